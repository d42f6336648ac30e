"""The commands on stored runs: list, show, trace, delete and cancel them; replay, resume, fork and diff them
against today's catalog; the calls waiting for a person, and the decisions on them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._errors import WorkflowError
from .._records import RunRow, WorkflowResult
from .._store import RunStore, StoreError, lookup
from .._ui._runs import siblings_of, turn_of
from ._live import LiveCalls
from ._safe_text import safe, visible
from ._shared import (
    LIMIT_MAX,
    SEQ_MAX,
    AgentsOpt,
    JsonOpt,
    RootOpt,
    StoreOpt,
    Where,
    app,
    catalog_options,
    console,
    err,
    fail,
    interrupted,
    load_json,
    open_store,
    require_store,
    show_waiting,
)

if TYPE_CHECKING:
    from .._engine import Harness

RunIdArg = Annotated[str, typer.Argument(help='A run id (or a unique prefix).')]


RecheckOpt = Annotated[
    bool,
    typer.Option(
        '--recheck',
        help='Continue under a changed catalog if the script still type-checks (done '
        'without asking when callees were only added).',
    ),
]
AcceptOpt = Annotated[
    bool,
    typer.Option(
        '--accept-changes',
        help='Continue under a changed catalog without the type check (calls are still validated as they are made).',
    ),
]


RUN_STATUSES = ('running', 'completed', 'failed', 'interrupted', 'needs_decision', 'waiting')
FullOpt = Annotated[bool, typer.Option('--full', help='Whole values and stack traces, nothing cut.')]


def find_run(db: RunStore, run_id: str) -> RunRow:
    return lookup(db.get_run, run_id, missing=f'no run {run_id!r} in {db.path}; `harness runs` lists them.', error=fail)


@app.command()
def runs(
    limit: Annotated[int, typer.Option('--limit', '-n', help='How many runs to list.', min=1, max=LIMIT_MAX)] = 20,
    status: Annotated[
        list[str] | None,
        typer.Option(
            '--status', '-s', help=f'Only runs with this status ({", ".join(RUN_STATUSES)}); repeat it for several.'
        ),
    ] = None,
    as_json: JsonOpt = False,
    full: FullOpt = False,
    store: StoreOpt = None,
) -> None:
    """Stored runs, newest first, with their calls, duration and cost."""
    from ._views import runs_json, runs_table

    for wanted in status or []:
        if wanted not in RUN_STATUSES:
            raise fail(f'--status {wanted!r}: use one of {", ".join(RUN_STATUSES)}')
    with open_store(store) as db:
        rows = db.list_runs(limit, status=status)
        usage = db.usage([r.run_id for r in rows])
        short = db.short_ids([r.run_id for r in rows])
    if as_json:
        print(json.dumps(runs_json(rows, usage), indent=2, default=str))
        return
    console.print(runs_table(rows, short, usage, full=full))


@app.command()
def show(
    run_id: RunIdArg,
    call: Annotated[
        int | None,
        typer.Option(
            '--call',
            '-k',
            help='Show call K whole: arguments, result, exception with its stack trace.',
            min=1,
            max=SEQ_MAX,
        ),
    ] = None,
    as_json: JsonOpt = False,
    full: FullOpt = False,
    store: StoreOpt = None,
) -> None:
    """One run: its turn, script, calls, value and token and cost totals.

    The turn is the orchestrator's prompt and answer (and the conversation before it); a failed call shows
    the exception the callee really raised.
    """
    from .._ui._runs import call_json, exceptions_by_seq, show_json
    from ._views import show_call, show_run

    with open_store(store) as db:
        run = find_run(db, run_id)
        calls = db.calls(run.run_id)
        spans = db.spans(run.run_id)
        usage = db.usage([run.run_id]).get(run.run_id)
        turn = turn_of(db, run)
        conversation = db.turns(turn.conversation_id) if turn is not None else []
        siblings = siblings_of(db, run, turn)
        short = db.short_ids([r.run_id for r in siblings])
        problems = db.verify(run.run_id)
    if problems and not as_json:  # shown, but marked: what follows may not be what was written
        err.print(f'[red]unverified:[/red] {safe(problems[0])}', soft_wrap=True)
    if call is not None:
        found = next((c for c in calls if c.seq == call), None)
        if found is None:
            valid = f'1 to {len(calls)}' if calls else 'none: it made no call'
            raise fail(f'run {run.run_id} has no call {call}; its calls are {valid}.')
        if as_json:
            print(json.dumps(call_json(found, exceptions_by_seq(spans).get(found.seq)), indent=2, default=str))
        else:
            show_call(console, run, found, spans)
        return
    if as_json:
        from .._catalog._rules import Access

        shown = {**show_json(run, calls, spans, usage, turn), 'verified': not problems, 'problems': problems}
        shown['plan'] = Access.from_json(run.access).plan  # held for review: what its approval allows
        print(json.dumps(shown, indent=2, default=str))
        return
    show_run(
        console,
        run,
        calls,
        spans,
        usage=usage,
        turn=turn,
        conversation=conversation,
        siblings=sorted(siblings, key=lambda r: r.created),
        short=short,
        full=full,
    )
    show_plan(run, lines=0)  # the script is shown above


def show_plan(run: RunRow, *, lines: int | None = None) -> None:
    """The plan a run was held for (`Harness(review=...)`), when it has one: what a person approves. The plan's
    text is imported only for a run that has one (it prices with pydantic-ai, which reading a run never loads)."""
    stored = (run.access or {}).get('plan')
    if stored is not None:
        from .._check._plan import plan_text

        console.print(f'[magenta]plan of run {run.run_id}[/magenta] (what its approval allows):')
        console.print(safe(plan_text(stored, run.script, lines=lines)), soft_wrap=True)


@app.command()
def trace(
    run_id: RunIdArg,
    mermaid: Annotated[
        bool, typer.Option('--mermaid', help="Mermaid flowchart of the script's possible calls; the path taken thick.")
    ] = False,
    as_json: Annotated[bool, typer.Option('--json', help='Print the stored spans as JSON.')] = False,
    full: FullOpt = False,
    store: StoreOpt = None,
    agents: AgentsOpt = None,
    root: RootOpt = None,
) -> None:
    """The run's nested span tree in the terminal (no Logfire account needed)."""
    from .._tracing._tree import render_tree
    from .._ui._runs import trace_spans

    with open_store(store) as db:
        run = find_run(db, run_id)
        spans = trace_spans(db, run)
        calls = db.calls(run.run_id)
    if mermaid:
        from .._studio._views import graph_json

        callees: Iterable[str] = ()  # the run's stored catalog names them: no Harness (nor the user's modules)
        if run.catalog is None:  # stored by a harness that kept no catalog: today's names them
            h, _ = Where(store, agents, root=root).harness(calls_models=False)
            h.close()
            callees = h.callees
        graph = graph_json(run, callees, calls)
        if graph['error']:
            raise fail(f'run {run.run_id} holds a script that does not parse; nothing to draw.')
        print(visible(graph['mermaid']))
        return
    if as_json:
        print(json.dumps(spans, indent=2, default=str))
        return
    if not spans:
        raise fail(f'run {run.run_id} has no stored spans (tracing was off, or HARNESS_TRACING=off).')
    console.print(render_tree(spans, full=full))


