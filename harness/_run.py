"""One run's lifecycle: its `run_workflow` span, the journal's begin and end, and its `WorkflowResult`.

Every way of running a script (run, resume, replay, fork) ends here, once it has a prepared
`ScriptRun` and a `Journal`: this is the only place that decides a run's final status, so no two
paths can record an ending differently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable

from opentelemetry.trace import Status, StatusCode

from ._agent._observe import observed
from ._check._checker import Checker
from ._dispatch._sources import effects_note
from ._errors import NeedsDecision, RunWaiting, SandboxCrashed, WorkflowError
from ._records import RunRow, RunStatus, WorkflowResult, is_progress
from ._sandbox._pool import SandboxPool
from ._sandbox._runner import PrintCapture, ScriptRun, run_script
from ._sandbox._values import renamed_note
from ._store._connection import StoreFull
from ._store._journal import Journal, on_thread
from ._tracing._names import ATTR_BUDGET_USED, ATTR_MODE, ATTR_RUN_ID, ATTR_SCRIPT, ATTR_STATUS, run_span_name
from ._tracing._setup import RECORDER, TRACER, attach_traceparent, current_traceparent


async def execute(
    pool: SandboxPool,
    checker: Checker,
    job: ScriptRun,
    journal: Journal,
    *,
    mode: str,
    begin: RunRow | None = None,
    traceparent: str | None = None,
) -> WorkflowResult:
    """Run a prepared script to its end, traced as one `run_workflow` span, and record how it ended.

    `begin` is the run row to create (new runs); `traceparent` joins the trace of an earlier
    process (resume, replay). The run's spans are stored with it once the span has ended.
    """
    run_id = job.dispatcher.run_id
    try:
        with (
            attach_traceparent(traceparent),
            TRACER.start_as_current_span(
                run_span_name(run_id), attributes={ATTR_RUN_ID: run_id, ATTR_MODE: mode, ATTR_SCRIPT: job.code}
            ) as span,
        ):
            if begin is not None:
                begin.trace_context = current_traceparent()
                try:
                    await journal.begin(begin)
                except StoreFull:
                    raise disk_full(run_id, 'did not start') from None
            try:
                async with journal.held():
                    result = await observed(span, journal.store, run_id, _finish(pool, checker, job, journal))
            except BaseException as exc:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                span.set_attribute(ATTR_STATUS, 'failed')
                raise
            finally:
                span.set_attribute(ATTR_BUDGET_USED, job.dispatcher.budget.summary())
            span.set_attribute(ATTR_STATUS, result.status)
            return result
    finally:
        if journal.store is not None:
            spans = RECORDER.drain(run_id)
            if spans:
                with contextlib.suppress(StoreFull):  # a full disk costs the trace, never the run's outcome
                    await on_thread(journal.store.add_spans, run_id, spans)


async def _finish(pool: SandboxPool, checker: Checker, job: ScriptRun, journal: Journal) -> WorkflowResult:
    budget = job.dispatcher.budget
    refused_before = budget.refused
    printed = PrintCapture()
    run_id = job.dispatcher.run_id
    try:
        value = await run_script(pool, checker, job, printed)
    except RunWaiting as wait:  # stopped cleanly for a person: stored, resumable, holding no worker
        await recorded(journal.end('waiting'), run_id, job, printed)
        return WorkflowResult(
            value=None,
            run_id=job.dispatcher.run_id,
            status='waiting',
            calls=job.dispatcher.calls,
            printed=printed.text,
            waiting=wait.pending,
        )
    except BaseException as exc:
        failure = disk_full(run_id, 'stopped', job, printed) if isinstance(exc, StoreFull) else exc
        status, message = ending(failure)
        with contextlib.suppress(StoreFull):  # not recorded: the run stays resumable (its journal is intact)
            await journal.end(status, error=message)
        if isinstance(failure, WorkflowError):  # a retry must know which effects it did not repeat
            failure.note = effects_note(job.dispatcher.sources)
        if failure is exc:
            raise
        raise failure from None
    await recorded(journal.end('completed', value=value), run_id, job, printed)
    exhausted = budget.refused > refused_before
    reused = [c for c in job.dispatcher.calls if c.source == 'reused' and not c.side_effect]
    effects = effects_note(job.dispatcher.sources)
    notes = []
    if exhausted:
        notes.append(
            f'A call budget ran out during this script ({budget.summary()}); no further calls of that kind can run.'
        )
    if job.renamed:
        notes.append(renamed_note(job.renamed))
    if reused:
        notes.append(
            'Reused results of identical earlier calls (no budget spent): '
            + ', '.join(f'#{c.seq} {c.callee}' for c in reused[:20])
        )
    if effects:
        notes.append(effects)
    return WorkflowResult(
        value=value,
        run_id=job.dispatcher.run_id,
        status='completed',
        calls=job.dispatcher.calls,
        printed=printed.text,
        budget_exhausted=exhausted,
        note=' '.join(notes) or None,
    )


def disk_full(
    run_id: str, what: str, job: ScriptRun | None = None, printed: PrintCapture | None = None
) -> WorkflowError:
    """A full disk as the model reads it: no path, and how to go on (the run is resumable once there is room)."""
    return WorkflowError(
        f"The run store's disk is full, so run {run_id} {what}; its journal keeps every call it finished. "
        f'Free space, then resume it (`harness resume {run_id}`).',
        run_id=run_id,
        completed=[r for r in job.dispatcher.calls if r.status == 'ok' and not is_progress(r)] if job else None,
        printed=printed.text if printed else '',
    )


async def recorded(ending: Awaitable[None], run_id: str, job: ScriptRun, printed: PrintCapture) -> None:
    """Record how the run ended; a full disk leaves it unrecorded (resumable) and is the run's failure."""
    try:
        await ending
    except StoreFull:
        raise disk_full(run_id, 'could not record how it ended', job, printed) from None


def ending(exc: BaseException) -> tuple[RunStatus, str]:
    """The status a run that raised `exc` is stored with, and the error stored beside it."""
    if isinstance(exc, NeedsDecision):
        return 'needs_decision', exc.message
    if isinstance(exc, SandboxCrashed):  # the worker died under the script: resumable
        return 'interrupted', exc.message
    if isinstance(exc, WorkflowError):  # a full disk too: recorded failed by it (if it can be), and resumable
        return 'failed', exc.message
    return 'interrupted', 'the run was cancelled'
