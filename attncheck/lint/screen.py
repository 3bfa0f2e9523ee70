"""The syntax screen of a large file, in pieces of bounded size.

Every file is compiled by CPython to screen it for syntax errors (:func:`attncheck.lint.engine.
_syntax_check`).  CPython's compiler holds the file's whole token array and syntax tree: about
100 bytes of memory per byte of a generated list of numbers (3.9 GB for a 40 MB data module).
Above :data:`PIECEWISE_ABOVE` characters the file is compiled in pieces instead:

1. The outermost bracket pairs (``[]``, ``()``, ``{}``) longer than :data:`PIECE` characters are
   found with a scan that follows strings and comments.
2. The *skeleton* — the text with the content of each such pair replaced by ``0`` — is compiled
   (it is checked again the same way if it is still large).
3. Each such pair's content is cut at commas directly inside it into groups of about
   :data:`PIECE` characters, and each group is compiled inside the same kind of bracket: as a
   list, set/dict or tuple display, or as call arguments / a subscript when the bracket follows
   an expression (``f(…)``, ``x[…]``).  A group holding a large pair itself is checked the same
   way, recursively.

Each compilation sees at most a few :data:`PIECE` characters, so memory stays bounded whatever
the size of a literal, and the time is about one ``compile()`` of the file.  Every byte is
compiled once in some piece, in its own bracket context, so a syntax error anywhere is found;
its position is mapped back to the file.  A statement too large to cut (no large bracket pair) is
compiled whole.
"""
from __future__ import annotations

import keyword
import re
import warnings
from dataclasses import dataclass

#: files longer than this (characters) are screened in pieces
PIECEWISE_ABOVE = 4_000_000
#: the size (characters) of a bracket pair worth cutting, and of the groups it is cut into
PIECE = 1_000_000

#: strings (with prefixes; triple-quoted ones across lines), comments, brackets
_SCAN = re.compile(
    r"""[rRbBuUfF]{0,3}(?:\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''"""
    r"""|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|#[^\n]*|[\[\](){}]""", re.S)
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_WORD_BEFORE = re.compile(r"([^\W\d]\w*)\s*\Z")


@dataclass
class ScreenError:
    """A syntax error at ``offset`` (characters into the file)."""

    offset: int
    kind: str
    msg: str


def _big_pairs(text: str) -> list[tuple[int, int]]:
    """``(open, close)`` positions of the outermost bracket pairs spanning more than
    :data:`PIECE` characters; an outermost bracket left open that far from the end counts as a
    pair closed at the end (compiling the skeleton then reports it).  A stray closing bracket
    ends the scan (compiling reports it too)."""
    stack: list[int] = []
    found: list[tuple[int, int]] = []
    for m in _SCAN.finditer(text):
        if m.end() - m.start() != 1:
            continue  # a string or a comment
        c = text[m.start()]
        if c in "([{":
            stack.append(m.start())
        elif c in ")]}":
            if not stack:
                break
            a = stack.pop()
            if not stack and m.start() - a > PIECE:
                found.append((a, m.start()))
    else:
        if stack and len(text) - stack[0] > PIECE:
            found.append((stack[0], len(text)))
    return found


def _cuts(text: str, a: int, b: int) -> list[int]:
    """Commas directly inside the pair ``text[a]…text[b]``, about :data:`PIECE` apart.  One scan
    visits the brackets, strings and comments inside (a flat list of numbers has none); commas
    are looked up with ``str.find`` in the plain code between them, only at the pair's depth."""
    cuts: list[int] = []
    target = a + 1 + PIECE
    depth = 0
    prev_end = a + 1
    matches = _SCAN.finditer(text, a + 1, b)
    while True:
        m = next(matches, None)
        seg_end = m.start() if m is not None else b
        while depth == 0 and target < seg_end:
            c = text.find(",", max(target, prev_end), seg_end)
            if c < 0:
                break
            cuts.append(c)
            target = c + 1 + PIECE
        if m is None:
            return cuts
        if m.end() - m.start() == 1:
            depth += 1 if text[m.start()] in "([{" else -1
        prev_end = m.end()