@app.command()
def rm(
    run_ids: Annotated[list[str], typer.Argument(help='Run ids (or unique prefixes) to delete.')],
    force: Annotated[bool, typer.Option('--force', '-f', help='Delete a run even if it is still running.')] = False,
    store: StoreOpt = None,
) -> None:
    """Delete runs, each with its journal, snapshots, spans and totals (runs forked from it stay)."""
    with open_store(store) as db:
        found = [find_run(db, run_id) for run_id in run_ids]
        for run in found:
            if run.status == 'running' and not force:
                raise fail(f'run {run.run_id} is running: `harness cancel {run.run_id}` first, or rm --force.')
        for run in found:
            db.delete_run(run.run_id)
            console.print(f'deleted run {run.run_id}')


@app.command()
def cancel(
    run_id: RunIdArg,
    wait: Annotated[float, typer.Option('--wait', help='Seconds to wait for the run to stop.', min=0)] = 10.0,
    store: StoreOpt = None,
) -> None:
    """Cancel a run that another process is running.

    It stops at its next pause, ends `interrupted`, and can be resumed (`harness resume RUN`).
    """
    import math
    import time

    if math.isnan(wait):
        raise fail('--wait takes a number of seconds, e.g. --wait 30 (or --wait inf: until it stops)')
    with open_store(store) as db:
        run = find_run(db, run_id)
        if run.status != 'running':
            raise fail(f'run {run.run_id} is not running (it is {run.status}); nothing to cancel.')
        db.request_cancel(run.run_id)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            current = db.get_run(run.run_id)
            if current is None or current.status != 'running':
                break
            time.sleep(0.1)  # another process writes the ending: nothing to wait on but the store
        current = db.get_run(run.run_id)
    if current is not None and current.status != 'running':
        console.print(f'cancelled run {run.run_id}: it is {current.status}; `harness resume {run.run_id}` finishes it')
        return
    console.print(
        f'[yellow]cancel requested[/yellow] for run {run.run_id}: its process has not stopped it '
        f'within {wait:g}s (it stops at its next pause; if that process dies instead, the run reads '
        f'`interrupted`: `harness resume {run.run_id}`)'
    )


