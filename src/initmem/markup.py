"""Text into LaTeX, Markdown and a terminal: one escaping function per format (HTML:
html.escape).

A string that came from a config or a runs archive (an optimizer's label, an archive's
path, a record's source) is text: escaped, it prints as typed and can never be a command
(LaTeX's \\input of a local file) or a tag (HTML's stored script). The only raw LaTeX
the project renders is a config's `tex_label` and `notes`, and only from a config the
user typed, never from an archive's (initmem.plan.optimizers.display). On a terminal, a
string from a file (a heartbeat's host, an archive's run id, an error quoting either)
prints through `terminal`: an escape sequence in it could clear the screen, move the
cursor over earlier lines, write the user's clipboard (OSC 52) or hide a link (OSC 8).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

TEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                "§": r"\S{}",
                # a bracket after \\ or \midrule would be read as its optional argument
                "[": "{[}", "]": "{]}"}
# Inline Markdown (a table cell): code, emphasis, links, raw HTML, entities, the cell's
# own bars; each is literal after a backslash (CommonMark's escapes).
MARKDOWN_SPECIALS = frozenset("\\`*_[]<>&|~")


def _one_line(text: object) -> str:
    """Control characters (a newline ends a paragraph, a table row) as spaces."""
    return "".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in str(text))


def tex_escape(text: object) -> str:
    """Plain text as LaTeX prints it (the templates' `tex` filter)."""
    return "".join(TEX_SPECIALS.get(ch, ch) for ch in _one_line(text))


def md_escape(text: object) -> str:
    """Plain text as a Markdown table cell prints it."""
    return "".join("\\" + ch if ch in MARKDOWN_SPECIALS else ch for ch in _one_line(text))


def terminal(text: object) -> str:
    """Text as a terminal shows it, on one line and inert: each character that is not
    printable (C0 and C1 controls: escape sequences, carriage return, newline; format
    characters: bidirectional overrides, which reorder what follows; line separators;
    surrogates, private and unassigned code points) written as its Python escape
    (\\x1b, \\u202e)."""
    return _inert(str(text), keep="")


def _inert(text: str, keep: str) -> str:
    # not printable: controls, format characters, separators other than the space,
    # surrogates (which no stream can encode), private and unassigned code points
    return "".join(ch if ch.isprintable() or ch in keep
                   else ch.encode("unicode_escape", "backslashreplace").decode() for ch in text)


class InertStream:
    """A text stream that passes on what it is written as `terminal` shows it, newlines
    and tabs kept: the command line puts one over stdout and stderr, so that no command
    prints a file's escape sequence, whether or not the line printing it went through
    `terminal` (which also escapes a newline: a file's text on its own line is still
    `terminal`'s). A sequence the program itself means goes through `screen_control`."""

    def __init__(self, stream: TextIO) -> None:
        """Over `stream`, which gets the inert text."""
        self.stream = stream

    def write(self, text: str) -> int:
        """Write `text` inert; its length, as a stream's write returns."""
        self.stream.write(_inert(text, keep="\n\t"))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        """The rest of a stream (flush, fileno, isatty, encoding) is the stream's."""
        return getattr(self.stream, name)


def screen_control(sequence: str) -> None:
    """Write a terminal control sequence of initmem's own (status's redraw) to stdout,
    past the inert layer."""
    out = sys.stdout
    (out.stream if isinstance(out, InertStream) else out).write(sequence)
