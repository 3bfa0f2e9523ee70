"""Trigger patterns of the built-in rules: where in a file each rule can report.

A rule's ``pattern`` (a regular expression, searched in the raw text) over-approximates the
places the rule can fire: the engine skips a file none of the enabled rules' patterns match, and
inside a file it parses only the functions and methods a pattern matches in, plus what the shared
analyses follow from there (:mod:`attncheck.lint.regions`).  A pattern that misses a place a rule
can fire in loses findings, so each one is written from what its rule (or the analysis it reads)
needs *in the same function*, and ``tests/test_engine_perf.py`` checks findings against a
whole-file parse on every fixture, handed case and a real-code sample.
"""
from __future__ import annotations

import re


class _MatmulOperator:
    """``@`` as an operator: after an operand (``q @ k``, ``q@k``, ``s @= k``: a word character,
    ``)`` or ``]`` then spaces) or before a space or parenthesis — not a decorator, whose ``@``
    opens its line.  Matches exactly as the regular expression :attr:`regex` does (the same match
    objects), found from the ``@`` characters instead: an expression starting with a character
    class cannot skip ahead and tries every word character of the file (about 15 ms per 100 kB of
    transformers code, the costliest trigger there); ``@`` is rare.  Used like a compiled pattern."""

    regex = re.compile(r"[\w)\]][ \t]*@|@(?=[ (])")
    pattern = regex.pattern

    def search(self, text: str, pos: int = 0):
        match = self.regex.match
        i = text.find("@", pos)
        while i >= 0:
            # a match ending at this ``@`` starts at the operand before the spaces, or at the
            # ``@`` itself; one ending at a later ``@`` starts after this one
            j = i
            while j > pos and text[j - 1] in " \t":
                j -= 1
            if j > pos:
                m = match(text, j - 1)
                if m is not None:
                    return m
            m = match(text, i)
            if m is not None:
                return m
            i = text.find("@", i + 1)
        return None

# Calls are matched with optional space before the parenthesis (``F.dropout (x)``); a function
# that can be imported under another name also matches its ``import`` statement, whose bound
# names then seed the units that use them (:mod:`attncheck.lint.regions`).
#
# Each trigger is a tuple of regular expressions (any of them matching is a match): the engine
# scans each separately, and a plain literal or short alternation scans far faster than one
# large alternation (``re`` skips ahead to a literal prefix).

#: a softmax call, an ``nn.Softmax`` module, ``log_softmax``
SOFTMAX = (r"softmax|Softmax",)
#: PyTorch's fused SDPA
SDPA = (r"scaled_dot_product_attention",)
#: fused kernels that take q, k, v (SDPA, flash-attn, xformers)
FUSED = (r"scaled_dot_product_attention|flash_attn|memory_efficient_attention",)
#: ``nn.MultiheadAttention`` / ``nn.Transformer*`` modules and the functional MHA
MHA = (r"MultiheadAttention|multi_head_attention_forward|TransformerEncoder|TransformerDecoder|"
       r"Transformer\(",)
#: a matrix product: ``matmul``/``bmm``/``baddbmm``/``einsum`` or an ``@`` after an operand (spaces
#: between allowed: ``q @k``, ``s @= k``) or before a space or parenthesis (not a decorator, whose
#: ``@`` opens its line)
MATMUL = (r"matmul|bmm|einsum", _MatmulOperator())
#: where attention scores or weights can exist in a function (mask uses need one of these in the
#: function that applies the mask: the softmax it reaches, the q·kᵀ that tags the scores, or the
#: fused consumer itself; :mod:`attncheck.lint.analysis.masks`)
SCORES = (r"softmax|Softmax|scaled_dot_product_attention|matmul|bmm|einsum",
          r"memory_efficient_attention") + MHA + MATMUL[1:] + (
    # a division by a sum (``w / w.sum(-1, keepdim=True)``, ``x / torch.sum(x)``): the mask
    # analysis reads it as a written-out softmax
    r"/[^\n]*sum\s*\(",)
# digits, ``.`` and any character outside ASCII (``\d`` matches other scripts' digits; encoded
# as ``?``, one byte per character, so offsets are the text's) → ``0``, ``E`` → ``e``, ``X`` → ``x``
_FOLD = bytes.maketrans(b"0123456789.?EX", b"000000000000ex")
_folded_last: tuple[str, bytes] = ("", b"")


def _folded(text: str) -> bytes:
    """``text`` with the characters of numbers folded (:data:`_FOLD`); the last one is kept, as
    the patterns of a trigger search the same text one after the other."""
    global _folded_last
    last = _folded_last
    if last[0] is text:
        return last[1]
    out = text.encode("ascii", "replace").translate(_FOLD)
    _folded_last = (text, out)
    return out


class _NumberPattern:
    """A regular expression that starts at a digit or ``.`` (or ``_`` before digits), searched
    where a *hint* matches in the :func:`_folded` text: a pattern starting with a character
    class tries every position of the text (about 6 ns a character, every one a possible ``.``
    or digit), the hint starts with a literal, which ``re`` skips ahead to.  Every match of
    :attr:`regex` starts where the hint matches (it is what the expression's first characters
    become when folded), so the matches are the expression's own, from any position.  Used
    like a compiled pattern."""

    def __init__(self, pattern: str, hint: bytes) -> None:
        self.regex = re.compile(pattern)
        self.pattern = pattern
        self.hint = re.compile(hint)

    def search(self, text: str, pos: int = 0):
        folded = _folded(text)
        hint, match = self.hint.search, self.regex.match
        while True:
            h = hint(folded, pos)
            if h is None:
                return None
            m = match(text, h.start())
            if m is not None:
                return m
            pos = h.start() + 1


