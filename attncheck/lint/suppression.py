"""Inline suppression comments.

Recognised comments (case of the keywords does not matter, codes are upper-cased):

- ``# noqa`` — every finding on that line;
- ``# noqa: ATT101, ATT2`` — findings whose code starts with one of the listed codes/prefixes
  (separators: commas and/or spaces; codes of other tools such as ``E501`` are ignored);
- ``# attncheck: ignore`` / ``# attncheck: ignore[ATT101, ATT2]`` — same, attncheck-specific;
- ``# attncheck: file-ignore`` / ``# attncheck: file-ignore[ATT101]`` — anywhere in the file,
  for the whole file.

A line comment applies to findings that start on that line, and to findings anywhere inside a
statement whose *first* line carries it (the innermost statement containing the finding's start
line; for a compound statement such as ``def``/``if`` that is its header, not its body).  A line
that cannot hold a comment — it ends in a backslash continuation, or inside a triple-quoted
string — is covered by the comment of the first line after it that can (where its logical line
goes on: ``x = a + \\`` then ``b  # noqa``; a string's closing line), as ruff does.

Comments are found with :mod:`tokenize` (so ``"# noqa"`` inside a string is not a comment) and
statement spans with :mod:`ast`; both run only for files that have findings and contain
``noqa`` or ``attncheck:``.

``ATT000`` (parse error) and ``ATT001`` (internal error) are never suppressed by comments: a file
that does not parse cannot be tokenized reliably, and silencing a crash inline would hide it.
Use ``ignore``/``per-file-ignores`` (by exact code) or ``exclude`` instead — visible in config.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

UNSUPPRESSIBLE = frozenset({"ATT000", "ATT001"})
ALL = None  # marker: "all codes"

_CODE_LIST = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
NOQA_RE = re.compile(rf"#\s*noqa(?::[\s]?(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
IGNORE_RE = re.compile(
    r"#\s*attncheck\s*:\s*(?P<kind>file-ignore|ignore)\b(?:\[(?P<codes>[^\]]*)\])?",
    re.IGNORECASE)


def _codes(text: str | None) -> frozenset[str] | None:
    if text is None:
        return ALL
    codes = frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)
    return codes if codes else ALL


def _merge(a: frozenset[str] | None, b: frozenset[str] | None,
           have_a: bool) -> frozenset[str] | None:
    if not have_a:
        return b
    if a is ALL or b is ALL:
        return ALL
    return a | b


def covers(codes: frozenset[str] | None, code: str) -> bool:
    """``codes`` (``None`` = all) covers ``code`` by exact code or prefix."""
    return codes is ALL or any(code.startswith(c) for c in codes)


@dataclass
class Directives:
    """Suppression directives of one file."""

    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    file: frozenset[str] | None = frozenset()
    stmt_start: dict[int, int] = field(default_factory=dict)
    #: a line that cannot hold a comment → the line whose comment covers it
    carry: dict[int, int] = field(default_factory=dict)

    def suppressed(self, line: int, code: str) -> bool:
        if code in UNSUPPRESSIBLE:
            return False
        if covers(self.file, code):
            return True
        for ln in covers_lines(line, self.stmt_start, self.carry):
            if ln in self.lines and covers(self.lines[ln], code):
                return True
        return False


def covers_lines(line: int, stmt_start: dict[int, int], carry: dict[int, int]) -> list[int]:
    """The lines whose comments cover a finding on ``line``, in the order ``--add-noqa`` tries
    them: the line, its statement's first line, and for each that cannot hold a comment the
    line that holds it for them."""
    out = [line]
    first = stmt_start.get(line, line)
    if first != line:
        out.append(first)
    for ln in list(out):
        c = carry.get(ln)
        if c is not None and c not in out:
            out.append(c)
    return out


#: a physical line as Python's tokenizer ends it: ``\n``, ``\r\n`` or a lone ``\r`` — not the
#: form feeds and other separators :meth:`str.splitlines` also breaks at
_PHYSICAL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_LONE_CR = re.compile(r"\r(?!\n)")


def physical_lines(source: str) -> list[str]:
    """``source`` cut into Python's physical lines (:data:`_PHYSICAL_LINE`), endings kept: line
    ``n`` of a finding is ``physical_lines(source)[n - 1]``."""
    return _PHYSICAL_LINE.findall(source)


def _readline(source: str):
    """``readline`` over ``source`` split into Python's physical lines (:data:`_PHYSICAL_LINE`)
    for :mod:`tokenize`, which ends a line at ``\n`` only: a lone ``\r`` (old Mac line endings,
    which CPython's own parser accepts) is read as ``\n``, one character for one, so lines and
    columns stay those of ``source``."""
    return io.StringIO(_LONE_CR.sub("\n", source)).readline


def comments(source: str) -> list[tuple[int, int, str]]:
    """``(line, col, text)`` of every comment token; tolerant of tokenize errors at the end."""
    return _scan_comments(source)[0]


def _scan_comments(source: str) -> tuple[list[tuple[int, int, str]], dict[int, int]]:
    """Comments (see :func:`comments`) and the carry map: each line that cannot hold a comment
    (no NEWLINE/NL token ends on it: a backslash continuation, or inside a multi-line string)
    → the next line that can, within the same logical line."""
    out = []
    carry: dict[int, int] = {}
    last_end = 0  # last line that ends in a NEWLINE/NL token
    try:
        for tok in tokenize.generate_tokens(_readline(source)):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.start[1], tok.string))
            elif tok.type in (tokenize.NEWLINE, tokenize.NL):
                ln = tok.start[0]
                for skipped in range(last_end + 1, ln):
                    carry[skipped] = ln
                last_end = ln
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return out, carry


def statement_starts(source: str) -> dict[int, int]:
    """Map each line to the first line of the innermost statement containing it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    starts: dict[int, int] = {}

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            end = stmt.end_lineno or stmt.lineno
            for ln in range(stmt.lineno, end + 1):
                starts[ln] = stmt.lineno
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                sub = getattr(stmt, name, None)
                if isinstance(sub, list) and sub:
                    if name in ("handlers", "cases"):
                        for h in sub:
                            hl = getattr(h, "lineno", None)
                            if hl is None:  # match_case has no lineno: use its pattern
                                hl = h.pattern.lineno
                            for ln in range(hl, (h.body[0].lineno if h.body else hl + 1)):
                                starts[ln] = hl
                            visit(h.body)
                    else:
                        visit(sub)

    visit(tree.body)
    return starts


def parse_directives(source: str) -> Directives:
    d = Directives()
    found, carry = _scan_comments(source)
    for line, _col, text in found:
        for m in IGNORE_RE.finditer(text):
            codes = _codes(m.group("codes"))
            if m.group("kind").lower() == "file-ignore":
                d.file = _merge(d.file, codes, True)
            else:
                d.lines[line] = _merge(d.lines.get(line), codes, line in d.lines)
        for m in NOQA_RE.finditer(text):
            codes = _codes(m.group("codes"))
            d.lines[line] = _merge(d.lines.get(line), codes, line in d.lines)
    if d.lines:
        d.stmt_start = statement_starts(source)
        d.carry = carry
    return d


def filter_findings(findings: list, source: str) -> list:
    """Drop findings suppressed by comments in ``source``."""
    if not findings or ("noqa" not in source.lower() and "attncheck" not in source.lower()):
        return findings
    d = parse_directives(source)
    if not d.lines and d.file == frozenset():
        return findings
    return [f for f in findings if not d.suppressed(f.line, f.code)]


def _commentable_lines(source: str) -> dict[int, int | None]:
    """Lines that end in a NEWLINE/NL token (a comment may be appended there) → the column of
    their existing comment (``None`` when they have none)."""
    out: dict[int, int | None] = {}
    pending: dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(_readline(source)):
            if tok.type == tokenize.COMMENT:
                pending[tok.start[0]] = tok.start[1]
            elif tok.type in (tokenize.NEWLINE, tokenize.NL):
                ln = tok.start[0]
                out[ln] = pending.get(ln)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}
    return out


