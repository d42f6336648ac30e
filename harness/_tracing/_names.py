"""The names of the harness's spans and of their `harness.*` attributes: the one place they are spelled.

The writers (`_run`, `_sandbox._runner`, `_dispatch._dispatcher`, `_dispatch._sources`, `_agent._usage`) and
the readers (the recorder in `_tracing._setup`, `_tracing._tree`, `_ui._runs` and through them the terminal and
the studio) all use these, so every span the engine emits is one the views recognise (`tests/test_layout.py`
holds that no other module spells a `harness.<word>` literal or names a span with one).

Invariant: the values never change. They are a contract with whatever receives the spans (an OTLP backend, a
Logfire query) and with the spans already stored with earlier runs, which `harness trace` reads back. A new
attribute is a new constant here. This module imports nothing, so the commands that only read the store can use it.
"""

from __future__ import annotations

# -- spans ----------------------------------------------------------------------------------------

SPAN_RUN = 'run_workflow'
"""One script run: `run_workflow {run_id}` (`run_span_name`), the root of the run's spans."""
SPAN_CHECK = 'check'
"""The type check before anything runs, below the run span."""
SPAN_CALL = 'call'
"""One call of a script: `call {callee}` (`call_span_name`); a sub-agent's own spans nest inside it."""
SPAN_APPROVAL = 'approval'
"""A person's decision on a call, as the run reads it: `approval {callee}` (`approval_span_name`)."""


def run_span_name(run_id: str) -> str:
    return f'{SPAN_RUN} {run_id}'


def call_span_name(callee: str) -> str:
    return f'{SPAN_CALL} {callee}'


def approval_span_name(callee: str) -> str:
    return f'{SPAN_APPROVAL} {callee}'


def is_span(name: str, span: str) -> bool:
    """Whether a span named `name` is one of the `span` kind with its subject (`call {callee}` for `SPAN_CALL`)."""
    return name.startswith(f'{span} ')


# -- span events ----------------------------------------------------------------------------------

EVENT_PROGRESS = 'progress'
"""On the run span, one per `log(text)`/`phase(name)` the script called: `ATTR_PROGRESS_KIND`, `ATTR_SEQ` and
(with `trace_values`) `ATTR_PROGRESS_TEXT`."""


# -- attributes -----------------------------------------------------------------------------------

ATTR_PREFIX = 'harness.'
"""Every attribute below starts with it; the recorder keeps the attributes that do."""

ATTR_RUN_ID = 'harness.run_id'
"""On the run span and every call span: what makes a span one of the run's (`RunSpanRecorder`)."""

# the run span
ATTR_MODE = 'harness.mode'
ATTR_SCRIPT = 'harness.script'
ATTR_STATUS = 'harness.status'
"""How the run ended, and on a call span how the call ended."""
ATTR_BUDGET_USED = 'harness.budget_used'
ATTR_USAGE = 'harness.usage'
"""The prefix of the run's sub-agent token and cost totals, the four below."""
ATTR_USAGE_INPUT_TOKENS = f'{ATTR_USAGE}.input_tokens'
ATTR_USAGE_OUTPUT_TOKENS = f'{ATTR_USAGE}.output_tokens'
ATTR_USAGE_REQUESTS = f'{ATTR_USAGE}.requests'
ATTR_USAGE_COST = f'{ATTR_USAGE}.cost'
"""Only when some request could be priced."""

# the check span
ATTR_ERRORS = 'harness.errors'

# a call span (and an approval span: the callee and seq of the call decided on)
ATTR_CALLEE = 'harness.callee'
ATTR_SEQ = 'harness.seq'
ATTR_ATTEMPT = 'harness.attempt'
ATTR_SOURCE = 'harness.source'
ATTR_LINE = 'harness.line'
ATTR_ARGUMENTS = 'harness.arguments'
"""Only with `trace_values`, as are the result previews."""
ATTR_RESULT_PREVIEW = 'harness.result_preview'

# a progress event (`EVENT_PROGRESS`), with `ATTR_SEQ`
ATTR_PROGRESS_KIND = 'harness.progress.kind'
"""`log` or `phase`."""
ATTR_PROGRESS_TEXT = 'harness.progress.text'

# an approval span
ATTR_DECISION = 'harness.decision'
ATTR_DECIDED_BY = 'harness.decided_by'
ATTR_DECIDED_AT = 'harness.decided_at'
