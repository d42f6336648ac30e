"""The built-in sub-agents: `reviewer`, `summarizer`, `critic`, `drafter`, `editor`.

Each is a pydantic-ai `Agent` with a name, a description (what the orchestrator's model reads in
the catalog), instructions (what the sub-agent's own model reads) and a typed output. With a model
they run on it; without one they run on an offline stand-in (see `offline`: ruff for the reviewer,
canned answers for the others), so the engine can be demonstrated and tested with no network or key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models import KnownModelName, Model

from .models import CritiqueRequest, EditRequest, Review, ReviewRequest, Score
from .offline import offline_model

ModelSpec = Model | KnownModelName | str
"""A pydantic-ai model, or a model string such as `'openai:gpt-4o'`."""


class AgentRegistry(Protocol):
    """What `register_builtins` needs of a `harness.Harness` (this package does not import the engine)."""

    def add_agent(
        self, agent: Agent[None, Any], *, description: str | None = None, params: type[BaseModel] | None = None
    ) -> Any: ...


REVIEWER_DESCRIPTION = (
    'Review one Python file for bugs and style problems. Pass its path and full source (for example '
    "from read_file), and optionally focus='bugs' or 'style'. Returns a verdict ('ok' or 'needs_work'), "
    'findings with 1-based line numbers and severities, and a short summary.'
)
SUMMARIZER_DESCRIPTION = (
    'Summarize text or data (for example code review findings, one per line) in a few sentences or '
    'bullets. Put the material in `task`, after an instruction line ending with a colon.'
)
CRITIC_DESCRIPTION = (
    'Grade an answer against the question it answers: a score from 0 (useless) to 10 (complete and '
    'precise) and the reasons for it.'
)
DRAFTER_DESCRIPTION = (
    'Write a first draft (an email, report, plan, document, announcement, ...) from a task that says '
    'what it is for and what it must cover. Include the facts it should contain in the task.'
)
EDITOR_DESCRIPTION = (
    "Revise a draft according to feedback such as 'shorter', 'more formal', 'as bullet points', 'fix "
    "typos', 'add a title', 'remove X', 'replace X with Y'. Returns the revised text only."
)

REVIEWER_INSTRUCTIONS = """\
You are a careful Python code reviewer. The input is XML with <path>, <source> and <focus>.
Report only real problems, each with the 1-based line number in <source> where it occurs, a severity
(error: a bug, crash or security hole; warning: likely bug or maintainability problem; info: minor
style note) and one sentence saying what is wrong and how to fix it.
focus='bugs' means correctness and security only, 'style' readability only, 'all' both.
Set verdict to 'needs_work' when any finding is a warning or an error, otherwise 'ok'.
The summary is one or two sentences naming the most important problems.
If the source does not parse, report the syntax error as a single error finding."""

SUMMARIZER_INSTRUCTIONS = """\
Summarize the material you are given for a busy engineer. Lead with the conclusion, then at most six
short bullets with the most important facts (for code reviews: the most severe findings with
file:line). Do not invent anything that is not in the material. Reply with the summary only."""

CRITIC_INSTRUCTIONS = """\
You grade answers. The input is XML with <question> and <answer>. Score the answer from 0 (empty,
wrong or evasive) to 10 (correct, complete, specific and concise) and list the reasons that decided
the score: what it covers, what it misses, and anything wrong."""

DRAFTER_INSTRUCTIONS = """\
You write first drafts. Choose the form the task asks for (email, report, plan, document, ...),
cover every point it lists, keep it plain and concise, and mark missing facts as [placeholders]
instead of inventing them. Reply with the draft only."""

EDITOR_INSTRUCTIONS = """\
You revise drafts. The input is XML with <draft> and <feedback>. Apply every piece of feedback,
change nothing else, keep the author's facts, and reply with the revised text only."""


@dataclass(frozen=True)
class BuiltinAgent:
    """A built-in sub-agent, ready for `Harness.add_agent(agent, params=params, description=description)`."""

    agent: Agent[None, Any]
    params: type[BaseModel] | None
    """The model whose fields are the sub-agent's keyword parameters (None: `task: str`)."""
    description: str

    @property
    def name(self) -> str:
        return self.agent.name or ''


def _agent(
    name: str, *, model: ModelSpec | None, output_type: type[Any], description: str, instructions: str
) -> Agent[None, Any]:
    chosen: ModelSpec = offline_model(name) if model is None else model
    return Agent(
        chosen,
        output_type=output_type,
        name=name,
        description=description,
        instructions=instructions,
        defer_model_check=True,  # a model string is resolved on first use, so no key is needed to build
    )


def make_reviewer(model: ModelSpec | None = None) -> Agent[None, Review]:
    """`reviewer(*, path, source, focus='all') -> Review` (register with `params=ReviewRequest`)."""
    return _agent(
        'reviewer',
        model=model,
        output_type=Review,
        description=REVIEWER_DESCRIPTION,
        instructions=REVIEWER_INSTRUCTIONS,
    )


def make_summarizer(model: ModelSpec | None = None) -> Agent[None, str]:
    """`summarizer(*, task) -> str`."""
    return _agent(
        'summarizer',
        model=model,
        output_type=str,
        description=SUMMARIZER_DESCRIPTION,
        instructions=SUMMARIZER_INSTRUCTIONS,
    )


def make_critic(model: ModelSpec | None = None) -> Agent[None, Score]:
    """`critic(*, question, answer) -> Score` (register with `params=CritiqueRequest`)."""
    return _agent(
        'critic', model=model, output_type=Score, description=CRITIC_DESCRIPTION, instructions=CRITIC_INSTRUCTIONS
    )


def make_drafter(model: ModelSpec | None = None) -> Agent[None, str]:
    """`drafter(*, task) -> str`."""
    return _agent(
        'drafter', model=model, output_type=str, description=DRAFTER_DESCRIPTION, instructions=DRAFTER_INSTRUCTIONS
    )


def make_editor(model: ModelSpec | None = None) -> Agent[None, str]:
    """`editor(*, draft, feedback) -> str` (register with `params=EditRequest`)."""
    return _agent(
        'editor', model=model, output_type=str, description=EDITOR_DESCRIPTION, instructions=EDITOR_INSTRUCTIONS
    )


def builtin_agents(model: ModelSpec | None = None) -> list[BuiltinAgent]:
    """The five built-in sub-agents; on their offline stand-ins when `model` is None."""
    return [
        BuiltinAgent(make_reviewer(model), ReviewRequest, REVIEWER_DESCRIPTION),
        BuiltinAgent(make_summarizer(model), None, SUMMARIZER_DESCRIPTION),
        BuiltinAgent(make_critic(model), CritiqueRequest, CRITIC_DESCRIPTION),
        BuiltinAgent(make_drafter(model), None, DRAFTER_DESCRIPTION),
        BuiltinAgent(make_editor(model), EditRequest, EDITOR_DESCRIPTION),
    ]


def register_builtins(h: AgentRegistry, model: ModelSpec | None = None) -> None:
    """Register every built-in sub-agent on `h` (replace one with `h.remove(name)` then your own)."""
    for builtin in builtin_agents(model):
        h.add_agent(builtin.agent, params=builtin.params, description=builtin.description)


__all__ = [
    'AgentRegistry',
    'BuiltinAgent',
    'ModelSpec',
    'builtin_agents',
    'make_critic',
    'make_drafter',
    'make_editor',
    'make_reviewer',
    'make_summarizer',
    'register_builtins',
]
