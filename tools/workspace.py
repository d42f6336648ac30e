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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import re2
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
RE2_OPTIONS = re2.Options()
RE2_OPTIONS.log_errors = False  # a refused pattern is the caller's error, not a line on the host's stderr

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
        """Lines matching the regular expression `pattern` (RE2: linear time) in the text files matching `glob`.

        In file order, then line order; at most `MAX_MATCHES`. Binary and oversized files are skipped.
        """
        if not pattern:
            raise WorkspaceError('the search pattern is empty: pass a regular expression such as "def main"')
        if len(pattern) > MAX_PATTERN:
            raise WorkspaceError(f'the search pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN}')
        regex = compile_search(pattern)
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


STAR = '*'
"""A segment token: any run of characters within one path segment."""
ANY_SEGMENTS = '**'
"""A pattern segment: any number of path segments (none included)."""


class Glob:
    """A pathlib-style glob over relative POSIX paths, matched without a regular expression.

    `*` and `?` stay within a segment, `[...]` is a character class (`[!...]` negated), `**` spans any number of
    segments (a trailing one, at least one). Both levels are matched by the same leftmost-greedy wildcard pass
    (`_wildcard`): the parts between stars are found left to right, each at its leftmost place, which is optimal
    for a star, so nothing is ever tried twice: the time is at most the path's length times the pattern's, never
    the exponential backtracking of a regular expression (`*` forty times and an `x` froze the host at 100% CPU
    through `re`, holding the GIL, where no timeout could stop it).
    """

    def __init__(self, pattern: str) -> None:
        segments: list[Any] = [ANY_SEGMENTS if s == ANY_SEGMENTS else _segment_tokens(s) for s in pattern.split('/')]
        if len(segments) > 1 and segments[-1] == ANY_SEGMENTS:
            segments.insert(-1, [STAR])  # `src/**` is what is under src: one segment at least
        self.pattern = pattern
        self.segments = segments

    def fullmatch(self, path: str) -> bool:
        return _wildcard(self.segments, path.split('/'), ANY_SEGMENTS, _segment_matches)

    def __repr__(self) -> str:
        return f'Glob({self.pattern!r})'


def compile_glob(pattern: str) -> Glob:
    """The matcher of a pathlib-style glob over relative POSIX paths (`**` spans directories)."""
    return Glob(pattern)


def _segment_tokens(segment: str) -> list[Any]:
    """One segment's tokens: a character, `STAR`, `?` as None, or a class as (negated, ranges)."""
    tokens: list[Any] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == '*':
            if not tokens or tokens[-1] != STAR:
                tokens.append(STAR)
        elif char == '?':
            tokens.append(None)
        elif char == '[' and (parsed := _char_class(segment, i)) is not None:
            token, i = parsed
            tokens.append(token)
            continue
        else:
            tokens.append(char)
        i += 1
    return tokens


def _char_class(segment: str, start: int) -> tuple[tuple[bool, tuple[tuple[str, str], ...]], int] | None:
    """`[...]` at `start` as (negated, ranges) and the index after it; None if it is not closed (a plain `[`)."""
    i = start + 1
    negated = segment[i : i + 1] == '!'
    i += negated
    end = segment.find(']', i + 1)  # a `]` first in the class is one of its characters
    if end == -1:
        return None
    body, ranges, j = segment[i:end], [], 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == '-':
            ranges.append((body[j], body[j + 2]))
            j += 3
        else:
            ranges.append((body[j], body[j]))
            j += 1
    return (negated, tuple(ranges)), end + 1


def _char_matches(token: Any, char: str) -> bool:
    if token is None:
        return True
    if isinstance(token, str):
        return token == char
    negated, ranges = token
    return any(low <= char <= high for low, high in ranges) != negated


def _segment_matches(tokens: Any, segment: str) -> bool:
    return _wildcard(tokens, segment, STAR, _char_matches)


def _wildcard(tokens: list[Any], items: Sequence[Any], star: Any, one: Callable[[Any, Any], bool]) -> bool:
    """Whether `tokens` match all of `items`: `star` matches any run of items, every other token one item (`one`).

    The runs of tokens between stars must appear in order: the first at the start, the last at the end, each
    middle one at its leftmost place after the one before (a later place could only leave less for the rest).
    """
    runs: list[list[Any]] = [[]]
    for token in tokens:
        if token == star:
            runs.append([])
        else:
            runs[-1].append(token)
    if len(runs) == 1:
        return len(items) == len(runs[0]) and _run_at(runs[0], items, 0, one)
    first, *middle, last = runs
    if len(first) + len(last) > len(items) or not _run_at(first, items, 0, one):
        return False
    if not _run_at(last, items, len(items) - len(last), one):
        return False
    at, stop = len(first), len(items) - len(last)
    for run in middle:
        found = _leftmost(run, items, at, stop, one)
        if found is None:
            return False
        at = found + len(run)
    return True


def _run_at(run: list[Any], items: Sequence[Any], at: int, one: Callable[[Any, Any], bool]) -> bool:
    return all(one(token, items[at + k]) for k, token in enumerate(run))


def _leftmost(run: list[Any], items: Sequence[Any], at: int, stop: int, one: Callable[[Any, Any], bool]) -> int | None:
    """The first place from `at` where `run` matches, ending by `stop`; None if there is none."""
    if isinstance(items, str) and all(isinstance(token, str) for token in run):
        found = items.find(''.join(run), at, stop)  # plain characters: str.find
        return None if found == -1 else found
    for place in range(at, stop - len(run) + 1):
        if _run_at(run, items, place, one):
            return place
    return None


def compile_search(pattern: str) -> Any:
    """`pattern` compiled by RE2, whose matching is linear in the text: no pattern can make a search backtrack
    (Python's `re` would, holding the GIL, on `(a*)*b`). RE2 has Python's syntax without lookarounds and
    backreferences; a pattern that needs them is refused saying so."""
    try:
        return re2.compile(pattern, RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode('utf-8', 'replace') if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        unsupported = any(word in reason for word in ('invalid perl operator', 'invalid escape sequence'))
        advice = ' (the search uses RE2: no lookarounds or backreferences)' if unsupported else ''
        raise WorkspaceError(f'invalid regular expression {_shown(pattern)}: {reason}{advice}') from None


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
        """Find the lines matching the regular expression `pattern` (Python `re` syntax without lookarounds and
        backreferences, case-sensitive; `(?i)` ignores case).

        Searches the text files whose relative path matches `glob` (as in list_files). Returns up to 200
        matches in file and line order, each with the file's relative path, the 1-based line number
        and the stripped line text.
        """
        return ws.search_text(pattern, glob)

    for fn in (list_files, read_file, search_text):
        h.tool(name=fn.__name__, expose_errors=True)(fn)
    return ws
