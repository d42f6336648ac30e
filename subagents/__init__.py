"""Built-in sub-agents: pydantic-ai `Agent`s with typed outputs, and their offline stand-ins.

```python
from harness import Harness
from subagents import register_builtins

h = Harness()
register_builtins(h)            # reviewer, summarizer, critic, drafter, editor (offline stand-ins)
register_builtins(h2, model='openai:gpt-4o')   # the same agents on a real model
```

Offline, the reviewer reports what ruff finds and the others give canned answers (`offline`);
`planner.demo_model()` stands in for the orchestrator's model. This package does not import `harness`.
"""

from .agents import (
    AgentRegistry,
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
from .offline import offline_model, review_source
from .planner import demo_model

__all__ = [
    'AgentRegistry',
    'BuiltinAgent',
    'CritiqueRequest',
    'EditRequest',
    'Finding',
    'ModelSpec',
    'Review',
    'ReviewRequest',
    'Score',
    'builtin_agents',
    'demo_model',
    'make_critic',
    'make_drafter',
    'make_editor',
    'make_reviewer',
    'make_summarizer',
    'offline_model',
    'register_builtins',
    'review_source',
]
