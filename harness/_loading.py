"""Finds the user's configuration: the store path, custom sub-agents (`--agents module:attr`) and
`[tool.harness]` in the nearest pyproject.toml.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent

from ._catalog import RegistrationError
from ._engine import Harness

DEFAULT_STORE = '.harness/runs.db'


def resolve_store(store: str | None) -> str:
    """`--store`, else `HARNESS_STORE`, else `.harness/runs.db` under the working directory."""
    return store or os.environ.get('HARNESS_STORE') or DEFAULT_STORE


@dataclass
class ProjectConfig:
    """`[tool.harness]` from the user's pyproject.toml."""

    agents: list[str] = field(default_factory=list)
    model: str | None = None
    workspace: str | None = None
    root: Path | None = None


def find_project_config(start: Path | None = None) -> ProjectConfig:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / 'pyproject.toml'
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise RegistrationError(f'cannot read {pyproject}: {exc}') from None
            section = data.get('tool', {}).get('harness', {})
            agents = section.get('agents', [])
            if isinstance(agents, str):
                agents = [agents]
            return ProjectConfig(
                agents=list(agents), model=section.get('model'), workspace=section.get('workspace'), root=folder
            )
    return ProjectConfig()


def load_object(spec: str, *, search_path: Path | None = None) -> Any:
    """Import `module:attr` (the working directory and `search_path` are importable)."""
    module_name, _, attr = spec.partition(':')
    if not module_name or not attr:
        raise RegistrationError(f'--agents {spec!r}: write it as module:attribute, e.g. myagents:reviewer')
    for path in (str(Path.cwd()), str(search_path) if search_path else None):
        if path and path not in sys.path:
            sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistrationError(f'--agents {spec!r}: cannot import {module_name!r} ({exc}).') from None
    obj: Any = module
    for part in attr.split('.'):
        if not hasattr(obj, part):
            raise RegistrationError(f'--agents {spec!r}: module {module_name!r} has no attribute {attr!r}.')
        obj = getattr(obj, part)
    return obj


def merge_into(h: Harness, obj: Any, *, spec: str) -> list[str]:
    """Register a Harness's catalog, an Agent, an async function, or a list of them; user entries replace built-ins."""
    added: list[str] = []
    items = obj if isinstance(obj, list | tuple) else [obj]
    for item in items:
        if isinstance(item, Harness):
            for name, callee in item.callees.items():
                if name in h.callees:
                    h.remove(name)
                h.add_callee(callee)
                added.append(name)
        elif isinstance(item, AbstractAgent):
            if item.name and item.name in h.callees:
                h.remove(item.name)
            h.add_agent(item)
            added.append(item.name or '?')
        elif inspect.iscoroutinefunction(item):
            if item.__name__ in h.callees:
                h.remove(item.__name__)
            h.subagent(item)
            added.append(item.__name__)
        else:
            raise RegistrationError(
                f'--agents {spec!r} is a {type(item).__name__}: point it at a Harness, a pydantic-ai Agent, '
                'an async function, or a list of them.'
            )
    return added
