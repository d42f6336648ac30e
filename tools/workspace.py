"""Read-only access to a workspace: one directory the user chose, and nothing outside it.

A `Workspace` lists, reads and searches the files under its root. Every path a caller gives is
relative to the root; absolute paths, `..` components and symbolic links that resolve outside the
root are refused with a `WorkspaceError`. Error messages name the path as the caller wrote it and
never the host's absolute root, so they are safe to show to a model (`register_workspace_tools`
registers the three methods as host tools with `expose_errors=True`).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

MAX_LIST = 500
"""`list_files` returns at most this many paths."""
MAX_READ_BYTES = 200 * 1024
"""`read_file` refuses files larger than this."""
MAX_MATCHES = 200
"""`search_text` returns at most this many matches."""
MAX_MATCH_TEXT = 240
"""A matching line is cut to this many characters."""
MAX_PATTERN = 1_000
"""Longest glob or regular expression accepted."""
BINARY_SNIFF = 8 * 1024

DEFAULT_IGNORED_DIRS = frozenset(
    {
        '.git',
        '.hg',
        '.svn',
        '__pycache__',
        '.venv',
        'venv',
        'node_modules',
        '.mypy_cache',
        '.pytest_cache',
        '.ruff_cache',
        '.tox',
        '.nox',
        '.harness',
        '.idea',
        '.eggs',
    }
)
"""Directories `list_files` and `search_text` do not descend into (tool caches and VCS metadata)."""


class WorkspaceError(ValueError):
    """A path or pattern the workspace refuses, or a file it cannot read as text.

    The message names the path as the caller gave it, never the host's absolute root.
    """


class Match(TypedDict):
    """One line that matched a `search_text` pattern."""

    path: str
    """The file, relative to the workspace root (POSIX separators)."""
    line: int
    """1-based line number."""
    text: str
    """The matching line, stripped of surrounding whitespace and cut to 240 characters."""


class Workspace:
    """Read-only, root-scoped file access: `list_files`, `read_file`, `search_text`."""

    def __init__(self, root: str | Path, *, ignored_dirs: frozenset[str] | set[str] = DEFAULT_IGNORED_DIRS) -> None:
        given = Path(root).expanduser()
        try:
            resolved = given.resolve(strict=True)
        except (OSError, RuntimeError):
            raise WorkspaceError(f'workspace root {str(root)!r} does not exist') from None
        if not resolved.is_dir():
            raise WorkspaceError(f'workspace root {str(root)!r} is not a directory')
        self.root = resolved
        self.ignored_dirs = frozenset(ignored_dirs)

    def __repr__(self) -> str:
        return f'Workspace({self.root.name!r})'

    # -- the three operations ---------------------------------------------------------------------

    def list_files(self, pattern: str = '**/*') -> list[str]:
        """Relative POSIX paths of the files matching the glob `pattern`, sorted, at most `MAX_LIST`.

        Glob rules are pathlib's: `*` and `?` stay within one path segment, `**` spans any number of
        directories (including none), so `*.py` matches top-level files and `**/*.py` all of them.
        """
        rel = self._check_pattern(pattern, what='glob')
        if not any(char in rel for char in '*?[') and self._resolve(rel).is_dir():
            rel = f'{rel}/**/*'  # a plain directory name lists what is under it
        matcher = compile_glob(rel)
        found: list[str] = []
        for rel in self._walk():
            if matcher.fullmatch(rel):
                found.append(rel)
        found.sort()
        return found[:MAX_LIST]

    def read_file(self, path: str) -> str:
        """The UTF-8 text of the file at `path`; refuses directories, binary files and files over the cap."""
        target = self._resolve(path)
        shown = _shown(path)
        if not target.exists():
            raise WorkspaceError(f'no file {shown} in the workspace{self._suggest(path)}')
        if target.is_dir():
            hint = _shown(f'{clean_relative(path).rstrip("/")}/*') if clean_relative(path) else "'*'"
            raise WorkspaceError(f'{shown} is a directory, not a file: list it with list_files(pattern={hint})')
        if not target.is_file():
            raise WorkspaceError(f'{shown} is not a regular file')
        try:
            size = target.stat().st_size
            if size > MAX_READ_BYTES:
                raise WorkspaceError(
                    f'{shown} is {_kb(size)}, over the {_kb(MAX_READ_BYTES)} read limit: '
                    'use search_text to find the lines you need'
                )
            data = target.read_bytes()
        except WorkspaceError:
            raise
        except OSError as exc:
            raise WorkspaceError(f'cannot read {shown}: {exc.strerror or type(exc).__name__}') from None
        text = decode_text(data)
        if text is None:
            raise WorkspaceError(f'{shown} is a binary file (not UTF-8 text), so it cannot be read as text')
        return text

    def search_text(self, pattern: str, glob: str = '**/*') -> list[Match]:
        """Lines matching the regular expression `pattern` in the text files matching `glob`.

        In file order, then line order; at most `MAX_MATCHES`. Binary and oversized files are skipped.
        """
        if not pattern:
            raise WorkspaceError('the search pattern is empty: pass a regular expression such as "def main"')
        if len(pattern) > MAX_PATTERN:
            raise WorkspaceError(f'the search pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN}')
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise WorkspaceError(f'invalid regular expression {pattern!r}: {exc}') from None
        matcher = compile_glob(self._check_pattern(glob, what='glob'))
        matches: list[Match] = []
        for rel in sorted(r for r in self._walk() if matcher.fullmatch(r)):
            text = self._read_quietly(rel)
            if text is None:
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    matches.append(Match(path=rel, line=number, text=_clip(line.strip())))
                    if len(matches) >= MAX_MATCHES:
                        return matches
        return matches

    # -- paths --------------------------------------------------------------------------------------

    def _resolve(self, path: str) -> Path:
        """The host path for a caller's relative `path`; `WorkspaceError` if it would leave the root."""
        rel = self._check_relative(path, what='path')
        candidate = self.root.joinpath(*PurePosixPath(rel).parts) if rel else self.root
        try:
            resolved = candidate.resolve(strict=False)
        except (OSError, RuntimeError):  # a symlink loop, for one
            raise WorkspaceError(f'path {_shown(path)} cannot be resolved (a symbolic link loop?)') from None
        if not resolved.is_relative_to(self.root):
            raise WorkspaceError(
                f'path {_shown(path)} resolves outside the workspace through a symbolic link; '
                'only files inside the workspace can be read'
            )
        return resolved

    def _check_relative(self, path: str, *, what: str) -> str:
        if not isinstance(path, str):
            raise WorkspaceError(f'the {what} must be a string, got {type(path).__name__}')
        if '\x00' in path:
            raise WorkspaceError(f'the {what} contains a NUL character')
        if len(path) > MAX_PATTERN:
            raise WorkspaceError(f'the {what} is {len(path)} characters long; the limit is {MAX_PATTERN}')
        normal = path.replace('\\', '/')
        if normal.startswith(('/', '~/')) or normal == '~' or re.match(r'^[A-Za-z]:', normal):
            # Not echoed whole: an absolute path may spell out where the workspace lives on the host.
            name = PurePosixPath(normal).name
            shown = f'{what} ending in {_shown(name)}' if name and name != '~' else f'the {what}'
            raise WorkspaceError(f'{shown} is absolute; use a path relative to the workspace root, e.g. "src/app.py"')
        if '..' in PurePosixPath(normal).parts:
            raise WorkspaceError(
                f'{what} {_shown(path)} goes up with "..", outside the workspace; '
                'use a path relative to the workspace root, without ".."'
            )
        return clean_relative(normal)

    def _check_pattern(self, pattern: str, *, what: str) -> str:
        rel = self._check_relative(pattern, what=what)
        return rel or '**/*'

    def _walk(self) -> Iterator[str]:
        """Every regular file under the root, as a relative POSIX path; does not follow directory links."""
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in self.ignored_dirs)
            base = Path(dirpath)
            for name in sorted(filenames):
                full = base / name
                if full.is_symlink():
                    try:
                        target = full.resolve(strict=True)
                    except (OSError, RuntimeError):
                        continue  # dangling or looping link
                    if not target.is_relative_to(self.root) or not target.is_file():
                        continue  # links out of the workspace are invisible
                elif not full.is_file():
                    continue
                yield full.relative_to(self.root).as_posix()

    def _read_quietly(self, rel: str) -> str | None:
        full = self.root.joinpath(*PurePosixPath(rel).parts)
        try:
            if full.stat().st_size > MAX_READ_BYTES:
                return None
            return decode_text(full.read_bytes())
        except OSError:
            return None

    def _suggest(self, path: str) -> str:
        wanted = clean_relative(path.replace('\\', '/'))
        known = list(self._walk())
        close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.6)
        if not close:
            by_name = [k for k in known if PurePosixPath(k).name == PurePosixPath(wanted).name]
            close = by_name[:3]
        if not close:
            return '; use list_files to see what is there'
        return '; did you mean ' + ' or '.join(_shown(c) for c in close) + '?'


