"""Findings produced by the lint engine.

A :class:`Finding` is one rule violation at one source range.  Lines are 1-based, columns are
0-based (as in Python's ``ast`` and libcst's ``PositionProvider``); the end position is exclusive.
A finding may carry a :class:`Fix`: a list of text edits that, applied to the file, removes it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "info"]
Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between ``(line, col)`` and ``(end_line, end_col)`` with ``content``."""

    line: int
    col: int
    end_line: int
    end_col: int
    content: str


@dataclass(frozen=True)
class Fix:
    """A suggested fix. ``applicability`` is ``"unsafe"`` when the edit changes numerics."""

    message: str
    edits: tuple[Edit, ...]
    applicability: Applicability = "unsafe"


@dataclass(frozen=True)
class Finding:
    """One rule violation.

    ``path`` is the file as given on the command line (``"-"`` for stdin), ``line``/``end_line``
    are 1-based, ``col``/``end_col`` 0-based.  In a Jupyter notebook ``cell`` is the 1-based cell
    number (among all cells) and lines count from the cell's first line; ``None`` elsewhere.
    Findings sort by (path, cell, line, col, code).
    """

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    name: str
    severity: Severity
    message: str
    fix: Fix | None = field(default=None, compare=False)
    cell: int | None = None

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.col, self.code, self.message)

    @property
    def location(self) -> str:
        """``path:line:col`` (1-based column), ``path:cell N:line:col`` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col + 1}"

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.fix is None:
            d["fix"] = None
        if self.cell is None:
            del d["cell"]
        return d
