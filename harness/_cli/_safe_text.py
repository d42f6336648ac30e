"""Text from a script, a callee, a model or the store, made safe to print in a terminal.

A script's `print`, a callee's error, a stored row: none of it is the CLI's own text, and a terminal obeys
what it is sent. An OSC 52 sequence writes the clipboard, OSC 0 sets the window's title, `ESC [2J` clears the
screen, a C1 CSI (U+009B) is an escape without the ESC; bidi overrides make a line read differently than it
is. `visible` shows each such character as an escape instead (`\\x1b`, `\\u202e`): newline and tab stay what
they are. `safe` is `visible` made literal for rich's markup too, so a `[bold]` in the text stays as written:
use it wherever such text goes into a `console.print` f-string.

`SafeConsole` is the net under both: every segment it writes goes through `visible` (rich's own control
segments, cursor moves of a live view, are the console's and pass), so a renderable built elsewhere (a
Syntax of a stored script, a Markdown answer, a span tree, an eval report) cannot reach the terminal raw.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

_KEEP = {'\n', '\t'}
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]


def _escape_for(code: int) -> str:
    if code == 0x0D:
        return '\\r'
    return f'\\x{code:02x}' if code < 0x100 else f'\\u{code:04x}'


_TABLE = {
    code: _escape_for(code) for code in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI] if chr(code) not in _KEEP
}


def visible(text: str) -> str:
    """`text` with every terminal control character (C0 but newline and tab, DEL, C1, bidi controls) shown
    as an escape: `'\\x1b]0;title\\x07'` prints as the 16 characters `\\x1b]0;title\\x07`, not as a title."""
    return text.translate(_TABLE)


def safe(text: object) -> str:
    """`visible(str(text))`, escaped for rich markup: for text that is not the CLI's own, in a markup string."""
    return escape(visible(str(text)))


class SafeConsole(Console):
    """A rich Console that shows terminal control characters in what it prints instead of sending them."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:  # rich's one hook on the text of every segment
        return super()._render_buffer(
            segment if segment.control else Segment(visible(segment.text), segment.style) for segment in buffer
        )
