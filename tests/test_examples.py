"""The runnable examples: each runs offline end to end (real engine, scripted planner) and shows what it claims."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness import CallContext, Harness, PolicyViolation
from harness._ui._models import KEY_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ('review_fanout', 'best_of_n', 'support_desk', 'research_loop')
STRIPPED = {*KEY_DEFAULTS, 'HARNESS_MODEL', 'HARNESS_BASE_URL', 'HARNESS_API_KEY', 'HARNESS_STORE', 'LOGFIRE_TOKEN'}
RUN_ID = re.compile(r'^run [0-9a-f]{12,} ', re.M)


@pytest.fixture(scope='module')
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the four examples at once (each pays the import cost; together it is paid in parallel)."""
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED and not k.endswith('_API_KEY')}
    env['COLUMNS'] = '200'
    procs = {
        name: subprocess.Popen(
            [sys.executable, f'examples/{name}.py', '--store', str(tmp_path_factory.mktemp(name) / 'runs.db')],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in EXAMPLES
    }
    results: dict[str, str] = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=100)
        assert proc.returncode == 0, f'{name} exited {proc.returncode}:\n{out}'
        results[name] = out
    return results


@pytest.mark.parametrize('name', EXAMPLES)
def test_example_runs_the_offline_demo(outputs: dict[str, str], name: str) -> None:
    out = outputs[name]
    assert out.splitlines()[0].startswith('Offline demo:')
    assert RUN_ID.search(out), out
    assert 'The workflow failed' not in out


def test_review_fanout_finds_eval_in_order_parser(outputs: dict[str, str]) -> None:
    out = outputs['review_fanout']
    assert re.search(r'sample_project/order_parser\.py:22 S307 .*eval\(', out), out
    assert out.count('✓ #') >= 12  # list_files, 5 x read_file, 5 x reviewer, summarizer
    assert 'Worst file: sample_project/order_parser.py' in out
    assert re.search(r'Reviewed 5 of 5 files: \d+ error, \d+ warning, \d+ info', out)


def test_best_of_n_prints_three_scores(outputs: dict[str, str]) -> None:
    out = outputs['best_of_n']
    assert re.search(r'Scores: concise \d+/10, thorough \d+/10, friendly \d+/10\. Winner: \w+', out), out
    assert len(re.findall(r'✓ #\d+ critic', out)) == 3
    assert len(re.findall(r'✓ #\d+ editor', out)) == 1


def test_support_desk_refunds_only_eligible_tickets_within_limits(outputs: dict[str, str]) -> None:
    out = outputs['support_desk']
    assert 'T-1001: refunded $49 ' in out  # asked 49, entitled to 98
    assert 'T-1002: refunded $100 ' in out  # asked 240, capped at the $100 limit
    assert 'T-1003: refunded $0 (purchased 400 days ago' in out
    assert 'T-1004: refunded $0 (already refunded in full)' in out
    assert 'Total refunded: $149' in out
    receipts = re.search(r'^Receipts issued: (.*)$', out, re.M)
    assert receipts is not None and receipts.group(1).count('R-') == 2
    # Every refund started after the entitlement check of the same ticket; ineligible tickets got none.
    lines = out.splitlines()

    def started(callee: str, ticket: str) -> list[int]:
        call = f"{callee}(ticket_id='{ticket}'"
        return [i for i, line in enumerate(lines) if call in line and '→' in line]

    for ticket in ('T-1001', 'T-1002'):
        assert started('check_entitlement', ticket)[0] < started('issue_refund', ticket)[0]
    assert not started('issue_refund', 'T-1003') and not started('issue_refund', 'T-1004')
    # The guard is the catalog's: a script that refunds first is flagged, then refused without paying.
    assert 'check flags the refund-first script: line 1: issue_refund can run before check_entitlement' in out
    assert 'and the harness refused it: The script stopped because a rule refused a call' in out
    assert out.count('Receipts issued: R-001: $49 to Ada for T-1001; R-002: $100 to Grace for T-1002') == 2


def load_support_desk() -> ModuleType:
    if str(ROOT / 'examples') not in sys.path:  # as when run as a script: its folder is importable
        sys.path.insert(0, str(ROOT / 'examples'))
    spec = importlib.util.spec_from_file_location('support_desk_example', ROOT / 'examples' / 'support_desk.py')
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refund_call(run_id: str, seq: int = 3) -> CallContext:
    return CallContext(run_id=run_id, seq=seq, callee='issue_refund', attempt=1)


