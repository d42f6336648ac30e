"""The audit of a catalog: what can change the world, what guards it, where, within which bounds, and
what a crash would do (`harness audit`).

It reads only the registered catalog and the Harness's settings: it answers for every script a
model could write, not for one script (that is `Harness.analyze`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .._catalog._rules import MAX_REFUSALS
from .._engine import Harness

ENFORCEMENT = [
    'requires= rules and allow/deny: at every call, when the paused script makes it, against the run\'s '
    'journal (Dispatcher.start), before the call is journaled as started, before any budget is spent and '
    'before it runs; the same on resume, replay and fork, whose answered calls are in the journal.',
    'Budgets (max_agent_calls, max_tool_calls, call_caps): at the same point, reserved synchronously in call '
    'order, so they are exact under any fan-out.',
    'Concurrency (max_concurrency, call_concurrency): when a call starts running.',
    'Stuck scripts (max_repeats, refused calls): at the same point; the script is stopped, not just refused.',
    'Before anything runs: `harness check` / Harness.check report every path that can break a rule '
    '(errors with strict=True, so nothing runs).',
    'Inside the sandbox: CPU time, memory and suspensions (Monty limits); no filesystem, network, clock '
    'or environment unless granted.',
]


@dataclass(frozen=True)
class CalleeAudit:
    name: str
    kind: str
    irreversible: bool
    guards: tuple[str, ...] = ()
    on_crash: str = ''


@dataclass
class Audit:
    callees: list[CalleeAudit]
    enforcement: list[str]
    bounds: dict[str, Any]
    on_crash: list[str]

    @property
    def irreversible(self) -> list[str]:
        return [c.name for c in self.callees if c.irreversible]

    def as_json(self) -> dict[str, Any]:
        return {'irreversible': self.irreversible, **asdict(self)}

    def text(self) -> str:
        lines = ['1. Irreversible callees (side_effect=True): ' + (', '.join(self.irreversible) or 'none')]
        lines.append('2. What guards each callee:')
        for callee in self.callees:
            lines.append(f'   {callee.name} ({callee.kind}): ' + ('; '.join(callee.guards) or 'budgets only'))
        lines.append('3. Where each constraint is enforced:')
        lines.extend(f'   - {where}' for where in self.enforcement)
        lines.append('4. Length and shape bounds:')
        lines.extend(f'   {key}: {value}' for key, value in self.bounds.items())
        lines.append('5. What a crash does:')
        lines.extend(f'   - {text}' for text in self.on_crash)
        lines.extend(f'   - {c.name}: {c.on_crash}' for c in self.callees)
        return '\n'.join(lines)


def audit(h: Harness) -> Audit:
    h.stubs()  # validates the rules
    callees = []
    for name, callee in sorted(h.callees.items()):
        guards = [f'requires {rule.describe()}' for rule in callee.requires]
        if name in h.call_caps:
            guards.append(f'at most {h.call_caps[name]} call(s) per run (call_caps)')
        if name in h.call_concurrency:
            guards.append(f'at most {h.call_concurrency[name]} at once (call_concurrency)')
        guards.append('counts against max_agent_calls' if callee.kind == 'agent' else 'counts against max_tool_calls')
        if callee.side_effect:
            on_crash = ('in flight at a crash: its outcome is unknown, so resume stops with NeedsDecision until '
                        'you re-run it (--retry-unknown) or supply its result (--answer SEQ=JSON); never re-run '
                        'silently. Finished: answered from the journal, never repeated.')
        else:
            on_crash = 'in flight at a crash: run again on resume (attempt 2). Finished: answered from the journal.'
        callees.append(CalleeAudit(name, callee.kind, callee.side_effect, tuple(guards), on_crash))
    bounds = {
        'max_agent_calls': h.max_agent_calls,
        'max_tool_calls': h.max_tool_calls,
        'call_caps': dict(h.call_caps),
        'max_concurrency': h.max_concurrency,
        'call_concurrency': dict(h.call_concurrency),
        'max_repeats (identical calls per script)': h.max_repeats,
        'refused calls per script before it is stopped': MAX_REFUSALS,
        'sandbox': {'max_duration_secs': h.limits.max_duration_secs, 'max_memory': h.limits.max_memory,
                    'max_suspensions': h.limits.max_suspensions},
        'strict (rule-breaking scripts fail the check)': h.strict,
    }
    on_crash = [
        'Before a call is journaled: nothing of it happened; resume makes it again.',
        'Every result is journaled before the script sees it, and every pause is snapshotted after the calls '
        'it waits on are journaled: resume (any process) restarts from the newest snapshot and answers the '
        'journaled calls without running them.',
        'Without a store (store=None) nothing is journaled: a crash loses the run.',
    ]
    return Audit(callees, ENFORCEMENT, bounds, on_crash)
