"""Built-in sub-agents: pydantic-ai `Agent`s with typed outputs, and their offline rule-based behaviour.

```python
from harness import Harness
from subagents import register_builtins

h = Harness()
register_builtins(h)            # reviewer, summarizer, critic, drafter, editor (offline rules)
register_builtins(h2, model='openai:gpt-4o')   # the same agents on a real model
```
"""

from .agents import (
    BuiltinAgent,
    ModelSpec,
    builtin_agents,
    make_critic,
    make_drafter,
    make_editor,
    make_reviewer,
    make_summarizer,
    register_builtins,
)
from .models import CritiqueRequest, EditRequest, Finding, Review, ReviewRequest, Score
from .review import review_source

__all__ = [
    'BuiltinAgent',
    'CritiqueRequest',
    'EditRequest',
    'Finding',
    'ModelSpec',
    'Review',
    'ReviewRequest',
    'Score',
    'builtin_agents',
    'make_critic',
    'make_drafter',
    'make_editor',
    'make_reviewer',
    'make_summarizer',
    'register_builtins',
    'review_source',
]
