"""Jupyter notebooks (``.ipynb``): lint the code cells as one module, as ruff does.

- The code cells of a Python notebook (``metadata.language_info.name`` / ``kernelspec.language``
  ``python`` or absent) are concatenated, each ending with a newline, and linted as one module:
  names bound in one cell are seen in the next, and a ``# noqa`` / ``# attncheck: ignore[...]``
  comment covers its line (and statement) in its cell; ``# attncheck: file-ignore`` anywhere
  covers the notebook.  Markdown and raw cells are not read.
- IPython syntax is neutralised without moving any other line or column: a cell whose first
  code line is a cell magic (``%%timeit``, ``%%bash``) is blanked whole; a line magic or shell
  escape (``%matplotlib inline``, ``!pip install x``, ``x = !ls``, ``?obj``, ``obj?``) and its
  backslash-continued lines become ``pass`` at the same indentation (so a magic in a block
  still leaves a block).
- Findings are reported at the 1-based cell number among all cells of the notebook (markdown
  cells count, as in Jupyter's own numbering and ruff's ``path:cell N:line:col``) and the line
  and column inside the cell.
- Fixes and ``--add-noqa`` are written back into the cells' ``source`` only: the notebook's
  bytes outside the changed ``source`` values — other cells, outputs, metadata, indentation,
  key order, the trailing newline — are kept byte for byte.  A changed ``source`` keeps its
  form (a list of lines or one string) and its indentation.

Only the standard library's :mod:`json` is used (nbformat is not a dependency).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from attncheck.lint.finding import Edit, Finding, Fix

_WS = re.compile(r"[ \t\n\r]*")
#: a line magic, shell escape or help request (optionally assigned: ``x = !ls``, ``y = %time f()``)
_MAGIC = re.compile(r"^[ \t]*(?:[^\W\d][\w.]*(?:[ \t]*,[ \t]*[^\W\d][\w.]*)*[ \t]*=[ \t]*)?[%!?]"
                    r"|^[ \t]*[^\W\d][\w.]*\?\??[ \t]*$")
_CELL_MAGIC = re.compile(r"^[ \t]*%%")


class NotebookError(Exception):
    """Not a readable notebook: ``line``/``col`` locate the problem in the JSON (1-based line,
    0-based column)."""

    def __init__(self, message: str, line: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.message, self.line, self.col = message, line, col


@dataclass
class Cell:
    index: int              # 1-based among all cells
    source: str             # the cell's text as in the notebook
    span: tuple[int, int]   # where its ``source`` JSON value lies in the notebook text
    text: str = ""          # the text linted (magics neutralised; ends with a newline)
    magic_lines: set[int] = field(default_factory=set)  # 0-based lines neutralised
    start: int = 0          # first line (1-based) of this cell in the concatenated module


@dataclass
class Notebook:
    """A notebook's raw text and code cells.  :attr:`module` is the concatenated text linted."""

    raw: str
    bom: bool
    cells: list[Cell]
    python: bool = True

    @property
    def module(self) -> str:
        return "".join(c.text for c in self.cells)


def _skip_ws(s: str, i: int) -> int:
    return _WS.match(s, i).end()


def _pos(s: str, i: int) -> tuple[int, int]:
    line_start = s.rfind("\n", 0, i) + 1
    return s.count("\n", 0, i) + 1, i - line_start


def _members(s: str, i: int, decoder: json.JSONDecoder):
    """Yield ``(key, value_start, value_end)`` of the JSON object starting at ``s[i] == "{"``;
    the final item is ``(None, end, end)``."""
    i = _skip_ws(s, i + 1)
    if s.startswith("}", i):
        yield None, i + 1, i + 1
        return
    while True:
        if not s.startswith('"', i):
            raise NotebookError("expected a string key", *_pos(s, i))
        key, i = json.decoder.scanstring(s, i + 1)
        i = _skip_ws(s, i)
        if not s.startswith(":", i):
            raise NotebookError("expected ':'", *_pos(s, i))
        start = _skip_ws(s, i + 1)
        _, end = decoder.raw_decode(s, start)
        yield key, start, end
        i = _skip_ws(s, end)
        if s.startswith("}", i):
            yield None, i + 1, i + 1
            return
        if not s.startswith(",", i):
            raise NotebookError("expected ',' or '}'", *_pos(s, i))
        i = _skip_ws(s, i + 1)