def _wrapper(text: str, a: int) -> tuple[str, str]:
    """How to compile part of the content of the bracket at ``a``: (opening, closing)."""
    c = text[a]
    before = text[max(0, a - 40):a].rstrip()
    w = _WORD_BEFORE.search(before)
    follows_expr = bool(before) and (before[-1] in ")]}\"'" or (
        w is not None and not keyword.iskeyword(w.group(1))))
    if follows_expr:
        return ("_(", ")") if c == "(" else ("_[", "]") if c == "[" else ("{", "}")
    return c, _CLOSE[c]


def beyond_parser_limits(exc: SyntaxError) -> bool:
    """Whether CPython refused the source for nesting brackets deeper than its tokenizer allows
    (200 levels, ``MAXLEVEL`` in CPython's ``Parser/tokenizer.c``): no Python version runs
    such a file, and libcst's native parser, asked instead, overflows the C stack on a few
    thousand levels (a segmentation fault)."""
    return (exc.msg or "") == "too many nested parentheses"


def _compile(src: str) -> SyntaxError | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(src, "<piece>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, OverflowError) as exc:  # e.g. an integer literal too long to convert
        return SyntaxError(str(exc))
    return None


def _offset_in(src: str, exc: SyntaxError) -> int:
    line = exc.lineno or 1
    start = 0
    for _ in range(line - 1):
        nxt = src.find("\n", start)
        if nxt < 0:
            break
        start = nxt + 1
    return start + max((exc.offset or 1) - 1, 0)


def check(text: str, base: int = 0, prefix: int = 0, suffix: int = 0,
          refused=None) -> ScreenError | None:
    """Screen ``text``: a piece whose character ``prefix`` is at file offset ``base``, its first
    ``prefix`` and last ``suffix`` characters a synthetic wrapper (not searched for large
    pairs).  ``refused(src)`` is asked whether a piece CPython refuses is valid after all
    (libcst accepts syntax newer than the running interpreter); only for the file's own text."""
    pairs = []
    if len(text) > PIECE:
        inner = text[prefix:len(text) - suffix] if prefix or suffix else text
        pairs = [(a + prefix, b + prefix) for a, b in _big_pairs(inner)]
        del inner
    if not pairs:
        exc = _compile(text)
        if exc is None or (refused is not None and prefix == 0 and
                           not beyond_parser_limits(exc) and refused(text)):
            return None
        at = _offset_in(text, exc)
        return ScreenError(base + max(at - prefix, 0), type(exc).__name__, exc.msg or str(exc))
    parts, shift = [], []
    last = length = removed = 0
    for a, b in pairs:
        head = text[last:a + 1]
        parts += [head, "0"]
        length += len(head) + 1
        shift.append((length, max(b - a - 2, 0)))  # skeleton offsets from here on lost this
        last = b
    parts.append(text[last:])
    skeleton = "".join(parts)
    del parts
    err = check(skeleton, 0, prefix=prefix, suffix=suffix, refused=refused)
    if err is not None:
        off = err.offset + prefix  # back to a skeleton offset
        for at, n in shift:
            if off >= at:
                removed += n
        return ScreenError(base + max(off + removed - prefix, 0), err.kind, err.msg)
    for a, b in pairs:
        opening, closing = _wrapper(text, a)
        cuts = _cuts(text, a, b)
        start = a + 1
        for end in cuts + [b]:
            group = text[start:end]
            close = closing
            if opening == "(" and cuts and not group.rstrip().endswith(","):
                close = ",)"  # one group of a tuple display
            err = check(opening + group + close, base + start - prefix, len(opening), len(close))
            if err is not None:
                return err
            start = end + 1
    return None
