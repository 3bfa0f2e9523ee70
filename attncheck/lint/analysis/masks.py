"""Mask algebra: where a mask expression comes from, and which (query i, key j) pairs it blocks.

A mask is abstracted to its value on the three triangles of an attention matrix, relative to the
diagonal of the *last two* axes (query i, key j):

* ``LOWER`` — strict lower triangle, ``j < i`` (the past),
* ``DIAG``  — the diagonal, ``j == i`` (the token itself),
* ``UPPER`` — strict upper triangle, ``j > i`` (the future).

Each triangle holds a :data:`Region` value: ``"Z"`` (zero / False), ``"P"`` (positive / True /
1), ``"N"`` (negative: an additive mask's blocking value) or ``None`` (unknown or mixed, e.g. a
sliding window or a padding mask).  The value of an expression is a :class:`MaskVal` (pattern,
dtype, the negative fill, padding polarity, origin).  Expressions are evaluated over local
assignments in source order (if/else branches joined), ``self.X`` attributes set in
``__init__`` (``register_buffer``), the return values of functions in the same file and the
arguments passed to them at call sites in the same file.

Consumers and their conventions (PyTorch docs of each op; docs/lint.md):

==========================================================  =====================================
consumer                                                    a True / non-zero entry means
==========================================================  =====================================
``x.masked_fill(m, v)``, ``torch.where(m, v, x)``, ``x[m] = v``  blocked (filled with v)
``torch.where(m, x, v)``                                    kept
``F.scaled_dot_product_attention(attn_mask=bool)``          kept (PyTorch SDPA docs)
``nn.MultiheadAttention`` / ``nn.Transformer*`` bool masks  blocked (PyTorch nn docs)
additive float mask (``scores + m``, float ``attn_mask``)   0 kept, large negative blocked
==========================================================  =====================================

A causal mask blocks exactly ``UPPER``.  :func:`analyze` returns a :class:`MaskAnalysis` whose
``uses`` list every consumer found, with the blocked set computed, and whose ``fills`` list every
constant used to mask (for the fill-value rules).  Nothing is imported or executed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from attncheck.lint.analysis import ops
from attncheck.lint.analysis.index import ClassInfo, FunctionInfo
from attncheck.lint.analysis.interpreter import (
    MISSING,
    PARTIAL,
    Frame,
    FuncRef,
    Interpreter,
    Many,
    Tup,
    keyword_values,
    positional_params,
    positional_values,
    replace,
    unpack,
    zip_values,
)
from attncheck.lint.analysis.syntax import (
    NodeCache,
    arg_value,
    child_nodes,
    int_of,
    kwarg,
    num_of,
)
from attncheck.lint.context import dotted_name, is_library_name
from attncheck.lint.project import may_resolve, rehome

Region = str | None  # "Z" | "P" | "N" | None
Pattern = tuple[Region, Region, Region]  # (lower j<i, diagonal j=i, upper j>i)
Blocked = tuple[bool | None, bool | None, bool | None]

LOWER, DIAG, UPPER = 0, 1, 2
ALL_P: Pattern = ("P", "P", "P")
ALL_Z: Pattern = ("Z", "Z", "Z")

FP16_MAX = 65504.0
#: a literal fill at or below this blocks (exp(-50) ≈ 2e-22); Swin's -100.0 is fine
BLOCKING_LITERAL = -50.0

#: Tensor methods that keep a mask's pattern on the last two axes: copies and device moves, and
#: the views that add, drop or broadcast leading axes (a (L, L) mask viewed as (1, 1, L, L))
_PRESERVE_METHODS = ops.methods("copy") | ops.methods("shape", "reshape", "insert", "broadcast")
#: ``torch.logical_and(a, b)`` / ``a.logical_and(b)`` … as the binary operator they compute
_BINARY = {"and": cst.BitAnd(), "or": cst.BitOr(), "xor": cst.BitXor(), "mul": cst.Multiply(),
           "add": cst.Add()}


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fill:
    """A constant used as a mask value.

    ``kind``: ``literal`` (``value`` set), ``neg_inf``, ``pos_inf``, ``finfo_min``
    (``torch.finfo(dt).min`` or ``-finfo.max``), ``finfo_max``.  ``node`` is where the constant
    is written (reported by the fill-value rules).
    """

    kind: str
    value: float | None = None
    node: cst.CSTNode | None = field(default=None, compare=False, repr=False)
    is_bool: bool = False
    #: held in a 0-dim tensor created with an explicit dtype of float32's range
    #: (``torch.full((), -1e9, dtype=q.dtype)`` with ``q`` float32 or bfloat16)
    wide: bool = field(default=False, compare=False)

    @property
    def region(self) -> Region:
        if self.kind in ("neg_inf", "finfo_min"):
            return "N"
        if self.kind in ("pos_inf", "finfo_max"):
            return "P"
        if self.value is None or math.isnan(self.value):
            return None
        if self.value == 0:
            return "Z"
        return "P" if self.value > 0 else "N"

    @property
    def blocking(self) -> bool:
        """Large enough a negative to hide a key after softmax."""
        return self.kind in ("neg_inf", "finfo_min") or (
            self.kind == "literal" and self.value is not None and self.value <= BLOCKING_LITERAL)

    @property
    def overflows_fp16(self) -> bool:
        """A finite literal below fp16's most negative value (-65504)."""
        return self.kind == "literal" and self.value is not None and self.value < -FP16_MAX

    @property
    def ineffective(self) -> bool:
        """Non-negative, +inf, or of magnitude below 1: masked logits keep their weight."""
        if self.kind in ("pos_inf", "finfo_max"):
            return True
        return self.kind == "literal" and self.value is not None and not self.is_bool and (
            self.value >= 0 or abs(self.value) < 1.0)

    def scaled(self, c: float) -> Fill:
        if self.kind == "literal" and self.value is not None:
            return replace(self, value=self.value * c)
        if c > 0:
            return self
        flip = {"neg_inf": "pos_inf", "pos_inf": "neg_inf", "finfo_min": "finfo_max",
                "finfo_max": "finfo_min"}
        return replace(self, kind=flip.get(self.kind, self.kind))


@dataclass(frozen=True)
class MaskVal:
    """Abstract value of a mask tensor.

    ``pattern``: region values on (lower, diagonal, upper) or ``None`` when unknown.
    ``dtype``: ``bool`` / ``float`` / ``int`` / ``None``.  ``fill``: the constant held by the
    ``N`` entries (additive masks).  ``polarity``: ``keep`` (True = real token, e.g.
    ``attention_mask``, ``x != pad``) or ``block`` (``key_padding_mask``) for padding masks.
    ``origin``: the expression that fixed the triangle pattern.  ``repeated``: tiled over heads
    with ``.repeat(H, 1, 1)``.  ``summed_min``: the sum of two ``finfo.min`` masks.
    """

    pattern: Pattern | None = None
    dtype: str | None = None
    fill: Fill | None = None
    polarity: str | None = None
    origin: cst.CSTNode | None = field(default=None, compare=False, repr=False)
    repeated: bool = False
    summed_min: bool = False
    #: every positive entry is exactly 1 (True / ones), so ``1 - m`` flips P and Z
    unit: bool = True
    #: a fill written into a float mask that blocks nothing (``zeros(L, L).masked_fill(m, 0)``,
    #: ``+inf``, ``-1e-9``): the additive mask it builds is ineffective
    weak_fill: Fill | None = field(default=None, compare=False)
    #: the polarity this padding mask has if it holds 0/1 numbers (a tokenizer's
    #: ``attention_mask``: 1 = attend, 0 = padding); it becomes :attr:`polarity` once the code
    #: treats the mask as numbers (compares it with 0 or 1, computes ``1 - m`` or ``m * c``, casts
    #: it), and is dropped when the code treats it as booleans (``~m``: already a bool mask)
    numeric_polarity: str | None = None
    #: a key padding mask laid out to broadcast over the query axis (``m[:, None, None, :]``,
    #: ``m.unsqueeze(1).unsqueeze(2)``, ``m.view(B, 1, 1, L)``): it selects keys (columns), the
    #: same for every query, never whole query rows
    key_only: bool = False

    def with_pattern(self, p: Pattern | None, **kw: Any) -> MaskVal:
        return replace(self, pattern=p, **kw)

    def as_numbers(self) -> MaskVal:
        """This mask read as 0/1 numbers: its numeric polarity, if any, now holds.  Callers
        invoke it on evidence that only a 0/1 mask fits (``m == 1``, ``1 - m``, ``m * c``, a
        float cast) or, for a test that an additive 0 / -inf mask passes too (``m == 0``,
        ``m != 0``, ``m.bool()``), when the code itself laid the mask out as a key padding
        mask (:attr:`key_only`): a layer handed an already additive mask does not."""
        if self.polarity is None and self.numeric_polarity is not None:
            return replace(self, polarity=self.numeric_polarity)
        return self


def key_layout(m: MaskVal) -> MaskVal:
    """``m`` laid out as a key padding mask of shape ``(…, 1, L_k)`` (``m[:, None, None, :]``,
    ``m.unsqueeze(1).unsqueeze(2)``, ``m.view(B, 1, 1, L)``, ``rearrange(m, 'b j -> b 1 1 j')``):
    it selects keys, the same for every query (:attr:`MaskVal.key_only`).  A boolean cast before
    the layout (``m.bool()[:, None, None, :]``) is the same evidence that ``m`` held 0/1 numbers
    as the cast after it (:meth:`MaskVal.as_numbers`); a number cast already applied it."""
    if m.dtype == "bool":
        m = m.as_numbers()
    return m if m.key_only else replace(m, key_only=True)


def negated(m: MaskVal) -> MaskVal:
    """``~m`` / ``m.logical_not()`` / ``torch.logical_not(m)``: a boolean mask with the pattern and
    the padding polarity flipped.  The numeric polarity of a mask the code treats as booleans is
    dropped (``~attention_mask``: already a boolean mask), but the negation of a boolean *cast*
    of one (``~attention_mask.bool()``) is True where the 0/1 numbers were 0: it flips too, and
    holds once the code lays the result out as a key padding mask (:func:`key_layout`)."""
    num = _flip(m.numeric_polarity) if m.dtype == "bool" else None
    return _same_axes(MaskVal(p_not(m.pattern), "bool", None, _flip(m.polarity), m.origin,
                              m.repeated, numeric_polarity=num), m)


def _same_axes(new: Any, old: MaskVal) -> Any:
    """``new`` (computed elementwise from ``old``) with ``old``'s key-only layout."""
    if isinstance(new, MaskVal) and old.key_only and not new.key_only:
        return replace(new, key_only=True)
    return new


@dataclass(frozen=True)
class IndexVal:
    """``torch.arange`` laid out along the query axis (``row``), key axis (``col``) or 1-D (``vec``),
    plus an integer ``offset`` (``None`` when unknown).

    ``size``: the arange's length as integer terms (``(("q_len", 1),)`` for ``arange(q_len)``;
    ``None`` unknown); ``sym``: symbolic terms added to the offset (``arange(q_len)[:, None] +
    (kv_len - q_len)`` → ``(("kv_len", 1), ("q_len", -1))``).  Comparing a row and a column index
    whose symbolic offsets differ by exactly the key length minus the query length aligns query
    ``r`` with key ``r + L_k - L_q``, the convention of a causal mask over a KV cache (the
    bottom-right alignment of ``torch.nn.attention.bias.causal_lower_right``)."""

    axis: str
    offset: int | None = 0
    size: tuple[tuple[str, int], ...] | None = None
    sym: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class IndicesVal:
    """``torch.triu_indices`` / ``tril_indices``: the positions where ``pattern`` is P;
    ``part`` 0 = row indices, 1 = column indices, ``None`` = both (2, N)."""

    pattern: Pattern
    part: int | None
    origin: cst.CSTNode | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class InstanceRef:
    """``self`` of a method of ``cls``, also when passed to a function (Hugging Face
    ``eager_attention_forward(self, ...)`` reads ``module.<buffer>``)."""

    cls: Any


@dataclass(frozen=True)
class ModuleRef:
    """An ``nn.Module`` instance of a known class (``mha``, ``softmax`` or ``passthrough``:
    dropout / identity)."""

    kind: str


@dataclass(frozen=True)
class Dtype:
    """A floating tensor of a known dtype whose mask contents are not tracked, or a
    ``torch.dtype`` object; ``names`` holds every dtype it may have on the paths joined
    (``x.float()``, then ``x.bfloat16()`` under an ``if``: float32 or bfloat16)."""

    names: frozenset[str]

    @property
    def wide(self) -> bool:
        """Every dtype it may have keeps float32's exponent range (max ≈ 3.4e38)."""
        return self.names <= ops.WIDE_DTYPES


@dataclass(frozen=True)
class Tag:
    """A tensor that is attention ``scores`` (q·kᵀ-derived, pre-softmax) or ``probs``."""

    kind: str


# --------------------------------------------------------------------------------------------
# region algebra
# --------------------------------------------------------------------------------------------

def _nz(r: Region) -> bool | None:
    return None if r is None else r != "Z"


def p_not(p: Pattern | None) -> Pattern | None:
    if p is None:
        return None
    return tuple(None if r is None else ("P" if r == "Z" else "Z") for r in p)  # type: ignore


def p_truthy(p: Pattern | None) -> Pattern | None:
    """``m != 0`` / ``.bool()``."""
    if p is None:
        return None
    return tuple(None if r is None else ("Z" if r == "Z" else "P") for r in p)  # type: ignore


def p_select(p: Pattern | None, want: str) -> Pattern | None:
    """``m > 0`` (want P) / ``m < 0`` (want N) / ``m == 1`` (want P)."""
    if p is None:
        return None
    return tuple(None if r is None else ("P" if r == want else "Z") for r in p)  # type: ignore


def p_scale(p: Pattern | None, c: float) -> Pattern | None:
    if p is None:
        return None
    if c == 0:
        return ALL_Z
    if c > 0:
        return p
    swap = {"P": "N", "N": "P", "Z": "Z", None: None}
    return tuple(swap[r] for r in p)  # type: ignore


def p_one_minus(p: Pattern | None, unit: bool = True) -> Pattern | None:
    """``1 - m``: exact for a 0/1 mask; positive entries of other sizes become unknown."""
    if p is None:
        return None
    m = {"Z": "P", "P": "Z" if unit else None, "N": "P", None: None}
    return tuple(m[r] for r in p)  # type: ignore


def p_minus_one(p: Pattern | None, unit: bool = True) -> Pattern | None:
    """``m - 1``: exact for a 0/1 mask; positive entries of other sizes become unknown."""
    if p is None:
        return None
    m = {"Z": "N", "P": "Z" if unit else None, "N": "N", None: None}
    return tuple(m[r] for r in p)  # type: ignore


def _combine(p: Pattern | None, q: Pattern | None, f) -> Pattern | None:
    if p is None and q is None:
        return None
    p = p or (None, None, None)
    q = q or (None, None, None)
    out = tuple(f(a, b) for a, b in zip(p, q))
    return None if out == (None, None, None) else out  # type: ignore


