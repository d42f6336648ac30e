"""The answer sources, each alone: the journal, an earlier script's result, an eval baseline and a person's decision.

Each is asked about a real call (a registered callee, a `CallRecord` as the dispatcher makes it) and either answers
it, filling in the record, holds it, or leaves it to the next source. The end-to-end behaviour of each (resume,
reuse, `reuse_calls`, approvals) is tested with the engine; these hold the pieces and the order they are asked in.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from harness._catalog._callees import Callee
from harness._catalog._manifest import manifest
from harness._dispatch._context import RunScope
from harness._dispatch._effects import EarlierEffects, Effect
from harness._dispatch._history import History
from harness._dispatch._recorded import RecordedCalls
from harness._dispatch._sources import (
    HOLD,
    Baseline,
    Decisions,
    EarlierScript,
    Effects,
    JournalAnswers,
    answer_sources,
    ask,
    remember,
    reuse_key,
)
from harness._errors import ReplayDivergence
from harness._records import CallRecord, Decision


@pytest.fixture
def callees(make_harness) -> dict[str, Callee]:
    h = make_harness()

    @h.tool
    def lookup(*, word: str) -> str:
        """Look a word up."""
        return word.upper()

    @h.tool(approval=True)
    def send(*, to: str) -> str:
        """Send a message."""
        return f'sent to {to}'

    @h.tool(side_effect=True)
    def email(*, to: str) -> str:
        """Email someone."""
        return f'emailed {to}'

    return dict(h.callees)


def call(callee: str, seq: int = 1, **arguments: Any) -> CallRecord:
    """A call as `Dispatcher.start` makes it: validated arguments and a seq, nothing decided yet."""
    return CallRecord(seq=seq, callee=callee, arguments=arguments, line=3)


def journaled(callee: str, seq: int, result: Any, **arguments: Any) -> CallRecord:
    return CallRecord(seq=seq, callee=callee, arguments=arguments, line=3, status='ok', result=result, duration=0.1)


def test_the_journal_answers_a_resumed_call_and_leaves_a_new_one_live(callees):
    source = JournalAnswers(History('resume', {1: journaled('lookup', 1, 'CAT', word='cat')}))

    record = call('lookup', word='cat')
    assert source.answer(callees['lookup'], record) == {'return_value': 'CAT'}
    assert (record.status, record.source, record.result) == ('ok', 'resumed', 'CAT')
    assert source.answer(callees['lookup'], call('lookup', seq=2, word='dog')) is None


def test_the_journal_refuses_a_call_that_diverges_from_it(callees):
    source = JournalAnswers(History('replay', {1: journaled('lookup', 1, 'CAT', word='cat')}))

    with pytest.raises(ReplayDivergence, match='diverges from the journal'):
        source.answer(callees['lookup'], call('lookup', word='dog'))


def test_an_earlier_scripts_result_answers_the_identical_call_only(callees):
    source = EarlierScript({reuse_key('lookup', {'word': 'cat'}): 'CAT'})

    record = call('lookup', word='cat')
    assert source.answer(callees['lookup'], record) == {'return_value': 'CAT'}
    assert (record.status, record.source, record.duration) == ('ok', 'reused', 0.0)
    other = call('lookup', word='dog')
    assert source.answer(callees['lookup'], other) is None
    assert other.status == 'running'  # a source that does not answer leaves the record as it was


def test_a_baseline_answer_answered_again_is_still_the_baselines(callees):
    """Issue 23.3: an eval baseline's result a later identical call reuses is still supplied, not run, so no rule
    takes it for a predecessor that ran (it was 'reused', which the rules trust)."""
    scope = RunScope()
    remember(
        scope,
        'r-1',
        [
            replace(journaled('lookup', 1, 'CAT', word='cat'), source='baseline'),
            journaled('lookup', 2, 'DOG', word='dog'),
        ],
    )
    source = EarlierScript(scope.reusable, scope.supplied)
    cat, dog = call('lookup', word='cat'), call('lookup', seq=2, word='dog')
    assert source.answer(callees['lookup'], cat) == {'return_value': 'CAT'} and cat.source == 'baseline'
    assert source.answer(callees['lookup'], dog) == {'return_value': 'DOG'} and dog.source == 'reused'


def test_an_earlier_side_effect_answers_one_identical_call_each_and_never_one_of_its_own_script(callees):
    """Issue 23.4: a side effect is answered only from earlier scripts, each success answering one call, so a retry
    repeating it does not repeat the effect and a call the code makes once more than before runs."""
    record = journaled('email', 4, 'emailed ann', to='ann')
    record.side_effect = True
    source = Effects(EarlierEffects.of([Effect.of('run-0', record)]))

    first, second = call('email', seq=1, to='ann'), call('email', seq=2, to='ann')
    assert source.answer(callees['email'], first) == {'return_value': 'emailed ann'}
    assert (first.status, first.source) == ('ok', 'reused')
    assert source.answer(callees['email'], second) is None  # one success answers one call: this one is sent
    assert source.answer(callees['lookup'], call('lookup', word='ann')) is None  # not a side effect: not its call
    assert 'email({"to":"ann"}) was not run again' in source.earlier.note()
    assert '(run run-0, #4)' in source.earlier.note()
    # An idempotent callee's earlier result answers; a side-effecting one's never does from `reusable`.
    reusable = EarlierScript({reuse_key('email', {'to': 'bob'}): 'emailed bob'})
    assert reusable.answer(callees['email'], call('email', to='bob')) is None


def test_a_baseline_answers_the_nth_identical_call_with_its_nth_result(callees):
    recorded = RecordedCalls()
    baseline_run = [journaled('lookup', 1, 'first', word='cat'), journaled('lookup', 2, 'second', word='cat')]
    recorded.add_run(baseline_run, manifest(callees, stubs=''))
    source = Baseline(recorded)

    answers = [source.answer(callees['lookup'], call('lookup', seq=n, word='cat')) for n in (1, 2, 3)]
    assert answers == [{'return_value': 'first'}, {'return_value': 'second'}, None]  # the third runs live
    assert recorded.answered == 2


def test_a_baseline_never_answers_a_call_that_needs_approval(callees):
    recorded = RecordedCalls()
    recorded.add_run([journaled('send', 1, 'sent to ann', to='ann')], manifest(callees, stubs=''))

    assert Baseline(recorded).answer(callees['send'], call('send', to='ann')) is None


def test_a_call_that_needs_approval_is_held_until_a_person_decides(callees):
    source = Decisions(
        'run-1', {2: Decision(approved=True), 3: Decision(approved=False, reason='not today', decided_by='ann')}
    )

    assert source.answer(callees['lookup'], call('lookup', word='cat')) is None  # no approval needed: not its call
    assert source.answer(callees['send'], call('send', seq=1, to='bob')) is HOLD
    assert source.answer(callees['send'], call('send', seq=2, to='bob')) is None  # approved: it runs live
    rejected = call('send', seq=3, to='bob')
    outcome = source.answer(callees['send'], rejected)
    assert isinstance(outcome, dict) and isinstance(outcome.get('exception'), PermissionError)
    assert (rejected.status, rejected.source, rejected.error) == (
        'refused',
        'answered',
        'send was rejected by ann: not today',
    )


def test_the_sources_are_asked_in_order_and_the_first_answer_wins(callees):
    recorded = RecordedCalls()
    recorded.add_run([journaled('lookup', 1, 'from the baseline', word='cat')], manifest(callees, stubs=''))
    scope = RunScope(reusable={reuse_key('lookup', {'word': 'cat'}): 'from an earlier script'})
    sources = answer_sources(
        run_id='run-1', callees=callees, history=None, scope=scope, reuse=True, recorded=recorded, decisions={}
    )

    assert [type(s) for s in sources] == [Effects, EarlierScript, Baseline, Decisions]
    assert ask(sources, callees['lookup'], call('lookup', word='cat')) == {'return_value': 'from an earlier script'}
    assert recorded.answered == 0  # the baseline was not asked, so its result is still there for a later call
    assert ask(sources, callees['send'], call('send', seq=2, to='ann')) is HOLD
    assert ask(sources, callees['lookup'], call('lookup', seq=3, word='dog')) is None  # nobody answers: it runs


def test_a_run_with_a_history_is_answered_from_its_journal_alone(callees):
    """Not from an earlier script's reusable results nor a baseline; past the journal, a resumed script is answered
    from the side effects it started with (`test_a_resumed_script_is_answered_past_its_journal_as_it_started`)."""
    recorded = RecordedCalls()
    recorded.add_run([journaled('lookup', 1, 'from the baseline', word='dog')], manifest(callees, stubs=''))
    history = History('resume', {1: journaled('lookup', 1, 'CAT', word='cat')})
    scope = RunScope(reusable={reuse_key('lookup', {'word': 'dog'}): 'DOG'})
    sources = answer_sources(
        run_id='run-1', callees=callees, history=history, scope=scope, reuse=True, recorded=recorded, decisions={}
    )

    assert [type(s) for s in sources] == [JournalAnswers, Effects, Decisions]
    assert ask(sources, callees['lookup'], call('lookup', seq=2, word='dog')) is None  # past the journal: live


def test_a_resume_keeps_where_a_result_that_did_not_run_came_from(callees):
    """A reused result resumed is still a reuse: not charged again, and not an effect that happened (issue 23.4)."""
    reused = journaled('email', 1, 'emailed ann', to='ann')
    reused.source, reused.side_effect = 'reused', True
    source = JournalAnswers(History('resume', {1: reused, 2: journaled('lookup', 2, 'CAT', word='cat')}))

    again, live = call('email', to='ann'), call('lookup', seq=2, word='cat')
    source.answer(callees['email'], again)
    source.answer(callees['lookup'], live)
    assert (again.source, live.source) == ('reused', 'resumed')


def test_a_resumed_script_is_answered_past_its_journal_as_it_started():
    """The calls its journal holds are its own (one waiting for approval runs once approved); past the journal, the
    side effects it started with answer, less those its journal was already answered from (issue 23.4)."""
    from harness._dispatch._effects import EarlierEffects, Effect

    effects = [Effect('run-0', n, 'email', {'to': 'ann'}, f'emailed {n}') for n in (1, 2)]
    used = journaled('email', 1, 'emailed 1', to='ann')
    used.source, used.side_effect = 'reused', True
    waiting = CallRecord(seq=2, callee='email', arguments={'to': 'ann'}, line=3, status='waiting', side_effect=True)
    earlier = EarlierEffects.of(effects, [used, waiting])
    assert earlier.take(call('email', seq=2, to='ann')) is None
    assert getattr(earlier.take(call('email', seq=3, to='ann')), 'result', None) == 'emailed 2'
    assert earlier.take(call('email', seq=4, to='ann')) is None  # both used up: it runs
