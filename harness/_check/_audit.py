"""The audit of a catalog: what can hurt, what can change the world, what guards it, where, within which
bounds, and what a crash would do (`harness audit`).

It reads only the registered catalog and the Harness's settings: it answers for every script a
model could write, not for one script (that is `Harness.analyze`). Nothing runs: a sub-agent's own
pydantic-ai tools are read from its agent's toolsets, never called. What it names as unguarded
(`Callee.unguarded`) is what `strict=True` refuses a script to reach (`_review.unguarded_reach`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from .._catalog._callees import Callee
from .._catalog._rules import MAX_REFUSALS, After

if TYPE_CHECKING:  # the facade imports this module (strict mode's refusal), not the other way round
    from .._engine import Harness

ENFORCEMENT = [
    "requires= rules and allow/deny: at every call, when the paused script makes it, against the run's "
    'journal (Dispatcher.start), before the call is journaled as started, before any budget is spent and '
    'before it runs; the same on resume, replay and fork, whose answered calls are in the journal. With '
    'once=True: each successful predecessor authorises one call (consumed in call order, so a fan-out gets '
    'as many through as there were successes; rebuilt from the journal on resume, replay and fork).',
    'approval=True: at the same point: the call is journaled waiting and the run stops until a person decides; '
    'it never runs before an approval, and a rejection reaches the script as PermissionError.',
    'Budgets (max_agent_calls, max_tool_calls, call_caps): at the same point, reserved synchronously in call '
    'order, so they are exact under any fan-out.',
    'Concurrency (max_concurrency, call_concurrency): when a call starts running.',
    'Stuck scripts (max_repeats identical calls; a callee that failed with the same error max_repeats times in a '
    'row, whatever its arguments; refused calls): at the same point, counted again on resume from the journal, '
    'so a resumed run stops where an uninterrupted one does; the script is stopped, not just refused.',
    'Before anything runs: the analysis (Harness.analyze) is an upper bound: every call a script can make is a '
    'call site with the most times it can run (or unbounded), and every transition between two calls is an edge, '
    'through helpers, recursion, lambdas, loops, joins and try/finally. The checker refuses what would hide a '
    'call (eval/exec, locals(), attribute access by a computed name, a class with methods, a name that shadows '
    'a callee); what the analysis still cannot follow makes it incomplete. `harness check` / Harness.check '
    'report every path that can break a rule (errors with strict=True, so nothing runs); strict=True also '
    'refuses an incomplete analysis, and a script that can reach an unguarded irreversible callee (no '
    'requires=, no approval) unless allow_unguarded names it.',
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
    unguarded: bool = False
    """Irreversible with no `requires=` and no approval: a script can call it at its first step."""
    possibly_irreversible: bool = False
    """A sub-agent registered without `side_effect=` whose own agent has tools (`own_tools`) that may change the
    world: the engine treats it as free of side effects (re-run after a crash, not marked in the stubs)."""
    own_tools: tuple[str, ...] = ()
    """The tools of a sub-agent's own agent, by name (a toolset whose tools are known only when it runs, an MCP
    server for example, by its label)."""


@dataclass
class Audit:
    callees: list[CalleeAudit]
    enforcement: list[str]
    bounds: dict[str, Any]
    on_crash: list[str]
    findings: list[str] = field(default_factory=list)
    """What can hurt, one plain sentence per callee: unguarded irreversible callees, possibly irreversible
    sub-agents."""

    @property
    def irreversible(self) -> list[str]:
        return [c.name for c in self.callees if c.irreversible]

    @property
    def possibly_irreversible(self) -> list[str]:
        return [c.name for c in self.callees if c.possibly_irreversible]

    def as_json(self) -> dict[str, Any]:
        return {'irreversible': self.irreversible, 'possibly_irreversible': self.possibly_irreversible, **asdict(self)}

    def text(self) -> str:
        lines = ['What can hurt:' + ('' if self.findings else ' nothing found')]
        lines.extend(f'   - {finding}' for finding in self.findings)
        lines.append('1. Irreversible callees (side_effect=True): ' + (', '.join(self.irreversible) or 'none'))
        if self.possibly_irreversible:
            lines.append(
                '   Possibly irreversible (sub-agents with tools of their own, no side_effect= given): '
                + ', '.join(self.possibly_irreversible)
            )
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
    callees = [audit_callee(h, callee) for _, callee in sorted(h.callees.items())]
    bounds = {
        'max_agent_calls': h.max_agent_calls,
        'max_tool_calls': h.max_tool_calls,
        'call_caps': dict(h.call_caps),
        'max_concurrency': h.max_concurrency,
        'call_concurrency': dict(h.call_concurrency),
        'max_repeats (identical calls per script)': h.max_repeats,
        'refused calls per script before it is stopped': MAX_REFUSALS,
        'sandbox': {
            'max_duration_secs': h.limits.max_duration_secs,
            'max_memory': h.limits.max_memory,
            'max_suspensions': h.limits.max_suspensions,
        },
        'strict (rule-breaking scripts fail the check)': h.strict,
        'allow_unguarded (strict lets scripts reach these unguarded callees)': sorted(h.allow_unguarded),
    }
    on_crash = [
        'Before a call is journaled: nothing of it happened; resume makes it again.',
        'Every result is journaled before the script sees it, and every pause is snapshotted after the calls '
        'it waits on are journaled: resume (any process) restarts from the newest snapshot and answers the '
        'journaled calls without running them.',
        'Without a store (store=None) nothing is journaled: a crash loses the run.',
    ]
    findings = [finding for c in callees if (finding := what_can_hurt(c, h.allow_unguarded))]
    return Audit(callees, ENFORCEMENT, bounds, on_crash, findings)


def audit_callee(h: Harness, callee: Callee) -> CalleeAudit:
    """One callee's answers: its guards (each with where it is enforced), what a crash does, what can hurt."""
    guards = [
        f'requires {rule.describe()}{untrusted(callee, rule)} (checked at each call, before it runs)'
        for rule in callee.requires
    ]
    if callee.approval:
        guards.append('a person approves each call before it runs (approval=True; the run waits)')
    if callee.name in h.call_caps:
        guards.append(f'at most {h.call_caps[callee.name]} call(s) per run (call_caps, reserved at each call)')
    if callee.name in h.call_concurrency:
        guards.append(f'at most {h.call_concurrency[callee.name]} at once (call_concurrency, as a call starts)')
    guards.append('counts against max_agent_calls' if callee.kind == 'agent' else 'counts against max_tool_calls')
    if callee.side_effect:
        on_crash = (
            'in flight at a crash: its outcome is unknown, so resume stops with NeedsDecision until '
            'you re-run it (--retry-unknown) or supply its result (--answer SEQ=JSON); never re-run '
            'silently. Finished: answered from the journal, never repeated.'
        )
    else:
        on_crash = 'in flight at a crash: run again on resume (attempt 2). Finished: answered from the journal.'
    tools = own_tools(callee.agent) if callee.agent is not None else ()
    possibly = bool(tools) and not callee.side_effect_given
    return CalleeAudit(
        callee.name,
        callee.kind,
        callee.side_effect,
        tuple(guards),
        on_crash,
        unguarded=callee.unguarded,
        possibly_irreversible=possibly,
        own_tools=tools,
    )