#: a numeric literal that can be below -65504 (fp16's most negative value): exponents ≥ 4,
#: integer parts ≥ 60000 (not the digits after a decimal point), digit groups, hexadecimal with 4+
#: digits (octal and binary ones that large have 6+ digits), and arithmetic between literals,
#: which the mask analysis folds (``-1000 * 1000``, ``-(10 ** 6)``, ``-1 / 1e-9``)
BIG_LITERAL = (_NumberPattern(r"[0-9.][eE]\+?0*(?:[4-9]|[1-9]\d)", rb"0e"),
               _NumberPattern(r"[6-9][0-9]{4}(?<![.0-9][6-9][0-9]{4})", rb"00000"),
               _NumberPattern(r"[1-9][0-9]{5}(?<![.0-9][1-9][0-9]{5})", rb"000000"),
               _NumberPattern(r"_[0-9]{3}", rb"_000"),
               _NumberPattern(r"0[xX][0-9a-fA-F_]{4,}", rb"0x"),
               _NumberPattern(r"\d[ \t]*(?:\*\*?|/|[-+])[ \t]*[-+(]*[ \t]*\.?\d", rb"0[ \t]*[-+*/]"))
#: a functional dropout call (``self.dropout(x)`` is an ``nn.Dropout`` module: not a trigger)
F_DROPOUT = (r"dropout(?<!self\.dropout)(?<!\wdropout)\s*\(|dropout[123]d\s*\(|alpha_dropout\s*\(",
             r"import[ \t]+(?:\([\w\s,.]*?|[\w \t,.]*?)dropout")
#: an assignment to an attribute of ``self`` (also inside a tuple target or annotated)
#: (``self.x = v``, ``self.x += v``, ``self.x: T = v``, ``self.x, y = v`` — the last written with
#: spaces around ``=``, which tells it from a keyword argument)
SELF_ASSIGN = (r"self\.\w+[ \t]*(?:[-+*/%@&|^]|\*\*|//|<<|>>)?=(?!=)|self\.\w+[ \t]*:[^\n=]*=(?!=)|"
               r"self\.\w+[ \t]*,[^\n()=]*[ \t]=[ \t]",)
#: tiling KV heads (also ``torch.cat([k] * n_rep, dim=1)``, ``torch.cat((k,) * n_rep)``)
REPEAT = (r"\.repeat\s*\(|tile\s*\(|\.expand\s*\(", r"import[ \t]+(?:\([\w\s,.]*?|[\w \t,.]*?)\btile\b",
          r"cat(?:enate)?\s*\(\s*[\[(]")
#: ``exp`` (a hand-written softmax)
EXP = (r"exp_?\s*\(", r"import[ \t]+(?:\([\w\s,.]*?|[\w \t,.]*?)\bexp_?\b")
#: a GQA group factor in the function that repeats: a group-like name (``n_rep``,
#: ``num_key_value_groups``, ``q_per_kv``, ``gqa_ratio``; :data:`attncheck.lint.analysis.layout
#: ._GROUP_NAME`) or a ratio of head counts (``//``)
GROUP_CONTEXT = (r"n_?rep\b|num_rep|rep_?kv|kv_?rep|group|per_kv|gqa|//",)
#: ``is_causal=True`` written in an SDPA call (ATT203 reports the literal)
IS_CAUSAL_TRUE = (r"is_causal\s*=\s*True",)
class _NameRead:
    """Code that reads a name: an identifier that is not in a comment line, not only the target
    of an assignment (``X = …``), not ``True``/``False``/``None``, and not part of a numeric
    literal (``1e9``, ``0xff``, ``1_000``, ``2j``).  A mask fill is reported where a mask is
    applied (a call, an operator or a subscript on a name), so a file without one — a generated
    data module, ``DATA = [12345678, …]`` — cannot hold an ATT204 finding however big its
    literals are.  Used like a compiled pattern (``search``, ``pattern``); a scan in Python over
    the identifiers only, since one regular expression that skips comment lines costs about
    0.3 s per MB."""

    pattern = "<code that reads a name>"
    # an ASCII letter class is searched about 4x faster than the Unicode one
    _IDENT = re.compile(r"[^\W\d]\w*")
    _IDENT_ASCII = re.compile(r"[A-Za-z_]\w*")
    _SPACE = re.compile(r"[ \t]*")

    def search(self, text: str, pos: int = 0):
        ident = self._IDENT_ASCII if text.isascii() else self._IDENT
        while True:
            m = ident.search(text, pos)
            if m is None:
                return None
            pos = m.end()
            if m.start() > 0 and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "._"):
                continue  # inside a number (``1e9``, ``0xff``) or an attribute
            line_start = text.rfind("\n", 0, m.start()) + 1
            if text[line_start:m.start()].lstrip(" \t").startswith("#"):
                end = text.find("\n", pos)
                if end < 0:
                    return None
                pos = end
                continue
            if m.group() in ("True", "False", "None"):
                continue
            after = self._SPACE.match(text, pos).end()
            if text.startswith("=", after) and not text.startswith("==", after):
                continue  # an assignment target
            return m


NAME_READ = (_NameRead(),)