def _elements(s: str, i: int, decoder: json.JSONDecoder):
    """Yield ``(start, end)`` of each element of the JSON array starting at ``s[i] == "["``."""
    i = _skip_ws(s, i + 1)
    if s.startswith("]", i):
        return
    while True:
        _, end = decoder.raw_decode(s, i)
        yield i, end
        i = _skip_ws(s, end)
        if s.startswith("]", i):
            return
        if not s.startswith(",", i):
            raise NotebookError("expected ',' or ']'", *_pos(s, i))
        i = _skip_ws(s, i + 1)


def _source_text(value, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    raise NotebookError(f"{where}: 'source' is neither a string nor a list of strings")


def neutralise(source: str) -> tuple[str, set[int]]:
    """The cell text to lint (IPython magics neutralised, see the module docstring; ends with a
    newline) and the 0-based lines changed."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    if _CELL_MAGIC.match(first):
        return "\n" * len(lines), set(range(len(lines)))
    changed: set[int] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        if _MAGIC.match(line):
            stmt = line[: len(line) - len(line.lstrip(" \t"))] + "pass"
            while True:
                body = line.rstrip("\r\n")
                lines[i] = stmt + line[len(body):]
                stmt = ""  # continuation lines of the magic become empty lines
                changed.add(i)
                if not body.endswith("\\") or i + 1 >= len(lines):
                    break
                i += 1
                line = lines[i]
        i += 1
    return "".join(lines), changed


def load(raw_bytes: bytes) -> Notebook:
    """Parse a notebook.  Raises :class:`NotebookError` for bytes that are not UTF-8 JSON of a
    notebook (an object with a ``cells`` list whose code cells have a string or list-of-strings
    ``source``)."""
    bom = raw_bytes.startswith(b"\xef\xbb\xbf")
    try:
        raw = raw_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not valid UTF-8 (byte 0x{raw_bytes[exc.start]:02x} at offset "
                            f"{exc.start})") from None
    decoder = json.JSONDecoder()
    try:
        top = _skip_ws(raw, 0)
        doc, end = decoder.raw_decode(raw, top)
        if raw[_skip_ws(raw, end):]:
            raise json.JSONDecodeError("Extra data", raw, _skip_ws(raw, end))
    except json.JSONDecodeError as exc:
        raise NotebookError(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno - 1) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise NotebookError("not a Jupyter notebook: no 'cells' list at the top level")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    lang = None
    if isinstance(meta.get("language_info"), dict):
        lang = meta["language_info"].get("name")
    if lang is None and isinstance(meta.get("kernelspec"), dict):
        lang = meta["kernelspec"].get("language")
    python = lang is None or str(lang).lower() == "python"
    cells: list[Cell] = []
    cells_span = next((a for k, a, _ in _members(raw, top, decoder) if k == "cells"), None)
    for n, (a, _b) in enumerate(_elements(raw, cells_span, decoder), start=1):
        cell = doc["cells"][n - 1]
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {n}: not a JSON object", *_pos(raw, a))
        if cell.get("cell_type") != "code":
            continue
        span = next(((s, e) for k, s, e in _members(raw, a, decoder) if k == "source"), None)
        if span is None:
            raise NotebookError(f"cell {n}: code cell without 'source'", *_pos(raw, a))
        source = _source_text(cell["source"], f"cell {n}")
        cells.append(Cell(n, source, span))
    line = 1
    for c in cells:
        c.text, c.magic_lines = neutralise(c.source)
        c.start = line
        line += c.text.count("\n")
    return Notebook(raw, bom, cells, python)


def _locate(nb: Notebook, line: int) -> tuple[Cell, int]:
    """The cell holding line ``line`` of the concatenated module, and the line in that cell."""
    lo, hi = 0, len(nb.cells) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if nb.cells[mid].start <= line:
            lo = mid
        else:
            hi = mid - 1
    c = nb.cells[lo]
    return c, line - c.start + 1


def to_cells(nb: Notebook, f: Finding) -> Finding:
    """``f`` (positions in the concatenated module) with cell-relative positions and ``cell``."""
    if not nb.cells:
        return f
    cell, line = _locate(nb, f.line)
    end_cell, end_line = _locate(nb, f.end_line)
    if end_cell is not cell:  # clamp to the cell's last line
        end_line = cell.text.count("\n")
    fix = f.fix
    if fix is not None:
        fix = Fix(fix.message, tuple(Edit(e.line - cell.start + 1, e.col,
                                          e.end_line - cell.start + 1, e.end_col, e.content)
                                     for e in fix.edits), fix.applicability)
    return Finding(f.path, line, f.col, end_line, f.end_col, f.code, f.name, f.severity,
                   f.message, fix, cell=cell.index)


def cell_findings(nb: Notebook, findings: list[Finding]) -> dict[int, list[Finding]]:
    """Findings (module positions) grouped by the position of their cell in ``nb.cells``,
    converted to cell positions."""
    out: dict[int, list[Finding]] = {}
    pos = {id(c): i for i, c in enumerate(nb.cells)}
    for f in findings:
        cell, _ = _locate(nb, f.line)
        out.setdefault(pos[id(cell)], []).append(to_cells(nb, f))
    return out


def restore_magics(cell: Cell, new_text: str) -> str:
    """``new_text`` (the linted text of ``cell`` after an edit that kept its lines) with the
    neutralised lines put back as they were, and the cell's own final-newline state."""
    new_lines = new_text.splitlines(keepends=True)
    old_lines = cell.source.splitlines(keepends=True)
    for i in cell.magic_lines:
        if i < len(new_lines) and i < len(old_lines):
            new_lines[i] = old_lines[i]
    out = "".join(new_lines)
    if not cell.source.endswith(("\n", "\r")) and out.endswith("\n"):
        out = out[:-1]
    return out


def _indent_of(raw: str, span: tuple[int, int]) -> tuple[str, str] | None:
    """(indent before each element, indent before the closing bracket) of a multi-line JSON
    array value, or ``None`` when it is on one line."""
    text = raw[span[0]:span[1]]
    if "\n" not in text:
        return None
    m = re.match(r"\[\s*?\n([ \t]*)", text)
    close = re.search(r"\n([ \t]*)\]\Z", text)
    if m is None:
        return None
    return m.group(1), close.group(1) if close else ""


def dump(nb: Notebook, new_sources: dict[int, str]) -> bytes:
    """The notebook's bytes with the ``source`` of the cells at positions ``new_sources`` (keys
    index ``nb.cells``) replaced, in the form and indentation of the original values."""
    ascii_only = nb.raw.isascii()
    out: list[str] = []
    last = 0
    for pos in sorted(new_sources, key=lambda p: nb.cells[p].span[0]):
        cell = nb.cells[pos]
        a, b = cell.span
        old = nb.raw[a:b]
        text = new_sources[pos]
        if old.startswith("["):
            lines = text.splitlines(keepends=True)
            ind = _indent_of(nb.raw, cell.span)
            items = [json.dumps(ln, ensure_ascii=ascii_only) for ln in lines]
            if not items:
                value = "[]"
            elif ind is None:
                sep = ", " if ", " in old or len(old) > 2 and '", "' in old else ","
                value = "[" + sep.join(items) + "]"
            else:
                value = ("[\n" + ",\n".join(ind[0] + it for it in items) + "\n" + ind[1] + "]")
        else:
            value = json.dumps(text, ensure_ascii=ascii_only)
        out.append(nb.raw[last:a])
        out.append(value)
        last = b
    out.append(nb.raw[last:])
    data = "".join(out).encode("utf-8")
    return (b"\xef\xbb\xbf" + data) if nb.bom else data
