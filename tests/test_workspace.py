"""The read-only workspace: listing, reading, searching, and refusing every way out of the root."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import Harness, WorkflowRuntimeError
from tools.workspace import (
    MAX_LIST,
    MAX_MATCHES,
    MAX_READ_BYTES,
    Workspace,
    WorkspaceError,
    compile_glob,
    register_workspace_tools,
)

A_PY = 'import os\n\n\ndef main() -> None:\n    print("hello from a")\n'
B_PY = 'def helper(x: int) -> int:\n    return x * 2  # hello again\n'


def build_tree(base: Path) -> tuple[Path, Path]:
    """A workspace root and, next to it, a directory the workspace must never reach."""
    root = base / 'project'
    outside = base / 'outside'
    (root / 'pkg' / 'deep').mkdir(parents=True)
    (root / '.git').mkdir()
    (root / '__pycache__').mkdir()
    outside.mkdir()
    (root / 'a.py').write_text(A_PY)
    (root / 'pkg' / 'b.py').write_text(B_PY)
    (root / 'pkg' / 'deep' / 'c.txt').write_text('deep text\nhello deep\n')
    (root / 'notes.md').write_text('# Notes\n\nhello, notes\n')
    (root / 'bom.txt').write_bytes('\ufeffwith a byte order mark'.encode())
    (root / 'image.bin').write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00\x00hello')
    (root / 'latin1.txt').write_bytes('caf\xe9'.encode('latin-1'))
    (root / 'big.txt').write_text('hello\n' + 'x' * (MAX_READ_BYTES + 10))
    (root / '.git' / 'config').write_text('[core]\nhello = git\n')
    (root / '__pycache__' / 'a.cpython-311.pyc').write_bytes(b'\x00\x01')
    (outside / 'secret.txt').write_text('top secret hello\n')
    os.symlink(outside, root / 'escape')  # a directory link out of the workspace
    os.symlink(outside / 'secret.txt', root / 'leak.txt')  # a file link out of it
    os.symlink(root / 'a.py', root / 'alias.py')  # a link that stays inside is fine
    return root, outside


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    return build_tree(tmp_path)


@pytest.fixture
def ws(tree: tuple[Path, Path]) -> Workspace:
    return Workspace(tree[0])


def assert_safe(exc: pytest.ExceptionInfo[WorkspaceError], root: Path) -> None:
    """The message is about the caller's path and never names the host's absolute root."""
    message = str(exc.value)
    assert str(root) not in message
    assert str(root.resolve()) not in message
    assert str(root.parent) not in message


# -- list_files ---------------------------------------------------------------------------------------


def test_list_files_default_lists_every_file_relative_and_sorted(ws: Workspace) -> None:
    files = ws.list_files()
    assert files == sorted(files)
    assert files == [
        'a.py',
        'alias.py',
        'big.txt',
        'bom.txt',
        'image.bin',
        'latin1.txt',
        'notes.md',
        'pkg/b.py',
        'pkg/deep/c.txt',
    ]


def test_list_files_hides_links_out_of_the_workspace_and_tool_directories(ws: Workspace) -> None:
    files = ws.list_files('**/*')
    assert 'leak.txt' not in files
    assert not any(f.startswith(('escape/', '.git/', '__pycache__/')) for f in files)


def test_list_files_glob_semantics(ws: Workspace) -> None:
    assert ws.list_files('*.py') == ['a.py', 'alias.py']
    assert ws.list_files('**/*.py') == ['a.py', 'alias.py', 'pkg/b.py']
    assert ws.list_files('pkg/*') == ['pkg/b.py']
    assert ws.list_files('pkg/**/*') == ['pkg/b.py', 'pkg/deep/c.txt']
    assert ws.list_files('**/c.txt') == ['pkg/deep/c.txt']
    assert ws.list_files('[ab].py') == ['a.py']
    assert ws.list_files('[!l]*.txt') == ['big.txt', 'bom.txt']
    assert ws.list_files('?.py') == ['a.py']
    assert ws.list_files('./pkg//b.py') == ['pkg/b.py']
    assert ws.list_files('nothing/*') == []


def test_list_files_with_a_directory_name_lists_what_is_under_it(ws: Workspace) -> None:
    assert ws.list_files('pkg') == ['pkg/b.py', 'pkg/deep/c.txt']
    assert ws.list_files('pkg/') == ['pkg/b.py', 'pkg/deep/c.txt']


def test_list_files_is_capped(tmp_path: Path) -> None:
    for i in range(MAX_LIST + 50):
        (tmp_path / f'f{i:04}.txt').write_text('x')
    files = Workspace(tmp_path).list_files()
    assert len(files) == MAX_LIST
    assert files[0] == 'f0000.txt'


def test_compile_glob_double_star_matches_zero_or_more_directories() -> None:
    pattern = compile_glob('src/**/test_*.py')
    assert pattern.fullmatch('src/test_a.py')
    assert pattern.fullmatch('src/x/y/test_a.py')
    assert not pattern.fullmatch('src/x/a.py')
    assert not pattern.fullmatch('other/test_a.py')


# -- read_file ----------------------------------------------------------------------------------------


def test_read_file_returns_text(ws: Workspace) -> None:
    assert ws.read_file('a.py') == A_PY
    assert ws.read_file('pkg/b.py') == B_PY
    assert ws.read_file('./pkg/b.py') == B_PY
    assert ws.read_file('alias.py') == A_PY  # a link inside the workspace
    assert ws.read_file('bom.txt') == 'with a byte order mark'


def test_read_file_missing_suggests_close_names(ws: Workspace, tree: tuple[Path, Path]) -> None:
    expected = "no file 'pkg/bb.py' in the workspace; did you mean 'pkg/b.py'?"
    with pytest.raises(WorkspaceError, match=re.escape(expected)) as exc:
        ws.read_file('pkg/bb.py')
    assert_safe(exc, tree[0])
    with pytest.raises(WorkspaceError, match='use list_files'):
        ws.read_file('zzzzzzzz/qqqqq')


def test_read_file_refuses_directories_binary_and_large_files(ws: Workspace, tree: tuple[Path, Path]) -> None:
    with pytest.raises(WorkspaceError, match=r"'pkg' is a directory.*list_files\(pattern='pkg/\*'\)") as exc:
        ws.read_file('pkg')
    assert_safe(exc, tree[0])
    with pytest.raises(WorkspaceError, match=r"'image\.bin' is a binary file") as exc:
        ws.read_file('image.bin')
    assert_safe(exc, tree[0])
    with pytest.raises(WorkspaceError, match=r"'latin1\.txt' is a binary file"):
        ws.read_file('latin1.txt')
    with pytest.raises(WorkspaceError, match=r"'big.txt' is 200 KB, over the 200 KB read limit") as exc:
        ws.read_file('big.txt')
    assert_safe(exc, tree[0])


# -- search_text --------------------------------------------------------------------------------------


def test_search_text_finds_lines_with_path_line_and_text(ws: Workspace) -> None:
    matches = ws.search_text(r'hello')
    assert {'path': 'a.py', 'line': 5, 'text': 'print("hello from a")'} in matches
    assert {'path': 'pkg/b.py', 'line': 2, 'text': 'return x * 2  # hello again'} in matches
    assert {'path': 'pkg/deep/c.txt', 'line': 2, 'text': 'hello deep'} in matches
    paths = {m['path'] for m in matches}
    # Binary, oversized, tool-cache and out-of-workspace files are never searched.
    assert paths.isdisjoint({'image.bin', 'big.txt', '.git/config', 'leak.txt', 'escape/secret.txt'})
    assert [(m['path'], m['line']) for m in matches] == sorted((m['path'], m['line']) for m in matches)


def test_search_text_glob_and_regex(ws: Workspace) -> None:
    assert ws.search_text(r'^def \w+\(', glob='**/*.py') == [
        {'path': 'a.py', 'line': 4, 'text': 'def main() -> None:'},
        {'path': 'alias.py', 'line': 4, 'text': 'def main() -> None:'},
        {'path': 'pkg/b.py', 'line': 1, 'text': 'def helper(x: int) -> int:'},
    ]
    assert ws.search_text('no such text anywhere') == []


def test_search_text_refuses_bad_patterns(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match='invalid regular expression'):
        ws.search_text('(unclosed')
    with pytest.raises(WorkspaceError, match='empty'):
        ws.search_text('')


def test_search_text_is_capped(tmp_path: Path) -> None:
    (tmp_path / 'many.txt').write_text('hit\n' * (MAX_MATCHES + 100))
    matches = Workspace(tmp_path).search_text('hit')
    assert len(matches) == MAX_MATCHES
    assert matches[-1]['line'] == MAX_MATCHES


def test_search_text_clips_long_lines(tmp_path: Path) -> None:
    (tmp_path / 'long.txt').write_text('needle ' + 'y' * 1000 + '\n')
    (match,) = Workspace(tmp_path).search_text('needle')
    assert len(match['text']) == 240
    assert match['text'].endswith('...')


# -- escaping the root --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('path', 'fragment'),
    [
        ('../outside/secret.txt', 'goes up with ".."'),
        ('pkg/../../outside/secret.txt', 'goes up with ".."'),
        ('pkg/../a.py', 'goes up with ".."'),
        ('..', 'goes up with ".."'),
        ('..\\outside\\secret.txt', 'goes up with ".."'),
        ('escape/secret.txt', 'resolves outside the workspace through a symbolic link'),
        ('leak.txt', 'resolves outside the workspace through a symbolic link'),
        ('escape', 'resolves outside the workspace through a symbolic link'),
    ],
)
def test_read_file_refuses_paths_out_of_the_root(
    ws: Workspace, tree: tuple[Path, Path], path: str, fragment: str
) -> None:
    with pytest.raises(WorkspaceError, match=fragment) as exc:
        ws.read_file(path)
    assert repr(path) in str(exc.value)  # the caller's own path is named
    assert_safe(exc, tree[0])


def test_absolute_paths_are_refused_without_echoing_the_root(ws: Workspace, tree: tuple[Path, Path]) -> None:
    root, outside = tree
    cases = {
        str(outside / 'secret.txt'): "path ending in 'secret.txt' is absolute",
        str(root / 'a.py'): "path ending in 'a.py' is absolute",
        '/etc/passwd': "path ending in 'passwd' is absolute",
        '~/secret.txt': "path ending in 'secret.txt' is absolute",
        'C:\\Windows\\win.ini': "path ending in 'win.ini' is absolute",
        '/': 'the path is absolute',
    }
    for path, expected in cases.items():
        with pytest.raises(WorkspaceError) as exc:
            ws.read_file(path)
        assert str(exc.value) == f'{expected}; use a path relative to the workspace root, e.g. "src/app.py"'
        assert_safe(exc, root)


def test_list_and_search_refuse_escaping_globs(ws: Workspace, tree: tuple[Path, Path]) -> None:
    with pytest.raises(WorkspaceError, match='goes up with') as exc:
        ws.list_files('../*')
    assert_safe(exc, tree[0])
    with pytest.raises(WorkspaceError, match='is absolute'):
        ws.list_files('/etc/*')
    with pytest.raises(WorkspaceError, match='goes up with'):
        ws.search_text('secret', glob='../**/*')
    with pytest.raises(WorkspaceError, match='resolves outside'):
        ws.list_files('escape')


def test_a_link_loop_is_an_error_not_a_hang(tmp_path: Path) -> None:
    os.symlink(tmp_path / 'loop_b', tmp_path / 'loop_a')
    os.symlink(tmp_path / 'loop_a', tmp_path / 'loop_b')
    ws = Workspace(tmp_path)
    assert ws.list_files() == []
    with pytest.raises(WorkspaceError):
        ws.read_file('loop_a')


def test_workspace_error_is_a_value_error_and_bad_roots_are_refused(tmp_path: Path) -> None:
    assert issubclass(WorkspaceError, ValueError)
    with pytest.raises(WorkspaceError, match='does not exist'):
        Workspace(tmp_path / 'missing')
    (tmp_path / 'file.txt').write_text('x')
    with pytest.raises(WorkspaceError, match='is not a directory'):
        Workspace(tmp_path / 'file.txt')


def test_the_root_may_itself_be_reached_through_a_link(tree: tuple[Path, Path], tmp_path: Path) -> None:
    link = tmp_path / 'project-link'
    os.symlink(tree[0], link)
    ws = Workspace(link)
    assert ws.read_file('a.py') == A_PY
    with pytest.raises(WorkspaceError, match='resolves outside'):
        ws.read_file('leak.txt')


# -- as host tools in a real script -------------------------------------------------------------------


@pytest.fixture(scope='module')
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, Path]]:
    root, _ = build_tree(tmp_path_factory.mktemp('scripted'))
    h = Harness(store=':memory:')
    ws = register_workspace_tools(h, root)
    assert isinstance(ws, Workspace)
    try:
        yield h, root
    finally:
        h.close()


def test_tools_are_in_the_catalog_with_their_docstrings(scripted: tuple[Harness, Path]) -> None:
    h, root = scripted
    stubs = h.stubs()
    assert "async def list_files(*, pattern: str = '**/*') -> list[str]:" in stubs
    assert 'async def read_file(*, path: str) -> str:' in stubs
    assert "async def search_text(*, pattern: str, glob: str = '**/*') -> list[Match]:" in stubs
    assert 'class Match(TypedDict):' in stubs
    assert 'Return the text of one file in the workspace' in stubs
    assert str(root) not in stubs
    assert {name: c.kind for name, c in h.callees.items()} == {
        'list_files': 'tool',
        'read_file': 'tool',
        'search_text': 'tool',
    }


def test_read_file_from_a_script(scripted: tuple[Harness, Path]) -> None:
    h, _ = scripted
    result = h.run_sync('await read_file(path="a.py")')
    assert result.value == A_PY


def test_list_and_search_from_a_script(scripted: tuple[Harness, Path]) -> None:
    h, _ = scripted
    code = (
        'files = await list_files(pattern="**/*.py")\n'
        'hits = await search_text(pattern="hello", glob="**/*.py")\n'
        '{"files": files, "hits": [h["path"] + ":" + str(h["line"]) for h in hits]}\n'
    )
    assert h.run_sync(code).value == {
        'files': ['a.py', 'alias.py', 'pkg/b.py'],
        'hits': ['a.py:5', 'alias.py:5', 'pkg/b.py:2'],
    }


@pytest.mark.parametrize('path', ['../outside/secret.txt', 'escape/secret.txt', 'ABSOLUTE'])
def test_an_escaping_path_in_a_script_is_a_runtime_error_with_the_reason(
    scripted: tuple[Harness, Path], path: str
) -> None:
    h, root = scripted
    if path == 'ABSOLUTE':
        path = str(root.parent / 'outside' / 'secret.txt')
    with pytest.raises(WorkflowRuntimeError) as exc:
        h.run_sync(f'await read_file(path={path!r})')
    message = str(exc.value)
    # The traceback quotes the script's own line; the error the tool raised is the last line.
    (error,) = [ln for ln in message.splitlines() if 'read_file failed with WorkspaceError' in ln]
    assert ('is absolute' if path.startswith('/') else repr(path)) in error
    assert str(root) not in error
    assert str(root.parent) not in error
    assert 'top secret' not in message


def test_a_script_can_catch_a_workspace_error_and_go_on(scripted: tuple[Harness, Path]) -> None:
    h, root = scripted
    code = (
        'try:\n'
        '    text = await read_file(path="../outside/secret.txt")\n'
        'except Exception as e:\n'
        '    text = "refused: " + str(e)\n'
        'text\n'
    )
    value = h.run_sync(code).value
    assert value.startswith('refused: read_file failed with WorkspaceError:')
    assert 'goes up with ".."' in value
    assert str(root) not in value