def p_and(p, q):
    def f(a, b):
        if a == "Z" or b == "Z":
            return "Z"
        if a is None or b is None:
            return None
        return "P"
    return _combine(p, q, f)


def p_or(p, q):
    def f(a, b):
        if (a is not None and a != "Z") or (b is not None and b != "Z"):
            return "P"
        if a == "Z" and b == "Z":
            return "Z"
        return None
    return _combine(p, q, f)


def p_xor(p, q):
    def f(a, b):
        if a is None or b is None:
            return None
        return "P" if (a != "Z") != (b != "Z") else "Z"
    return _combine(p, q, f)


def p_add(p, q):
    def f(a, b):
        if a == "Z":
            return b
        if b == "Z":
            return a
        if a is None or b is None:
            return None
        return a if a == b else None
    return _combine(p, q, f)


def p_join(p, q):
    if p is None or q is None:
        return None
    out = tuple(a if a == b else None for a, b in zip(p, q))
    return None if out == (None, None, None) else out  # type: ignore


def p_where(c: Pattern | None, a: Region, b: Region) -> Pattern | None:
    if c is None:
        return None
    out = []
    for r in c:
        if r is None:
            out.append(a if a == b else None)
        else:
            out.append(a if r != "Z" else b)
    return tuple(out)  # type: ignore


def p_masked_fill(base: Pattern | None, m: Pattern | None, v: Region) -> Pattern | None:
    if m is None:
        return None
    base = base or (None, None, None)
    out = []
    for b, r in zip(base, m):
        if r is None:
            out.append(b if b == v else None)
        else:
            out.append(v if r != "Z" else b)
    return tuple(out)  # type: ignore


def _region_tri(p: Pattern, d: int | None, lower: bool) -> Pattern:
    """``tril(x, d)`` (lower=True) / ``triu(x, d)``: keep entries with ``j - i <= d`` / ``>= d``."""
    if d is None:
        return tuple(r if r == "Z" else None for r in p)  # type: ignore

    def kept(region: int) -> bool | None:
        # δ = j - i ranges: lower (-inf, -1], diag {0}, upper [1, inf)
        if region == DIAG:
            return (0 <= d) if lower else (0 >= d)
        if region == LOWER:
            if lower:
                return True if d >= -1 else None
            return False if d >= 0 else None
        if lower:
            return False if d <= 0 else None
        return True if d <= 1 else None

    out = []
    for i, r in enumerate(p):
        k = kept(i)
        if k is True:
            out.append(r)
        elif k is False:
            out.append("Z")
        else:
            out.append("Z" if r == "Z" else None)
    return tuple(out)  # type: ignore


def p_tril(p: Pattern | None, d: int | None) -> Pattern | None:
    return None if p is None else _region_tri(p, d, True)


def p_triu(p: Pattern | None, d: int | None) -> Pattern | None:
    return None if p is None else _region_tri(p, d, False)


def p_transpose(p: Pattern | None) -> Pattern | None:
    return None if p is None else (p[UPPER], p[DIAG], p[LOWER])


_CMP = {
    "<": lambda x: x < 0, "<=": lambda x: x <= 0, ">": lambda x: x > 0, ">=": lambda x: x >= 0,
    "==": lambda x: x == 0, "!=": lambda x: x != 0,
}


def p_compare_index(op: str, row_off: int, col_off: int, row_first: bool) -> Pattern | None:
    """Pattern of ``(i + row_off) OP (j + col_off)`` (or ``(j + col_off) OP (i + row_off)``
    when ``row_first`` is False), with i the query index and j the key index."""
    c = row_off - col_off
    if abs(c) > 16:
        return None
    test = _CMP[op]
    out = []
    for deltas in (range(-64, 0), (0,), range(1, 65)):  # δ = j - i
        vals = {test((-d + c) if row_first else (d - c)) for d in deltas}
        out.append(None if len(vals) > 1 else ("P" if vals.pop() else "Z"))
    return tuple(out)  # type: ignore


def blocked_set(p: Pattern | None, convention: str) -> Blocked | None:
    """Which triangles a consumer blocks.

    ``convention``: ``true_blocked`` (True / non-zero blocks), ``true_kept`` (True attends),
    ``additive`` (negative entries block).
    """
    if p is None:
        return None
    if convention == "true_blocked":
        return tuple(_nz(r) for r in p)  # type: ignore
    if convention == "true_kept":
        return tuple(None if r is None else r == "Z" for r in p)  # type: ignore
    return tuple(None if r is None else r == "N" for r in p)  # type: ignore


def describe_pattern(p: Pattern | None) -> str:
    """``"True above the diagonal"`` and the like (for messages)."""
    if p is None:
        return "unknown"
    names = ["below", "on", "above"]
    nz = [i for i, r in enumerate(p) if r is not None and r != "Z"]
    if not nz:
        return "zero everywhere"
    if nz == [0, 1, 2]:
        return "non-zero everywhere"
    if nz == [0, 1]:
        return "non-zero on and below the diagonal"
    if nz == [1, 2]:
        return "non-zero on and above the diagonal"
    return "non-zero " + " and ".join(names[i] for i in nz) + " the diagonal"


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------

@dataclass
class MaskUse:
    """One place where a mask is applied to attention scores (or passed to an attention op).

    ``consumer``: ``masked_fill`` | ``where`` | ``index_assign`` | ``sdpa`` | ``mha`` |
    ``additive`` | ``multiply`` (a keep mask multiplied into probabilities).  ``convention``: see :func:`blocked_set`.  ``node``: what to report (the mask
    argument).  ``target``: the filled / added-to tensor (``None`` for sdpa/mha).
    """

    consumer: str
    convention: str | None
    node: cst.CSTNode
    call: cst.CSTNode
    mask: MaskVal | None
    fill: Fill | None
    target: cst.BaseExpression | None
    target_tag: str | None
    reaches_softmax: bool
    function: str
    keyword: str | None = None
    #: the masked tensor then meets the values in a matmul / einsum / bmm (same function)
    reaches_matmul: bool = False
    #: the filled value may reach attention: a softmax, a return, a store on self, or a call
    #: other than a torch op (``False``: it only meets comparisons / top-k in this function,
    #: e.g. beam-search scores)
    escapes: bool = True
    #: the filled tensor's dtype is tracked to float32's range (``s = s.float()`` before it)
    wide: bool = False

    @property
    def blocked(self) -> Blocked | None:
        if self.mask is None or self.convention is None:
            return None
        return blocked_set(self.mask.pattern, self.convention)

    @property
    def attention(self) -> bool:
        """Whether this use masks attention logits (fused ops always; fills when they block or
        the result reaches a softmax)."""
        if self.consumer in ("sdpa", "mha"):
            return True
        if self.consumer == "additive":
            return self.reaches_softmax or self.target_tag == "scores"
        return (self.fill is not None and self.fill.blocking) or self.reaches_softmax


@dataclass
class FillSite:
    """A constant that builds an additive mask (``(1 - m) * -1e9``, ``torch.full(..., -1e9)``)."""

    fill: Fill
    node: cst.CSTNode
    context: str
    base: cst.CSTNode | None = None
    #: the tensor holding the fill is created with an explicit ``dtype=`` whose range holds it
    #: (float32, float64, bfloat16: max ≈ 3.4e38), whatever the model's dtype
    wide: bool = False
    #: see :attr:`MaskUse.escapes`
    escapes: bool = True
    #: ``False`` when the mask it builds is added, in the same expression, to a tensor that is
    #: neither established attention scores nor reaches a softmax (beam-search log-probabilities
    #: penalised with ``log_probs += finished * -1e9``): it masks something other than attention
    attention: bool = True


@dataclass
class MaskAnalysis:
    uses: list[MaskUse] = field(default_factory=list)
    fill_sites: list[FillSite] = field(default_factory=list)
    #: sums of two finfo.min-filled additive masks (BinaryOperation nodes)
    summed_min: list[cst.CSTNode] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IntSum:
    """An integer local that is a sum of sizes: ``off = kv_len - q_len`` is
    ``IntSum((("kv_len", 1), ("q_len", -1)), 0)`` (terms keyed by their source text)."""

    terms: tuple[tuple[str, int], ...]
    const: int


def _linear_terms(node: cst.BaseExpression, text, env: dict | None = None) -> tuple[dict[str, int], int] | None:
    """``node`` as an integer combination of opaque terms (names, attributes, subscripts,
    calls; keyed by ``text(term)``) plus a constant: ``j - i + 1`` → ``({"j": 1, "i": -1}, 1)``;
    ``None`` for anything else (a product, a float).  A name ``env`` binds to an :class:`IntSum`
    or an integer literal stands for its value (``d = j - i``; ``tril(m, diagonal=d)``); a name
    it binds to anything else is not an integer."""
    t = type(node)
    if t is cst.Integer:
        return {}, int_of(node)
    if t is cst.UnaryOperation and type(node.operator) is cst.Minus:
        r = _linear_terms(node.expression, text, env)
        return None if r is None else ({k: -v for k, v in r[0].items()}, -r[1])
    if t is _BinaryOperation and type(node.operator) in (cst.Add, cst.Subtract):
        a, b = _linear_terms(node.left, text, env), _linear_terms(node.right, text, env)
        if a is None or b is None:
            return None
        sign = 1 if type(node.operator) is cst.Add else -1
        terms = dict(a[0])
        for k, v in b[0].items():
            terms[k] = terms.get(k, 0) + sign * v
        return {k: v for k, v in terms.items() if v}, a[1] + sign * b[1]
    if t is _Name and env is not None and node.value in env:
        v = env[node.value]
        if isinstance(v, IntSum):
            return dict(v.terms), v.const
        if isinstance(v, Fill) and v.kind == "literal" and not v.is_bool and v.value is not None \
                and float(v.value).is_integer():
            return {}, int(v.value)
        return None
    if t in (_Name, _Attribute, cst.Subscript, _Call):
        return {text(node): 1}, 0
    return None


def _add_terms(terms: tuple[tuple[str, int], ...], more: dict[str, int], sign: int = 1) -> tuple[tuple[str, int], ...]:
    """``terms + sign · more`` as a sorted tuple without zero coefficients."""
    out = dict(terms)
    for k, v in more.items():
        out[k] = out.get(k, 0) + sign * v
    return tuple(sorted((k, v) for k, v in out.items() if v))


def _kv_aligned(row: IndexVal, col: IndexVal) -> bool:
    """Whether the symbolic offsets of a query-axis index ``row`` and a key-axis index ``col``
    differ by exactly ``L_k - L_q`` (their aranges' lengths): then ``row OP col`` is the same
    pattern, relative to the KV-aligned diagonal, as on a square mask without them."""
    if row.size is None or col.size is None:
        return False
    net = _add_terms(row.sym, dict(col.sym), -1)
    return net == _add_terms(col.size, dict(row.size), -1)


