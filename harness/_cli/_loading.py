"""Finds the user's configuration: the store path, custom sub-agents (`--agents module:attr`), host tools
(`--tools module:attr`) and `[tool.harness]` in the nearest pyproject.toml.

What a plain function becomes is the user's choice, not a guess: under `agents` an async function is a
sub-agent, under `tools` a function (sync or async) is a host tool.

Only the standard library at import: the CLI's commands that read stored runs start fast because
nothing here pulls in pydantic-ai; `load_object` and `merge_into` import what they need when called.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .._engine import Harness

STORE_DIR = '.harness'
DEFAULT_STORE = '.harness/runs.db'
ROOT_MARKERS = ('pyproject.toml', '.git')


class ConfigError(ValueError):
    """The user's configuration cannot be used; the message names the file and the fix."""


def resolve_store(store: str | None, config: ProjectConfig | None = None, *, start: Path | None = None) -> str:
    """`--store`, else `HARNESS_STORE`, else `[tool.harness] store` (relative to its pyproject.toml), else the
    `.harness/runs.db` found walking up from the working directory to the project root, else a new one at
    the project root (the nearest folder with a pyproject.toml or .git; the working directory if none).

    So every subdirectory of a project shares the project's runs.
    """
    if store == '':
        raise ConfigError('--store is empty: pass a path to the run store, or leave it out for .harness/runs.db')
    if store or os.environ.get('HARNESS_STORE'):
        return store or os.environ['HARNESS_STORE']
    config = config if config is not None else find_project_config(start)
    if config.store:
        path = Path(config.store).expanduser()
        return str(path if path.is_absolute() or config.root is None else config.root / path)
    here = (start or Path.cwd()).resolve()
    root = project_root(here)
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_STORE
        if candidate.is_file():
            return str(candidate) if folder != here else DEFAULT_STORE
        if folder == root:
            break
    return DEFAULT_STORE if root is None or root == here else str(root / DEFAULT_STORE)


def project_root(start: Path | None = None) -> Path | None:
    """The nearest folder, from `start` up, holding a pyproject.toml or a .git."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return None


@dataclass
class ProjectConfig:
    """`[tool.harness]` from the user's pyproject.toml."""

    agents: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    """`module:attr` of host tools: functions (sync or async), or lists of them."""
    model: str | None = None
    workspace: str | None = None
    store: str | None = None
    temporal: str | None = None
    """A Temporal server's address: scripts run as Temporal workflows (the `temporal` extra)."""
    task_queues: dict[str, str] = field(default_factory=dict)
    """Callee name -> Temporal task queue, for callees with workers of their own."""
    root: Path | None = None
    review: Literal['side_effects', 'always'] | None = None
    """`Harness(review=...)`: which scripts wait for a person's approval of their plan before they run."""
    max_cost: float | None = None
    """`Harness(max_cost=...)`: USD per orchestrator turn (per `exec` run)."""
    conversation_cost: float | None = None
    """`Harness(conversation_cost=...)`: USD over every turn of one `chat` conversation."""


def find_project_config(start: Path | None = None) -> ProjectConfig:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / 'pyproject.toml'
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text(encoding='utf-8'))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f'cannot read {pyproject}: {exc}') from None
            except UnicodeDecodeError as exc:
                raise ConfigError(f'cannot read {pyproject}: it is not UTF-8 text (byte {exc.start})') from None
            tool = data.get('tool', {})
            section = tool.get('harness', {}) if isinstance(tool, dict) else None
            if not isinstance(section, dict):
                raise ConfigError(f'{pyproject}: [tool.harness] is a table, e.g. [tool.harness] then store = "..."')
            agents = section.get('agents', [])
            if isinstance(agents, str):
                agents = [agents]
            if not isinstance(agents, list) or not all(isinstance(a, str) for a in agents):
                raise ConfigError(
                    f'{pyproject}: [tool.harness] agents lists module:attribute strings, e.g. '
                    'agents = ["myagents:reviewer"]'
                )
            for key in ('model', 'workspace'):
                if section.get(key) is not None and not isinstance(section[key], str):
                    raise ConfigError(f'{pyproject}: [tool.harness] {key} must be a string')
            tools = section.get('tools', [])
            tools = [tools] if isinstance(tools, str) else tools
            if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
                raise ConfigError(
                    f'{pyproject}: [tool.harness] tools lists module:attribute strings, e.g. '
                    'tools = ["mytools:word_count"]'
                )
            store = section.get('store')
            if store is not None and not isinstance(store, str):
                raise ConfigError(
                    f'{pyproject}: [tool.harness] store must be a path string, e.g. store = ".harness/runs.db"'
                )
            temporal = section.get('temporal')
            if temporal is not None and not isinstance(temporal, str):
                raise ConfigError(f'{pyproject}: [tool.harness] temporal must be an address, e.g. "127.0.0.1:7233"')
            queues = section.get('task_queues', {})
            if not isinstance(queues, dict) or not all(isinstance(v, str) for v in queues.values()):
                raise ConfigError(
                    f'{pyproject}: [tool.harness] task_queues maps callees to queue names, e.g. '
                    'task_queues = { reviewer = "gpu" }'
                )
            review = section.get('review')
            if review not in (None, 'side_effects', 'always'):
                raise ConfigError(
                    f'{pyproject}: [tool.harness] review is "side_effects" (scripts that can reach a side-effecting or '
                    'approval callee wait for a person) or "always"'
                )
            dollars = {name: section.get(name) for name in ('max_cost', 'conversation_cost')}
            for name, value in dollars.items():
                if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                    raise ConfigError(f'{pyproject}: [tool.harness] {name} is USD, 0 or more, e.g. {name} = 1.50')
            return ProjectConfig(
                agents=list(agents),
                tools=tools,
                model=section.get('model'),
                workspace=section.get('workspace'),
                store=store,
                temporal=temporal,
                task_queues=queues,
                root=folder,
                review=review,
                max_cost=dollars['max_cost'],
                conversation_cost=dollars['conversation_cost'],
            )
    return ProjectConfig()