def finish_run(
    h: Harness, action: Callable[[], WorkflowResult], what: str, *, run_id: str = '', from_seq: int | None = None
) -> None:
    try:
        result = action()
    except WorkflowError as exc:
        if from_seq is not None and h.store is not None and (run := h.store.get_run(run_id)) is not None:
            positions = h.store.snapshot_positions(run.run_id)
            valid = f'K is one of {", ".join(map(str, positions))}' if positions else 'it has no snapshot'
            raise fail(f'replay --from K: {exc.message} ({valid}; or leave --from out)') from None
        raise fail(exc.message) from None
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise interrupted(exc) from None
    finally:
        h.close()
    if result.status == 'waiting':
        show_waiting(result)
        return
    console.print_json(json.dumps(result.value, default=str))
    console.print(f'[dim]{what} run {result.run_id} · {len(result.calls)} call(s)[/dim]')


@app.command()
@catalog_options
def replay(
    run_id: RunIdArg,
    from_seq: Annotated[
        int | None, typer.Option('--from', help='Start from the snapshot at call K.', min=0, max=SEQ_MAX)
    ] = None,
    recheck: RecheckOpt = False,
    accept_changes: AcceptOpt = False,
    *,
    where: Where,
) -> None:
    """Re-run a stored run from its journal; no sub-agent or tool is called."""
    h = where.stored_run_harness(calls_models=False, on_event=LiveCalls(console))
    finish_run(
        h,
        lambda: h.replay_sync(run_id, from_seq=from_seq, recheck=recheck, accept_changes=accept_changes),
        'replayed',
        run_id=run_id,
        from_seq=from_seq,
    )


@app.command()
@catalog_options
def resume(
    run_id: RunIdArg,
    retry_unknown: Annotated[
        bool, typer.Option('--retry-unknown', help='Re-run side-effecting calls whose outcome is unknown.')
    ] = False,
    answer: Annotated[
        list[str] | None, typer.Option('--answer', help='SEQ=JSON: the result of an unknown call.')
    ] = None,
    recheck: RecheckOpt = False,
    accept_changes: AcceptOpt = False,
    *,
    where: Where,
) -> None:
    """Continue an interrupted run; recorded calls are not repeated."""
    answers: dict[int, Any] = {}
    for item in answer or []:
        seq, sep, raw = item.partition('=')
        try:
            number = int(seq)
            answers[number] = load_json(raw, f'--answer {seq}')
        except ValueError:
            raise fail(f'--answer {item[:80]!r}: write it as SEQ=JSON, e.g. --answer 7=\'"refunded"\'') from None
        if not sep:
            raise fail(f'--answer {item[:80]!r}: write it as SEQ=JSON')
        if not 1 <= number <= SEQ_MAX:
            raise fail(f'--answer {item[:80]!r}: SEQ is a call of the run (1, 2, ...)')
    h = where.stored_run_harness(on_event=LiveCalls(console))
    finish_run(
        h,
        lambda: h.resume_sync(
            run_id, retry_unknown=retry_unknown, answers=answers, recheck=recheck, accept_changes=accept_changes
        ),
        'resumed',
    )


@app.command()
@catalog_options
def fork(
    run_id: RunIdArg,
    at: Annotated[int, typer.Option('--at', help='The call to answer differently (1-based).', min=1, max=SEQ_MAX)],
    result: Annotated[str, typer.Option('--result', help='Its result, as JSON.')],
    recheck: RecheckOpt = False,
    accept_changes: AcceptOpt = False,
    *,
    where: Where,
) -> None:
    """A new run: calls before K from the journal, call K answered with RESULT, later calls live."""
    try:
        value = load_json(result, '--result')
    except json.JSONDecodeError:
        raise fail(f'--result {result!r} is not JSON (a string needs quotes: --result \'"text"\')') from None
    h = where.stored_run_harness(on_event=LiveCalls(console))
    finish_run(
        h, lambda: h.fork_sync(run_id, at=at, result=value, recheck=recheck, accept_changes=accept_changes), 'forked'
    )


