"""The typed inputs and outputs of the built-in sub-agents.

Inputs (`*Request`) become the keyword parameters of a sub-agent's stub; outputs cross into the
sandbox as plain dicts typed as `TypedDict`s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Severity = Literal['info', 'warning', 'error']
Focus = Literal['bugs', 'style', 'all']
Verdict = Literal['ok', 'needs_work']


class ReviewRequest(BaseModel):
    """A file to review."""

    path: str = Field(description='The file path, as shown to the user (used in the review and its summary).')
    source: str = Field(description="The file's full text, e.g. what read_file returned.")
    focus: Focus = Field(
        default='all', description="'bugs' for correctness only, 'style' for readability only, 'all' for both."
    )


class Finding(BaseModel):
    """One problem found in a file."""

    line: int = Field(description='1-based line number the finding refers to.')
    severity: Severity
    message: str


class Review(BaseModel):
    """A code review of one file."""

    path: str
    verdict: Verdict = Field(description="'needs_work' when any finding is a warning or an error.")
    findings: list[Finding]
    summary: str


class CritiqueRequest(BaseModel):
    """An answer to grade against the question it answers."""

    question: str
    answer: str


class Score(BaseModel):
    """A grade from 0 (useless) to 10 (complete and precise), with the reasons for it."""

    score: int = Field(ge=0, le=10)
    reasons: list[str]


class EditRequest(BaseModel):
    """A draft to revise and the feedback to apply to it."""

    draft: str
    feedback: str


__all__ = [
    'CritiqueRequest',
    'EditRequest',
    'Finding',
    'Focus',
    'Review',
    'ReviewRequest',
    'Score',
    'Severity',
    'Verdict',
]
