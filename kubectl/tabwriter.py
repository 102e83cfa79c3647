"""Go's text/tabwriter (elastic tabstops), as kubectl aligns its tables and describe output.

kubectl's columns are not "pad every cell to the widest one": a column block is a run of
consecutive lines that all have a cell in that column, and a line without any tab flushes what
came before it. Reproducing kubectl's spacing byte for byte means reproducing that algorithm, so
this is a small port of the Go package's `Write`/`format`/`writeLines` (left alignment, a space
pad character, and the RememberWidths flag `kubectl get -w` uses so that later rows line up with
the header printed earlier). HTML filtering and escapes are not needed and not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO


@dataclass
class _Cell:
    text: str
    width: int  # runes
    htab: bool  # terminated by a tab (not the line's trailing text)


class TabWriter:
    """Buffer text, align tab-terminated cells into columns, write on flush (or on a tab-free line)."""

    def __init__(self, out: TextIO, minwidth: int = 0, tabwidth: int = 8, padding: int = 1,
                 remember_widths: bool = False) -> None:
        self.out = out
        self.minwidth = minwidth
        self.tabwidth = tabwidth
        self.padding = padding
        self.remember_widths = remember_widths
        self.max_widths: list[int] = []
        self._reset()

    def _reset(self) -> None:
        self._lines: list[list[_Cell]] = [[]]
        self._cell = ""
        self._widths: list[int] = []

    def forget_widths(self) -> None:
        """SetRememberedWidths(nil): a new table starts with fresh column widths."""
        self.max_widths = []

    def write(self, text: str) -> None:
        start = 0
        for i, ch in enumerate(text):
            if ch in "\t\v\n\f":
                self._cell += text[start:i]
                start = i + 1
                line = self._lines[-1]
                line.append(_Cell(self._cell, len(self._cell), ch == "\t"))
                self._cell = ""
                if ch in "\n\f":
                    ncells = len(line)
                    self._lines.append([])
                    if ch == "\f" or ncells == 1:
                        # a line with a single cell cannot affect the alignment of later lines
                        self.flush()
        self._cell += text[start:]

    def flush(self) -> None:
        if self._cell:
            self._lines[-1].append(_Cell(self._cell, len(self._cell), False))
            self._cell = ""
        parts: list[str] = []
        self._format(parts, 0, len(self._lines))
        self.out.write("".join(parts))
        self._reset()

    # -- the Go algorithm ------------------------------------------------------------------

    def _format(self, parts: list[str], line0: int, line1: int) -> None:
        column = len(self._widths)
        this = line0
        while this < line1:
            line = self._lines[this]
            if column >= len(line) - 1:
                this += 1
                continue
            # a cell in this column: print the lines before the block, then size the block
            self._write_lines(parts, line0, this)
            line0 = this
            width = self.minwidth
            while this < line1:
                line = self._lines[this]
                if column >= len(line) - 1:
                    break
                width = max(width, line[column].width + self.padding)
                this += 1
            if self.remember_widths:
                if len(self.max_widths) < len(self._widths):
                    self.max_widths.extend(self._widths[len(self.max_widths):])
                if len(self.max_widths) == len(self._widths):
                    self.max_widths.append(width)
                elif self.max_widths[len(self._widths)] > width:
                    width = self.max_widths[len(self._widths)]
                else:
                    self.max_widths[len(self._widths)] = width
            self._widths.append(width)
            self._format(parts, line0, this)
            self._widths.pop()
            line0 = this
        self._write_lines(parts, line0, line1)

    def _write_lines(self, parts: list[str], line0: int, line1: int) -> None:
        for i in range(line0, line1):
            for j, cell in enumerate(self._lines[i]):
                parts.append(cell.text)
                if j < len(self._widths):
                    parts.append(" " * (self._widths[j] - cell.width))
            if i + 1 < len(self._lines):
                parts.append("\n")
            # the last buffered line has no newline yet: its pending text stays in self._cell


def tabbed(text: str, *, minwidth: int = 0, tabwidth: int = 8, padding: int = 2) -> str:
    """Format `text` at once, as kubectl's describe does (`tabwriter.NewWriter(buf, 0, 8, 2, ' ', 0)`)."""
    import io

    buf = io.StringIO()
    writer = TabWriter(buf, minwidth, tabwidth, padding)
    writer.write(text)
    writer.flush()
    return buf.getvalue()