# -- helpers ------------------------------------------------------------------------------------------


def clean_relative(path: str) -> str:
    """`./a//b/` -> `a/b`; `.` and `` -> ``."""
    parts = [p for p in path.split('/') if p not in ('', '.')]
    return '/'.join(parts)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex for a pathlib-style glob over relative POSIX paths (`**` spans directories)."""
    out: list[str] = []
    segments = pattern.split('/')
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == '**':
            out.append('.*' if last else '(?:[^/]+/)*')
            continue
        out.append(_glob_segment(segment))
        if not last:
            out.append('/')
    return re.compile(''.join(out), re.DOTALL)


def _glob_segment(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == '*':
            out.append('[^/]*')
        elif char == '?':
            out.append('[^/]')
        elif char == '[':
            end = segment.find(']', i + 2 if segment[i + 1 : i + 2] in ('!', ']') else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : end]
                negate = body.startswith('!')
                if negate:
                    body = body[1:]
                escaped = ''.join('\\' + c if c in '\\[]^&~|' else c for c in body)
                out.append('[' + ('^' if negate else '') + escaped + ']')
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return ''.join(out)


def decode_text(data: bytes) -> str | None:
    """UTF-8 text (a BOM is dropped), or None for binary data."""
    if b'\x00' in data[:BINARY_SNIFF]:
        return None
    try:
        return data.decode('utf-8-sig')
    except UnicodeDecodeError:
        return None


def _shown(path: str) -> str:
    return repr(path if len(path) <= 200 else path[:200] + '...')


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MATCH_TEXT else text[: MAX_MATCH_TEXT - 3] + '...'


def _kb(size: int) -> str:
    return f'{size / 1024:.0f} KB'


# -- registration as host tools ----------------------------------------------------------------------


class ToolRegistry(Protocol):
    """What `register_workspace_tools` needs of a `harness.Harness` (this package does not import the engine)."""

    def tool(self, *, name: str | None = None, expose_errors: bool = False) -> Callable[[Any], Any]: ...


def register_workspace_tools(h: ToolRegistry, root: str | Path) -> Workspace:
    """Register `list_files`, `read_file` and `search_text` on `h`, scoped to `root`; return the `Workspace`.

    The tools are read-only and expose `WorkspaceError` messages to scripts (they hold no host paths).
    """
    ws = Workspace(root)

    def list_files(*, pattern: str = '**/*') -> list[str]:
        """List the files in the workspace whose relative path matches the glob `pattern`.

        Paths are relative to the workspace root, with `/` separators, sorted, at most 500 (narrow the
        pattern if you get 500). `*` matches within one directory level and `**` any number of levels:
        `*.py` is the top-level Python files, `**/*.py` all of them, `src/**/*` everything under src.
        """
        return ws.list_files(pattern)

    def read_file(*, path: str) -> str:
        """Return the text of one file in the workspace; `path` is relative to the workspace root.

        Fails (with a message saying why) for a missing file, a directory, a binary file, a file over
        200 KB, or a path outside the workspace (absolute, with `..`, or through a symbolic link).
        """
        return ws.read_file(path)

    def search_text(*, pattern: str, glob: str = '**/*') -> list[Match]:
        """Find the lines matching the regular expression `pattern` (Python `re` syntax, case-sensitive).

        Searches the text files whose relative path matches `glob` (as in list_files). Returns up to 200
        matches in file and line order, each with the file's relative path, the 1-based line number
        and the stripped line text.
        """
        return ws.search_text(pattern, glob)

    for fn in (list_files, read_file, search_text):
        h.tool(name=fn.__name__, expose_errors=True)(fn)
    return ws