def untrusted(callee: Callee, rule: After) -> str:
    """What a rule of a side-effecting callee does not take for a predecessor (the stubs leave it unsaid: it is the
    rule's default, and the model has no answers to supply)."""
    if not callee.side_effect or rule.trust_answers:
        return ''
    return (
        f"; a {rule.callee} result supplied rather than run (a fork's result=, --answer, an eval baseline) "
        'does not count'
    )


def what_can_hurt(c: CalleeAudit, allowed: frozenset[str]) -> str | None:
    """The finding for one callee, in plain words, with the fix; None when nothing of it can hurt unseen."""
    if c.unguarded:
        allowed_text = (
            ' strict=True lets scripts reach it (allow_unguarded names it).'
            if c.name in allowed
            else ' Give it requires= or approval=True, or accept it by name with allow_unguarded=[...]; '
            'strict=True refuses scripts that can reach it until then.'
        )
        return f'{c.name}: irreversible, no guard, no approval: a script can call it at step one.' + allowed_text
    if c.possibly_irreversible:
        return (
            f'{c.name}: possibly irreversible: its own agent has tools ({", ".join(c.own_tools)}) that run '
            'when it runs, and it was registered without side_effect=, so it counts as free of side effects '
            '(re-run after a crash, not marked in the stubs). Register it with side_effect=True, or '
            'side_effect=False if none of its tools changes anything.'
        )
    return None


def own_tools(agent: AbstractAgent[Any, Any]) -> tuple[str, ...]:
    """The tools a sub-agent's agent can call on its own, read without running it: each function tool by name,
    each other toolset (an MCP server, a dynamic toolset) by its label, as its tools are known only when it runs.
    An agent that does not say what its toolsets are (a wrapper of another kind) is one unknown toolset."""
    toolsets: Any = getattr(agent, 'toolsets', None)
    if toolsets is None:
        return (f'{type(agent).__name__} (its toolsets cannot be read)',)
    found: list[str] = []

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            found.extend(sorted(toolset.tools))
        else:
            found.append(toolset.label)

    for toolset in toolsets:
        toolset.apply(visit)
    return tuple(found)