def add_noqa(source: str, findings: list) -> tuple[str, int]:
    """:func:`add_noqa_report` without the list of findings it could not place."""
    new, n, _ = add_noqa_report(source, findings)
    return new, n


def add_noqa_report(source: str, findings: list) -> tuple[str, int, list]:
    """Append ``# noqa: CODE[, CODE]`` to the lines of ``findings`` (not ATT000/ATT001) so that
    they are suppressed; existing ``# noqa: …`` lists are extended.  A finding on a line that
    cannot take a comment gets it where :class:`Directives` honours it: the first line of its
    statement, else the line its logical line goes on to (after a backslash continuation, the
    closing line of a multi-line string).  Returns (new source, number of lines changed, the
    findings no line could take a comment for — e.g. the source does not tokenize)."""
    todo = [f for f in findings if f.code not in UNSUPPRESSIBLE]
    if not todo:
        return source, 0, []
    ok = _commentable_lines(source)
    starts = statement_starts(source)
    carry = _scan_comments(source)[1]
    wanted: dict[int, set[str]] = {}
    unplaced = []
    for f in todo:
        for ln in covers_lines(f.line, starts, carry):
            if ln in ok:
                wanted.setdefault(ln, set()).add(f.code)
                break
        else:
            unplaced.append(f)
    lines = physical_lines(source)
    changed = 0
    for ln, codes in wanted.items():
        if ln > len(lines):
            continue
        raw = lines[ln - 1]
        body = raw.rstrip("\r\n")
        eol = raw[len(body):]
        col = ok.get(ln)
        comment = body[col:] if col is not None else ""
        m = NOQA_RE.search(comment)
        if m and m.group("codes") is None:
            continue  # a bare noqa comment already covers everything
        if m:
            existing = [c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c]
            merged = existing + sorted(c for c in codes if not covers(frozenset(existing), c))
            if merged == existing:
                continue
            new_comment = comment[:m.start()] + "# noqa: " + ", ".join(merged) + comment[m.end():]
            body = body[:col] + new_comment
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        lines[ln - 1] = body + eol
        changed += 1
    return "".join(lines), changed, unplaced
