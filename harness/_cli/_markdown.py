"""Markdown for answers in the terminal, much as pydantic-ai's `clai` renders them: headings left-aligned,
code blocks without a background (copy-pasteable) and labelled with their language.

Unlike `clai`, a heading is shown as a heading, not as its source: no `#`s in front of it (a person reads
the answer; the conversation in the store keeps the Markdown). The first level is bold and underlined, the
others bold; none is centred or boxed as rich's own headings are.

A subclass with its own element table, so rich's global `Markdown` is left as other code expects it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Heading, Markdown
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text


class _CodeBlock(CodeBlock):
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        code = str(self.text).rstrip()
        yield Text(self.lexer_name, style='dim')
        yield Syntax(code, self.lexer_name, theme=self.theme, background_color='default', word_wrap=True)
        yield Text(f'/{self.lexer_name}', style='dim')


class _Heading(Heading):
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # The heading's own text (inline code, emphasis), styled as a heading, left-aligned.
        text = self.text.copy()
        text.justify = 'left'
        text.stylize(Style(bold=True, underline=self.tag == 'h1'))
        yield text


class Answer(Markdown):
    """A model's answer, rendered."""

    elements: ClassVar[dict[str, type[Any]]] = {
        **Markdown.elements,
        'fence': _CodeBlock,
        'code_block': _CodeBlock,
        'heading_open': _Heading,
    }

    def __init__(self, markup: str, code_theme: str = 'ansi_dark') -> None:
        super().__init__(markup, code_theme=code_theme)