def _leaves(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a tree of ``+`` / ``-`` / unary ``-``."""
    t = type(node)
    if t is _BinaryOperation and type(node.operator) in (cst.Add, cst.Subtract):
        return _leaves(node.left) + _leaves(node.right)
    if t is cst.UnaryOperation and type(node.operator) is cst.Minus:
        return _leaves(node.expression)
    return [node]


def _size_call(call: cst.Call) -> bool:
    """Whether a call yields an integer size: ``x.size(-1)``, ``len(xs)``, ``int(n)``,
    ``min(a, b)`` / ``max(a, b)`` (not a tensor method such as ``m.unsqueeze(1)``)."""
    f = call.func
    if type(f) is _Attribute:
        return f.attr.value == "size"
    return type(f) is _Name and f.value in ("len", "int", "min", "max")


def _size_args(call: cst.Call, q: str) -> list[cst.BaseExpression] | None:
    """The size arguments of a tensor constructor (``torch.ones(i, j)``,
    ``torch.ones((i, j), dtype=torch.bool)``, ``torch.full((i, j), v)``, ``x.new_ones(i, j)``)."""
    meth = call.func.attr.value if type(call.func) is _Attribute else None
    full = q == "torch.full" or meth == "new_full"
    if not (full or q in ("torch.ones", "torch.zeros", "torch.empty")
            or meth in ("new_ones", "new_zeros", "new_empty")):
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    size = kwarg(call, "size")
    if size is None and positional:
        size = positional[0]
    if type(size) in (cst.Tuple, cst.List):
        return [e.value for e in size.elements if type(e) is cst.Element]
    return None if full else positional


#: ``torch.<dtype>`` names of the floating dtypes, and the tensor methods that cast to them
_FLOAT_DTYPES = ops.dtypes(lambda d: d.kind == "float")
_CAST_METHODS = {n: op.dtype_name for n, op in ops.METHODS.items()
                 if op.family == "cast" and op.kind == "float"}
#: tensor methods whose result keeps the receiver's dtype: copies, views, axis moves and fills
_SAME_DTYPE_METHODS = (_PRESERVE_METHODS | ops.methods("shape", "transpose", "permute", "flatten", "t")
                       | ops.methods("fill"))


def _dtype_of(node: cst.BaseExpression | None, ctx) -> str | None:
    """``bool`` / ``float`` / ``int`` for a dtype argument (:func:`ops.dtype_kind`)."""
    if node is None:
        return None
    return ops.dtype_kind(ctx.qualname(node) or "")


#: nested scopes a function's statements do not include
_NESTED_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
_Call, _Name, _Attribute, _BinaryOperation = cst.Call, cst.Name, cst.Attribute, cst.BinaryOperation
_MatrixMultiply, _Add = cst.MatrixMultiply, cst.Add


_BLOCK_TYPE: dict[type, bool] = {}


def _is_block_type(t: type) -> bool:
    """``issubclass(t, (BaseCompoundStatement, BaseSuite, Else, ExceptHandler, Finally))``."""
    r = _BLOCK_TYPE.get(t)
    if r is None:
        r = _BLOCK_TYPE[t] = issubclass(t, (cst.BaseCompoundStatement, cst.BaseSuite, cst.Else,
                                            cst.ExceptHandler, cst.Finally))
    return r


#: methods whose result is a boolean tensor (a mask selecting positions, not data)
_BOOL_METHODS = frozenset(ops.COMPARE_METHODS) | ops.methods("logical") | ops.methods("cast", "bool")


def _data_names(node: cst.CSTNode, qualname) -> set[str]:
    """The names whose *values* ``node`` carries: not those only used to choose positions (the
    mask of ``x.masked_fill(mask, v)``, the condition of ``torch.where(c, a, b)``, a comparison
    or another boolean result).  A tensor that reaches a softmax only as such a mask is not the
    scores (a monotonic-attention step count compared into a mask is no logit)."""
    t = type(node)
    if t is _Name:
        return {node.value}
    if t is _Attribute:
        d = dotted_name(node)
        if d is not None:
            return {d} if d.startswith("self.") else {d.split(".", 1)[0]}
    if t is cst.Comparison or (t is cst.UnaryOperation and type(node.operator) is cst.BitInvert):
        return set()
    if t is _Call:
        f = node.func
        if type(f) is _Attribute:
            if f.attr.value in _BOOL_METHODS:
                return set()
            if f.attr.value in ("masked_fill", "masked_fill_"):
                return _data_names(f.value, qualname)
        if (qualname(f) or "") == "torch.where":
            out: set[str] = set()
            for a in node.args[1:3]:
                out |= _data_names(a.value, qualname)
            return out
    out = set()
    for c in child_nodes(node):
        out |= _data_names(c, qualname)
    return out


_SOFTMAX_METHODS = ops.methods("softmax")
_MATMUL_METHODS = ops.methods("matmul")

_KEEP_WORDS = ("valid", "keep", "not_pad", "non_pad", "nonpad", "is_token")
_BLOCK_WORDS = ("pad", "is_masked", "blocked")


def _polarity_of_name(name: str) -> str | None:
    low = name.lower().split(".")[-1]
    if "bias" in low:  # an additive bias, not a boolean padding mask
        return None
    if any(w in low for w in ("invalid", "not_valid", "nonvalid")):
        return "block"
    # ``attention_mask`` is deliberately absent: real code uses the name for keep-masks (HF
    # inputs), blocked masks (MPT's bool-cast 4-D mask) and padding masks (grounding-dino)
    if any(w in low for w in _KEEP_WORDS):
        return "keep"
    if any(w in low for w in _BLOCK_WORDS):
        return "block"
    return None


_NOT_MASK_WORDS = frozenset({
    "value", "values", "fill", "ratio", "prob", "probs", "token", "tokens", "id", "ids", "idx",
    "index", "indices", "num", "count", "len", "length", "size", "type", "fn", "func", "dim",
    "shape", "labels", "label", "embeddings", "embedding", "features", "feature", "kwargs",
})


def named_mask(name: str) -> MaskVal | None:
    """An otherwise unknown variable whose name says it is a mask (``attention_mask``,
    ``key_padding_mask``, ``valid``): pattern unknown, padding polarity from the name; ``None``
    for any other name."""
    low = name.lower()
    if not low.endswith("mask") and set(low.split("_")) & _NOT_MASK_WORDS:
        return None
    pol = _polarity_of_name(low)
    if pol is None and "mask" not in low:
        return None
    if pol is None and low.endswith("attention_mask"):
        # the tokenizer's ``attention_mask`` (Hugging Face glossary: "1 for tokens that are not
        # masked, 0 for tokens that are masked") when it is used as numbers; as a boolean the
        # name is used both ways (MPT's bool-cast 4-D mask is True = blocked)
        return MaskVal(numeric_polarity="keep")
    return MaskVal(polarity=pol)


def _flip(pol: str | None) -> str | None:
    return {"keep": "block", "block": "keep"}.get(pol or "", None)


class _Analyzer(Interpreter):
    def __init__(self, ctx, loading: set[str] | None = None) -> None:
        super().__init__(ctx, loading)
        self.result = MaskAnalysis()
        self.index = ctx.index
        self.classes = self.index.classes
        #: attributes ``self.X`` each class's ``__init__`` sets (run once, on first look-up)
        self.class_attrs: dict[int, dict[str, Any]] = {}  # by id of the ClassInfo
        self._inited: set[int] = set()  # classes whose ``__init__`` ran
        self._inited_lineages: set[int] = set()  # classes whose bases' ``__init__`` ran too
        self.globals: dict[str, Any] = {}
        self.callsite_args: dict[int, dict[int, Any]] = {}  # id(function) -> parameter index -> value
        #: pass 2: same-file functions called in this file (by ``id`` of their FunctionInfo),
        #: whose uses are recorded at each call with that call's arguments; those recorded so
        #: far
        self.per_call: set[int] = set()
        self.recorded: set[int] = set()
        #: the function being recorded returns to a caller whose result reaches a softmax
        self._result_to_softmax = False
        self._returning = False  # the statement being scanned is a ``return``
        self._targets: Any = None
        self._in_matmul: set[int] = set()
        self.recording = False
        self.collecting = True  # pass 1: gather call-site arguments (frozen for pass 2)
        self._return_depth = 0
        self.current: FunctionInfo | None = None
        self._data: dict[int, tuple[cst.CSTNode, set[str]]] = {}
        self._code: dict[int, tuple[cst.CSTNode, str]] = {}
        self._texts: dict[int, tuple[cst.CSTNode, str]] = {}
        self.nodes = NodeCache()  # walks of this file's nodes, for this run only
        #: the functions defined inside functions, by ``id`` of their node (kept alive by the
        #: module): what a local ``def``'s :class:`FuncRef` runs
        self.local_defs: dict[int, FunctionInfo] = {}
        #: :func:`named_mask` of the names read in this file (a name is read many times)
        self._named: dict[str, MaskVal | None] = {}
        self._collect(ctx.module)

    # ---- module structure ---------------------------------------------------------------
    def _collect(self, module: cst.Module) -> None:
        """Module-level masks and fills (``CAUSAL = torch.tril(…)``, ``NEG = -1e9``)."""
        for stmt in module.body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if (type(small) is cst.Assign and len(small.targets) == 1
                            and type(small.targets[0].target) is cst.Name):
                        v = self.ev(small.value, {})
                        if isinstance(v, (Fill, MaskVal)):
                            self.globals[small.targets[0].target.value] = v

    def named_mask(self, name: str) -> MaskVal | None:
        """:func:`named_mask`, once per name in this file."""
        try:
            return self._named[name]
        except KeyError:
            v = self._named[name] = named_mask(name)
            return v

    def _attrs(self, cls: ClassInfo) -> dict[str, Any]:
        attrs = self.class_attrs.get(id(cls))
        if attrs is None:
            attrs = self.class_attrs[id(cls)] = {}
        return attrs

    def class_attr(self, cls: ClassInfo | None, attr: str, depth: int = 0) -> Any:
        if cls is None or depth > self.index.MAX_BASES:
            return None
        if id(cls) not in self._inited:
            self._inited.add(id(cls))
            init = cls.methods.get("__init__")
            if init is not None:
                saved = (self.recording, self.current)
                self.recording, self.current = False, init
                try:
                    self._run_function(init, {}, cls_env=cls)
                finally:
                    self.recording, self.current = saved
        attrs = self._attrs(cls)
        if attr in attrs:
            return attrs[attr]
        for b in self.index.bases_of(cls):
            v = self.class_attr(b, attr, depth + 1)
            if v is not None:
                return v
        return None

    def _lineage_inited(self, cls: ClassInfo | None) -> bool:
        """Whether the ``__init__`` of ``cls`` and of every base :meth:`class_attr` can reach
        has run (a look-up then runs nothing)."""
        if cls is None or id(cls) in self._inited_lineages:
            return True
        stack = [(cls, 0)]
        while stack:
            c, depth = stack.pop()
            if depth > self.index.MAX_BASES:
                continue
            if id(c) not in self._inited:
                return False
            stack.extend((b, depth + 1) for b in self.index.bases_of(c))
        self._inited_lineages.add(id(cls))
        return True

    def method(self, cls: ClassInfo | None, name: str) -> FunctionInfo | None:
        return self.lookup_function(name, cls) if cls is not None else None

    def adopt_imported(self, an: Interpreter) -> None:
        an.collecting = False  # its call-site arguments are this file's, per call

    def callee(self, q: str, env: dict[str, Any]) -> FunctionInfo | None:
        """The same-file function a call of the qualified name ``q`` runs, by value: a local
        ``def`` the name is bound to in ``env``, else ``f(...)`` or, in a method,
        ``self.m(...)`` as the module index resolves them."""
        if q.startswith("self.") and q.count(".") == 1:
            return self.method(self.current.cls, q[5:]) if self.current is not None else None
        v = env.get(q)
        if isinstance(v, FuncRef):
            return self.local_defs.get(id(v.fn))
        return self.lookup_function(q) if q != "float" and v is None else None

    def return_value(self, f: FunctionInfo, call: cst.Call, env: dict[str, Any]) -> Any:
        """What the same-file function ``f`` returns at ``call``: its body run with the call's
        arguments (evaluated in the caller's ``env``) bound to its parameters, at most
        :data:`~attncheck.lint.analysis.interpreter.MAX_INLINE_DEPTH` calls deep.  Per call, not
        per function: the value at one call site never depends on the file's other calls of
        ``f``, their order, or whether a region parse kept them (:mod:`attncheck.lint.regions`
        keeps a kept function's helpers, not every caller of those helpers)."""
        return self.returns_with(f, self._call_args(f, call, env))

    def returns_with(self, f: FunctionInfo, args: dict[int, Any]) -> Any:
        """What ``f`` returns with the argument values ``args`` (by parameter index)."""
        if not self.can_inline(f.node, self._return_depth + 1):
            return None  # too deep, or recursion
        params = self._params(f)
        penv = {params[i]: v for i, v in args.items() if i < len(params)}
        self._return_depth += 1
        saved = (self.recording, self.current)
        self.recording, self.current = False, f
        try:
            return self._run_function(f, penv)
        finally:
            self.recording, self.current = saved
            self._return_depth -= 1

    def call_ref(self, ref: FuncRef, node: cst.Call, pos: list, kw: dict) -> Any:
        """The value of calling the function value ``ref`` with the argument values ``pos`` /
        ``kw`` at ``node``: a lambda's expression or a ``def``'s body run with them bound to its
        parameters (:meth:`returns_with`); in the file that defines it when another linted file
        does (the value then belongs to ``node``)."""
        pos, kw = ref.call_args(pos, kw)
        if ref.owner is not None and ref.owner is not self:
            an = ref.owner
            an._return_depth = self._return_depth
            v = an.call_ref(replace(ref, owner=None), node, pos, kw)
            # a function value of that file is not run as code of this one
            return rehome(v, an.ctx, node, opaque=(FuncRef,)) if isinstance(v, _RETURNED) else None
        fn = ref.fn
        if type(fn) is cst.Lambda:
            if not self.can_inline(fn, self._return_depth + 1):
                return None
            env = dict(ref.closure or {})
            for i, p in enumerate(positional_params(fn)):
                v = pos[i] if i < len(pos) else kw.get(p)
                if v is None:
                    env.pop(p, None)  # a parameter shadows the enclosing name
                else:
                    env[p] = v
            self._return_depth += 1
            try:
                v = self.run_body(_MaskFrame(self, env, None), fn)
            finally:
                self._return_depth -= 1
            return v if isinstance(v, _RETURNED) else None
        f = self.local_defs.get(id(fn)) if fn is not None else None
        if f is None:
            cls = ref.bound_self.cls if isinstance(ref.bound_self, InstanceRef) else None
            f = self.lookup_function(ref.name, cls)
            if f is None or (fn is not None and f.node is not fn):
                return None
        params = self._params(f)
        args = {i: v for i, v in enumerate(pos) if v is not None}
        args.update((params.index(k), v) for k, v in kw.items() if k in params and v is not None)
        v = self.returns_with(f, args)
        return v if isinstance(v, _RETURNED) else None

    @staticmethod
    def _params(f: FunctionInfo) -> list[str]:
        return f.call_params()

    def _call_args(self, f: FunctionInfo, call: cst.Call, env: dict[str, Any]) -> dict[int, Any]:
        """The known argument values of ``call`` (evaluated in ``env``) by parameter index of ``f``
        (``self`` not counted); a starred tuple of known length spreads its items, any other
        ``*args`` leaves the positions after it unknown."""
        params = self._params(f)
        args = [self.ev(a.value, env) for a in call.args]
        out = {i: v for i, v in enumerate(positional_values(call, args)) if v is not None}
        out.update((params.index(k), v) for k, v in keyword_values(call, args).items()
                   if k in params and v is not None)
        return out

    def _param_env(self, f: FunctionInfo) -> dict[str, Any]:
        env: dict[str, Any] = {}
        args = self.callsite_args.get(id(f), {})
        params = self._params(f)
        for i, p in enumerate(params):
            if i in args and args[i] is not None:
                env[p] = args[i]
        return env

    # ---- statements -----------------------------------------------------------------------
    def _run_function(self, f: FunctionInfo, env: dict[str, Any], cls_env: ClassInfo | None = None) -> Any:
        """Run ``f``'s body in ``env``; return the join of what its ``return`` statements give."""
        return self.run_body(_MaskFrame(self, env, cls_env), f.node)

    def _bind(self, target, val, tag, state: _MaskFrame, cls_env, value_node) -> None:
        if type(target) is cst.Name:
            name = target.value
            if isinstance(val, MaskVal) and val.polarity is None and (
                    val.pattern is None or None in val.pattern):
                pol = _polarity_of_name(name)  # ``valid = attention_mask.bool()``
                if pol is not None:
                    val = replace(val, polarity=pol)
            if isinstance(val, Dtype) and self.named_mask(name) is not None:
                val = None  # ``valid = valid.float()``: still the mask its name says
            if val is None:
                state.env.pop(name, None)
            else:
                state.env[name] = val
            if tag is None:
                state.tags.pop(name, None)
            else:
                state.tags[name] = tag
        elif type(target) in (cst.Tuple, cst.List):
            elems = [e.value for e in target.elements]
            if isinstance(val, IndicesVal) and val.part is None and len(elems) == 2:
                for i, e in enumerate(elems):
                    self._bind(e, IndicesVal(val.pattern, i, val.origin), None, state, cls_env, None)
                return
            vals = unpack(target.elements, val, None)
            for e, v in zip(elems, vals):
                self._bind(e, v, None, state, cls_env, None)
        elif type(target) is cst.Attribute and cls_env is not None:
            d = dotted_name(target)
            if d is not None and d.startswith("self.") and d.count(".") == 1 and val is not None:
                self._attrs(cls_env)[target.attr.value] = val
        elif type(target) is cst.Attribute:
            d = dotted_name(target)
            if d is not None and tag is not None:
                state.tags[d] = tag

    def _inplace(self, expr: cst.BaseExpression, state: _MaskFrame) -> None:
        """``m.tril_()``, ``m.masked_fill_(...)``, ``self.register_buffer("bias", ...)``."""
        if type(expr) is not cst.Call or type(expr.func) is not cst.Attribute:
            return
        meth = expr.func.attr.value
        recv = expr.func.value
        if meth == "register_buffer" and type(recv) is cst.Name and recv.value == "self":
            name_node = arg_value(expr, 0, "name")
            tensor = arg_value(expr, 1, "tensor")
            cls = self.current.cls if self.current else None
            if (cls is not None and type(name_node) is cst.SimpleString
                    and tensor is not None):
                v = self.ev(tensor, state.env)
                if v is not None:
                    self._attrs(cls)[name_node.evaluated_value] = v
            return
        if meth.endswith("_") and type(recv) is cst.Name and recv.value in state.env:
            fake = expr.with_changes(func=expr.func.with_changes(attr=cst.Name(meth[:-1])))
            v = self.ev(fake, state.env, origin=expr)
            if v is None:
                state.env.pop(recv.value, None)
            else:
                state.env[recv.value] = v

    # ---- tags (scores / probs) --------------------------------------------------------------
    def is_softmax_call(self, node: cst.CSTNode, state: _MaskFrame | None = None) -> bool:
        if type(node) is not _Call:
            return False
        func = node.func
        if type(func) is _Attribute and func.attr.value in _SOFTMAX_METHODS:
            return True
        q = self.qualname(func)
        if q in ops.SOFTMAX_OR_LOG:
            return True
        if q is not None and q.startswith("self.") and self.current is not None:
            v = self.class_attr(self.current.cls, q[5:])
            return isinstance(v, ModuleRef) and v.kind == "softmax"
        if q is not None and state is not None:
            v = state.env.get(q)
            return isinstance(v, ModuleRef) and v.kind == "softmax"
        return False

    def _is_matmul(self, node: cst.CSTNode) -> bool:
        t = type(node)
        if t is _BinaryOperation and type(node.operator) is _MatrixMultiply:
            return True
        if t is _Call:
            q = self.qualname(node.func) or ""
            if q in ops.MATMUL:
                return True
            if type(node.func) is _Attribute and node.func.attr.value in _MATMUL_METHODS:
                return True
        return False

    def qualname(self, node: cst.BaseExpression) -> str | None:
        """``ctx.qualname`` (kept per node by the file's context)."""
        return self.ctx.qualname(node)

    def data_names(self, node: cst.CSTNode) -> set[str]:
        """:func:`_data_names` of ``node``, cached per node for this analysis (do not mutate)."""
        w = self._data.get(id(node))
        if w is None:
            w = self._data[id(node)] = (node, _data_names(node, self.qualname))
        return w[1]

    def class_inits_of(self, expr: cst.BaseExpression, state: _MaskFrame) -> None:
        """What :meth:`tag_of` does besides computing the tag: :meth:`is_softmax_call` of each
        ``self.m(...)`` call runs the ``__init__`` of the current class on first look-up
        (:meth:`class_attr`), which can record call-site arguments.  For a run without recording
        (nothing reads its tags)."""
        if self.current is None or self._lineage_inited(self.current.cls):
            return
        for n in self.nodes.ops(expr):
            if type(n) is not _Call:
                continue
            func = n.func
            if type(func) is _Attribute and func.attr.value in _SOFTMAX_METHODS:
                continue
            q = self.qualname(func)
            if q is not None and q not in ops.SOFTMAX_OR_LOG and q.startswith("self."):
                self.class_attr(self.current.cls, q[5:])

    def tag_of(self, expr: cst.BaseExpression, state: _MaskFrame) -> str | None:
        has_softmax = has_mm = False
        for n in self.nodes.ops(expr):  # only calls / binary operations can be either
            if self.is_softmax_call(n, state):
                has_softmax = True
            elif self._is_matmul(n):
                has_mm = True
        if has_softmax:
            return "probs"
        if not state.tags:  # no name holds scores or probabilities yet
            return "scores" if has_mm else None
        names = self.nodes.names(expr)
        tags = {state.tags.get(n) for n in names}
        if "scores" in tags and _normalised(expr):
            return "probs"  # exp(s - max) / exp(s - max).sum(dim): a softmax written out
        if has_mm:
            return "out" if "probs" in tags else "scores"
        if "scores" in tags:
            return "scores"
        if "probs" in tags:
            return "probs"
        return None

    # ---- consumers ------------------------------------------------------------------------
    def _scan(self, expr: cst.CSTNode, state: _MaskFrame, assign_targets=None,
              returned: bool = False) -> None:
        """Find consumers inside one statement's expression."""
        self._targets = assign_targets
        if not self.recording:
            # still record call-site arguments of same-file functions (pass 1)
            if self.collecting:
                for n in self.nodes.ops(expr):
                    if type(n) is _Call:
                        self._callsite(n, state)
            return
        ops = self.nodes.ops(expr)  # _operands is empty for every other node
        self._targets = assign_targets
        self._returning = returned
        in_softmax: set[int] = set()
        self._in_matmul = in_matmul = set()
        for n in ops:
            for a in self._operands(n, state, "softmax"):
                in_softmax.update(id(x) for x in self.nodes.walk(a))
            for a in self._operands(n, state, "matmul"):
                in_matmul.update(id(x) for x in self.nodes.walk(a))
        if self.per_call:
            for n in ops:
                if type(n) is _Call:
                    self._record_call(n, state, id(n) in in_softmax)
        for n in ops:
            if type(n) is _Call:
                self._call_consumer(n, state, id(n) in in_softmax, assign_targets)
            elif type(n) is _BinaryOperation and type(n.operator) is _Add:
                self._additive(n, n.left, n.right, state, assign_targets, id(n) in in_softmax)
            elif type(n) is _BinaryOperation and type(n.operator) is cst.Multiply:
                self._multiplicative(n, state)

    def _record_call(self, call: cst.Call, state: _MaskFrame, in_softmax: bool) -> None:
        """Pass 2: record the uses in the same-file function ``call`` runs, with this call's
        argument values (by value, per call: a helper applying the masks two call sites pass is
        checked with each, not with their join); what the helper returns reaches a softmax when
        the call's result does (``scores = apply_mask(scores, m); scores.softmax(-1)``)."""
        q = self.qualname(call.func)
        f = self.callee(q, state.env) if q is not None else None
        if f is None or id(f) not in self.per_call or not self.can_inline(f.node, self._return_depth + 1):
            return
        params = self._params(f)
        penv = {params[i]: v for i, v in self._call_args(f, call, state.env).items() if i < len(params)}
        to_softmax = self._reaches_softmax(call, self._targets, state, in_softmax)
        self.recorded.add(id(f))
        saved = (self.current, self._targets, self._in_matmul, self._returning, self._result_to_softmax)
        self.current, self._result_to_softmax = f, to_softmax
        self._return_depth += 1
        try:
            self._run_function(f, penv)
        finally:
            self._return_depth -= 1
            self.current, self._targets, self._in_matmul, self._returning, self._result_to_softmax = saved

    def _callsite(self, call: cst.Call, state: _MaskFrame) -> None:
        q = self.qualname(call.func)
        f = self.callee(q, state.env) if q is not None else None
        if f is None:
            return
        slots = self.callsite_args.setdefault(id(f), {})
        for idx, v in self._call_args(f, call, state.env).items():
            slots[idx] = v if idx not in slots else _join(slots[idx], v)

    def _reaches_softmax(self, node: cst.CSTNode, targets, state, direct: bool) -> bool:
        if direct or (self._returning and self._result_to_softmax):
            return True
        names = set()
        for t in targets or ():
            if type(t) is cst.Name:
                names.add(t.value)
            elif type(t) is cst.Attribute and dotted_name(t):
                names.add(dotted_name(t))
        if not names or self.current is None:
            return False
        return self._flows_to_softmax(node, names, state)

    def _reaches_matmul(self, node: cst.CSTNode, targets, state, direct: bool) -> bool:
        if direct:
            return True
        names = {dotted_name(t) for t in targets or () if type(t) in (cst.Name, cst.Attribute)}
        names.discard(None)
        if not names or self.current is None:
            return False
        return self._flows_to_softmax(node, names, state, want="matmul")

    def _flows_to_softmax(self, node: cst.CSTNode, names: set[str], state,
                          want: str = "softmax") -> bool:
        """Does a value assigned to ``names`` reach a softmax (or, with ``want="matmul"``, a
        matmul) later in the current function?"""
        stmts = self._linear(self.current)
        start = self._stmt_index(self.current).get(id(node))
        if start is None:
            return False
        tainted = set(names)
        # toward a softmax only values count (not masks that select positions of other scores)
        names_of = self.data_names if want == "softmax" else self.nodes.names
        to_caller = want == "softmax" and self._result_to_softmax
        for s, _ in stmts[start + 1:]:
            for n in self.nodes.ops(s):  # _operands is empty for every other node
                argnodes = self._operands(n, state, want)
                if argnodes and any(names_of(a) & tainted for a in argnodes):
                    return True
            if to_caller and type(s) is cst.Return and s.value is not None \
                    and names_of(s.value) & tainted:
                return True  # returned to a caller that takes its softmax
            if type(s) in (cst.Assign, cst.AugAssign, cst.AnnAssign):
                value = s.value
                if value is None:
                    continue
                tgts = [t.target for t in s.targets] if type(s) is cst.Assign else [s.target]
                hit = bool(names_of(value) & tainted) and not self._opaque_call(value)
                for t in tgts:
                    d = dotted_name(t) if type(t) in (cst.Name, cst.Attribute) else None
                    if d is None:
                        continue
                    if hit:
                        tainted.add(d)
                    elif type(s) is cst.Assign:
                        tainted.discard(d)
        return False

    def _operands(self, n: cst.CSTNode, state, want: str) -> list:
        """The tensors a softmax (``want="softmax"``) or a matmul (``"matmul"``) consumes."""
        if want == "softmax":
            if type(n) is _BinaryOperation and _normalised(n):
                return [n.left]  # e / e.sum(dim, keepdim=True): a softmax written out
            if not self.is_softmax_call(n, state):
                return []
            out = [a.value for a in n.args[:1]]
            if type(n.func) is _Attribute:
                out.append(n.func.value)
            return out
        if not self._is_matmul(n):
            return []
        if type(n) is _BinaryOperation:
            return [n.left]
        out = [a.value for a in n.args]
        if type(n.func) is _Attribute and dotted_name(n.func) is None or (
                type(n.func) is _Attribute and not (self.qualname(n.func) or "")
                .startswith("torch.")):
            out.append(n.func.value)
        return out

    def _opaque_call(self, expr: cst.CSTNode) -> bool:
        """Whether ``expr`` calls a layer or helper (``self.layer(x)``, ``block(x)``): taint does
        not flow through those (the masked tensor is no longer the same scores)."""
        for n in self.nodes.ops(expr):
            if type(n) is not _Call or self.is_softmax_call(n):
                continue
            q = self.qualname(n.func) or ""
            if type(n.func) is _Name and not q.startswith("torch."):
                return True
            if q.startswith("self.") and q.count(".") == 1:
                v = self.class_attr(self.current.cls, q[5:]) if self.current is not None else None
                if isinstance(v, ModuleRef) and v.kind == "passthrough":
                    continue  # dropout keeps the tensor what it was
                return True
        return False

    def _linear(self, f: FunctionInfo) -> list:
        cache = getattr(self, "_lin_cache", None)
        if cache is None:
            cache = self._lin_cache = {}
        if id(f) in cache:
            return cache[id(f)]
        out: list = []
        self._linear_into(f.node.body, out)
        cache[id(f)] = out
        return out

    def _linear_into(self, node: cst.CSTNode, out: list) -> None:
        for c in self.nodes.children(node):
            t = type(c)
            if t in _NESTED_SCOPES:
                continue
            if t is cst.SimpleStatementLine:
                for s in c.body:
                    out.append((s, None))
            elif t is cst.If or t is cst.While:
                out.append((c.test, None))
                self._linear_into(c, out)
            elif _is_block_type(t):
                self._linear_into(c, out)

    def _stmt_index(self, f: FunctionInfo) -> dict[int, int]:
        """``id(node)`` → index of the first :meth:`_linear` entry of ``f`` whose
        :meth:`NodeCache.walk` holds the node."""
        cache = getattr(self, "_idx_cache", None)
        if cache is None:
            cache = self._idx_cache = {}
        idx = cache.get(id(f))
        if idx is None:
            idx = cache[id(f)] = {}
            for i, (s, _) in enumerate(self._linear(f)):
                for n in self.nodes.walk(s):
                    idx.setdefault(id(n), i)
        return idx

    def _target_tag(self, target: cst.BaseExpression | None, state) -> str | None:
        if target is None:
            return None
        return self.tag_of(target, state)

    _ATTENTION_OPS = ("scaled_dot_product_attention", "multi_head_attention_forward")

    def escapes(self, node: cst.CSTNode) -> bool:
        """Whether the value of the statement holding ``node`` may reach attention: it (or what
        is computed from its values, not from masks it selects) meets a softmax, an attention
        op, a ``return``, a store on ``self`` or a call other than a torch op later in the
        function.  Unknown structure counts as escaping; only a value that provably stays in
        comparisons, top-k and other torch ops (beam-search bookkeeping) does not."""
        f = self.current
        if f is None:
            return True
        stmts = self._linear(f)
        i = self._stmt_index(f).get(id(node))
        if i is None:
            return True
        st = stmts[i][0]
        t = type(st)
        if t in (cst.Assign, cst.AugAssign, cst.AnnAssign):
            tgts = [x.target for x in st.targets] if t is cst.Assign else [st.target]
        elif t is cst.Expr and type(st.value) is _Call and type(st.value.func) is _Attribute \
                and st.value.func.attr.value.endswith("_"):
            tgts = [st.value.func.value]  # an in-place fill
        else:
            return True
        names = {dotted_name(x) for x in tgts if type(x) in (_Name, _Attribute)}
        if None in names or not names or any(n.startswith("self.") for n in names):
            return True
        data = self.data_names
        tainted = set(names)
        for j, (s2, _) in enumerate(stmts[i:]):
            if j and type(s2) is cst.Return and s2.value is not None and data(s2.value) & tainted:
                return True
            for n in self.nodes.ops(s2):
                if type(n) is not _Call:
                    continue
                if self.is_softmax_call(n):
                    if any(data(a.value) & tainted for a in n.args[:1]) or (
                            type(n.func) is _Attribute and data(n.func.value) & tainted):
                        return True
                    continue
                q = self.qualname(n.func) or ""
                if type(n.func) is _Attribute and data(n.func.value) & tainted and not q.startswith("torch."):
                    continue  # a method of the tensor itself: its result is assigned below
                if q.startswith("torch.") and not q.endswith(self._ATTENTION_OPS):
                    continue
                if any(data(a.value) & tainted for a in n.args):
                    return True
            if j and type(s2) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and s2.value is not None:
                tg = [x.target for x in s2.targets] if type(s2) is cst.Assign else [s2.target]
                hit = bool(data(s2.value) & tainted)
                for x in tg:
                    d = dotted_name(x) if type(x) in (_Name, _Attribute) else None
                    if d is None:
                        if hit:
                            return True  # stored into a container or a subscript: unknown
                        continue
                    if hit:  # (a reassignment does not clear it: it may be another branch)
                        if d.startswith("self."):
                            return True
                        tainted.add(d)
        return False

    _NARROWING = frozenset({"to", "type", "type_as", "half", "bfloat16", "copy_", "add_", "sub_",
                            "masked_fill_", "__setitem__"})

    def stays_wide(self, node: cst.CSTNode) -> bool:
        """Whether the float32 value assigned by the statement holding ``node`` keeps float32's
        range in this function: it is only combined out of place (``scores + mask`` promotes
        float16 scores to float32), never cast (``.to(x.dtype)``, ``.type_as``, ``.half()``),
        added in place (``scores += mask`` keeps the target's dtype), stored, returned or passed
        to a call other than a torch op."""
        f = self.current
        if f is None:
            return False
        stmts = self._linear(f)
        i = self._stmt_index(f).get(id(node))
        if i is None:
            return False
        st = stmts[i][0]
        if type(st) is not cst.Assign:
            return False
        names = {dotted_name(x.target) for x in st.targets if type(x.target) is _Name}
        if not names or None in names or len(names) != len(st.targets):
            return False
        data = self.data_names
        tainted = set(names)
        for j, (s2, _) in enumerate(stmts[i:]):
            for n in self.nodes.ops(s2):
                if self.is_softmax_call(n) and (
                        any(data(a.value) & tainted for a in n.args[:1])
                        or type(n.func) is _Attribute and data(n.func.value) & tainted):
                    return True  # the masked scores reach their softmax in float32
            if type(s2) is cst.Return and s2.value is not None and data(s2.value) & tainted:
                return False
            for n in self.nodes.ops(s2):
                if type(n) is not _Call:
                    continue
                q = self.qualname(n.func) or ""
                if type(n.func) is _Attribute and n.func.attr.value in self._NARROWING and (
                        data(n.func.value) & tainted or any(data(a.value) & tainted for a in n.args)):
                    return False
                if any(data(a.value) & tainted for a in n.args) and not q.startswith("torch.") \
                        and not self.is_softmax_call(n):
                    return False
            if type(s2) is cst.AugAssign and data(s2.value) & tainted:
                tg = dotted_name(s2.target) if type(s2.target) in (_Name, _Attribute) else None
                if tg not in tainted:
                    return False  # in place: the target's dtype, maybe float16
            if j and type(s2) in (cst.Assign, cst.AnnAssign) and s2.value is not None \
                    and data(s2.value) & tainted:
                tg = [x.target for x in s2.targets] if type(s2) is cst.Assign else [s2.target]
                for x in tg:
                    d = dotted_name(x) if type(x) is _Name else None
                    if d is None:
                        return False  # stored on self, into a container or a slice
                    tainted.add(d)
        return False  # never reaches a softmax here: the caller may narrow it

    def _record(self, **kw) -> None:
        kw.setdefault("function", self.current.qual if self.current else "<module>")
        fill = kw.get("fill")
        if fill is not None and fill.overflows_fp16:
            kw["escapes"] = self.escapes(kw["call"])
        if kw.get("target_tag") == "probs":
            targets = self._targets
            kw["reaches_matmul"] = self._reaches_matmul(
                kw["call"], targets, None, id(kw["call"]) in getattr(self, "_in_matmul", ()))
        self.result.uses.append(MaskUse(**kw))

    def _as_mask(self, node: cst.BaseExpression | None, state) -> MaskVal | None:
        if node is None:
            return None
        v = self.ev(node, state.env)
        if isinstance(v, MaskVal):
            return v
        name = dotted_name(node)
        if name is not None:
            pol = _polarity_of_name(name)
            if pol is not None:
                return MaskVal(polarity=pol)
        return None

    def _fill(self, node: cst.BaseExpression | None, state) -> Fill | None:
        if node is None:
            return None
        v = self.ev(node, state.env)
        return v if isinstance(v, Fill) else None

    def _call_consumer(self, call: cst.Call, state, in_softmax: bool, targets) -> None:
        func = call.func
        q = self.qualname(func) or ""
        meth = func.attr.value if type(func) is cst.Attribute else None
        # x.masked_fill(m, v) / torch.masked_fill(x, m, v)
        if meth in ("masked_fill", "masked_fill_") or q == "torch.masked_fill":
            if q == "torch.masked_fill":
                base, mnode, vnode = arg_value(call, 0), arg_value(call, 1, "mask"), arg_value(call, 2, "value")
            else:
                base, mnode, vnode = func.value, arg_value(call, 0, "mask"), arg_value(call, 1, "value")
            if base is None or mnode is None or vnode is None:
                return
            bv = self.ev(base, state.env)
            if isinstance(bv, MaskVal):
                return  # building a mask, not applying one
            fill = self._fill(vnode, state)
            tgts = targets if meth != "masked_fill_" else [base]
            self._record(consumer="masked_fill", convention="true_blocked", node=mnode, call=call,
                         mask=self._as_mask(mnode, state), fill=fill, target=base,
                         target_tag=self._target_tag(base, state),
                         wide=isinstance(bv, Dtype) and bv.wide,
                         reaches_softmax=self._reaches_softmax(call, tgts, state, in_softmax))
            return
        if q == "torch.where":
            c, a, b = arg_value(call, 0, "condition"), arg_value(call, 1, "input"), arg_value(call, 2, "other")
            if c is None or a is None or b is None:
                return
            fa, fb = self._fill(a, state), self._fill(b, state)
            if (fa is None) == (fb is None):
                return
            tv = self.ev(a if fb is not None else b, state.env)
            if isinstance(tv, MaskVal):
                return
            if fb is not None:
                conv, fill, target = "true_kept", fb, a
            else:
                conv, fill, target = "true_blocked", fa, b
            self._record(consumer="where", convention=conv, node=c, call=call,
                         mask=self._as_mask(c, state), fill=fill, target=target,
                         target_tag=self._target_tag(target, state),
                         wide=isinstance(tv, Dtype) and tv.wide,
                         reaches_softmax=self._reaches_softmax(call, targets, state, in_softmax))
            return
        kop = ops.kernel(q) if q.endswith("scaled_dot_product_attention") or "." in q \
            or type(func) is _Name else None
        if kop is not None and kop.attn_mask is not None:
            # SDPA's ``attn_mask`` (bool: True = attend; float: added to the scores) and
            # xformers' ``attn_bias`` (a tensor added to the scores, xformers docs)
            mnode = kop.attn_mask.of(call)
            if mnode is None:
                return
            mnode = _given_branch(mnode)
            m = self._as_mask(mnode, state)
            conv = None
            if m is not None:
                if m.dtype == "bool":
                    conv = "true_kept" if kop.kind != "xformers" else None
                elif m.dtype in ("float", "int") or (m.pattern and "N" in m.pattern):
                    conv = "additive"
            self._record(consumer="sdpa", convention=conv, node=mnode, call=call, mask=m,
                         fill=None, target=None, target_tag=None, reaches_softmax=True,
                         keyword=kop.attn_mask.kw)
            return
        is_mha = q.endswith("multi_head_attention_forward")
        if not is_mha:
            if q.startswith("self.") and q.count(".") == 1 and self.current is not None:
                v = self.class_attr(self.current.cls, q[5:])
                is_mha = isinstance(v, ModuleRef) and v.kind == "mha"
            elif type(func) is cst.Name:
                v = state.env.get(func.value)
                is_mha = isinstance(v, ModuleRef) and v.kind == "mha"
        if is_mha:
            for a in call.args:
                if a.keyword is None or a.keyword.value not in ops.MHA_MASK_KWARGS:
                    continue
                mnode = _given_branch(a.value)
                m = self._as_mask(mnode, state)
                conv = None
                if m is not None:
                    if m.dtype == "bool":
                        conv = "true_blocked"
                    elif m.dtype in ("float", "int") or (m.pattern and "N" in m.pattern):
                        conv = "additive"
                self._record(consumer="mha", convention=conv, node=mnode, call=call, mask=m,
                             fill=None, target=None, target_tag=None, reaches_softmax=True,
                             keyword=a.keyword.value)

    def _additive(self, node, left, right, state, targets, in_softmax: bool = False) -> None:
        lv, rv = self.ev(left, state.env), self.ev(right, state.env)
        if isinstance(lv, MaskVal) and isinstance(rv, MaskVal):
            return
        if isinstance(rv, MaskVal):
            mnode, m, target = right, rv, left
        elif isinstance(lv, MaskVal):
            mnode, m, target = left, lv, right
        else:
            return
        if isinstance(self.ev(target, state.env), (Fill, IndexVal)) or isinstance(
                target, (cst.Integer, cst.Float)):
            return
        conv = "additive" if m.dtype != "bool" else None
        self._record(consumer="additive", convention=conv, node=mnode, call=node, mask=m,
                     fill=m.fill, target=target, target_tag=self._target_tag(target, state),
                     reaches_softmax=self._reaches_softmax(node, targets, state, in_softmax))

    def _multiplicative(self, node, state) -> None:
        """``probs * keep``: a 0/1 or boolean mask multiplied into softmax probabilities (recorded
        only on probabilities; a product with scores is a scale, not a mask)."""
        lv, rv = self.ev(node.left, state.env), self.ev(node.right, state.env)
        if isinstance(lv, MaskVal) == isinstance(rv, MaskVal):
            return
        mnode, m, target = (node.right, rv, node.left) if isinstance(rv, MaskVal) else \
            (node.left, lv, node.right)
        if m.fill is not None or (m.pattern and "N" in m.pattern):
            return  # an additive mask scaled, not a 0/1 keep mask
        tag = self._target_tag(target, state)
        if tag != "probs":
            return
        self._record(consumer="multiply", convention="true_kept", node=mnode, call=node, mask=m,
                     fill=None, target=target, target_tag=tag, reaches_softmax=False)

    def _index_assign(self, target: cst.Subscript, value, state) -> None:
        if not self.recording:
            return
        idx = [e.slice.value for e in target.slice if type(e.slice) is cst.Index]
        vals = [self.ev(i, state.env) for i in idx]
        pattern = None
        origin = None
        ind = [v for v in vals if isinstance(v, IndicesVal)]
        if len(ind) == 2 and {v.part for v in ind} == {0, 1} and ind[0].pattern == ind[1].pattern:
            pattern, origin = ind[0].pattern, ind[0].origin
        elif len(vals) == 1 and isinstance(vals[0], MaskVal):
            pattern, origin = vals[0].pattern, vals[0].origin
            if vals[0].dtype not in ("bool", None):
                return
        else:
            return
        fill = self._fill(value, state)
        self._record(consumer="index_assign", convention="true_blocked", node=target,
                     call=target, mask=MaskVal(pattern=pattern, dtype="bool", origin=origin),
                     fill=fill, target=target.value,
                     target_tag=self._target_tag(target.value, state),
                     reaches_softmax=self._reaches_softmax(
                         target, [target.value], state, False))

    # ---- expressions ----------------------------------------------------------------------
    def ev(self, node: cst.BaseExpression, env: dict[str, Any], origin=None) -> Any:
        try:
            return self._ev(node, env, origin or node)
        except RecursionError:  # pragma: no cover - pathological nesting
            return None

    def _ev(self, node, env, origin) -> Any:
        t = type(node)  # exact types: libcst's node classes are leaves (and slow ABCs)
        if t is _Name:
            if node.value in env:
                return env[node.value]
            if node.value == "self" and self.current is not None and self.current.cls is not None:
                return InstanceRef(self.current.cls)
            if node.value in ("True", "False"):
                return Fill("literal", 1.0 if node.value == "True" else 0.0, node, is_bool=True)
            if node.value in self.globals:
                return self.globals[node.value]
            ref = self.function_value(node, env)
            return ref if ref is not None else self.named_mask(node.value)
        if t is _Attribute:
            return self._ev_attribute(node, env)
        if t is _Call:
            return self._ev_call(node, env, origin)
        if t is cst.Integer or t is cst.Float:
            return Fill("literal", num_of(node), node)
        if t is cst.UnaryOperation:
            inner = self._ev(node.expression, env, origin)
            top = type(node.operator)
            if top is cst.Minus:
                if isinstance(inner, Fill):
                    return replace(inner.scaled(-1.0), node=node)
                if isinstance(inner, MaskVal):
                    return inner.with_pattern(p_scale(inner.pattern, -1.0))
                return None
            if top is cst.BitInvert and isinstance(inner, MaskVal):
                return negated(inner)
            if top is cst.Not:
                return None
            return inner if top is cst.Plus else None
        if t is cst.Subscript:
            return self._ev_subscript(node, env)
        if t is _BinaryOperation:
            a, b = self._ev(node.left, env, origin), self._ev(node.right, env, origin)
            shifted = self._index_shift(a, node.operator, b, node, env)
            if shifted is not None:
                return shifted
            v = self._binop(a, node.operator, b, node)
            if v is None and type(node.operator) in (cst.Add, cst.Subtract):
                return self._int_sum(node, env)
            return v
        if t is cst.Comparison:
            return self._compare(node, env)
        if t is cst.Tuple or t is cst.List:
            items: list = []
            for e in node.elements:
                v = self._ev(e.value, env, origin)
                if type(e) is not cst.StarredElement:
                    items.append(v)
                elif isinstance(v, Tup) and not v.star_unknown:
                    items.extend(v.items)
                else:
                    return Tup(tuple(items), star_unknown=True)
            return Tup(tuple(items))
        if t is cst.ListComp or t is cst.GeneratorExp:
            return _MaskFrame(self, env, None).eval_comp(node)
        if t is cst.Lambda:
            return FuncRef("<lambda>", fn=node, closure=env)
        if t is cst.IfExp:
            # ``mask if is_causal else None``: ``None`` passes no mask at all, so it adds nothing to
            # the join and the mask seen is the other branch's
            if _is_none(node.orelse) or _is_none(node.body):
                return self._ev(_given_branch(node), env, origin)
            return _join(self._ev(node.body, env, origin), self._ev(node.orelse, env, origin))
        return None

    def _ev_attribute(self, node: cst.Attribute, env) -> Any:
        q = self.qualname(node)
        attr = node.attr.value
        if q in ("math.inf", "torch.inf", "numpy.inf", "np.inf"):
            return Fill("pos_inf", None, node)
        if q in _FLOAT_DTYPES:
            return Dtype(frozenset({q}))
        if attr == "dtype":
            base = self._ev(node.value, env, node)
            return base if isinstance(base, Dtype) else None
        if attr in ("min", "max") and type(node.value) is cst.Call:
            fq = self.qualname(node.value.func) or ""
            if fq.endswith("finfo"):
                return Fill("finfo_min" if attr == "min" else "finfo_max", None, node)
        if q is not None and q.startswith("self.") and q.count(".") == 1 and self.current:
            v = self.class_attr(self.current.cls, attr)
            if isinstance(v, (MaskVal, Fill)):
                return v
            f = self.method(self.current.cls, attr)  # a method as a value: ``fn = self.m``
            return FuncRef(attr, InstanceRef(f.cls), fn=f.node) if f is not None else None
        inner = None
        if attr in ("T", "mT"):
            inner = self._ev(node.value, env, node)
            if isinstance(inner, MaskVal):
                return inner.with_pattern(p_transpose(inner.pattern))
        if attr == "data":
            return self._ev(node.value, env, node)
        if type(node.value) is _Name and node.value.value != "self":
            base = env.get(node.value.value)
            if isinstance(base, InstanceRef):  # module.<attr> of a module passed in
                v = self.class_attr(base.cls, attr)
                return v if isinstance(v, (MaskVal, Fill)) else None
        return self.function_value(node, env)  # ``utils.helper`` as a value

    def _wide_dtype(self, node: cst.BaseExpression | None, env) -> bool:
        """Whether a ``dtype=`` argument is float32's range or wider: named (``torch.float32``)
        or tracked (``q.dtype`` after ``q = q.float()``)."""
        if node is None:
            return False
        v = self._ev(node, env, node)
        return isinstance(v, Dtype) and v.wide

    def _cast(self, node: cst.Call, meth: str, recv: Any, env, origin) -> Dtype | None:
        """The dtype of ``recv.<meth>(...)`` for a tensor whose mask contents are not tracked:
        ``.float()``/``.half()``/``.bfloat16()``/``.double()``, ``.to(dtype)``,
        ``.to(other)``/``.type_as(other)`` of a tracked tensor, and shape methods of a tracked
        one (``view``, ``transpose``, ``masked_fill``) that keep its dtype."""
        if meth in _CAST_METHODS and not node.args:
            return Dtype(frozenset({_CAST_METHODS[meth]}))
        if meth in ("to", "type", "type_as"):
            a = arg_value(node, 0, "dtype" if meth != "type_as" else "other")
            v = self._ev(a, env, origin) if a is not None else None
            return v if isinstance(v, Dtype) else None
        if meth in _SAME_DTYPE_METHODS and isinstance(recv, Dtype):
            return recv
        return None

    def _diagonal(self, dnode: cst.BaseExpression | None, m: MaskVal, env) -> int | None:
        """The ``diagonal`` of ``tril``/``triu`` on ``m``, relative to the diagonal its
        consumers read: an integer, or ``cols - rows + c`` where ``m`` was created as a
        ``(rows, cols)`` tensor — with a KV cache the L_q queries are the last of L_k keys, so
        query ``r`` sits on key ``r + L_k - L_q`` (``torch.ones(i, j).triu(j - i + 1)`` blocks
        the future of each query as ``triu(1)`` does on a square mask)."""
        if dnode is None:
            return 0
        d = int_of(dnode)
        if d is not None:
            return d
        lin = _linear_terms(dnode, self._text, env)
        if lin is not None and not lin[0]:
            return lin[1]  # a local holding an integer: ``off = 1``
        if lin is None or type(m.origin) is not _Call:
            return None
        size = _size_args(m.origin, self.qualname(m.origin.func) or "")
        if size is None or len(size) < 2:
            return None
        rows = _linear_terms(size[-2], self._text, env)
        cols = _linear_terms(size[-1], self._text, env)
        if rows is None or cols is None:
            return None
        offset = dict(cols[0])
        for k, v in rows[0].items():
            offset[k] = offset.get(k, 0) - v
        offset = {k: v for k, v in offset.items() if v}
        if not offset or lin[0] != offset:
            return None
        return lin[1] - (cols[1] - rows[1])

    def _text(self, n: cst.CSTNode) -> str:
        """:meth:`code` of ``n`` without whitespace (a term's key in :func:`_linear_terms`)."""
        if type(n) is _Name and not n.lpar:
            return n.value  # a name's code is its value
        w = self._texts.get(id(n))
        if w is None:
            w = self._texts[id(n)] = (n, "".join(self.code(n).split()))
        return w[1]

    def code(self, n: cst.CSTNode) -> str:
        """The source code of ``n``, generated once per node for this analysis."""
        w = self._code.get(id(n))
        if w is None:
            w = self._code[id(n)] = (n, self.ctx.module.code_for_node(n))
        return w[1]

    def _index_shift(self, a, op, b, node: cst.BinaryOperation, env) -> IndexVal | None:
        """An index plus or minus integer terms that are not literals: ``arange(q_len)[:, None] +
        (kv_len - q_len)`` (the terms are kept symbolically, :class:`IndexVal`); ``None`` for
        anything else (literal shifts are :meth:`_binop`'s)."""
        if type(op) not in (cst.Add, cst.Subtract):
            return None
        if isinstance(a, IndexVal) and not isinstance(b, (IndexVal, Fill)):
            idx, other, sign = a, node.right, 1 if type(op) is cst.Add else -1
        elif isinstance(b, IndexVal) and not isinstance(a, (IndexVal, Fill)) and type(op) is cst.Add:
            idx, other, sign = b, node.left, 1
        else:
            return None
        lin = _linear_terms(other, self._text, env)
        if lin is None or idx.offset is None:
            return replace(idx, offset=None)
        return replace(idx, offset=idx.offset + sign * lin[1], sym=_add_terms(idx.sym, lin[0], sign))

    def _arange(self, node: cst.Call, env) -> IndexVal:
        """``torch.arange(end)`` / ``arange(start, end)``: a 1-D index with ``start`` as its offset
        and ``end - start`` as its size (integer terms, :func:`_linear_terms`)."""
        pos = [a.value for a in node.args if a.keyword is None and not a.star]
        start = pos[0] if len(pos) >= 2 else kwarg(node, "start")
        end = pos[1] if len(pos) >= 2 else pos[0] if pos else kwarg(node, "end")
        step = pos[2] if len(pos) >= 3 else kwarg(node, "step")
        if step is not None and int_of(step) != 1:
            return IndexVal("vec", None)
        lo = ({}, 0) if start is None else _linear_terms(start, self._text, env)
        hi = _linear_terms(end, self._text, env) if end is not None else None
        if lo is None:
            return IndexVal("vec", None)
        size = None if hi is None else _add_terms(_add_terms((("", hi[1] - lo[1]),), hi[0]), lo[0], -1)
        # a symbolic start (``arange(past, past + L)``) is a symbolic offset
        return IndexVal("vec", lo[1], size=size, sym=_add_terms((), lo[0]))

    def _int_sum(self, node: cst.BinaryOperation, env) -> IntSum | None:
        """An integer sum of sizes (``kv_len - q_len + 1``) as an :class:`IntSum`; ``None`` when a
        term may be anything but an integer: a name that holds a mask value or whose name says it
        is a mask, a float literal."""
        for n in _leaves(node):  # before the terms' source text is generated
            if type(n) is _Name and n.value not in env and self.named_mask(n.value) is not None:
                return None
            if type(n) is _Call and not _size_call(n):
                return None  # a tensor method (``m.unsqueeze(1) - m.unsqueeze(2)``) is no size
        lin = _linear_terms(node, self._text, env)
        if lin is None:
            return None
        return IntSum(tuple(sorted(lin[0].items())), lin[1])

    def _ev_subscript(self, node: cst.Subscript, env) -> Any:
        base = self._ev(node.value, env, node)
        elems = [e.slice for e in node.slice]
        if isinstance(base, Tup) and len(elems) == 1 and type(elems[0]) is cst.Index:
            i = int_of(elems[0].value)
            if i is None or base.star_unknown or not -len(base.items) <= i < len(base.items):
                return None
            return base.items[i]
        if isinstance(base, IndicesVal) and base.part is None and len(elems) == 1:
            i = int_of(elems[0].value) if type(elems[0]) is cst.Index else None
            if i in (0, 1):
                return IndicesVal(base.pattern, i, base.origin)
            return None
        if isinstance(base, IndexVal):
            kinds = []
            for e in elems:
                if type(e) is cst.Slice:
                    kinds.append(":")
                elif type(e.value) is cst.Name and e.value.value == "None":
                    kinds.append("N")
                else:
                    return None
            if kinds == [":", "N"]:
                return replace(base, axis="row")
            if kinds in (["N", ":"], ["N"]):
                return replace(base, axis="col")
            return None
        if isinstance(base, MaskVal):
            plain = True
            for e in elems:
                if type(e) is cst.Slice:
                    if e.step is not None:
                        return None
                    continue
                v = e.value
                if type(v) is cst.Ellipsis or (type(v) is cst.Name and v.value == "None"):
                    continue
                plain = False
            if plain and len(elems) >= 2 and type(elems[-1]) is cst.Slice \
                    and type(elems[-2]) is cst.Index and type(elems[-2].value) is cst.Name \
                    and elems[-2].value.value == "None":
                return key_layout(base)  # m[:, None, None, :]: (B, 1, 1, L_k)
            if plain or (len(elems) >= 2 and all(type(e) is cst.Slice for e in elems[-2:])):
                return base
            return base.with_pattern(None)
        return None

    def _ev_call(self, node: cst.Call, env, origin) -> Any:
        func = node.func
        q = self.qualname(func) or ""
        meth = func.attr.value if type(func) is cst.Attribute else None
        recv = None
        if meth is not None and not q.startswith(("torch.", "math.", "numpy.")):
            recv = self._ev(func.value, env, origin)
        # --- fills
        if q in ("float",) and node.args:
            a = node.args[0].value
            if type(a) is cst.SimpleString:
                s = a.evaluated_value.strip().lower()
                try:
                    v = float(s)
                except ValueError:
                    return None
                if math.isinf(v):
                    return Fill("neg_inf" if v < 0 else "pos_inf", None, node)
                return Fill("literal", v, node)
            inner = self._ev(a, env, origin)
            return inner if isinstance(inner, Fill) else None
        shape0 = arg_value(node, 0, "size")
        scalar_shape = type(shape0) in (cst.List, cst.Tuple) and not shape0.elements
        if scalar_shape and q in ("torch.zeros", "torch.ones"):  # torch.zeros(()) is a scalar
            return Fill("literal", 0.0 if q == "torch.zeros" else 1.0, node)
        if q in ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor") or meth == "new_tensor" \
                or (q == "torch.full" and scalar_shape):
            a = arg_value(node, 1, "fill_value") if q == "torch.full" else arg_value(node, 0, "data")
            inner = self._ev(a, env, origin) if a is not None else None
            if not isinstance(inner, Fill):
                return None
            return replace(inner, wide=True) if self._wide_dtype(kwarg(node, "dtype"), env) \
                else inner
        # --- functions, by value: local defs, lambdas, partials, functions passed in, helpers of
        # this file and of other linted files
        ref = self.resolve_callee(_MaskFrame(self, env, None), func) \
            if type(func) in _CALLEE_EXPRS else None
        # ``U.f(...)`` / ``pkg.mod.f(...)``; PyTorch and the op catalog are never another
        # linted file's function (:meth:`FileContext.imported_function`)
        if not isinstance(ref, FuncRef) and "." in q and not is_library_name(q):
            found = self.imported(func, env)
            ref = FuncRef(found[1].name, fn=found[1].node, owner=found[0]) if found else None
        if isinstance(ref, FuncRef) or q in PARTIAL or (q in _SEQUENCE_BUILTINS and type(func) is _Name
                                                        and func.value not in env):
            args = [self._ev(a.value, env, origin) for a in node.args]
            pos, kw = positional_values(node, args), keyword_values(node, args)
            if isinstance(ref, FuncRef):
                return self.call_ref(ref, node, pos, kw)
            if q in PARTIAL:
                return pos[0].partial(pos[1:], kw) if pos and isinstance(pos[0], FuncRef) else None
            if q == "map" and len(pos) == 2 and len(node.args) == 2:
                return _MaskFrame(self, env, None).map_values(pos[0], pos[1], node)
            if q == "zip" and pos and len(pos) == len(node.args):
                return zip_values(pos, None)
            if len(pos) == 1 and len(node.args) == 1:  # tuple(xs) / list(xs)
                return pos[0] if isinstance(pos[0], (Tup, Many)) else None
            return None
        if q.startswith("self.") and q.count(".") == 1 and self.current is not None:
            v = self.class_attr(self.current.cls, q[5:])
            if isinstance(v, ModuleRef):
                return None
            f = self.method(self.current.cls, q[5:])
            if f is not None:
                v = self.return_value(f, node, env)
                return v if isinstance(v, (MaskVal, Fill, IndexVal)) else None
            return None
        # --- modules
        mod = ops.MODULES.get(q)
        if mod is not None and mod.family in ("mha", "softmax", "dropout", "identity"):
            return ModuleRef(mod.family if mod.family in ("mha", "softmax") else "passthrough")
        if q.endswith("generate_square_subsequent_mask"):
            return MaskVal(("Z", "Z", "N"), "float", Fill("neg_inf"), None, node)
        # --- constructors
        if q in ("torch.ones", "torch.ones_like", "torch.zeros", "torch.zeros_like",
                 "torch.empty", "torch.full", "torch.full_like") or meth in (
                "new_ones", "new_zeros", "new_full") and recv is None:
            dt = _dtype_of(kwarg(node, "dtype"), self.ctx)
            if q.endswith("_like") and dt is None:
                src = self._ev(arg_value(node, 0), env, origin) if arg_value(node, 0) is not None else None
                dt = src.dtype if isinstance(src, MaskVal) else None
            if q == "torch.empty":
                return None
            default = "float" if q.startswith("torch.") and not q.endswith("_like") else None
            if "ones" in (q + (meth or "")):
                return MaskVal(ALL_P, dt or default, None, None, node)
            if "zeros" in (q + (meth or "")):
                return MaskVal(ALL_Z, dt or default, None, None, node)
            fv = arg_value(node, 1, "fill_value")
            f = self._ev(fv, env, origin) if fv is not None else None
            if not isinstance(f, Fill):
                return None
            if f.overflows_fp16 and self.recording:
                self.result.fill_sites.append(FillSite(f, f.node or fv, "full",
                                                       wide=self._wide_dtype(kwarg(node, "dtype"), env),
                                                       escapes=self.escapes(node)))
            if dt is None:
                # a literal written as an integer fills an integer tensor (torch.full infers the
                # dtype from fill_value); an attribute (``self.p``) or an expression is not read
                text = getattr(fv, "value", None)
                dt = "bool" if f.is_bool else ("float" if f.kind != "literal" or isinstance(
                    fv, cst.Float) or not isinstance(text, str) or "." in text else "int")
            r = f.region
            return MaskVal((r, r, r) if r else None, dt, f if r == "N" else None, None, node,
                           unit=r != "P" or dt == "bool" or f.value == 1.0)
        if q == "torch.arange":
            return self._arange(node, env)
        if q in ("torch.triu_indices", "torch.tril_indices"):
            off = arg_value(node, 2, "offset")
            d = 0 if off is None else int_of(off)
            p = p_triu(ALL_P, d) if q.endswith("triu_indices") else p_tril(ALL_P, d)
            return IndicesVal(p, None, node) if d is not None else None
        if q in ("torch.tril", "torch.triu"):
            x = arg_value(node, 0, "input")
            src = self._ev(x, env, origin) if x is not None else None
            if not isinstance(src, MaskVal):
                return None
            d = self._diagonal(arg_value(node, 1, "diagonal"), src, env)
            p = p_tril(src.pattern, d) if q == "torch.tril" else p_triu(src.pattern, d)
            return replace(src, pattern=p, origin=node)
        fop = ops.FUNCTIONS.get(q)
        if fop is not None and fop.family == "logical" and fop.kind == "not":
            src = self._ev(arg_value(node, 0), env, origin) if node.args else None
            return negated(src) if isinstance(src, MaskVal) else None
        if fop is not None and fop.family in ("logical", "pointwise") and fop.other is not None:
            if len(node.args) < 2:
                return None
            a, b = self._ev(node.args[0].value, env, origin), self._ev(node.args[1].value, env, origin)
            op = _BINARY.get(fop.kind)
            if op is None:
                return None
            return self._binop(a, op, b, node)
        if q == "torch.where":
            c = self._ev(arg_value(node, 0, "condition"), env, origin) if node.args else None
            a = arg_value(node, 1, "input")
            b = arg_value(node, 2, "other")
            if not isinstance(c, MaskVal) or a is None or b is None:
                return None
            fa, fb = self._ev(a, env, origin), self._ev(b, env, origin)
            if isinstance(fa, Fill) and isinstance(fb, Fill):
                fill = fa if fa.region == "N" else fb if fb.region == "N" else None
                if fill is not None and fill.overflows_fp16 and self.recording:
                    # torch.where of two Python scalars has the default dtype, float32 (PyTorch
                    # type promotion): safe while only out-of-place ops promote it onwards; of
                    # 0-dim tensors of a float32-range dtype, that dtype
                    self.result.fill_sites.append(FillSite(fill, fill.node or node, "additive",
                                                           wide=fill.wide or self.stays_wide(node),
                                                           escapes=self.escapes(node)))
                dt = "bool" if fa.is_bool and fb.is_bool else "float"
                unit = all(x.region != "P" or x.value == 1.0 for x in (fa, fb))
                # polarity says what the non-zero entries are: torch.where(keep, 0, -1e9) is
                # non-zero (blocking) where keep is False
                pol = _flip(c.polarity) if fa.region == "Z" and fb.region not in ("Z", None) \
                    else c.polarity
                return _same_axes(MaskVal(p_where(c.pattern, fa.region, fb.region), dt, fill,
                                          pol, c.origin or origin, c.repeated, unit=unit), c)
            return None
        if fop is not None and fop.family == "einops" and fop.kind == "rearrange":
            return self._rearrange(node, env, origin)
        if q.endswith("functional.pad") or q == "torch.nn.functional.pad":
            src = self._ev(arg_value(node, 0), env, origin) if node.args else None
            if isinstance(src, MaskVal) and src.pattern == ALL_P:
                return MaskVal(None, src.dtype, None, "keep", origin)
            return None
        if meth is None:
            return None
        if recv is None or isinstance(recv, Dtype):
            return self._cast(node, meth, recv, env, origin)
        if meth in ops.COMPARE_METHODS and len(node.args) == 1 and node.args[0].keyword is None \
                and isinstance(recv, (MaskVal, IndexVal)):
            other = self._ev(node.args[0].value, env, origin)
            return self._compare_vals(recv, ops.COMPARE_METHODS[meth], other, node, node.args[0].value)
        if isinstance(recv, ModuleRef) and meth in ("eval", "train", "to", "cuda", "cpu", "half",
                                                    "float", "requires_grad_"):
            return recv
        # --- methods on a mask value
        if isinstance(recv, IndexVal):
            if meth == "unsqueeze":
                d = int_of(arg_value(node, 0, "dim"))
                if d in (-1, 1):
                    return replace(recv, axis="row")
                if d in (0, -2):
                    return replace(recv, axis="col")
            if meth in ("view", "reshape") and len(node.args) == 2:
                a, b = int_of(node.args[0].value), int_of(node.args[1].value)
                if b == 1:
                    return replace(recv, axis="row")
                if a == 1:
                    return replace(recv, axis="col")
            if meth in ("to", "long", "int", "float", "cuda", "cpu"):
                return recv
            return None
        if not isinstance(recv, MaskVal):
            return None
        m = recv
        if meth in ("tril", "triu", "tril_", "triu_"):
            d = self._diagonal(arg_value(node, 0, "diagonal"), m, env)
            p = p_tril(m.pattern, d) if meth.startswith("tril") else p_triu(m.pattern, d)
            return replace(m, pattern=p, origin=node if origin is node or not meth.endswith("_")
                           else origin)
        if meth in _PRESERVE_METHODS:
            if meth == "repeat" and node.args and int_of(node.args[0].value) != 1:
                return replace(m, repeated=True)
            if self._query_axis_added(node, meth):
                return key_layout(m)
            return m
        if meth in ("transpose", "swapaxes") and len(node.args) == 2:
            dims = {int_of(node.args[0].value), int_of(node.args[1].value)}
            return m.with_pattern(p_transpose(m.pattern)) if dims == {-1, -2} else m.with_pattern(None)
        if meth in ("t", "mT"):
            return m.with_pattern(p_transpose(m.pattern))
        if meth in ops.FLOAT_CASTS or meth in ops.INT_CASTS or meth == "type_as" \
                or meth == "bool" and m.key_only:
            m = m.as_numbers()  # a cast: the mask held numbers (or is about to)
        if meth == "bool":
            return replace(m, pattern=p_truthy(m.pattern), dtype="bool")
        if meth in ops.FLOAT_CASTS:
            return replace(m, dtype="float")
        if meth in ops.INT_CASTS:
            return replace(m, dtype="int")
        if meth in ("to", "type", "type_as"):
            a = arg_value(node, 0, "dtype")
            text = self.code(a) if a is not None else ""
            dt = _dtype_of(a, self.ctx) if a is not None else None
            if meth == "type_as":
                return replace(m, dtype="float")
            if dt == "bool":
                return replace(m.as_numbers() if m.key_only else m, pattern=p_truthy(m.pattern), dtype="bool")
            if dt is not None:
                return replace(m.as_numbers(), dtype=dt)
            if "device" in text or a is None:
                return m
            if "dtype" in text:
                return replace(m.as_numbers(), dtype="float")
            return m
        if meth == "logical_not":
            return negated(m)
        mop = ops.METHODS.get(meth)
        if mop is not None and mop.family in ("logical", "pointwise") and mop.other is not None \
                and not mop.inplace and mop.kind in _BINARY:
            other = self._ev(arg_value(node, 0), env, origin) if node.args else None
            return self._binop(m, _BINARY[mop.kind], other, node)
        if meth in ("masked_fill", "masked_fill_"):
            mm = self._ev(arg_value(node, 0, "mask"), env, origin) if node.args else None
            fnode = arg_value(node, 1, "value")
            f = self._ev(fnode, env, origin) if fnode is not None else None
            if not isinstance(f, Fill):
                return m.with_pattern(None)
            if f.overflows_fp16 and self.recording:
                self.result.fill_sites.append(FillSite(f, f.node or fnode, "masked_fill",
                                                       func.value, escapes=self.escapes(node)))
            mp = mm.pattern if isinstance(mm, MaskVal) else None
            region = f.region
            if m.dtype == "bool" and region is not None:
                region = "Z" if region == "Z" else "P"  # the value is cast to the tensor's dtype
            fill = f if region == "N" else m.fill
            dt = m.dtype
            pol = m.polarity or (mm.polarity if isinstance(mm, MaskVal) else None)
            unit = m.unit and (region != "P" or dt == "bool" or f.value == 1.0)
            weak = f if f.ineffective and dt != "bool" and f.node is not None else m.weak_fill
            return MaskVal(p_masked_fill(m.pattern, mp, region), dt, fill, pol,
                           (mm.origin if isinstance(mm, MaskVal) and mm.origin else m.origin),
                           m.repeated, unit=unit, weak_fill=weak)
        if meth in ("unfold", "flatten"):
            return m.with_pattern(None)
        if meth in ("flip", "roll", "sum", "cumsum", "any", "all", "nonzero", "float_power"):
            return None
        return None

    def _rearrange(self, node: cst.Call, env, origin) -> Any:
        """``einops.rearrange(m, 'b j -> b 1 1 j')``: a key padding layout when the output's
        second-to-last axis is a literal 1 and its last is the input's last; the mask itself when
        the last two axes stay as they are; unknown otherwise (axes grouped or moved)."""
        x, pattern = arg_value(node, 0, "tensor"), arg_value(node, 1, "pattern")
        if x is None or type(pattern) is not cst.SimpleString:
            return None
        m = self._ev(x, env, origin)
        text = pattern.evaluated_value
        if not isinstance(m, MaskVal) or not isinstance(text, str) or text.count("->") != 1:
            return None
        lhs, rhs = (side.split() for side in text.split("->"))
        if len(lhs) < 2 or len(rhs) < 2 or "(" in text or "..." in lhs[-2:] + rhs[-2:]:
            return None
        if rhs[-2] == "1" and rhs[-1] == lhs[-1] != "1":
            return key_layout(m)
        return m if rhs[-2:] == lhs[-2:] else None

    @staticmethod
    def _query_axis_added(node: cst.Call, meth: str) -> bool:
        """Whether ``m.<meth>(...)`` lays a key padding mask out as ``(…, 1, L_k)``:
        ``unsqueeze(-2)``, ``unsqueeze(1).unsqueeze(2)`` (a ``(B, L)`` mask), or a ``view`` /
        ``reshape`` whose second-to-last size is 1 and last is not."""
        if meth == "unsqueeze":
            d = int_of(arg_value(node, 0, "dim"))
            if d == -2:
                return True
            inner = node.func.value
            return d == 2 and type(inner) is _Call and type(inner.func) is _Attribute \
                and inner.func.attr.value == "unsqueeze" and int_of(arg_value(inner, 0, "dim")) == 1
        if meth in ("view", "reshape") and len(node.args) >= 3 and not any(a.star for a in node.args):
            return int_of(node.args[-2].value) == 1 and int_of(node.args[-1].value) != 1
        return False

    def _binop(self, a, op, b, node) -> Any:
        if isinstance(a, Fill) and isinstance(b, Fill):
            if a.kind == b.kind == "literal" and a.value is not None and b.value is not None:
                try:
                    if type(op) is cst.Multiply:
                        return Fill("literal", a.value * b.value, node)
                    if type(op) is cst.Add:
                        return Fill("literal", a.value + b.value, node)
                    if type(op) is cst.Subtract:
                        return Fill("literal", a.value - b.value, node)
                    if type(op) is cst.Divide and b.value:
                        return Fill("literal", a.value / b.value, node)
                    if type(op) is cst.Power:
                        return Fill("literal", a.value ** b.value, node)
                except (OverflowError, ZeroDivisionError):
                    return None
            return None
        if isinstance(a, IndexVal) or isinstance(b, IndexVal):
            if isinstance(a, IndexVal) and isinstance(b, Fill) and b.kind == "literal":
                off = None if a.offset is None or b.value is None or b.value != int(b.value) else (
                    a.offset + int(b.value) if type(op) is cst.Add
                    else a.offset - int(b.value) if type(op) is cst.Subtract else None)
                return replace(a, offset=off) if type(op) in (cst.Add, cst.Subtract) else None
            if isinstance(b, IndexVal) and isinstance(a, Fill) and type(op) is cst.Add \
                    and a.kind == "literal" and a.value == int(a.value or 0):
                return replace(b, offset=None if b.offset is None else b.offset + int(a.value))
            if isinstance(a, IndexVal) and type(op) in (cst.Add, cst.Subtract) and b is None:
                return replace(a, offset=None)
            return None
        if isinstance(a, MaskVal) and isinstance(b, MaskVal):
            if type(op) is cst.Multiply and "N" in (a.pattern or ()) + (b.pattern or ()):
                return MaskVal(None, "float", a.fill or b.fill, a.polarity or b.polarity)
            if type(op) in (cst.BitAnd, cst.Multiply):
                return MaskVal(p_and(a.pattern, b.pattern), a.dtype if a.dtype == b.dtype else None,
                               a.fill or b.fill, a.polarity or b.polarity, a.origin or b.origin,
                               a.repeated or b.repeated, unit=a.unit and b.unit)
            if type(op) is cst.BitOr:
                return MaskVal(p_or(a.pattern, b.pattern), "bool", None, a.polarity or b.polarity,
                               a.origin or b.origin, a.repeated or b.repeated)
            if type(op) is cst.BitXor:
                return MaskVal(p_xor(a.pattern, b.pattern), "bool", None, None,
                               a.origin or b.origin)
            if type(op) is cst.Add:
                summed = bool(a.fill and b.fill and a.fill.kind == b.fill.kind == "finfo_min")
                if summed and self.recording:
                    self.result.summed_min.append(node)
                return MaskVal(p_add(a.pattern, b.pattern), "float" if "float" in (a.dtype, b.dtype)
                               else a.dtype, a.fill or b.fill, a.polarity or b.polarity,
                               a.origin or b.origin, a.repeated or b.repeated, summed,
                               unit=False)
            return None
        if isinstance(a, MaskVal) and isinstance(b, Fill) or isinstance(b, MaskVal) and isinstance(a, Fill):
            m = a if isinstance(a, MaskVal) else b
            return _same_axes(self._binop_fill(a, op, b, node), m)
        return None

    def _binop_fill(self, a, op, b, node) -> Any:
        """A mask combined with a constant (``m * -1e9``, ``1 - m``, ``m ^ True``)."""
        m, f, mask_left = (a, b, True) if isinstance(a, MaskVal) else (b, a, False)
        if type(op) in (cst.Multiply, cst.Subtract):
            m = m.as_numbers()
        if type(op) is cst.Multiply:
            if f.kind == "literal" and f.value is not None:
                scaled_fill = m.fill.scaled(f.value) if m.fill else None
                pat = p_scale(m.pattern, f.value)
                if f.value < 0 and (m.pattern is None and m.fill is None and m.polarity is not None
                                    or m.pattern is not None and "P" in m.pattern):
                    scaled_fill = f  # the non-zero entries (a padding mask's 1s) hold f
                if f.overflows_fp16 and self.recording:
                    self.result.fill_sites.append(FillSite(f, f.node or node, "additive",
                                                           escapes=self.escapes(node)))
                unit = (m.unit and f.value == 1.0) or not (pat and "P" in pat)
                return MaskVal(pat, "float", scaled_fill, m.polarity, m.origin, m.repeated,
                               unit=unit)
            if f.kind in ("neg_inf", "finfo_min", "pos_inf", "finfo_max"):
                sign = -1.0 if f.region == "N" else 1.0
                pat = p_scale(m.pattern, sign)
                return MaskVal(pat, "float", f if sign < 0 else None,
                               m.polarity, m.origin, m.repeated, unit=not (pat and "P" in pat))
            return None
        if type(op) is cst.Subtract and f.kind == "literal":
            unit = m.unit or m.dtype == "bool"
            if not mask_left and f.value == 1.0:
                p = p_one_minus(m.pattern, unit)
                return MaskVal(p, "float", None, _flip(m.polarity), m.origin, m.repeated,
                               unit=not (m.pattern and "N" in m.pattern))
            if mask_left and f.value == 1.0:
                return MaskVal(p_minus_one(m.pattern, unit), "float", Fill("literal", -1.0),
                               _flip(m.polarity), m.origin, m.repeated, unit=True)
            return None
        if type(op) is cst.BitXor and f.is_bool and f.value == 1.0:
            return MaskVal(p_not(m.pattern), "bool", None, _flip(m.polarity), m.origin)
        return None

    def _compare(self, node: cst.Comparison, env) -> Any:
        if len(node.comparisons) != 1:
            return None
        comp = node.comparisons[0]
        op = {cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
              cst.GreaterThanEqual: ">=", cst.Equal: "==", cst.NotEqual: "!="}.get(type(comp.operator))
        if op is None:
            return None
        a = self._ev(node.left, env, node)
        b = self._ev(comp.comparator, env, node)
        return self._compare_vals(a, op, b, node, comp.comparator)

    def _compare_vals(self, a, op: str, b, node, comparator) -> Any:
        m = a if isinstance(a, MaskVal) else b if isinstance(b, MaskVal) else None
        r = self._compare_vals_of(a, op, b, node, comparator)
        return _same_axes(r, m) if m is not None else r

    def _compare_vals_of(self, a, op: str, b, node, comparator) -> Any:
        if isinstance(a, IndexVal) and isinstance(b, IndexVal):
            axes = {a.axis, b.axis}
            if a.offset is None or b.offset is None or "row" not in axes or axes == {"row"}:
                return MaskVal(None, "bool", None, None, node)
            row_first = a.axis == "row"
            row, col = (a, b) if row_first else (b, a)
            if (row.sym or col.sym) and not _kv_aligned(row, col):
                return MaskVal(None, "bool", None, None, node)
            return MaskVal(p_compare_index(op, row.offset, col.offset, row_first), "bool", None,
                           None, node)
        if isinstance(b, MaskVal) and isinstance(a, Fill):
            a, b = b, a
            op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        if isinstance(a, MaskVal) and isinstance(b, Fill):
            if b.kind == "literal" and not b.is_bool and (b.value == 1.0 or b.value == 0.0 and a.key_only):
                a = a.as_numbers()
            r = b.region
            p = a.pattern
            if op == "==" and r == "Z":
                return MaskVal(p_not(p), "bool", None, _flip(a.polarity), a.origin, a.repeated)
            if op in ("!=", ">") and r == "Z":
                pp = p_truthy(p) if op == "!=" else p_select(p, "P")
                return MaskVal(pp, "bool", None, a.polarity, a.origin, a.repeated)
            if op == "<" and r == "Z":
                return MaskVal(p_select(p, "N"), "bool", None, _flip(a.polarity), a.origin,
                               a.repeated)
            if op == "==" and r == "P" and (b.value == 1.0 or b.is_bool):
                return MaskVal(p_select(p, "P"), "bool", None, a.polarity, a.origin, a.repeated)
            if op == "==" and r == "N" and a.fill == replace(b, node=None):
                return MaskVal(p_select(p, "N"), "bool", None, _flip(a.polarity), a.origin)
            return MaskVal(None, "bool", None, None, node)
        # padding-style comparisons: x != pad_id (keep) / x == pad_id (block)
        text = self.code(comparator).lower()
        if "pad" in text and op in ("==", "!="):
            return MaskVal(None, "bool", None, "keep" if op == "!=" else "block", node)
        return None


#: what a call of a function value gives the mask domain (anything else is unknown)
_RETURNED = (MaskVal, Fill, IndexVal, Tup, Many, FuncRef)
#: call targets whose value is the callee (``f(x)``, ``functools.partial(f, a)(x)``,
#: ``(lambda a: ...)(x)``, ``fns[0](x)``); attribute targets other than ``self.m`` are methods
#: of their receiver
_CALLEE_EXPRS = frozenset({cst.Name, cst.Call, cst.Lambda, cst.Subscript})
#: builtins computed over sequences of values
_SEQUENCE_BUILTINS = frozenset({"map", "zip", "tuple", "list"})


def _normalised(expr: cst.CSTNode) -> bool:
    """``x / x.sum(dim, ...)`` or ``x / torch.sum(x, dim, ...)``: a row normalisation (a
    written-out softmax when ``x`` is exponentiated scores).  A sum without ``dim`` divides by
    the total (``w / torch.sum(w)``: weights of a loss), which normalises no row."""
    if type(expr) is not _BinaryOperation or type(expr.operator) is not cst.Divide:
        return False
    r = expr.right
    if type(r) is not _Call:
        return False
    f = r.func
    if dotted_name(f) in ("torch.sum", "th.sum"):
        return arg_value(r, 1, "dim") is not None
    return type(f) is _Attribute and f.attr.value == "sum" and arg_value(r, 0, "dim") is not None


def _is_none(node: cst.BaseExpression) -> bool:
    return type(node) is _Name and node.value == "None"


def _given_branch(node: cst.BaseExpression) -> cst.BaseExpression:
    """The branch of ``mask if cond else None`` (or ``None if cond else mask``) that passes a mask;
    ``node`` itself when it is not such a conditional."""
    if type(node) is cst.IfExp:
        if _is_none(node.orelse):
            return node.body
        if _is_none(node.body):
            return node.orelse
    return node


def _join(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if a == b:
        return a
    if isinstance(a, MaskVal) and isinstance(b, MaskVal):
        return MaskVal(p_join(a.pattern, b.pattern), a.dtype if a.dtype == b.dtype else None,
                       a.fill if a.fill == b.fill else None,
                       a.polarity if a.polarity == b.polarity else None,
                       a.origin if a.pattern == b.pattern else None, a.repeated or b.repeated,
                       unit=a.unit and b.unit)
    if isinstance(a, Fill) and isinstance(b, Fill):
        return a if a.kind == b.kind and a.value == b.value else None
    if isinstance(a, Dtype) and isinstance(b, Dtype):
        return Dtype(a.names | b.names)
    return None


class _MaskFrame(Frame):
    """One function body run over the mask domain: ``env`` (name → :class:`MaskVal`, :class:`Fill`,
    ... ; an unknown value is not bound, so the name falls back to what it says) and ``tags``
    (name → ``"scores"`` / ``"probs"`` / ``"out"``: what a name holds on some path)."""

    UNKNOWN = None
    STORES_UNKNOWN = False

    def __init__(self, an: _Analyzer, env: dict, cls_env: ClassInfo | None) -> None:
        super().__init__(env)
        self.an = an
        self.tags: dict[str, str] = {}
        self.cls_env = cls_env
        self._tag: str | None = None  # the tag of the assignment being run

    # ---- the lattice
    def join(self, a: Any, b: Any) -> Any:
        return _join(a, b)

    def join_absent(self, v: Any) -> Any:
        # a cast on one path only: the other keeps its dtype, so the dtype is unknown
        return MISSING if isinstance(v, Dtype) else v

    def snapshot(self) -> Any:
        return dict(self.env), dict(self.tags)

    def restore(self, state: Any) -> None:
        super().restore(state[0])
        self.tags = dict(state[1])

    def join_states(self, a: Any, b: Any) -> Any:
        tags = dict(a[1])
        tags.update(b[1])  # a tag holds if it holds on some path
        return self.join_envs(a[0], b[0]), tags

    # ---- transfer functions
    def eval(self, node: cst.BaseExpression) -> Any:
        return self.an.ev(node, self.env)

    def read(self, expr: cst.BaseExpression) -> None:
        self.an._scan(expr, self)

    def decide(self, test: cst.BaseExpression) -> bool | None:
        """``if flag:`` / ``if not flag:`` on a name holding ``True`` or ``False`` (a literal
        argument of the call being run) runs one branch."""
        self.read(test)
        negate = False
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, negate = test.expression, True
        if type(test) is not cst.Name or test.value not in self.env:
            return None
        v = self.env[test.value]
        if not isinstance(v, Fill) or not v.is_bool or v.value is None:
            return None
        return (v.value != 0) != negate

    def assigned(self, value: cst.BaseExpression, targets: list) -> Any:
        an = self.an
        an._scan(value, self, assign_targets=targets)
        v = an.ev(value, self.env)
        if an.recording:  # only a run that records reads tags (:meth:`_Analyzer._target_tag`)
            self._tag = an.tag_of(value, self)
        else:
            an.class_inits_of(value, self)
        return v

    def assign(self, target: cst.BaseExpression, value: Any, value_node: Any = None) -> None:
        self.an._bind(target, value, self._tag if value_node is not None else None, self,
                      self.cls_env, value_node)
        if type(target) is cst.Subscript and value_node is not None:
            self.an._index_assign(target, value_node, self)

    def aug_assign(self, s: cst.AugAssign) -> None:
        an = self.an
        an._scan(s.value, self)
        if type(s.operator) is cst.AddAssign and an.recording:  # as ``x + m`` (:meth:`_scan`)
            an._additive(s, s.target, s.value, self, [s.target])
        if type(s.target) is cst.Name:
            name = s.target.value
            cur = self.env.get(name)
            op = {cst.AddAssign: cst.Add, cst.MultiplyAssign: cst.Multiply,
                  cst.SubtractAssign: cst.Subtract, cst.BitAndAssign: cst.BitAnd,
                  cst.BitOrAssign: cst.BitOr}.get(type(s.operator))
            if op is not None and isinstance(cur, MaskVal):
                self.env[name] = an._binop(cur, op(), an.ev(s.value, self.env), s)
            elif isinstance(cur, MaskVal):
                self.env.pop(name, None)

    def expr_stmt(self, s: cst.Expr) -> None:
        self.an._scan(s.value, self)
        self.an._inplace(s.value, self)

    def define(self, s: cst.FunctionDef) -> None:
        self.env[s.name.value] = FuncRef(s.name.value, fn=s)

    def call_value(self, f: Any, node: cst.Call, pos: list, kw: dict) -> Any:
        return self.an.call_ref(f, node, pos, kw) if isinstance(f, FuncRef) else None

    def returned(self, value: cst.BaseExpression | None) -> Any:
        if value is None:
            return MISSING  # a bare ``return`` passes no mask: it adds nothing to the join
        self.an._scan(value, self, returned=True)
        return self.an.ev(value, self.env)


def analyze(ctx) -> MaskAnalysis:
    """Run the mask algebra over ``ctx.module`` (a :class:`~attncheck.lint.context.FileContext`).

    Two passes over every function (module level and class methods, plus nested functions):
    the first collects the mask/fill values passed at same-file call sites, the second binds
    them to parameters and records every consumer (:class:`MaskUse`).
    """
    return _analyze(ctx)


def _analyze(ctx) -> MaskAnalysis:
    an = _Analyzer(ctx)
    nested: list[FunctionInfo] = []
    for f in an.index.defs:
        nested.extend(an.index.nested(f, an.nodes.defs))
    everything = an.index.defs + nested
    an.local_defs = {id(f.node): f for f in nested}
    names = {id(f): an.nodes.identifiers(f.node.body) for f in everything}
    mask_globals = an.globals.keys()  # module-level masks and fills (``CAUSAL = torch.tril(…)``)
    relevant = {id(f) for f in everything
                if names[id(f)] & _RELEVANT or names[id(f)] & mask_globals
                or any("mask" in n for n in names[id(f)])}
    for _ in range(2):  # callers of relevant same-file helpers pass them masks
        helpers = _relevant_helpers(an, everything, relevant)
        relevant |= {id(f) for f in everything if id(f) not in relevant and names[id(f)] & helpers(f)}
    funcs = [f for f in everything if id(f) in relevant]
    reaching = _reaching_names(an, everything)
    for f in funcs:  # pass 1: call-site arguments
        an.current = f
        if f.cls is not None:
            an.class_attr(f.cls, "")
        if names[id(f)] & reaching:
            an._run_function(f, {})
    # a function the relevant ones pass a mask to applies it (``def add_bias(scores, bias)``)
    funcs += [f for f in everything if id(f) not in relevant
              and any(isinstance(v, MaskVal) for v in an.callsite_args.get(id(f), {}).values())]
    an.recording, an.collecting = True, False
    # pass 2: record uses; a function called in this file is run at each call, with its
    # arguments (a function never reached that way runs with the join of its call sites')
    an.per_call = {id(f) for f in funcs if id(f) in an.callsite_args}
    for f in funcs:
        if id(f) in an.per_call:
            continue
        an.current = f
        an._run_function(f, an._param_env(f))
    for f in funcs:
        if id(f) in an.per_call and id(f) not in an.recorded:
            an.current = f
            an._run_function(f, an._param_env(f))
    an.current = None
    other = {id(n) for u in an.result.uses if u.consumer == "additive" and not u.attention
             for n in an.nodes.walk(u.node)}
    for site in an.result.fill_sites:
        if id(site.node) in other:
            site.attention = False
    return an.result


def _reaching_names(an: _Analyzer, everything: list[FunctionInfo]) -> set[str]:
    """The names through which running a function can reach beyond its own body: the names of
    the file's functions and methods (a call inlines them and records the arguments it passes
    them), its module-level aliases and the names it imports from outside PyTorch that can
    resolve to a linted file (:func:`~attncheck.lint.project.may_resolve`: a helper of another
    linted file is inlined too; ``math``, ``typing.Callable`` or ``numpy`` outside the linted
    files are not), ``register_buffer`` (it stores a class attribute other
    methods read) and ``lambda`` (:meth:`NodeCache.identifiers` gives it for a lambda, whose
    body may call any of these).  A function whose identifiers hold none of them only reads
    and binds its own locals: its first-pass run records nothing.  ``__init__`` counts only
    where the file calls ``self.__init__``: ``super().__init__(…)`` and ``Base.__init__(self)``
    resolve to no function of this file."""
    out = {f.node.name.value for f in everything}
    if "self.__init__" not in an.ctx.source:
        out.discard("__init__")
    out.update(an.index.aliases)
    imports = an.ctx.imports
    ctx = an.ctx
    out.update(a for a in imports.relative if may_resolve(ctx, a))
    out.update(a for a, full in imports.aliases.items()
               if full.partition(".")[0] != "torch" and may_resolve(ctx, a))
    out.update(("register_buffer", "lambda"))
    return out


def _relevant_helpers(an: _Analyzer, everything: list[FunctionInfo], relevant: set[int]):
    """For each function, the names of the relevant helpers it can call the way the analysis
    resolves calls: top-level functions, methods of its class and the class's same-file bases
    (``self.m()``), and functions nested in it.  A method of an unrelated class with the same
    name does not count (the analysis never resolves ``other.m()`` into it, and a region parse
    need not keep it).  Returns ``f -> set of names``."""
    top: set[str] = set()
    by_scope: dict[str, set[str]] = {}  # class name or enclosing function's qual -> names
    for g in everything:
        if id(g) not in relevant:
            continue
        name = g.node.name.value
        if "." not in g.qual:
            top.add(name)
        else:
            by_scope.setdefault(g.qual.rsplit(".", 1)[0], set()).add(name)

    def names_for(f: FunctionInfo) -> set[str]:
        out = set(top)
        out.update(by_scope.get(f.qual, ()))
        for k in an.index.lineage(f.cls):
            out.update(by_scope.get(k, ()))
        out.discard(f.node.name.value)
        return out

    return names_for


_RELEVANT = frozenset({
    "masked_fill", "masked_fill_", "where", "scaled_dot_product_attention", "tril", "triu",
    "tril_", "triu_", "triu_indices", "tril_indices", "register_buffer", "arange", "softmax",
    "log_softmax", "generate_square_subsequent_mask", "finfo", "MultiheadAttention",
    "multi_head_attention_forward", "is_causal", "attn_mask",
})