@app.command()
@catalog_options
def diff(run_id: RunIdArg, *, where: Where) -> None:
    """How the current catalog differs from the one the run ran against (exit 1 when it does)."""
    h = where.stored_run_harness(calls_models=False)
    try:
        found = h.diff(run_id)
    except WorkflowError as exc:
        raise fail(exc.message) from None
    finally:
        h.close()
    if not found:
        console.print(f'[green]no changes[/green]: the catalog is the one run {safe(run_id)} ran against')
        return
    for change in found:
        console.print(f'- {safe(str(change))}')
    raise typer.Exit(1)


@app.command()
def pending(
    run_id: Annotated[str | None, typer.Argument(help='Only this run (an id or a unique prefix).')] = None,
    as_json: Annotated[bool, typer.Option('--json', help='Print them as JSON.')] = False,
    store: StoreOpt = None,
) -> None:
    """The plans and the calls that wait for a person's approval, in every waiting run (or one)."""
    from .._catalog._rules import Access
    from .._records import preview
    from .._store._approvals import pending_calls, plans_waiting

    with open_store(store) as db:
        try:
            found = pending_calls(db, run_id)
            plans = plans_waiting(db, run_id)
        except WorkflowError as exc:
            raise fail(exc.message) from None
    if as_json:
        shown = [{'run_id': r.run_id, 'plan': Access.from_json(r.access).plan, 'script': r.script} for r in plans]
        calls = [{'run_id': p.run_id, 'seq': p.seq, 'callee': p.callee, 'arguments': p.arguments} for p in found]
        print(json.dumps([*shown, *calls]))
        return
    if not found and not plans:
        console.print('[dim]nothing waits for approval[/dim]')
        return
    for run in plans:
        show_plan(run, lines=5)
    if plans:
        console.print(
            '[dim]decide with: harness approve RUN | harness reject RUN --reason TEXT; then: harness resume RUN[/dim]'
        )
    for p in found:
        console.print(f'run {safe(p.run_id)} #{p.seq} [bold]{safe(p.callee)}[/bold]({safe(preview(p.arguments, 200))})')
    if found:
        console.print(
            '[dim]decide with: harness approve RUN [SEQ] | harness reject RUN SEQ --reason TEXT; '
            'then: harness resume RUN[/dim]'
        )


def decide(run_id: str, act: Callable[[Harness], list[int]], what: str, store: str | None) -> None:
    from .._check._plan import PLAN_SEQ
    from .._engine import Harness

    h = Harness(store=require_store(store))  # deciding needs the store, not the catalog
    try:
        seqs = act(h)
    except WorkflowError as exc:
        raise fail(exc.message) from None
    except StoreError as exc:
        raise fail(str(exc)) from None
    finally:
        h.close()
    if seqs == [PLAN_SEQ]:
        done = 'it ended' if what == 'rejected' else f'run it with: harness resume {safe(run_id)}'
        console.print(f'{what} the plan of run {safe(run_id)}; {done}')
        return
    console.print(
        f'{what} call(s) {", ".join(f"#{s}" for s in seqs) or "none"} of run {safe(run_id)}; '
        f'continue it with: harness resume {safe(run_id)}'
    )


@app.command()
def approve(
    run_id: RunIdArg,
    seq: Annotated[
        int | None,
        typer.Argument(help='The call to approve (default: every waiting call, or the plan).', min=0, max=SEQ_MAX),
    ] = None,
    by: Annotated[str | None, typer.Option('--by', help='Who decides (default: your user name).')] = None,
    store: StoreOpt = None,
) -> None:
    """Approve a waiting call, or a run's plan (any process, any time later); `harness resume RUN` then runs it."""
    decide(run_id, lambda h: h.approve(run_id, seq, by=by), 'approved', store)


@app.command()
def reject(
    run_id: RunIdArg,
    reason: Annotated[str, typer.Option('--reason', help='Why: the script gets it as PermissionError.')],
    seq: Annotated[
        int | None, typer.Argument(help='The call to reject (default: the plan the run waits for).', min=0, max=SEQ_MAX)
    ] = None,
    by: Annotated[str | None, typer.Option('--by', help='Who decides (default: your user name).')] = None,
    store: StoreOpt = None,
) -> None:
    """Reject a waiting call (when the run resumes, the script gets PermissionError(REASON) there), or the plan a
    run waits for (the run ends, nothing of it having run)."""
    decide(run_id, lambda h: h.reject(run_id, seq, reason=reason, by=by), 'rejected', store)
