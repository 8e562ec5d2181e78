"""Counterparty text made safe to show: in a terminal and in markdown.

Company names, answers, document names and the service's error bodies are written by
third parties. `terminal_text` shows every control character (C0, DEL, C1; so every
ANSI/OSC escape sequence, which begins with ESC or CSI) as a visible `\\xNN` escape, so
upstream text can neither move the cursor, recolour, retitle nor hide output.
`markdown_text` also backslash-escapes markdown's punctuation and puts line breaks on
one line, so a name cannot become a link, an image, HTML or a table cell of its own.
"""

from __future__ import annotations

import re

from rich.markup import escape

__all__ = ["console_text", "markdown_text", "terminal_text"]

# C0 controls except none, DEL, and the C1 range (includes CSI U+009B)
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
#: Enough to stop links, images, HTML, emphasis and cell breaks mid-line; `(`, `.`,
#: `-` and `#` only matter at a line's start, where upstream text is never put.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]!|<>~])")


def terminal_text(text: object) -> str:
    """`text` with every control character shown as `\\xNN` (newline and tab too)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def console_text(text: object) -> str:
    """`text` for a rich console: controls escaped, and `[..]` is text, never markup
    (so no terminal hyperlink or style can be injected)."""
    return escape(terminal_text(text))


def markdown_text(text: object) -> str:
    """`text` safe inside markdown (also in a table cell): controls escaped, markdown
    punctuation backslash-escaped, no line break."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", terminal_text(text))
