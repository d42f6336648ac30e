"""The floor plan holds: read from the imports of every module, so a change that breaks it fails here.

The engine's core is grouped by stage (`_catalog`, `_check`, `_sandbox`, `_dispatch`, `_store`, `_tracing`,
`_agent`, and the modules at the top of `harness/`); its edges (`_cli`, `_studio`, `_temporal`, `_evals`) stand on
it. The core never imports an edge; the `Harness` facade (`_engine`) reaches the Temporal engine and the evals only
when asked to (inside the method that needs them), so importing the core loads no edge. `_ui`, the layer under
both user interfaces, holds plain data: no rich, no Starlette, no edge. Span names and `harness.*` attribute names
are spelled in one module, `harness/_tracing/_names.py`, which every writer and reader of spans uses.
ARCHITECTURE.md, the code map, names every module and no other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / 'harness'
EDGES = {'_cli', '_studio', '_temporal', '_evals'}
UI_FORBIDDEN = {'rich', 'starlette', 'typer', 'uvicorn'}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob('*.py')):
        parts = ['harness', *path.relative_to(ROOT).with_suffix('').parts]
        found['.'.join(parts[:-1] if parts[-1] == '__init__' else parts)] = path
    return found


def imports(name: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in the file."""
    tree = ast.parse(path.read_text())
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    top_level = {id(node) for node in tree.body}
    guarded = set()  # imports under `if TYPE_CHECKING:` at module level
    for node in tree.body:
        if isinstance(node, ast.If) and 'TYPE_CHECKING' in ast.unparse(node.test):
            guarded.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split('.')[: len(package.split('.')) - node.level + 1] if node.level else []
            target = '.'.join([*base, *(node.module.split('.') if node.module else [])])
            found.append((target, node.lineno, id(node) in top_level and id(node) not in guarded))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, id(node) in top_level) for alias in node.names)
    return found


def package_of(module: str) -> str:
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else ''


MODULES = modules()


FACADES = {'harness', 'harness._engine'}
"""The public surface and the `Harness` facade: they may name an edge lazily (inside a function, under
TYPE_CHECKING, or in `__init__`'s lazy map), never at import time. (`python -m harness` is the CLI.)"""


@pytest.mark.parametrize('name', [m for m in MODULES if package_of(m) not in EDGES and m != 'harness.__main__'])
def test_the_core_imports_no_edge(name: str) -> None:
    for target, line, at_top in imports(name, MODULES[name]):
        if package_of(target) in EDGES and target.startswith('harness.'):
            assert name in FACADES and not at_top, (
                f'{name}:{line} imports the edge {target}: the core never does; the Harness facade only inside the '
                'method that needs it'
            )


@pytest.mark.parametrize('name', [m for m in MODULES if package_of(m) == '_ui'])
def test_the_layer_under_both_interfaces_is_plain_data(name: str) -> None:
    for target, line, _ in imports(name, MODULES[name]):
        assert target.split('.')[0] not in UI_FORBIDDEN, f'{name}:{line} imports {target}'
        assert package_of(target) not in EDGES or not target.startswith('harness.'), f'{name}:{line} imports {target}'


def test_the_studio_does_not_stand_on_the_terminal() -> None:
    for name in (m for m in MODULES if package_of(m) == '_studio'):
        for target, line, _ in imports(name, MODULES[name]):
            assert not target.startswith('harness._cli'), f'{name}:{line} imports the CLI ({target}): use harness._ui'


def test_every_module_is_in_a_package_of_its_stage_or_edge() -> None:
    """The top of `harness/` holds the public surface, the facade and what every stage shares, and nothing else."""
    top = sorted(p.name for p in ROOT.glob('*.py'))
    assert top == ['__init__.py', '__main__.py', '_engine.py', '_errors.py', '_records.py', '_run.py', '_settings.py']


@pytest.mark.parametrize('name', list(MODULES))
def test_no_module_is_a_room_of_several_jobs(name: str) -> None:
    """A module past 600 lines does several jobs: split it by job (issue 22)."""
    lines = MODULES[name].read_text().count('\n')
    assert lines <= 600, f'{MODULES[name].relative_to(ROOT.parent)} has {lines} lines'


NAMES = ROOT / '_tracing' / '_names.py'
ATTRIBUTE_LITERAL = re.compile(r'harness\.[a-z]')
"""A `harness.<word>` string: a span attribute's name (module paths, `harness._x`, are not)."""
NOT_ATTRIBUTES = {'harness._temporal._flow': {'harness.advance', 'harness.call'}}
"""Temporal activity names, not span attributes; that module imports only the standard library and temporalio."""


def test_span_attribute_names_are_spelled_only_in_the_names_module() -> None:
    """Writers and readers share the constants of `_tracing._names`, so a renamed or new attribute cannot leave
    a view reading a name no span carries (f-string pieces count: `f'harness.{x}'` is caught too)."""
    found = []
    for name, path in MODULES.items():
        if path == NAMES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            literal = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ''
            if ATTRIBUTE_LITERAL.match(literal) and literal not in NOT_ATTRIBUTES.get(name, set()):
                found.append(f'{path.relative_to(ROOT.parent)}:{node.lineno} {literal!r}')
    assert not found, 'use (or add) a constant of harness/_tracing/_names.py:\n' + '\n'.join(sorted(found))


