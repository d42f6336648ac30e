"""Which model the orchestrator runs on: `--model`/`HARNESS_MODEL`, an OpenAI-compatible server at
`HARNESS_BASE_URL`, a provider key in the environment, or else the offline demo planner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

# Provider keys and the model used when only the key is present.
KEY_DEFAULTS = {
    'OPENAI_API_KEY': 'openai:gpt-4.1-mini',
    'ANTHROPIC_API_KEY': 'anthropic:claude-sonnet-4-5',
    'GEMINI_API_KEY': 'google-gla:gemini-2.5-flash',
    'GROQ_API_KEY': 'groq:llama-3.3-70b-versatile',
    'MISTRAL_API_KEY': 'mistral:mistral-large-latest',
}


@dataclass(frozen=True)
class ModelChoice:
    model: Any
    """A pydantic-ai model or model string; None in demo mode (the caller builds the planner)."""
    label: str
    demo: bool


def choose_model(model: str | None = None, *, config_model: str | None = None) -> ModelChoice:
    name = model or os.environ.get('HARNESS_MODEL') or config_model
    base_url = os.environ.get('HARNESS_BASE_URL')
    if base_url:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model_name = (name or 'default').removeprefix('openai:')
        provider = OpenAIProvider(base_url=base_url, api_key=os.environ.get('HARNESS_API_KEY') or 'not-needed')
        return ModelChoice(OpenAIChatModel(model_name, provider=provider), f'{model_name} at {base_url}', False)
    if name:
        return ModelChoice(resolve(name), name, False)
    for key, default in KEY_DEFAULTS.items():
        if os.environ.get(key):
            return ModelChoice(resolve(default), default, False)
    return ModelChoice(None, 'offline demo planner', True)


class ModelError(ValueError):
    """The model cannot be used as named; the message is one line that says what to change."""


def resolve(name: str) -> Any:
    """The pydantic-ai model for `name`, built now, so a typo or a missing key is one line before anything runs."""
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    try:
        return infer_model(name)
    except UserError as exc:
        message = ' '.join(str(exc).split())
        if message.startswith('Unknown model'):
            raise ModelError(
                f'unknown model {name!r}: name it as provider:model, e.g. --model openai:gpt-4.1-mini, '
                'or set HARNESS_BASE_URL for an OpenAI-compatible server (Ollama, vLLM).'
            ) from None
        first = message.split('. ')[0].rstrip('.')
        raise ModelError(f'cannot use model {name!r}: {first}.') from None
    except ImportError as exc:
        raise ModelError(f'cannot use model {name!r}: {" ".join(str(exc).split())}') from None


DEMO_NOTICE = (
    'Offline demo mode: no model configured and no provider key found, so a small scripted planner writes the '
    'workflow scripts, the reviewer reports what ruff finds and the other sub-agents give canned answers. '
    'Set HARNESS_MODEL (or --model, or '
    'HARNESS_BASE_URL for Ollama/vLLM) to use a real model.'
)