def test_issue_refund_is_idempotent_per_key() -> None:
    desk = load_support_desk()
    first = desk.issue_refund(ticket_id='T-1001', amount=49, ctx=refund_call('r1'))
    again = desk.issue_refund(ticket_id='T-1001', amount=49, ctx=refund_call('r1'))  # a resume retrying it
    assert again == first
    assert desk.REFUNDED['T-1001'] == 49 and len(desk.RECEIPTS) == 1
    # Another call is another refund.
    desk.issue_refund(ticket_id='T-1001', amount=49, ctx=refund_call('r2'))
    assert desk.REFUNDED['T-1001'] == 98


def test_the_refund_policy_is_enforced_by_the_catalog() -> None:
    desk = load_support_desk()
    with Harness(store=':memory:') as h:
        desk.register_desk(h)
        over = 'e = await check_entitlement(ticket_id="T-1002")\nawait issue_refund(ticket_id="T-1002", amount=101)'
        other = 'e = await check_entitlement(ticket_id="T-1001")\nawait issue_refund(ticket_id="T-1002", amount=5)'
        stale = 'e = await check_entitlement(ticket_id="T-1003")\nawait issue_refund(ticket_id="T-1003", amount=5)'
        for script in (over, other, stale):
            with pytest.raises(PolicyViolation, match='issue_refund requires a successful check_entitlement'):
                h.run_sync(script)
        assert desk.RECEIPTS == {} and desk.REFUNDED == {'T-1004': 30}
        allowed = 'e = await check_entitlement(ticket_id="T-1002")\nawait issue_refund(ticket_id="T-1002", amount=100)'
        ok = h.run_sync(allowed)
        assert ok.value.startswith('R-001: $100 to Grace')


def test_one_passing_check_pays_one_refund() -> None:
    """Issue 23: one check of a $98 ticket used to pay ten $49 refunds (as many as the script asked)."""
    desk = load_support_desk()
    script = (
        'e = await check_entitlement(ticket_id="T-1001")\n'
        'rs = await settle_all(*[issue_refund(ticket_id="T-1001", amount=49) for _ in range(10)])\n'
        '[r["ok"] for r in rs]'
    )
    with Harness(store=':memory:') as h:
        desk.register_desk(h)
        assert h.run_sync(script).value == [True] + [False] * 9
        again = h.run_sync(
            'e = await check_entitlement(ticket_id="T-1001")\nawait issue_refund(ticket_id="T-1001", amount=49)'
        )  # a second check: $49 left
        assert again.value.startswith('R-002: $49 to Ada')
    assert desk.REFUNDED['T-1001'] == 98 and len(desk.RECEIPTS) == 2


def test_a_forks_edited_check_does_not_pay_an_ineligible_ticket() -> None:
    desk = load_support_desk()
    script = (
        'e = await check_entitlement(ticket_id="T-1003")\ntry:\n'
        '    r = await issue_refund(ticket_id="T-1003", amount=100)\nexcept PermissionError as exc:\n'
        '    r = str(exc)\nr'
    )
    with Harness(store=':memory:') as h:
        desk.register_desk(h)
        first = h.run_sync(script)
        forked = h.fork_sync(first.run_id, at=1, result={'eligible': True, 'max_refund': 100, 'reason': 'edited'})
    assert 'The check_entitlement result of call #1 was supplied, not run' in forked.value
    assert desk.RECEIPTS == {} and 'T-1003' not in desk.REFUNDED


def test_research_loop_retries_failed_lookups_then_summarises(outputs: dict[str, str]) -> None:
    out = outputs['research_loop']
    failed = re.findall(r'✗ #\d+ lookup: lookup failed with TimeoutError', out)
    assert len(failed) == 6  # snapshot x1, replay x2, forks x3
    assert "'how does replay work': attempt 2 failed" in out
    replay_ok = [line for line in out.splitlines() if '✓' in line and 'Replay runs a stored script' in line]
    assert replay_ok, 'replay was answered on its third attempt'
    assert 'no answer for: how do forks work' in out
    summary = re.search(r'^Summary: (.+)$', out, re.M)
    assert summary is not None and 'snapshot' in summary.group(1).lower()