def test_spans_are_named_through_the_names_module() -> None:
    """A span's name is a `_tracing._names` constant or helper, never a literal at the place that starts it."""
    found = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ('start_as_current_span', 'start_span')
                and node.args
                and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
            ):
                found.append(f'{path.relative_to(ROOT.parent)}:{node.lineno}')
    assert not found, 'name the span with harness/_tracing/_names.py: ' + ', '.join(found)


TEMPORAL = ROOT / '_temporal'
OWN = {'self', 'cls'}
"""A class's own private attributes are its business; any other object's are not the Temporal side's."""


def private(name: str) -> bool:
    return name.startswith('_') and not name.startswith('__')


def reads_private(node: ast.AST) -> bool:
    """`h._x` or `self.harness._x` (not `self._x`), or `getattr(h, '_x')` (and its set/has twins)."""
    if isinstance(node, ast.Attribute):
        return private(node.attr) and not (isinstance(node.value, ast.Name) and node.value.id in OWN)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and len(node.args) > 1
        and node.func.id in ('getattr', 'setattr', 'hasattr')
        and isinstance(node.args[1], ast.Constant)
        and private(str(node.args[1].value))
    )


def private_reaches(path: Path) -> list[str]:
    """Where a module touches something private of another object (`reads_private`), has a protocol naming a
    private method it would call, or imports a private name from the engine facade."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        where = f'{path.name}:{getattr(node, "lineno", 0)}'
        if reads_private(node):
            found.append(f'{where} {ast.unparse(node)}')
        elif isinstance(node, ast.ClassDef) and any('Protocol' in ast.unparse(base) for base in node.bases):
            found.extend(
                f'{where} {node.name}.{item.name}'
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and private(item.name)
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or '').endswith('_engine'):
            found.extend(f'{where} {alias.name}' for alias in node.names if private(alias.name))
    return found


def test_the_temporal_engine_reaches_the_engine_through_public_methods_only() -> None:
    """`harness/_temporal/` drives runs through the `Harness`'s public methods (`start_run`, `advance`,
    `run_call`, ...) and the seam it plugs into (`Starter`), never its private attributes (issue 22)."""
    found = [hit for path in sorted(TEMPORAL.glob('*.py')) for hit in private_reaches(path)]
    assert not found, 'use (or add) a public method of the engine:\n' + '\n'.join(found)


def test_the_private_attribute_check_sees_what_it_must(tmp_path: Path) -> None:
    bad = tmp_path / 'bad.py'
    bad.write_text(
        'class Host(Protocol):\n    def _step(self): ...\n\n'
        'async def f(h, s):\n    await h._advance(1)\n    s.harness._dispatcher()\n    getattr(h, "_x")\n'
        '    self._own = 1\n    h.__class__\n'
    )
    hits = sorted(hit.split(' ', 1)[1] for hit in private_reaches(bad))
    assert hits == ['Host._step', "getattr(h, '_x')", 'h._advance', 's.harness._dispatcher']


def test_the_dispatcher_has_no_mode_flag_for_temporal() -> None:
    """Where a call runs is the `Starter` handed in (`_dispatch/_starters.py`), not a `defer` flag the dispatcher
    branches on (issue 22)."""
    tree = ast.parse((ROOT / '_dispatch' / '_dispatcher.py').read_text())
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    assert not {name for name in names if 'defer' in name}


def test_architecture_names_every_module_and_no_other() -> None:
    """ARCHITECTURE.md is the code map: every module of `harness/` is in its package's row of a table and is
    described in the text (a module only listed is not explained), and every module a row lists exists."""
    text = (ROOT.parent / 'ARCHITECTURE.md').read_text()
    rows = {m['package'] or 'top': set(re.findall(r'`(_\w+)`', m['modules'])) for m in TABLE_ROW.finditer(text)}
    prose = '\n'.join(line for line in text.splitlines() if not line.startswith('|'))
    missing, unexplained, extra = [], [], []
    for name, path in modules().items():
        parts = name.split('.')
        if path.name in ('__init__.py', '__main__.py') or len(parts) > 3:
            continue
        package = parts[1] + '/' if len(parts) == 3 else 'top'
        module = parts[-1]
        if module not in rows.get(package, set()):
            missing.append(name)
        if not re.search(rf'`(?:[\w./]*[./])?{module}[`.(]', prose):
            unexplained.append(name)
    for package, listed in rows.items():
        where = ROOT if package == 'top' else ROOT / package.rstrip('/')
        extra += [f'{package}{m}' for m in sorted(listed) if not (where / f'{m}.py').exists()]
    assert (missing, unexplained, extra) == ([], [], [])


TABLE_ROW = re.compile(r'^\| (?:`(?P<package>_\w+/)`|top of `harness/`) \|[^|\n]*\| (?P<modules>[^|\n]*) \|$', re.M)
"""A row of ARCHITECTURE.md's tables of packages: the package (the modules at the top of `harness/`: no group), the
modules."""


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Not even through a type-only or a lazy import: a reader of either module would go back and forth."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _line, _top in imports(name, path):
            while target and target not in MODULES:
                target = target.rpartition('.')[0]
            if target and target != name:
                graph[name].add(target)
    circles = []
    for start in graph:  # a path from a module's imports back to itself (the graph is small: a search per module)
        seen, todo = set(), list(graph[start])
        while todo:
            here = todo.pop()
            if here == start:
                circles.append(start)
                break
            if here not in seen:
                seen.add(here)
                todo.extend(graph[here])
    assert not circles, f'these modules are on an import circle: {sorted(circles)}'