def load_object(spec: str, *, search_path: Path | None = None, option: str = '--agents') -> Any:
    """Import `module:attr` (the working directory and `search_path` are importable); errors name `option`."""
    from .._catalog._callees import RegistrationError

    module_name, _, attr = spec.partition(':')
    if not module_name or not attr:
        example = 'mytools:word_count' if option == '--tools' else 'myagents:reviewer'
        raise RegistrationError(f'{option} {spec!r}: write it as module:attribute, e.g. {example}')
    for path in (str(Path.cwd()), str(search_path) if search_path else None):
        if path and path not in sys.path:
            sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistrationError(f'{option} {spec!r}: cannot import {module_name!r} ({exc}).') from None
    except SyntaxError as exc:
        raise RegistrationError(
            f'{option} {spec!r}: {module_name!r} has a syntax error at line {exc.lineno}: {exc.msg}.'
        ) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's module ran and failed: say where, not a traceback
        raise RegistrationError(
            f'{option} {spec!r}: importing {module_name!r} raised {type(exc).__name__}{message_of(exc)}'
        ) from None
    obj: Any = module
    for part in attr.split('.'):
        if not hasattr(obj, part):
            raise RegistrationError(f'{option} {spec!r}: module {module_name!r} has no attribute {attr!r}.')
        obj = getattr(obj, part)
    return obj


def message_of(exc: BaseException) -> str:
    """`: message` of an exception, or nothing when it has none or its `__str__` raises."""
    try:
        text = str(exc)
    except Exception:
        return ''
    return f': {text}' if text else ''


def merge_into(h: Harness, obj: Any, *, spec: str) -> list[str]:
    """Register a Harness's catalog, an Agent, an async function (a sub-agent), or a list of them; user entries
    replace built-ins."""
    from pydantic_ai.agent.abstract import AbstractAgent

    from .._catalog._callees import RegistrationError
    from .._engine import Harness

    added: list[str] = []
    for item in obj if isinstance(obj, list | tuple) else [obj]:
        if isinstance(item, Harness):
            for name, callee in item.callees.items():
                replace(h, name)
                h.add_callee(callee)
                added.append(name)
        elif isinstance(item, AbstractAgent):
            replace(h, item.name)
            h.add_agent(item)
            added.append(item.name or '?')
        elif inspect.iscoroutinefunction(item):
            replace(h, item.__name__)
            h.subagent(item)
            added.append(item.__name__)
        elif inspect.isfunction(item):
            raise RegistrationError(
                f'--agents {spec!r}: {item.__name__} is a plain (not async) function, which cannot be a sub-agent; '
                f'for a host tool, load it with --tools {spec} (or [tool.harness] tools).'
            )
        else:
            raise RegistrationError(
                f'--agents {spec!r} is a {type(item).__name__}: point it at a Harness, a pydantic-ai Agent, '
                'an async function, or a list of them.'
            )
    return added


def merge_tools(h: Harness, obj: Any, *, spec: str) -> list[str]:
    """Register a function (sync or async) or a list of them as host tools; user entries replace built-ins."""
    from pydantic_ai.agent.abstract import AbstractAgent

    from .._catalog._callees import RegistrationError
    from .._engine import Harness

    added: list[str] = []
    for item in obj if isinstance(obj, list | tuple) else [obj]:
        if isinstance(item, Harness | AbstractAgent):
            what = (
                'a Harness (its catalog says what each callee is)'
                if isinstance(item, Harness)
                else 'a pydantic-ai Agent (a sub-agent)'
            )
            raise RegistrationError(
                f'--tools {spec!r} is {what}: load it with --agents {spec} (or [tool.harness] agents).'
            )
        if not inspect.isfunction(item):
            raise RegistrationError(
                f'--tools {spec!r} is a {type(item).__name__}: point it at a function (sync or '
                'async) or a list of them.'
            )
        replace(h, item.__name__)
        h.tool(item)
        added.append(item.__name__)
    return added


def replace(h: Harness, name: str | None) -> None:
    """Make room for a user's callee: it replaces a built-in of the same name."""
    if name and name in h.callees:
        h.remove(name)
