"""Which model the orchestrator runs on: `--model`/`HARNESS_MODEL`, an OpenAI-compatible server at
`HARNESS_BASE_URL`, a provider key in the environment, or else the offline demo planner.

A model is built when chosen, so a wrong name, a missing key or an unreachable server is one line before
anything runs. With `HARNESS_BASE_URL` and no name, the server is asked which model it serves.
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


def choose_model(model: str | None = None, *, config_model: str | None = None, ask_server: bool = True) -> ModelChoice:
    """`ask_server=False`: for a command that calls no model (check, audit, replay, ...), the server at
    `HARNESS_BASE_URL` is not asked which model it serves (it need not be up); the model is then None."""
    name = model or os.environ.get('HARNESS_MODEL') or config_model
    base_url = os.environ.get('HARNESS_BASE_URL')
    if base_url and not name and not ask_server:
        return ModelChoice(None, f'the model served at {base_url}', False)
    if base_url:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        api_key = os.environ.get('HARNESS_API_KEY') or 'not-needed'
        model_name = name.removeprefix('openai:') if name else served_model(base_url, api_key)
        provider = OpenAIProvider(base_url=base_url, api_key=api_key)
        return ModelChoice(OpenAIChatModel(model_name, provider=provider), f'{model_name} at {base_url}', False)
    if name:
        return ModelChoice(resolve(name), name, False)
    for key, default in KEY_DEFAULTS.items():
        if os.environ.get(key):
            return ModelChoice(resolve(default), default, False)
    return ModelChoice(None, 'offline demo planner', True)


class ModelError(ValueError):
    """The model cannot be used as named; the message is one line that says what to change."""


MODELS_SHOWN = 10


def served_model(base_url: str, api_key: str) -> str:
    """The one model the OpenAI-compatible server at `base_url` serves (`GET {base_url}/models`).

    Ollama and vLLM refuse a request for a model they do not serve, so no name is made up: with none or
    several served, the user names one in `HARNESS_MODEL` (then the server is not asked)."""
    url = base_url.rstrip('/') + '/models'
    names = model_names(fetch_json(url, api_key, base_url))
    if names is None:
        raise ModelError(
            f'{url} did not answer with a list of models: set HARNESS_MODEL to the name of the model '
            'to use at HARNESS_BASE_URL.'
        )
    if len(names) == 1:
        return names[0]
    if not names:
        raise ModelError(
            f'the server at {base_url} serves no model: load one (e.g. `ollama pull llama3.2`), or set '
            'HARNESS_MODEL to the name of the model to use.'
        )
    shown = ', '.join(names[:MODELS_SHOWN]) + (', ...' if len(names) > MODELS_SHOWN else '')
    raise ModelError(
        f'the server at {base_url} serves {len(names)} models ({shown}): set HARNESS_MODEL (or --model) '
        'to the one to use.'
    )


def fetch_json(url: str, api_key: str, base_url: str) -> Any:
    """GET `url` as JSON, with a one-line `ModelError` naming the fix when the server cannot be asked."""
    import json
    import urllib.error
    import urllib.request

    if not url.startswith(('http://', 'https://')):
        raise ModelError(
            f"HARNESS_BASE_URL {base_url!r} is not an http(s) URL: name the server's OpenAI API, e.g. "
            'http://127.0.0.1:11434/v1 for Ollama.'
        )
    request = urllib.request.Request(url, headers={'Authorization': f'Bearer {api_key}', 'Accept': 'application/json'})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        raise ModelError(
            f'{url} answered HTTP {exc.code}: set HARNESS_MODEL to the name of the model to use at HARNESS_BASE_URL.'
        ) from None
    except urllib.error.URLError as exc:  # refused, unknown host
        reason = getattr(exc.reason, 'strerror', None) or exc.reason
        raise ModelError(
            f'cannot reach the model server at {base_url} (HARNESS_BASE_URL): {reason}. Start it '
            '(e.g. `ollama serve`), or point HARNESS_BASE_URL at it.'
        ) from None
    except TimeoutError:
        raise ModelError(
            f'the model server at {base_url} (HARNESS_BASE_URL) did not answer within 10 s: is it '
            'running? Or set HARNESS_MODEL to the name of the model to use.'
        ) from None
    except ValueError:  # not JSON: something else answers there
        raise ModelError(
            f"{url} did not answer with JSON: HARNESS_BASE_URL must be the server's OpenAI API, e.g. "
            'http://127.0.0.1:11434/v1 (or set HARNESS_MODEL).'
        ) from None


def model_names(listing: Any) -> list[str] | None:
    """The model ids of an OpenAI `/models` answer (`{"data": [{"id": ...}, ...]}`), or None if it is not one."""
    data = listing.get('data') if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    return [m['id'] for m in data if isinstance(m, dict) and isinstance(m.get('id'), str)]


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
