"""Score provenance: an abstract interpreter over each function body of one file.

It answers, for the attention rules (ATT1xx scale, ATT301 softmax axis, ATT401/402 head layout):

* which expressions are attention **scores** — ``q @ kᵀ`` via ``@``, ``torch.matmul``, ``torch.bmm``,
  ``torch.baddbmm`` (``alpha=``) or ``torch.einsum``/``einops.einsum`` with a literal equation whose
  contracted index is the feature axis (a runtime equation is *unknown*: no scores, no finding);
* which **factors** scaled them — on q, on k, on the scores, ``alpha=``, SDPA's ``scale=`` and its
  default ``1/√E`` (PyTorch ``F.scaled_dot_product_attention`` docs) — each factor a symbolic
  product of dimension powers (:class:`Sym`), e.g. ``self.head_dim ** -0.5`` = ``head_dim^-0.5``;
* which **softmax** consumed them, over which axis, with the scores' rank and key axis;
* the **axis layout** of tensors in terms of atoms ``B`` (batch), ``L`` (tokens), ``H`` (heads), ``d``
  (head dim); a width ``E`` is ``H·d``.  A ``view``/``reshape`` that moves ``H`` across ``L`` without a
  transpose is recorded as a :class:`ViewEvent`.

Facts are followed through sequential local assignments (tuple unpacking, augmented assignment,
``q, k, v = (f(t) for t in (q, k, v))``), attributes set in ``__init__`` (numbers, ``nn.Linear``,
``nn.Softmax(dim=...)``, ``register_buffer``), and helper functions/methods of the same file, which
are *inlined* at their call sites with the caller's argument values (a helper never called in the
file is analysed on its own with opaque parameters).  No scope or qualified-name metadata is used:
names resolve through :meth:`FileContext.qualname` and this module's own dataflow.

Everything unknown stays unknown: rules only fire on established facts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Collection
from typing import Any

import libcst as cst

from attncheck.lint.analysis import ops
from attncheck.lint.analysis.interpreter import (
    MAX_INLINE_DEPTH,
    PARTIAL,
    Frame,
    FuncRef,
    Interpreter,
    Many,
    Tup,
    positional_params,
    positional_values,
    replace,
    zip_values,
)
from attncheck.lint.project import rehome
from attncheck.lint.analysis.syntax import (
    arg_value,
    int_of,
    mentions_name,
    num_of,
    parse_einsum,
    scope_nodes,
    short_code,
)

# --------------------------------------------------------------------------- names → roles

_HEAD_DIM_NAMES = {
    "head_dim", "d_k", "dk", "d_v", "d_head", "dim_head", "head_size", "attention_head_size",
    "head_dims", "d_kv", "dim_per_head", "hd", "d", "key_dim", "qk_dim", "d_qk", "kv_channels",
    "head_channels", "size_per_head", "qk_head_dim", "attn_head_size", "head_features",
}
_WIDTH_NAMES = {
    "c", "e", "d_model", "dmodel", "embed_dim", "hidden_size", "n_embd", "n_embed", "dim", "emb_dim",
    "embedding_dim", "embed_size", "n_state", "channels", "all_head_size", "inner_dim", "hidden_dim",
    "model_dim", "d_embed", "num_channels", "in_channels", "query_dim", "embedding_size",
}
_HEADS_NAMES = {
    "heads", "num_heads", "n_head", "n_heads", "nh", "num_attention_heads", "num_key_value_heads",
    "head_num", "nheads", "num_kv_heads", "n_kv_heads", "nhead", "num_head", "n_kv_head", "head_count",
}
_BATCH_NAMES = {"b", "bs", "bsz", "batch", "batch_size", "nbatches", "n_batch", "nb", "b_"}
_SEQ_NAMES = {
    "t", "l", "n", "seq_len", "seqlen", "seq_length", "tgt_len", "src_len", "q_len", "kv_len", "k_len",
    "query_length", "key_length", "length", "sequence_length", "num_tokens", "len_q", "len_k", "lq", "lk",
    "s", "kv_seq_len", "key_len", "query_len", "n_ctx", "seq", "tokens", "q_length", "kv_length",
}
_SCALE_NAME = re.compile(r"(^|_)(scale|scaling|softmax_scale|sm_scale|scale_factor|norm_factor|"
                         r"inv_norm_factor|attn_scale|qk_scale|scalar|temperature|inv_sqrt)", re.IGNORECASE)
# a parameter with these names is a softmax scale supplied by the caller
SCALE_PARAM = re.compile(r"^(scale|scaling|softmax_scale|sm_scale|attn_scale|qk_scale|scale_factor)$")


def _leaf(text: str) -> str:
    return text.rsplit(".", 1)[-1].lower()


def role_by_name(text: str, heads: Collection[str] = frozenset()) -> str:
    """Role of a dimension from its name: ``d`` head dim, ``E`` width, ``H`` heads, ``B``, ``L``, ``?``.

    ``heads``: leaf names found to be head counts by structure in the scope being analysed
    (:attr:`Analyzer.heads`); without it, the role by name alone."""
    leaf = _leaf(text)
    raw = text.rsplit(".", 1)[-1]
    if leaf in _HEADS_NAMES or leaf in heads:
        return "H"
    if leaf in _HEAD_DIM_NAMES:
        return "d"
    if leaf in _WIDTH_NAMES:
        return "E"
    if leaf in _BATCH_NAMES:
        return "B"
    if leaf in _SEQ_NAMES or raw in ("T", "L", "N", "S"):
        return "L"
    return "?"


# --------------------------------------------------------------------------- symbolic scalars

@dataclass(frozen=True)
class Dim:
    """A named dimension: ``text`` for messages, ``role`` (d/E/H/B/L/?), known ``value``, ``atoms``."""

    text: str
    role: str = "?"
    value: float | None = None
    atoms: tuple[str, ...] | None = None

    def get_atoms(self, heads: Collection[str] = frozenset()) -> tuple[str, ...]:
        """Axis atoms of this dimension (``heads``: as for :func:`role_by_name`)."""
        if self.atoms is not None:
            return self.atoms
        if self.role == "?" and _leaf(self.text) in heads:
            return ("H",)
        return {"B": ("B",), "L": ("L",), "H": ("H",), "d": ("d",), "E": ("H", "d")}.get(
            self.role, ("?" + self.text,))


@dataclass(frozen=True)
class Sym:
    """A symbolic scalar ``coef · Π dim^exp``.  ``coef is None``: unknown number.

    ``opaque``: something unknown (a tensor, a learned parameter, an unresolved call) — as a scale
    factor it means "scaled by something we cannot classify".  ``default_one``: a scale parameter
    whose value is its default ``1.0`` (name of the parameter); ``explicit_one``: ``1.0`` passed
    explicitly as ``scale=1.0`` / ``scaling=1.0`` (T5's intentional unscaled attention).
    """

    coef: float | None = 1.0
    pows: tuple[tuple[Dim, float], ...] = ()
    opaque: bool = False
    name: str | None = None
    default_one: str | None = None
    explicit_one: bool = False

    # constructors
    @staticmethod
    def lit(v: float) -> Sym:
        return Sym(coef=float(v))

    @staticmethod
    def dim(d: Dim) -> Sym:
        return Sym(pows=((d, 1.0),))

    def is_literal(self) -> bool:
        return not self.opaque and not self.pows and self.coef is not None

    def value(self) -> float | None:
        if self.opaque or self.coef is None:
            return None
        v = self.coef
        for d, e in self.pows:
            if d.value is None:
                return None
            try:
                v *= float(d.value) ** e
            except (ZeroDivisionError, OverflowError, ValueError):
                return None
        return v

    def mul(self, other: Sym) -> Sym:
        if self.opaque or other.opaque:
            return Sym(coef=None, opaque=True, name=self.name or other.name)
        pows: dict[Dim, float] = {}
        for d, e in self.pows + other.pows:
            pows[d] = pows.get(d, 0.0) + e
        coef = None if self.coef is None or other.coef is None else self.coef * other.coef
        return Sym(coef=coef, pows=tuple((d, e) for d, e in pows.items() if abs(e) > 1e-12),
                   name=self.name or other.name)

    def pow(self, p: float) -> Sym:
        if self.opaque:
            return Sym(coef=None, opaque=True, name=self.name)
        coef = None
        if self.coef is not None:
            try:
                coef = self.coef ** p if self.coef > 0 or float(p).is_integer() else None
            except (ZeroDivisionError, OverflowError):
                coef = None
        return Sym(coef=coef, pows=tuple((d, e * p) for d, e in self.pows), name=self.name)

    def inv(self) -> Sym:
        return self.pow(-1.0)

    def atoms(self, heads: Collection[str] = frozenset()) -> tuple[str, ...] | None:
        """Axis atoms of an integer dimension expression (``B * H`` → ``('B', 'H')``;
        ``heads``: as for :func:`role_by_name`)."""
        if self.opaque:
            return ("?" + (self.name or "opaque"),)
        out: list[str] = []
        if self.coef is None:
            return None
        if self.coef != 1:
            if self.coef == -1 and not self.pows:
                return ("REST",)
            out.append(f"#{self.coef:g}")
        for d, e in self.pows:
            if e == 1:
                out.extend(d.get_atoms(heads))
        for d, e in self.pows:
            if e == -1:
                for a in d.get_atoms(heads):
                    if a in out:
                        out.remove(a)
                    elif a == "H" and "d" not in out and ("H" in out or "E" in out):
                        return None
                    else:
                        return None
            elif e != 1:
                return None
        return tuple(out)

    def text(self) -> str:
        if self.opaque:
            return self.name or "?"
        parts = []
        if self.coef is not None and self.coef != 1:
            parts.append(f"{self.coef:g}")
        for d, e in self.pows:
            if e == 1:
                parts.append(d.text)
            elif e == -0.5:
                parts.append(f"1/√{d.text}")
            elif e == 0.5:
                parts.append(f"√{d.text}")
            elif e == -1:
                parts.append(f"1/{d.text}")
            else:
                parts.append(f"{d.text}^{e:g}")
        return " · ".join(parts) or "1"


ONE = Sym()


# --------------------------------------------------------------------------- abstract values

@dataclass(frozen=True)
class Factor:
    """One multiplicative factor applied to q, k or the scores. ``where``: q/k/scores/alpha/sdpa/sdpa-default."""

    sym: Sym
    where: str
    node: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Tensor:
    """A tensor's known facts.

    ``axes``: tuple of axes, each a tuple of atoms (``('B', 'H')`` = batch and heads merged); an axis
    ``('*',)`` stands for "leading axes not known"; ``None`` = layout unknown.  ``rank`` when known.
    ``factors``: scale factors applied so far.  ``origin``: ``proj`` (output of a projection or a
    fresh tensor: not pre-scaled), ``param`` (a function parameter: a caller may have pre-scaled it),
    ``unknown``.  ``scores``: derived from q·kᵀ; ``key_axis`` negative index of the key axis.
    ``kT``: the last two axes of a key were swapped.  ``pending``: a non-negative transpose on a
    tensor of unknown rank, resolved once the rank is known (``bmm`` → 3).  ``last``: the size of the
    last axis; ``perhead``: q/k split into heads; ``token_major``: heads still packed in the last axis
    (B, L, H·d); ``normalized``: ``F.normalize``-d (cosine attention).
    """

    rank: int | None = None
    axes: tuple[tuple[str, ...], ...] | None = None
    factors: tuple[Factor, ...] = ()
    origin: str = "unknown"
    scores: bool = False
    key_axis: int | None = None
    kT: bool = False
    pending: tuple[int, int] | None = None
    last: Dim | None = None
    perhead: bool = False
    token_major: bool = False
    normalized: bool = False
    softmaxed: bool = False
    uncertain: bool = False  # factors differ between branches
    partial: bool = False  # another branch holds something unknown (e.g. a KV-cache update)
    q: Tensor | None = field(default=None, compare=False, repr=False)
    k: Tensor | None = field(default=None, compare=False, repr=False)
    node: Any = field(default=None, compare=False, repr=False)
    dims: tuple = field(default=(), compare=False, repr=False)
    #: name of the function parameter this tensor came from (``q``, ``key_states``), if any
    pname: str | None = field(default=None, compare=False, repr=False)
    #: the view/reshape that split heads as (…, L, H, d) and has not been transposed since
    split_node: Any = field(default=None, compare=False, repr=False)
    split_axes: tuple = field(default=((), ()), compare=False, repr=False)
    #: for softmax weights: the ScaleEvent of the scores they came from
    event: Any = field(default=None, compare=False, repr=False)
    #: scores plus T5's learned relative ``position_bias`` (the scale is folded into the init)
    biased: bool = False
    #: for softmax outputs: the :class:`SoftmaxEvent`\ s that produced them (several after a join)
    softmax_evs: tuple = field(default=(), compare=False, repr=False)
    #: for ``p.sum(key axis)`` of such outputs: the events whose rows it sums (a renormaliser)
    row_sum_of: tuple = field(default=(), compare=False, repr=False)
    #: a name bound to the parts of a split/chunk/unbind (``qkv = x.chunk(3, -1)``): this is one
    #: part; iterating or indexing the name yields parts like it
    parts: bool = field(default=False, compare=False, repr=False)
    #: ``exp`` of scores (a softmax written out: ``e = exp(s - max)``, ``e / e.sum(dim)``)
    exped: bool = field(default=False, compare=False, repr=False)
    #: ``e.sum(dim, keepdim=True)`` of exponentiated scores: the ``dim`` argument node
    exp_sum: Any = field(default=None, compare=False, repr=False)
    #: for softmax weights: the axes of the softmax's input (negative indices) that now sit at
    #: positions -2 and -1; tracked through transposes of the last two axes and through ops that
    #: keep the layout (dropout, casts, pointwise), None once any other op reshapes the weights
    weight_axes: tuple[int, int] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ShapeVal:
    """``t.shape`` / ``t.size()``: lazily creates per-axis Dims."""

    t: Tensor
    text: str
    start: int = 0
    stop_minus: int = 0  # shape[:-1] → 1


@dataclass(frozen=True)
class ModVal:
    """An ``nn`` module stored on self: kind linear/softmax/dropout/norm/other."""

    kind: str
    dim: Any = None
    in_f: Sym | None = None
    out_f: Sym | None = None
    has_dim: bool = False


@dataclass
class SelfVal:
    cls: str
    attrs: dict = field(default_factory=dict)


class Unknown:
    pass


UNK = Unknown()


class _NoneType(Unknown):
    """The literal ``None`` (an Unknown for every other purpose)."""


NONE = _NoneType()


# --------------------------------------------------------------------------- events for the rules

@dataclass
class ScaleEvent:
    """Scores reach a softmax (``kind='softmax'``) or q, k reach SDPA (``kind='sdpa'``).

    ``factors``: all factors applied (q, k, scores, ``alpha``, SDPA ``scale``/default);
    ``q``/``k``: the operand facts; ``node``: where to report.
    """

    kind: str
    node: Any = field(repr=False)
    factors: tuple[Factor, ...]
    q: Tensor | None
    k: Tensor | None
    scores: Tensor | None
    uncertain: bool = False
    partial: bool = False
    #: the softmax weights were multiplied with v (``softmax(q·kᵀ) @ v``): the shape of attention
    to_v: bool = False


@dataclass
class SoftmaxEvent:
    """A softmax over ``dim`` (``None`` = implicit) applied to scores of ``rank``, key axis ``key_axis``."""

    node: Any = field(repr=False)
    dim: int | None
    implicit: bool
    rank: int | None
    key_axis: int | None
    func: str
    #: the weights are divided by their own sum over the key axis afterwards (``p / p.sum(-1,
    #: keepdim=True)``, ``F.normalize(p, p=1, dim=-1)``): a softmax over another axis followed by
    #: renormalisation over the keys is a deliberate design (slot attention, Locatello et al.
    #: 2020; GroupViT, Xu et al. 2022; inverted attention), not a wrong axis
    renormalised: bool = False
    #: the scores' :class:`ScaleEvent` (its ``to_v``: these weights met the values)
    scale_event: Any = field(default=None, compare=False, repr=False)

    def is_key_axis(self, dim: int | None) -> bool:
        """Whether ``dim`` (negative or non-negative) is these scores' key axis."""
        if dim is None or self.key_axis is None:
            return False
        if dim < 0:
            return dim == self.key_axis
        return self.rank is not None and dim - self.rank == self.key_axis


@dataclass
class ViewEvent:
    """A view/reshape moving the heads axis across the token axis. ``code`` ATT401 (split) / ATT402 (merge)."""

    node: Any = field(repr=False)
    code: str
    in_axes: tuple
    out_axes: tuple
    #: ``view``: the view itself reorders H and L; ``scores``: a (…, L, H, d) split reached q·kᵀ,
    #: the weights·v product or SDPA without ``transpose(1, 2)``
    reason: str = "view"
    #: the run that recorded it — a method or an uncalled function of the file, with the
    #: same-file helpers inlined into it — computes attention in this file's code: q·kᵀ scores,
    #: the weights·v product, a softmax over scores or a fused kernel (SDPA, flash-attn,
    #: xformers).  A view of a tensor that never meets attention there (a classifier head's
    #: ``logits.view(-1, n)``, a projection reshaped for a convolution) is no head split.
    in_attention: bool = True


@dataclass
class Provenance:
    scale_events: list[ScaleEvent] = field(default_factory=list)
    softmax_events: list[SoftmaxEvent] = field(default_factory=list)
    view_events: list[ViewEvent] = field(default_factory=list)
    #: abstract value of each expression evaluated in a recorded context: ``id(node)`` → values
    #: (one per context, e.g. a helper inlined at two call sites has two); read by the layout
    #: analysis (:mod:`attncheck.lint.analysis.layout`)
    values: dict = field(default_factory=dict, repr=False)

    def _dedup(self) -> None:
        for name in ("scale_events", "softmax_events", "view_events"):
            seen: dict = {}
            for e in getattr(self, name):
                key = (id(e.node), getattr(e, "code", None))
                seen.setdefault(key, []).append(e)
            setattr(self, name, [v for evs in seen.values() for v in evs])


# --------------------------------------------------------------------------- helpers

#: T5's learned relative position bias (Raffel et al. 2020 fold 1/√d_kv into the q initialisation)
_T5_BIAS = re.compile(r"(^|\.)position_bias(_\w+)?(\[…\])?$")
#: Tensor methods that keep every fact tracked here (scores stay scores with the same factors,
#: layout and softmax): copies and device moves, float casts, fills, and the pointwise maps that
#: keep the logits' meaning (clamping, adding a bias, ``nan_to_num``, a ``tanh`` soft-cap)
_PASSTHROUGH_METHODS = frozenset(
    n for n, op in ops.METHODS.items()
    if op.family in ("copy", "fill") or (op.family == "cast" and op.kind in ("float", ""))
    or (op.family == "pointwise" and op.kind in ("clamp", "add", "sub", "nan_to_num", "tanh")))


_SOFTMAX_MODULES = ops.modules("softmax", "softmax")
_LINEAR_MODULES = ops.modules("linear")
_EINSUM = ops.functions("matmul", "einsum")
_REARRANGE = ops.functions("einops", "rearrange")
_TRANSPOSE = ops.functions("shape", "transpose")

_TRAINING_NAMES = frozenset({"training", "is_training", "train"})
def mentions_training(node: cst.CSTNode) -> bool:
    """Whether an expression reads a ``training`` flag (``self.training``, ``module.training``, ``training``).

    That is: some ``Name`` in the subtree (an attribute's ``attr`` included) is ``training``,
    ``is_training`` or ``train``."""
    return mentions_name(node, _TRAINING_NAMES)


# --------------------------------------------------------------------------- the interpreter

_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def _is_word(ch: str) -> bool:
    """``re``'s ``\\w`` for one character."""
    return ch == "_" or ch.isalnum()


def _referenced(text: str, nm: str) -> bool:
    """Whether some match of ``(?<![\\w.])(?:self\\.|cls\\.)?([A-Za-z_]\\w*)\\b`` in ``text``
    has group ``nm`` and is not right after ``def `` (a nested definition).

    Same answer as scanning every match of that pattern, found with ``str.find`` instead: a
    match starts exactly where a run of ``[\\w.]`` characters starts with ``[A-Za-z_]``, and
    its group is the identifier there, or the one after a leading ``self.`` / ``cls.``."""
    if not nm or nm[0] not in _IDENT_START or not all(_is_word(c) for c in nm):
        return False  # never a whole match group
    n = len(nm)
    size = len(text)
    i = text.find(nm)
    while i >= 0:
        end = i + n
        if end == size or not _is_word(text[end]):
            prev = text[i - 1] if i else ""
            p = -1
            if not prev or not (prev == "." or _is_word(prev)):
                p = i  # the match starts at the name ...
                if text.startswith(("self.", "cls."), p):
                    # ... unless it is ``self.x`` / ``cls.x``: then the group is ``x``
                    k = p + (5 if text.startswith("self.", p) else 4)
                    if k < size and text[k] in _IDENT_START:
                        p = -1
            elif prev == ".":
                for pre in ("self.", "cls."):
                    q = i - len(pre)
                    if q >= 0 and text.startswith(pre, q) and (
                            q == 0 or not (text[q - 1] == "." or _is_word(text[q - 1]))):
                        p = q  # ``self.name`` / ``cls.name`` starting a run
            if p >= 0 and not (p >= 4 and text.startswith("def ", p - 4)):
                return True
        i = text.find(nm, i + 1)
    return False


class Analyzer(Interpreter):
    def __init__(self, ctx: Any, loading: set[str] | None = None) -> None:
        super().__init__(ctx, loading)
        self.result = Provenance()
        self.funcs: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.methods: dict[str, dict[str, cst.FunctionDef]] = {}
        self.selfs: dict[str, SelfVal] = {}
        self.called: set[str] = set()
        #: leaf names found to be head counts by structure in the scope being analysed:
        #: ``width // X`` or ``width / X`` (``C // self.n_head`` whatever ``n_head`` is called)
        #: makes ``X`` the heads and the quotient the head dim.  Scoped by :meth:`run`: a method
        #: sees what its own body (and the helpers it inlines) and its class's ``__init__``
        #: establish, a function what its own body does; never what another class or function of
        #: the file does — exactly what a region parse keeps of a method (its class's
        #: ``__init__`` and the helpers it names), so findings do not depend on code a region
        #: parse drops, nor on the order of definitions.  Roles asked for after the analysis
        #: (by the rules) are roles by name.
        self.heads: set[str] = set()
        #: :func:`_self_calls` of each function run, by ``id`` of its node (kept alive here)
        self._self_calls: dict[int, tuple[cst.FunctionDef, list[tuple[str, str]]]] = {}
        #: how many times a recording run of this file's code formed attention (q·kᵀ scores,
        #: weights·v, a softmax over scores, a fused kernel): :meth:`_run_root` compares it
        #: before and after a run to set :attr:`ViewEvent.in_attention`
        self.attention_formed = 0

    def _load_index(self) -> None:
        index = self.ctx.index
        self.funcs = {n: f.node for n, f in index.functions.items()}
        self.classes = {n: c.node for n, c in index.classes.items()}
        self.methods = {n: {m: f.node for m, f in c.methods.items()} for n, c in index.classes.items()}

    def imported_ref(self, func: cst.BaseExpression, env: dict) -> FuncRef | None:
        """:meth:`Interpreter.imported` as a :class:`FuncRef` to inline like a same-file helper."""
        found = self.imported(func, env)
        return FuncRef(found[1].name, owner=found[0]) if found is not None else None

    def adopt_imported(self, an: Interpreter) -> None:
        an._load_index()
        an.heads = self.heads  # head counts by structure: the caller's scope, as inlined

    # ---- module walk
    def run(self) -> Provenance:
        self._load_index()
        self._collect_calls(self.ctx.module)
        init_heads: dict[str, frozenset[str]] = {}  # heads by structure in each class's __init__
        for cname, ms in self.methods.items():
            sv = SelfVal(cname)
            self.selfs[cname] = sv
            init = ms.get("__init__")
            self.heads.clear()
            if init is not None:
                self._run_function(init, sv, None, depth=0, record=False)
            init_heads[cname] = frozenset(self.heads)
        for cname, ms in self.methods.items():
            for mname, fn in ms.items():
                if mname == "__init__" or (mname in self.called and mname != "forward"):
                    continue
                self.heads.clear()
                self.heads.update(init_heads[cname])
                # each method starts from the attributes ``__init__`` sets: what another method
                # assigns (``self.scale = 1.0`` in a setter) is unknown here, whatever the order
                sv = self.selfs[cname]
                self._run_root(fn, SelfVal(sv.cls, dict(sv.attrs)))
        for fname, fn in self.funcs.items():
            if fname in self.called:
                continue
            self.heads.clear()
            self._run_root(fn, None)
        return self.result

    def _run_root(self, fn: cst.FunctionDef, selfv: SelfVal | None) -> None:
        """Run a method or an uncalled function (its same-file helpers inlined): the view events
        it records are :attr:`ViewEvent.in_attention` when the run formed attention."""
        first, formed = len(self.result.view_events), self.attention_formed
        self._run_function(fn, selfv, None, depth=0)
        if self.attention_formed == formed:
            for ev in self.result.view_events[first:]:
                ev.in_attention = False

    def _collect_calls(self, module: cst.Module) -> None:
        """Names of file-local functions/methods called (or referenced, ``fn = helper``) inside some
        function body.  Cheap text scan: no second tree traversal.  A helper that is called is
        analysed only inlined at its call sites (with the caller's values)."""
        names = set(self.funcs) | {m for ms in self.methods.values() for m in ms}
        if not names:
            return
        src = self.ctx.source
        # only text inside def bodies counts: drop module-level statements (``if __name__ == ...``)
        body_lines = []
        def_indent: int | None = None
        for line in src.splitlines():
            stripped = line.lstrip()
            if not stripped or stripped.startswith("#"):
                continue
            indent = len(line) - len(stripped)
            if def_indent is not None and indent <= def_indent and not stripped.startswith((")", "]", "}")):
                def_indent = None
            if def_indent is None and stripped.startswith(("def ", "async def ")):
                def_indent = indent
                continue
            if def_indent is not None:
                body_lines.append(line)
        text = "\n".join(body_lines)
        for nm in names:
            if _referenced(text, nm):
                self.called.add(nm)

    # ---- functions
    def _run_function(self, fn: cst.FunctionDef, selfv: SelfVal | None, bound: dict | None,
                      depth: int, record: bool = True, call_kw: set | None = None,
                      closure: bool = False) -> Any:
        if fn in self.stack or depth > MAX_INLINE_DEPTH:
            return UNK
        env: dict[str, Any] = {}
        if closure and bound:
            env.update(bound)  # enclosing names of a local def
        params = fn.params
        plist = list(params.posonly_params) + list(params.params)
        all_params = plist + list(params.kwonly_params)
        is_method = selfv is not None and plist and plist[0].name.value in ("self", "cls")
        for i, p in enumerate(all_params):
            name = p.name.value
            if is_method and i == 0:
                env[name] = selfv
                continue
            if bound is not None and name in bound:
                env[name] = bound[name]
                continue
            default = p.default
            if default is not None and bound is not None:
                env[name] = self._param_default(name, default, fn, passed_somewhere=False, bound_call=True)
            elif default is not None:
                env[name] = self._param_default(name, default, fn, passed_somewhere=False,
                                                init=fn.name.value == "__init__")
            else:
                env[name] = ("param", name)
        if params.star_arg is not None and type(params.star_arg) is cst.Param:
            env[params.star_arg.name.value] = UNK
        if params.star_kwarg is not None:
            env[params.star_kwarg.name.value] = UNK
        if selfv is not None and any(type(v) is tuple and v == ("param", k) for k, v in env.items()) \
                and any(isinstance(mv, ModVal) and mv.kind == "linear" for mv in selfv.attrs.values()):
            calls = self._self_calls.get(id(fn))
            if calls is None:
                calls = self._self_calls[id(fn)] = (fn, _self_calls(fn))
            for name in _projected_params(calls[1], selfv, env):
                # a parameter the body feeds to a linear projection is (…, L, E) from the first
                # statement on: ``B, L, D = x.shape`` before the projection unpacks the width
                env[name] = Tensor(origin="param", pname=name, token_major=True)
        return self.run_body(_Frame(self, env, selfv, depth, record), fn)

    def method_of(self, selfv: SelfVal, name: str) -> Any:
        """The method ``name`` of the instance ``selfv`` (its class or a same-file base)."""
        return self.lookup_function(name, self.index.classes.get(selfv.cls))

    def _param_default(self, name: str, default: cst.BaseExpression, fn: cst.FunctionDef,
                       passed_somewhere: bool, init: bool = False, bound_call: bool = False) -> Any:
        v = num_of(default)
        if SCALE_PARAM.match(name) and v == 1.0 and not passed_somewhere:
            return Sym(coef=1.0, default_one=name)
        if init and v is not None:
            return Sym.dim(Dim(name, role_by_name(name, self.heads), v))
        if type(default) is cst.Name and default.value == "None" and bound_call:
            return NONE
        return ("param", name)


class _Frame(Frame):
    """Evaluation of one function body: the score-provenance domain on the shared executor."""

    UNKNOWN = UNK

    def __init__(self, an: Analyzer, env: dict, selfv: SelfVal | None, depth: int, record: bool) -> None:
        super().__init__(env, depth)
        self.an = an
        self.ctx = an.ctx
        self.selfv = selfv
        self.record = record

    # ---- the domain's hooks on the executor
    def join(self, a: Any, b: Any) -> Any:
        return _join(a, b)

    def define(self, s: cst.FunctionDef) -> None:
        # a local def: called by value (directly, through map, a comprehension ...)
        self.env[s.name.value] = FuncRef(s.name.value, None, fn=s, closure=self.env)

    def read(self, expr: cst.BaseExpression) -> None:
        pass  # loop iterables and ``with`` items hold no score facts

    def decide(self, test: cst.BaseExpression) -> bool | None:
        decided = self._none_test(test)
        if decided is None:
            self.eval(test)
        return decided

    def fallback_name(self, s: cst.If) -> str | None:
        return self._none_fallback(s)

    def aug_assign(self, s: cst.AugAssign) -> None:
        cur = self.eval(s.target)
        rhs = self.eval(s.value)
        op = type(s.operator).__name__.replace("Assign", "")
        self.assign(s.target, self.binop(op, cur, rhs, s, s.target, s.value))

    def expr_stmt(self, s: cst.Expr) -> None:
        v = self.eval(s.value)
        receiver = _inplace_receiver(s.value)
        if receiver is not None and isinstance(v, Tensor):
            # ``s.div_(math.sqrt(d))`` as a statement rebinds ``s`` like ``s /= math.sqrt(d)``
            self.assign(receiver, v)

    def _none_test(self, test: cst.BaseExpression) -> bool | None:
        """``x is None`` / ``x is not None`` with ``x`` known: True/False; else None."""
        if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.left) is cst.Name:
            c = test.comparisons[0]
            if type(c.comparator) is cst.Name and c.comparator.value == "None" and \
                    type(c.operator) in (cst.Is, cst.IsNot):
                v = self.env.get(test.left.value, UNK)
                if v is NONE:
                    known = True
                elif isinstance(v, (Sym, Tensor, ModVal, FuncRef)):
                    known = False
                else:
                    return None
                return known if type(c.operator) is cst.Is else not known
        return None

    def _none_fallback(self, s: cst.If) -> str | None:
        """``if scale is None: scale = d ** -0.5`` (no else) on a parameter that defaults to
        ``None``: the name whose value after the ``if`` is the fallback, as with
        ``scale = scale or d ** -0.5``."""
        t = s.test
        if s.orelse is not None or type(t) is not cst.Comparison or len(t.comparisons) != 1 \
                or type(t.left) is not cst.Name or type(t.comparisons[0].operator) is not cst.Is:
            return None
        c = t.comparisons[0].comparator
        if type(c) is not cst.Name or c.value != "None":
            return None
        return t.left.value if self._defaults_to_none(self.eval(t.left)) else None

    def assign(self, target: cst.BaseExpression, v: Any, value_node: Any = None) -> None:
        if type(target) is cst.Name:
            v = _named(v, target.value, self.an.heads)
            self.env[target.value] = v
        elif type(target) in (cst.Tuple, cst.List):
            stars = [i for i, e in enumerate(target.elements) if type(e) is cst.StarredElement]
            if len(stars) == 1:
                # *_, d = q.shape: names before the star take leading items, names after it
                # trailing ones (negative indices), the starred name what is left
                i0 = stars[0]
                elts = [e.value for e in target.elements]
                n_after = len(elts) - i0 - 1
                for j, e in enumerate(elts):
                    if j == i0:
                        self.assign(e, UNK)
                    elif isinstance(v, ShapeVal):
                        self.assign(e, self._shape_dim(v, j if j < i0 else j - len(elts), None))
                    elif isinstance(v, Tup) and not v.star_unknown and len(v.items) >= len(elts) - 1:
                        self.assign(e, v.items[j] if j < i0 else v.items[len(v.items) - n_after + (j - i0 - 1)])
                    elif isinstance(v, Many):
                        self.assign(e, v.t)
                    else:
                        self.assign(e, UNK)
                return
            elts = [e.value for e in target.elements]
            items = self._unpack(v, len(elts))
            if isinstance(v, ShapeVal):
                items = self._shape_roles(elts, items)
            for e, it in zip(elts, items):
                self.assign(e, it)
        elif type(target) is cst.Attribute:
            if type(target.value) is cst.Name and isinstance(self.env.get(target.value.value), SelfVal):
                sv = self.env[target.value.value]
                val = v
                if isinstance(v, Sym) and not v.opaque:
                    val = _named_attr(v, f"self.{target.attr.value}", self.an.heads)
                sv.attrs[target.attr.value] = val

    def _shape_roles(self, elts: list, items: list) -> list:
        """``a, b, c = t.shape``: names give roles, but two names of one role (``batch_size, dim,
        num_channels`` where ``dim`` is the sequence) are ambiguous: keep the one at the role's usual
        position (B first, E/d last, L in between) and make the others unknown."""
        n = len(elts)
        roles = []
        for e, it in zip(elts, items):
            r = "?"
            if isinstance(it, Sym) and len(it.pows) == 1 and it.pows[0][0].role != "?":
                r = it.pows[0][0].role
            elif type(e) is cst.Name:
                r = role_by_name(e.value, self.an.heads)
            roles.append(r)
        out = list(items)
        for r in set(roles) - {"?"}:
            idx = [i for i, x in enumerate(roles) if x == r]
            if len(idx) < 2:
                continue
            want = 0 if r == "B" else (n - 1 if r in ("E", "d") else None)
            keep = want if want in idx else None
            for i in idx:
                if i != keep and type(elts[i]) is cst.Name:
                    out[i] = Sym.dim(Dim(elts[i].value, "?", atoms=("?!" + elts[i].value,)))
        return out

    def _unpack(self, v: Any, n: int) -> list:
        if isinstance(v, Many):
            return [v.t] * n
        if isinstance(v, Tup) and len(v.items) == n and not v.star_unknown:
            return list(v.items)
        if isinstance(v, ShapeVal):
            if v.t.rank is None and v.start == 0 and v.stop_minus == 0:
                # ``a, b, c = t.shape`` unpacks every axis: ``t`` has rank n
                v = replace(v, t=replace(v.t, rank=n))
            return [self._shape_dim(v, i, None) for i in range(n)]
        if isinstance(v, Tensor) and v.parts:
            return [replace(v, parts=False)] * n
        if isinstance(v, Tensor):
            # iterating a tensor walks its first axis
            el = replace(v, rank=None if v.rank is None else v.rank - 1,
                         axes=v.axes[1:] if v.axes is not None and v.axes[0] != ("*",) else None,
                         key_axis=v.key_axis if v.key_axis is not None and v.rank and v.key_axis > -v.rank else None,
                         token_major=False, dims=())
            return [el] * n
        return [UNK] * n

    # ---- expressions
    def eval(self, node: cst.BaseExpression | None) -> Any:
        if node is None:
            return UNK
        try:
            v = self._eval(node)
        except RecursionError:  # pragma: no cover
            return UNK
        if self.record:
            self.an.result.values.setdefault(id(node), []).append(v)
        return v

    def _eval(self, node: cst.BaseExpression) -> Any:
        t = type(node)  # exact types: libcst's node classes are leaves (and slow ABCs)
        if t is cst.Name:
            if node.value in self.env:
                v = self.env[node.value]
                if isinstance(v, tuple) and v and v[0] == "param":
                    return _ParamRef(v[1])
                return v
            if node.value == "None":
                return NONE
            ref = self.an.function_value(node, self.env)
            if ref is not None:
                return ref
            if node.value in ("True", "False"):
                return UNK
            return _ParamRef(node.value, glob=True)
        if t in (cst.Integer, cst.Float):
            v = num_of(node)
            return Sym.lit(v) if v is not None else UNK
        if t is cst.UnaryOperation:
            v = self.eval(node.expression)
            if type(node.operator) is cst.Minus:
                s = self.as_sym(v, node.expression)
                if s is not None:
                    return s.mul(Sym.lit(-1))
                return v if isinstance(v, Tensor) else UNK
            if type(node.operator) is cst.Plus:
                return v
            return UNK
        if t is cst.Attribute:
            return self.eval_attr(node)
        if t is cst.BinaryOperation:
            a = self.eval(node.left)
            b = self.eval(node.right)
            return self.binop(type(node.operator).__name__, a, b, node, node.left, node.right)
        if t is cst.Call:
            return _layout_kept(node, self.ctx.qualname(node.func), self.eval_call(node))
        if t is cst.Subscript:
            v = self.eval_subscript(node)
            return replace(v, weight_axes=None) if isinstance(v, Tensor) and v.weight_axes else v
        if t in (cst.Tuple, cst.List):
            items = []
            star = False
            for e in node.elements:
                if type(e) is cst.StarredElement:
                    sv = self.eval(e.value)
                    if isinstance(sv, Tup):
                        items.extend(sv.items)
                        star = star or sv.star_unknown
                    elif isinstance(sv, ShapeVal):
                        items.append(("STAR", sv))
                        star = True
                    else:
                        items.append(("STAR", None))
                        star = True
                else:
                    items.append(self.eval(e.value))
            return Tup(tuple(items), star)
        if t is cst.IfExp:
            self.eval(node.test)
            return _join(self.eval(node.body), self.eval(node.orelse))
        if t is cst.BooleanOperation:
            a = self.eval(node.left)
            b = self.eval(node.right)
            if type(node.operator) is cst.Or and (a is NONE or self._defaults_to_none(a)):
                return b  # scale = scale or d ** -0.5: the fallback is the default
            return _join(a, b)
        if t in (cst.GeneratorExp, cst.ListComp):
            return self.eval_comp(node)
        if t is cst.Lambda:
            return FuncRef("<lambda>", None, fn=node, closure=self.env)
        if t is cst.Comparison:
            self.eval(node.left)
            return UNK
        return UNK

    def _defaults_to_none(self, v: Any) -> bool:
        """``v`` is a parameter of the function being run whose default is ``None``."""
        if not isinstance(v, _ParamRef) or v.glob or not self.an.stack:
            return False
        ps = self.an.stack[-1].params
        return any(p.name.value == v.name and type(p.default) is cst.Name and p.default.value == "None"
                   for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params))

    def is_unknown(self, v: Any) -> bool:
        return isinstance(v, Unknown)

    def as_sequence(self, v: Any) -> Any:
        # the parts of a split tensor: any number of like tensors
        return Many(replace(v, parts=False)) if isinstance(v, Tensor) and v.parts else v

    # attributes: self.x, t.shape, t.T, t.mT, module.attr
    def eval_attr(self, node: cst.Attribute) -> Any:
        attr = node.attr.value
        base = self.eval(node.value)
        if isinstance(base, SelfVal):
            if attr in base.attrs:
                return base.attrs[attr]
            if self.an.method_of(base, attr) is not None:
                return FuncRef(attr, bound_self=base)
            if attr == "training":
                return UNK
            return _ParamRef(f"self.{attr}", glob=True)
        if isinstance(base, Tensor):
            if attr == "shape":
                return ShapeVal(base, short_code(node.value) + ".shape")
            if attr == "mT":
                return self.transpose(base, -2, -1)
            if attr in ("real", "data"):
                return base
            return UNK
        if isinstance(base, _ParamRef):
            if attr == "shape":
                return ShapeVal(self.tensorize(base), short_code(node.value) + ".shape")
            if attr == "mT":
                return self.transpose(self.tensorize(base), -2, -1)
            if base.glob:
                ref = self.an.function_value(node, self.env)  # ``utils.helper`` as a value
                if ref is not None:
                    return ref
            return _ParamRef(f"{base.name}.{attr}", glob=True)
        if isinstance(base, (ModVal, Unknown)):
            name = dotted = short_code(node)
            return _ParamRef(dotted, glob=True) if "(" not in name and "[" not in name else UNK
        return UNK

    def tensorize(self, v: Any) -> Tensor | None:
        if isinstance(v, Tensor):
            return v
        if isinstance(v, _ParamRef):
            return Tensor(origin="param" if not v.glob else "unknown", pname=None if v.glob else v.name)
        return None

    def as_sym(self, v: Any, node: cst.BaseExpression | None = None) -> Sym | None:
        if isinstance(v, Sym):
            return v
        if isinstance(v, _ParamRef):
            return Sym.dim(Dim(v.name, role_by_name(v.name, self.an.heads)))
        return None

    def eval_subscript(self, node: cst.Subscript) -> Any:
        base = self.eval(node.value)
        sl = node.slice
        if isinstance(base, ShapeVal) and len(sl) == 1:
            el = sl[0].slice
            if type(el) is cst.Index:
                i = int_of(el.value)
                if i is not None:
                    return self._shape_dim(base, i, node)
            elif type(el) is cst.Slice:
                lo = int_of(el.lower) if el.lower is not None else 0
                hi = int_of(el.upper) if el.upper is not None else None
                if lo == 0 and hi is not None and hi < 0:
                    return replace(base, stop_minus=-hi)
            return UNK
        if isinstance(base, Tup) and len(sl) == 1 and type(sl[0].slice) is cst.Index:
            i = int_of(sl[0].slice.value)
            if i is not None and not base.star_unknown and -len(base.items) <= i < len(base.items):
                return base.items[i]
            return UNK
        t = self.tensorize(base)
        if t is not None:
            # indexing/slicing: keep scale facts, drop layout (a slice of scores stays scores)
            if t.scores:
                only_slices = all(type(e.slice) is cst.Slice or
                                  (type(e.slice) is cst.Index and type(e.slice.value) is cst.Ellipsis)
                                  for e in sl)
                if only_slices:
                    return t
                return replace(t, rank=None, axes=None, key_axis=None, pending=None)
            if t.parts and len(sl) == 1 and type(sl[0].slice) is cst.Index \
                    and int_of(sl[0].slice.value) is not None:
                return replace(t, parts=False)  # qkv[0] of qkv = x.chunk(3, dim=-1)
            kept = _index_axes(t, sl)
            if kept is not None:  # qkv[0] of (3, B, H, L, d): an integer index drops its axis
                return replace(t, rank=len(kept), axes=kept, pending=None, kT=False, dims=(),
                               split_node=None)
            return replace(t, rank=None, axes=None, pending=None, kT=False, dims=(), split_node=None)
        return UNK

    def _shape_dim(self, sv: ShapeVal, i: int, node: Any) -> Any:
        t = sv.t
        text = f"{sv.text}[{i}]"
        if t.axes is not None and t.rank is not None and "*" not in [a for ax in t.axes for a in ax]:
            if -t.rank <= i < t.rank:
                ax = t.axes[i]
                if len(ax) == 1 and ax[0] in ("B", "L", "H", "d"):
                    if i in (-1, t.rank - 1) and t.last is not None:
                        return Sym.dim(t.last)
                    return Sym.dim(Dim(text, ax[0], atoms=ax))
                return Sym.dim(Dim(text, "?", atoms=ax))
        if t.axes is None and t.origin == "param" and sv.start == 0 and sv.stop_minus == 1 \
                and i in (0, 1):
            # input_shape = x.shape[:-1] of a (B, L, E) input: input_shape[0] is B, [1] is L
            return Sym.dim(Dim(text, "BL"[i], atoms=("BL"[i],)))
        if (i == -1 or (t.rank is not None and i == t.rank - 1)) and t.last is not None:
            return Sym.dim(t.last)
        if i == -1 or (t.rank is not None and i == t.rank - 1):
            role = "d" if t.perhead else ("E" if t.token_major else "?")
            return Sym.dim(Dim(text, role))
        return Sym.dim(Dim(text, "?"))

    # ---- arithmetic
    def binop(self, op: str, a: Any, b: Any, node: Any, ln: Any = None, rn: Any = None) -> Any:
        if op == "MatrixMultiply":
            return self.matmul(a, b, node, kind="@")
        ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
        if op in ("Multiply", "Divide") and (ta or tb):
            t, other = (a, b) if ta else (b, a)
            if op == "Divide" and ta and tb and b.row_sum_of and a.softmax_evs:
                return self.renormalise(a, b.row_sum_of)
            if op == "Divide" and ta and tb and a.exped and a.scores and b.exp_sum is not None:
                # exp(s) / exp(s).sum(dim, keepdim=True): a softmax over dim
                return self.softmax(replace(a, exped=False), node, b.exp_sum, "exp/sum")
            if ta and tb:
                if a.scores or b.scores:
                    s = a if a.scores else b
                    return replace(s, factors=s.factors + (Factor(Sym(coef=None, opaque=True, name="tensor"),
                                                                  "scores", node),),
                                   normalized=s.normalized)
                return replace(a, factors=a.factors + (Factor(Sym(coef=None, opaque=True, name="tensor"), "x",
                                                              node),))
            s = self.as_sym(other) if not isinstance(other, _ParamRef) or not other.glob else _glob_sym(other, self.an.heads)
            if s is None:
                s = Sym(coef=None, opaque=True, name=short_code(rn if ta else ln) if (rn or ln) else "?")
            if op == "Divide":
                if not ta:  # scalar / tensor
                    return replace(t, factors=t.factors + (Factor(Sym(coef=None, opaque=True, name="recip"),
                                                                  "scores", node),))
                s = s.inv()
            return replace(t, factors=t.factors + (Factor(s, "scores" if t.scores else "x", node),))
        if op in ("Add", "Subtract") and (ta or tb):
            if ta and tb:
                s = a if a.scores or not b.scores else b
                other = rn if s is a else ln
            else:
                s = a if ta else b
                other = rn if ta else ln
            if op == "Add" and s.scores and other is not None and _T5_BIAS.search(short_code(other)):
                return replace(s, biased=True)
            return s if not (ta and tb) else replace(s)
        if op == "Add" and isinstance(a, (ShapeVal, Tup)) and isinstance(b, (ShapeVal, Tup)):
            def items(x: Any) -> tuple:
                return x.items if isinstance(x, Tup) else (("STAR", x),)
            return Tup(items(a) + items(b), star_unknown=True)
        if op in ("Multiply", "Divide", "Power", "FloorDivide", "Add", "Subtract"):
            sa = self.as_sym(a) if not isinstance(a, _ParamRef) or not a.glob else _glob_sym(a, self.an.heads)
            sb = self.as_sym(b) if not isinstance(b, _ParamRef) or not b.glob else _glob_sym(b, self.an.heads)
            if sa is None or sb is None:
                return UNK
            if op == "Multiply":
                return sa.mul(sb)
            if op in ("Divide", "FloorDivide"):
                r = sa.mul(sb.inv())
                _note_heads(r, self.an.heads)
                return r
            if op == "Power":
                if sb.is_literal():
                    return sa.pow(sb.coef)
                return Sym(coef=None, opaque=True, name="pow")
            # sums: opaque unless literal
            if sa.is_literal() and sb.is_literal():
                return Sym.lit(sa.coef + sb.coef if op == "Add" else sa.coef - sb.coef)
            return Sym.dim(Dim(short_code(node), "?"))
        return UNK

    # ---- calls
    def eval_call(self, node: cst.Call) -> Any:
        func = node.func
        q = self.ctx.qualname(func) or ""
        # method calls on values
        imported = type(func) is cst.Attribute and self._is_import(func.value)
        if type(func) is cst.Attribute and not imported:
            recv = self.eval(func.value)
            meth = func.attr.value
            if isinstance(recv, FuncRef):
                return UNK
            if isinstance(recv, (SelfVal, Tensor, _ParamRef, ShapeVal, Sym, ModVal)):
                r = self.method_call(recv, meth, node, q)
                if r is not None:
                    return r
        args = [self.eval(a.value) for a in node.args]
        kw = {a.keyword.value: v for a, v in zip(node.args, args) if a.keyword is not None}
        pos = positional_values(node, args)
        callee = self.an.resolve_callee(self, func) if type(func) in _CALLEE_EXPRS else None
        name = q
        leaf = name.rsplit(".", 1)[-1]
        low = leaf.lower()
        if "rotary" in low or "rope" in low or low in ("repeat_kv", "apply_rotary_emb", "apply_pos_emb"):
            # position embeddings / KV repetition keep the scale and layout of q and k
            ts = [self.tensorize(p) for p in pos]
            ts = [t for t in ts if t is not None]
            if low == "repeat_kv" or len(ts) == 1:
                return ts[0] if ts else UNK
            return Tup(tuple(ts)) if ts else UNK
        if not isinstance(callee, FuncRef):  # a function of another linted file
            callee = self.an.imported_ref(func, self.env) or callee
        if isinstance(callee, FuncRef):
            return self.inline(callee, node, pos, kw)
        if name in PARTIAL and pos and isinstance(pos[0], FuncRef):
            return pos[0].partial(pos[1:], kw)
        builtin = not (type(func) is cst.Name and func.value in self.env)
        if name == "map" and len(pos) == 2 and builtin:
            return self.map_values(args[0], pos[1], node)
        if name == "zip" and pos and builtin and len(pos) == len(node.args):
            return _zip(pos)
        if name in ("tuple", "list") and len(pos) == 1 and builtin and isinstance(pos[0], (Tup, Many)):
            return pos[0]
        if leaf in ("get_interface", "get") and any(isinstance(v, FuncRef) for v in args):
            # ALL_ATTENTION_FUNCTIONS.get_interface(impl, eager_attention_forward): the fallback
            return next(v for v in args if isinstance(v, FuncRef))
        if leaf == "getattr" and len(node.args) >= 2 and type(node.args[1].value) is cst.SimpleString:
            attr = node.args[1].value.evaluated_value
            base = short_code(node.args[0].value)
            if isinstance(attr, str) and role_by_name(attr, self.an.heads) != "?":
                return Sym.dim(Dim(f"{base}.{attr}", role_by_name(attr, self.an.heads)))
            return _ParamRef(f"{base}.{attr}", glob=True)
        if isinstance(callee, ModVal):
            return self.module_call(callee, node, pos)
        # torch / math functions
        if name in ("math.sqrt", "numpy.sqrt", "np.sqrt", "torch.sqrt", "sqrt") or leaf == "sqrt" and name.startswith(("math", "torch", "numpy")):
            s = self.as_sym(pos[0]) if pos else None
            if isinstance(pos[0] if pos else None, Tensor):
                s = None
            return s.pow(0.5) if s is not None else Sym(coef=None, opaque=True, name=short_code(node))
        if name in ("torch.rsqrt",):
            s = self.as_sym(pos[0]) if pos else None
            return s.pow(-0.5) if s is not None else Sym(coef=None, opaque=True, name=short_code(node))
        if name in ("math.pow", "pow", "torch.pow") and len(pos) == 2:
            a, b = self.as_sym(pos[0]), self.as_sym(pos[1])
            if a is not None and b is not None and b.is_literal():
                return a.pow(b.coef)
            return Sym(coef=None, opaque=True, name=short_code(node))
        if name in ("float", "int", "torch.tensor", "torch.as_tensor", "numpy.float32", "math.floor"):
            if pos:
                s = self.as_sym(pos[0])
                if s is not None:
                    return s
            return UNK
        if name in ("torch.full", "torch.full_like") and len(pos) >= 2:
            s = self.as_sym(pos[1])
            return s if s is not None else UNK
        if name == "torch.where" and len(pos) == 3:
            # torch.where(mask, scores, fill) / torch.where(mask, fill, scores): masked scores keep
            # their rank, key axis and scale facts (GPT-2's causal mask)
            for cand in (pos[1], pos[2]):
                if isinstance(cand, Tensor) and cand.scores:
                    return cand
            return UNK
        op = ops.FUNCTIONS.get(name)
        if op is not None and op.family == "matmul" and op.kind in ("matmul", "bmm", "baddbmm"):
            if len(pos) <= op.other.pos:
                return UNK
            r = self.matmul(pos[op.input.pos], pos[op.other.pos], node,
                            kind="matmul" if op.kind == "matmul" else "bmm")
            alpha = kw.get("alpha")
            if op.kind == "baddbmm" and isinstance(r, Tensor) and r.scores:
                s = self.as_sym(alpha) if alpha is not None else ONE
                if s is None:
                    s = Sym(coef=None, opaque=True, name="alpha")
                if alpha is not None:
                    r = replace(r, factors=r.factors + (Factor(s, "alpha", node),))
            return r
        if name in _EINSUM or name.endswith(".einsum") or name == "einsum":
            return self.einsum(node, q)
        if name in _REARRANGE:
            return self.rearrange(node, pos, kw)
        if name in ops.EXP and pos and isinstance(pos[0], Tensor) and pos[0].scores:
            return replace(pos[0], exped=True)
        if name in ops.SOFTMAX:
            if pos:
                return self.softmax(pos[0], node, ops.FUNCTIONS[name].dim.of(node), name)
            return UNK
        if name in ops.SDPA:
            return self.sdpa(node, pos, kw)
        kop = ops.kernel(name)
        if kop is not None and kop.layout == "BLHD" and kop.q is not None and kop.k is not None:
            return self.sdpa(node, pos, kw, kop)  # flash-attn / xformers: q, k (B, L, H, d)
        if name in ("torch.nn.functional.normalize",) or leaf == "l2norm" or leaf == "l2_norm":
            t = self.tensorize(pos[0]) if pos else None
            if t is not None and t.softmax_evs and name == "torch.nn.functional.normalize":
                # F.normalize(x, p, dim) divides by the p-norm over dim (defaults p=2, dim=1,
                # PyTorch docs): with p=1 on non-negative weights, by their sum
                pa, da = arg_value(node, 1, "p"), arg_value(node, 2, "dim")
                pv = num_of(pa) if pa is not None else 2.0
                if pv is None and pa is not None:
                    pv = self._int_value(pa, None)
                dim = self._int_value(da, 1)
                if pv == 1:
                    return self.renormalise(t, tuple(e for e in t.softmax_evs if e.is_key_axis(dim)))
            if t is not None:
                return replace(t, normalized=True, factors=())
            return UNK
        if name in ("torch.nn.functional.linear",) and pos:
            x = self.tensorize(pos[0])
            return self.project(x, None)
        if name in ops.F_DROPOUT and pos:
            return pos[0] if isinstance(pos[0], Tensor) else UNK
        if name in _TRANSPOSE and len(pos) == 3:
            t = self.tensorize(pos[0])
            i, j = int_of(node.args[1].value), int_of(node.args[2].value)
            if t is not None and i is not None and j is not None:
                return self.transpose(t, i, j)
            return UNK
        if name in _SOFTMAX_MODULES:
            d = ops.MODULES[name].dim.of(node)
            return ModVal("softmax", dim=int_of(d) if d is not None else None, has_dim=d is not None)
        if name in _LINEAR_MODULES or leaf in ("Conv1D",):
            in_f = self.as_sym(pos[0]) if pos else None
            out_f = self.as_sym(pos[1]) if len(pos) > 1 else None
            if leaf == "Conv1D" and len(pos) > 1:  # HF Conv1D(nf, nx): out first
                in_f, out_f = out_f, in_f
            return ModVal("linear", in_f=in_f, out_f=out_f)
        if name.startswith("torch.nn.") and leaf in ("Dropout", "Identity"):
            return ModVal("dropout")
        if name.startswith("torch.nn.") and "Norm" in leaf:
            return ModVal("norm")
        if name.startswith("torch.nn.") and leaf[:1].isupper():
            return ModVal("other")
        if name in ("torch.ones", "torch.zeros", "torch.randn", "torch.rand", "torch.empty"):
            return Tensor(origin="proj")
        if "rotary" in leaf.lower() or "rope" in leaf.lower() or leaf in ("repeat_kv", "apply_rotary_emb"):
            ts = [self.tensorize(p) for p in pos]
            ts = [t for t in ts if t is not None]
            if leaf == "repeat_kv" or len(ts) == 1:
                return ts[0] if ts else UNK
            return Tup(tuple(ts)) if ts else UNK
        return UNK

    def _is_import(self, node: cst.BaseExpression) -> bool:
        """``node`` is a name bound by an import (a module, relative imports included) or an
        attribute of one."""
        while type(node) is cst.Attribute:
            node = node.value
        imports = self.ctx.imports
        return type(node) is cst.Name and node.value not in self.env and (
            node.value in imports.aliases or node.value in imports.relative)

    def method_call(self, recv: Any, meth: str, node: cst.Call, q: str) -> Any:
        if isinstance(recv, ModVal) and meth in _MODULE_MOVES:
            return recv  # ``nn.Linear(E, 3 * E).double()``: the same module
        if isinstance(recv, SelfVal):
            if meth in recv.attrs:
                mv = recv.attrs[meth]
                args = [self.eval(a.value) for a in node.args]
                pos = [v for a, v in zip(node.args, args) if a.keyword is None and not a.star]
                if isinstance(mv, ModVal):
                    return self.module_call(mv, node, pos)
                return UNK
            if self.an.method_of(recv, meth) is not None:
                args = [self.eval(a.value) for a in node.args]
                kw = {a.keyword.value: v for a, v in zip(node.args, args) if a.keyword is not None}
                return self.inline(FuncRef(meth, bound_self=recv), node, positional_values(node, args), kw)
            if meth == "register_buffer" and len(node.args) >= 2:
                nm = node.args[0].value
                if type(nm) is cst.SimpleString:
                    recv.attrs[nm.evaluated_value] = self.eval(node.args[1].value)
                return UNK
            # unknown module on self: a projection when its name says so
            args = [self.eval(a.value) for a in node.args]
            pos = [v for a, v in zip(node.args, args) if a.keyword is None and not a.star]
            low = meth.lower()
            if pos and re.search(r"(proj|^q$|^k$|^v$|^w_?[qkv]|query|key|value|qkv|c_attn|to_[qkv]|linear|^wq|^wk|^wv|in_proj)", low) and "norm" not in low and "rot" not in low:
                return self.project(self.tensorize(pos[0]), None)
            if pos and "norm" in low:
                t = self.tensorize(pos[0])
                return replace(t, factors=()) if t is not None else UNK
            return UNK
        if isinstance(recv, Sym):
            if meth in ("sqrt",):
                return recv.pow(0.5)
            if meth in ("rsqrt",):
                return recv.pow(-0.5)
            if meth in ("exp", "log", "clamp", "item"):
                return Sym(coef=None, opaque=True, name=meth)
            return None
        if isinstance(recv, ShapeVal):
            return None
        t = self.tensorize(recv)
        if t is None:
            return None
        ints = [int_of(a.value) for a in node.args if a.keyword is None]
        if meth == "size":
            if not node.args:
                return ShapeVal(t, short_code(node.func.value) + ".size()")
            i = ints[0] if ints else None
            if i is not None:
                return self._shape_dim(ShapeVal(t, short_code(node.func.value) + ".shape"), i, node)
            return UNK
        if meth in ("transpose", "swapaxes", "swapdims") and len(ints) == 2 and None not in ints:
            return self.transpose(t, ints[0], ints[1])
        if meth == "permute":
            if len(ints) == 1 and node.args and type(node.args[0].value) in (cst.Tuple, cst.List):
                ints = [int_of(e.value) for e in node.args[0].value.elements]
            if ints and None not in ints:
                return self.permute(t, ints)
            return replace(t, rank=None, axes=None, kT=False, split_node=None)
        if meth in ("view", "reshape", "expand", "repeat", "unflatten", "flatten") and meth in ("view", "reshape"):
            return self.view(t, node)
        if meth == "unflatten":
            # x.unflatten(-1, (H, d)) is x.view(*x.shape[:-1], H, d)
            dn, sizes = arg_value(node, 0, "dim"), arg_value(node, 1, "sizes")
            dv = int_of(dn) if dn is not None else None
            if sizes is not None and type(sizes) in (cst.Tuple, cst.List) and (
                    dv == -1 or (t.rank is not None and dv == t.rank - 1)):
                items = [self.eval(e.value) for e in sizes.elements]
                return self.view(t, node, [("STAR", ShapeVal(t, "x.shape", 0, 1))] + items)
            return replace(t, rank=None, axes=None, split_node=None)
        if meth == "flatten":
            start = ints[0] if ints else 0
            if t.axes is not None and t.rank is not None and start is not None and len(ints) <= 1 \
                    and not any("*" in ax for ax in t.axes):
                st = start if start >= 0 else t.rank + start
                if 0 <= st < t.rank:
                    axes = t.axes[:st] + (tuple(a for ax in t.axes[st:] for a in ax),)
                    return replace(t, rank=len(axes), axes=axes, split_node=None, kT=False,
                                   key_axis=t.key_axis if t.key_axis == -1 and st == t.rank - 1 else None,
                                   token_major=axes[-1] == ("H", "d"), pending=None, dims=())
            return replace(t, rank=None, axes=None, split_node=None, key_axis=t.key_axis if t.key_axis == -1 and ints and ints[0] not in (-1,) else None)
        if meth in ("softmax",):
            return self.softmax(t, node, arg_value(node, 0, "dim"), "Tensor.softmax")
        if meth in ("split", "chunk", "unbind", "tensor_split"):
            dim = arg_value(node, 1 if meth != "unbind" else 0, "dim")
            di = int_of(dim) if dim is not None else (0 if meth == "unbind" else 0)
            if meth == "unbind":
                if di == -1 or (t.rank is not None and di == t.rank - 1):
                    # unbinding the feature axis leaves scalars per token: head_dim is 1
                    return Many(replace(t, rank=None if t.rank is None else t.rank - 1, axes=None,
                                         last=Dim("1", "d", 1.0), token_major=False, dims=()))
                if t.axes is not None and t.rank is not None and di is not None:
                    axes = t.axes[:di] + t.axes[di + 1:]
                    return Many(replace(t, rank=t.rank - 1, axes=axes, dims=()))
                return Many(replace(t, rank=None if t.rank is None else t.rank - 1, axes=None, dims=()))
            out = t
            if t.token_major and (di == -1 or (t.rank is not None and di == t.rank - 1) or (t.rank is None and di == 2)):
                out = replace(t, last=None)
            return Many(replace(out, dims=()))
        if meth in _PASSTHROUGH_METHODS or meth in ("expand", "expand_as", "repeat", "repeat_interleave"):
            if meth in ("expand", "repeat", "repeat_interleave", "expand_as"):
                return replace(t, dims=())
            return t
        if meth in ("unsqueeze", "squeeze"):
            if t.scores:
                return replace(t, rank=None if t.rank is None else t.rank + (1 if meth == "unsqueeze" else -1),
                               axes=None, key_axis=-1 if t.key_axis == -1 else None)
            return replace(t, rank=None, axes=None, dims=(), split_node=None)
        if meth in ("mul", "mul_", "div", "div_"):
            args = [self.eval(a.value) for a in node.args if a.keyword is None]
            if args:
                return self.binop("Multiply" if meth.startswith("mul") else "Divide", t, args[0], node)
            return t
        if meth in ("matmul", "bmm") and node.args:
            return self.matmul(t, self.eval(node.args[0].value), node, kind=meth)
        if meth in ("masked_fill",):
            return t
        if meth == "exp" and t.scores:
            return replace(t, exped=True)
        if meth in ("sum", "nansum") and t.exped and t.scores:
            dn = arg_value(node, 0, "dim")
            return replace(t, exped=False, scores=False, factors=(), exp_sum=dn) if dn is not None else UNK
        if meth in ("sum", "nansum") and t.softmax_evs:
            kd = arg_value(node, None, "keepdim")
            keep = isinstance(kd, cst.Name) and kd.value == "True"
            return self.row_sum(t, self._int_value(arg_value(node, 0, "dim"), None), keep)
        return None

    def module_call(self, mv: ModVal, node: cst.Call, pos: list) -> Any:
        if mv.kind == "softmax":
            if not pos:
                return UNK
            return self.softmax(pos[0], node, None, "nn.Softmax", mod=mv)
        if mv.kind == "dropout":
            return pos[0] if pos and isinstance(pos[0], Tensor) else UNK
        if mv.kind == "linear":
            x = self.tensorize(pos[0]) if pos else None
            a0 = node.args[0].value if node.args and node.args[0].keyword is None else None
            if x is not None and type(a0) is cst.Name and x.origin == "param" and x.axes is None \
                    and not x.perhead and not x.token_major and a0.value in self.env:
                # a parameter fed to a projection is (…, L, E): its last axis is the model width
                self.env[a0.value] = replace(x, token_major=True, pname=a0.value)
            return self.project(x, mv)
        if mv.kind == "norm":
            t = self.tensorize(pos[0]) if pos else None
            return replace(t, factors=(), dims=()) if t is not None else UNK
        if mv.kind == "other" and pos and isinstance(pos[0], Tensor):
            return Tensor(origin="proj")  # a fresh tensor (conv, embedding, ...): layout unknown
        return UNK

    def project(self, x: Tensor | None, mv: ModVal | None) -> Tensor:
        last = None
        if mv is not None and mv.out_f is not None and not mv.out_f.opaque:
            out = mv.out_f
            if len(out.pows) == 1 and out.pows[0][1] == 1 and out.coef == 1:
                d = out.pows[0][0]
                last = d
            else:
                role = _role_of_sym(out, self.an.heads)
                last = Dim(out.text(), role, out.value())
        axes = None
        rank = None
        if x is not None and x.axes is not None and x.rank is not None:
            axes = x.axes[:-1] + (("H", "d"),)
            rank = x.rank
        else:
            axes = (("*",), ("H", "d"))
        perhead = last is not None and last.role == "d"
        return Tensor(rank=rank, axes=axes, origin="proj", last=last, perhead=perhead, token_major=True)

    def call_value(self, f: Any, node: cst.Call, pos: list, kw: dict) -> Any:
        """Apply a callable value (a :class:`FuncRef`, an ``nn`` module) to evaluated arguments."""
        if isinstance(f, FuncRef):
            return self.inline(f, node, pos, kw)
        if isinstance(f, ModVal) and pos:
            return self.module_call(f, node, pos)
        return UNK

    def inline(self, ref: FuncRef, node: cst.Call, pos: list, kw: dict) -> Any:
        """The value of calling ``ref`` with ``pos`` / ``kw``: its body inlined (see
        :class:`~attncheck.lint.analysis.interpreter.Interpreter`)."""
        pos, kw = ref.call_args(pos, kw)
        cls = self.an.index.classes.get(ref.bound_self.cls) if ref.bound_self is not None else None
        fn = self.an.function_of(ref, cls)
        an = self.an if ref.owner is None else ref.owner  # the file that defines it
        if not self.an.can_inline(fn, self.depth + 1):
            return UNK
        if type(fn) is cst.Lambda:
            env = dict(ref.closure or {})
            for i, n in enumerate(positional_params(fn)):
                env[n] = pos[i] if i < len(pos) else kw.get(n, ("param", n))
            return self.an.run_body(_Frame(self.an, env, self.selfv, self.depth + 1, self.record), fn)
        params = fn.params
        plist = list(params.posonly_params) + list(params.params)
        bound: dict[str, Any] = {}
        names = [p.name.value for p in plist]
        offset = 0
        if ref.bound_self is not None and names and names[0] in ("self", "cls"):
            offset = 1
        for i, v in enumerate(pos):
            if i + offset < len(names):
                bound[names[i + offset]] = _unparam(v) if not isinstance(v, Unknown) or v is NONE else ("param", names[i + offset])
        allnames = set(names) | {p.name.value for p in params.kwonly_params}
        for k, v in kw.items():
            if k in allnames:
                val = _unparam(v) if not isinstance(v, Unknown) or v is NONE else ("param", k)
                if SCALE_PARAM.match(k) and isinstance(v, Sym) and v.is_literal() and v.coef == 1.0:
                    val = Sym(coef=1.0, explicit_one=True)
                bound[k] = val
        for p in plist + list(params.kwonly_params):
            n = p.name.value
            # a literal 1.0 passed for a parameter (whatever its name: scaling, temp, alpha, ...) is an
            # explicit unit scale when it multiplies the scores (T5's intentional unscaled attention)
            if n in bound and isinstance(bound[n], Sym) and bound[n].is_literal() \
                    and bound[n].coef == 1.0 and not bound[n].default_one:
                bound[n] = Sym(coef=1.0, explicit_one=True, name=bound[n].name)
        # module-level helper receiving self as first arg (HF eager_attention_forward(self, ...))
        selfv = ref.bound_self
        if ref.fn is not None and ref.closure is not None:
            # a local def sees the enclosing frame's names; its parameters shadow them
            params_env = {p.name.value for p in plist + list(params.kwonly_params)}
            bound = {**{k: v for k, v in ref.closure.items() if k not in params_env}, **bound}
            selfv = self.selfv
        if an is not self.an:  # another file's function: nothing of its body is recorded here,
            # and what its value says about its own nodes moves to this call
            return rehome(an._run_function(fn, selfv, bound, self.depth + 1, record=False), an.ctx,
                          node, opaque=(FuncRef,), unknown=UNK)
        return self.an._run_function(fn, selfv, bound, self.depth + 1, record=self.record,
                                     closure=ref.fn is not None)

    # ---- tensor ops
    def transpose(self, t: Tensor, i: int, j: int) -> Tensor:
        r = t.rank
        if t.weight_axes is not None:
            t = replace(t, weight_axes=_swap_last_two(t.weight_axes, i, j, r))
        if r is None and (i >= 0 or j >= 0) and not (i < 0 and j < 0):
            # rank unknown: resolved at the matmul.  A (B, L, H, d) split survives only the key's
            # transpose(2, 3) (H↔d); transpose(1, 2) is the head transpose itself
            return replace(t, pending=(i, j), kT=False, axes=None, dims=(),
                           split_node=t.split_node if t.pending is None and {i, j} == {2, 3} else None)
        if r is None:
            # negative indices: swapping the last two is kT
            last_two = {i, j} == {-1, -2}
            if not last_two or t.pending is not None:
                t = replace(t, split_node=None)
            ka = t.key_axis
            if t.scores and ka is not None and ka in (i, j):
                ka = j if ka == i else i
            return replace(t, kT=last_two or t.kT and not last_two, axes=None, key_axis=ka, dims=())
        ii, jj = i % r, j % r
        axes = None
        if t.axes is not None and len(t.axes) == r:
            ax = list(t.axes)
            ax[ii], ax[jj] = ax[jj], ax[ii]
            axes = tuple(ax)
        last_two = {ii, jj} == {r - 2, r - 1}
        ka = t.key_axis
        if t.scores and ka is not None:
            kpos = ka % r
            if kpos in (ii, jj):
                kpos = jj if kpos == ii else ii
            ka = kpos - r
        last = t.last if r - 1 not in (ii, jj) else None
        split = t.split_node if last_two and ii != jj else None
        return replace(t, axes=axes, kT=(not t.kT) if last_two else t.kT, key_axis=ka, last=last, dims=(),
                       split_node=split)

    def permute(self, t: Tensor, perm: list[int]) -> Tensor:
        r = len(perm)
        if t.rank is not None and t.rank != r:
            return replace(t, rank=None, axes=None, split_node=None)
        perm = [p % r for p in perm]
        axes = None
        if t.axes is not None and len(t.axes) == r and "*" not in [a for ax in t.axes for a in ax]:
            axes = tuple(t.axes[p] for p in perm)
        kT = t.kT
        feature_last = (t.axes is not None and t.axes[-1] in (("d",), ("H", "d"))) or t.last is not None \
            or t.perhead or t.token_major
        if perm[-2] == r - 1 and feature_last:
            kT = not t.kT
        ka = t.key_axis
        if t.scores and ka is not None:
            ka = perm.index(ka % r) - r
        wa = None
        if t.weight_axes is not None and perm[:-2] == list(range(r - 2)):
            wa = t.weight_axes if perm[-1] == r - 1 else t.weight_axes[::-1]
        t = replace(t, weight_axes=wa)
        last = t.last if perm[-1] == r - 1 else None
        split = t.split_node if perm[:-2] == list(range(r - 2)) else None
        return replace(t, rank=r, axes=axes, kT=kT, key_axis=ka, pending=None, last=last, dims=(),
                       split_node=split)

    def _resolve(self, t: Tensor, rank: int | None) -> Tensor:
        if t.pending is not None and rank is not None:
            i, j = t.pending
            base = replace(t, pending=None, rank=rank)
            return self.transpose(base, i, j)
        if rank is not None and t.rank is None:
            return replace(t, rank=rank)
        return t

    @staticmethod
    def _heads_last(t: Tensor, kt: bool = False) -> bool:
        """``t`` is still laid out (…, L, H, d) by a head-split view (a key after ``transpose(-2, -1)``:
        (…, L, d, H)): attention over it would run over the heads axis.  Any other transpose,
        permute or view since the split clears :attr:`Tensor.split_node`."""
        return t.split_node is not None and t.pending is None

    def _attention_formed(self) -> None:
        """This file's code formed attention here (:attr:`ViewEvent.in_attention`)."""
        if self.record:
            self.an.attention_formed += 1

    def _split_event(self, t: Tensor) -> None:
        if self.record:
            ev = ViewEvent(t.split_node, "ATT401", t.split_axes[0], t.split_axes[1], reason="scores")
            self.an.result.view_events.append(ev)

    def matmul(self, a: Any, b: Any, node: Any, kind: str) -> Any:
        ta, tb = self.tensorize(a), self.tensorize(b)
        if ta is None or tb is None:
            return UNK
        rank = 3 if kind == "bmm" else (ta.rank or tb.rank)
        if rank is None and any(t.pending in ((1, 2), (2, 1)) and t.perhead for t in (ta, tb)):
            rank = 4  # per-head q/k after the head transpose(1, 2): (B, H, L, d)
        if rank is None and tb.pending is not None and abs(tb.pending[0] - tb.pending[1]) == 1:
            rank = max(tb.pending) + 1  # k.transpose(2, 3) as a matmul operand: its last two axes
        ta, tb = self._resolve(ta, rank), self._resolve(tb, rank)
        if tb.pending is not None or ta.softmaxed or ta.scores:
            # weights @ v
            if ta.scores or ta.softmaxed and ta.event is not None:
                self._attention_formed()
            if ta.softmaxed and ta.event is not None:
                ta.event.to_v = True
            if ta.softmaxed and ta.weight_axes is not None and self.record:
                # the values are summed over the weights' last axis: that axis of the scores is
                # the key axis (``k @ q.transpose(-2, -1)`` lays the keys out on dim -2)
                for sev in ta.softmax_evs:
                    sev.key_axis = ta.weight_axes[-1]
            if ta.softmaxed and self._heads_last(tb):
                self._split_event(tb)
                return Tensor(rank=ta.rank or tb.rank, origin="proj", perhead=True, last=tb.last)
            axes = None
            if ta.axes is not None and tb.axes is not None:
                axes = ta.axes[:-1] + tb.axes[-1:]
            elif tb.axes is not None and not ta.scores:
                axes = None
            elif ta.axes is not None and ta.scores:
                axes = ta.axes[:-1] + (tb.axes[-1:] if tb.axes else (("d",),))
            return Tensor(rank=ta.rank or tb.rank, axes=axes, origin="proj", perhead=tb.perhead or ta.perhead,
                          last=tb.last)
        if not tb.kT:
            return Tensor(rank=rank, origin="unknown")
        if ta.rank is not None and ta.rank < 3 and rank is not None and rank < 3:
            return Tensor(rank=rank, origin="unknown")
        if kind == "@" and rank is None and ta.axes is None and tb.rank is None and ta.origin == "unknown" \
                and tb.origin == "unknown":
            pass
        axes = None
        if ta.axes is not None and tb.axes is not None and len(ta.axes) >= 2:
            axes = ta.axes[:-1] + (("L",),)
        bad = [t for t in (ta, tb) if self._heads_last(t, kt=t is tb)]
        for t in bad:
            self._split_event(t)
        if bad:
            axes = None
        factors = _qk_factors(ta, tb)
        self._attention_formed()
        return Tensor(rank=rank, axes=axes, factors=factors, origin="proj", scores=True, key_axis=-1,
                      q=ta, k=tb, node=node, normalized=ta.normalized and tb.normalized,
                      perhead=ta.perhead or tb.perhead,
                      uncertain=ta.uncertain or tb.uncertain, partial=ta.partial or tb.partial)

    def einsum(self, node: cst.Call, q: str) -> Any:
        eq = None
        ops: list = []
        for a in node.args:
            if a.keyword is not None:
                continue
            if type(a.value) in (cst.SimpleString, cst.ConcatenatedString) and eq is None:
                try:
                    eq = a.value.evaluated_value
                except Exception:
                    eq = None
                if eq is None:
                    return UNK
                continue
            if type(a.value) is cst.FormattedString and eq is None:
                parts = [p.value for p in a.value.parts if type(p) is cst.FormattedStringText]
                if len(parts) != len(a.value.parts):
                    return UNK
                eq = "".join(parts)
                continue
            if a.star:
                return UNK
            ops.append(self.eval(a.value))
        if not isinstance(eq, str) or len(ops) != 2:
            for _ in ops:
                pass
            return UNK
        parsed = parse_einsum(eq)
        if parsed is None or len(parsed[0]) != 2:
            return UNK
        (sa, sb), out = parsed
        ta, tb = self.tensorize(ops[0]), self.tensorize(ops[1])
        if ta is None or tb is None or not sa or not sb:
            return UNK
        for w in (ta, tb):
            if w.softmaxed and w.event is not None:
                w.event.to_v = True  # weights · v written as an einsum (either operand order)
                self._attention_formed()
        axes = _einsum_axes(sa, sb, out, ta, tb)
        if isinstance(ops[0], Tensor) and ops[0].softmaxed:
            return Tensor(rank=len(out), axes=axes, origin="proj", perhead=ta.perhead or tb.perhead,
                          last=tb.last if out[-1:] == sb[-1:] else None)
        contracted = [c for c in sa if c in sb and c not in out and c != "…"]
        a_only = [c for c in sa if c not in sb and c in out]
        b_only = [c for c in sb if c not in sa and c in out]
        if len(contracted) != 1 or len(b_only) != 1 or len(a_only) < 1:
            return Tensor(rank=len(out.replace("…", "")) if "…" not in out else None, origin="unknown")
        c = contracted[0]
        if sa[-1] != c or sb[-1] != c:
            return Tensor(origin="unknown")
        if "…" in out:
            rank = None
            key_axis = out.index(b_only[0]) - len(out)
        else:
            rank = len(out)
            key_axis = out.index(b_only[0]) - rank
        perhead = ta.perhead or tb.perhead or len(sa.replace("…", "")) >= 4
        factors = _qk_factors(ta, tb)
        self._attention_formed()
        return Tensor(rank=rank, axes=axes, factors=factors, origin="proj", scores=True,
                      key_axis=key_axis, q=ta, k=tb, node=node,
                      normalized=ta.normalized and tb.normalized, perhead=perhead)

    def rearrange(self, node: cst.Call, pos: list, kw: dict) -> Any:
        if len(pos) < 2 or type(node.args[1].value) is not cst.SimpleString:
            return UNK
        t = self.tensorize(pos[0])
        if t is None:
            return UNK
        pat = node.args[1].value.evaluated_value
        if "->" not in pat:
            return UNK
        lhs, rhs = pat.split("->", 1)
        toks = re.findall(r"\([^)]*\)|\S+", rhs)
        perhead = any(tok == "h" for tok in toks)
        axes = _einops_axes(lhs, rhs, t, {a.keyword.value for a in node.args if a.keyword is not None})
        last = None
        if axes is not None and axes[-1:] == (("d",),):
            last = t.last if t.last is not None and t.last.role == "d" else Dim("head_dim", "d")
        return Tensor(rank=len(toks), axes=axes, origin=t.origin, factors=t.factors,
                      perhead=perhead or t.perhead, normalized=t.normalized, last=last,
                      token_major=axes is not None and axes[-1:] == (("H", "d"),))

    def view(self, t: Tensor, node: cst.Call, given: list | None = None) -> Any:
        """``t.view(...)`` / ``reshape``; ``given``: the target sizes already evaluated (an
        ``unflatten`` rewritten as a view)."""
        args = [a for a in node.args if a.keyword is None] if given is None else []
        vals: list = [] if given is None else list(given)
        for a in args:
            v = self.eval(a.value)
            if a.star:
                if isinstance(v, Tup):
                    vals.extend(v.items)
                elif isinstance(v, ShapeVal):
                    vals.append(("STAR", v))
                else:
                    vals.append(("STAR", None))
            else:
                vals.append(v)
        if len(vals) == 1 and isinstance(vals[0], Tup):
            vals = list(vals[0].items)
        elif len(vals) == 1 and isinstance(vals[0], ShapeVal):
            vals = [("STAR", vals[0])]
        self._infer_heads(t, vals)
        axes: list[tuple[str, ...]] = []
        unknown = False
        last_dim: Dim | None = None
        for i, v in enumerate(vals):
            if isinstance(v, tuple) and v and v[0] == "STAR":
                sv = v[1]
                if isinstance(sv, ShapeVal) and sv.t.axes is not None and "*" not in [x for ax in sv.t.axes for x in ax] \
                        and sv.t.rank is not None:
                    axes.extend(sv.t.axes[sv.start: sv.t.rank - sv.stop_minus])
                elif isinstance(sv, ShapeVal) and _token_prefix(sv, t):
                    axes.extend((("B",), ("L",)))
                else:
                    axes.append(("*",))
                continue
            s = self.as_sym(v) if not isinstance(v, _ParamRef) or not v.glob else _glob_sym(v, self.an.heads)
            if s is None:
                axes.append(("?",))
                unknown = True
                continue
            at = s.atoms(self.an.heads)
            if at is None:
                axes.append(("?" + s.text(),))
                continue
            axes.append(at)
            if i == len(vals) - 1 and len(s.pows) == 1 and s.pows[0][1] == 1 and s.coef == 1:
                last_dim = s.pows[0][0]
        rank = None if any(ax == ("*",) for ax in axes) else len(axes)
        out_axes = tuple(axes)
        # resolve REST (-1) against the input's atoms
        in_atoms = [a for ax in (t.axes or ()) for a in ax]
        if t.axes is not None and sum(1 for ax in out_axes if ax == ("REST",)) == 1:
            explicit = [a for ax in out_axes if ax != ("REST",) for a in ax]
            rest = tuple(a for a in in_atoms if a not in explicit)
            if any(a.startswith("?") for a in explicit) and any(not a.startswith("?") and a != "*" for a in rest):
                rest = ("?rest",)  # an unknown explicit axis may stand for any of the remaining atoms
            if "*" in rest:
                if "L" in explicit or any(a.startswith("?") for a in explicit):
                    rest = tuple(a for a in rest if a != "*")
                elif "B" in explicit:
                    rest = tuple("L" if a == "*" else a for a in rest)
            out_axes = tuple(rest if ax == ("REST",) else ax for ax in out_axes)
        if t.axes is not None and not unknown and self.record:
            code = _reorder(t.axes, out_axes, t.token_major)
            if code is not None:
                self.an.result.view_events.append(ViewEvent(node, code, t.axes, out_axes))
                # the tensor's real layout no longer matches any atom labelling
                return replace(t, rank=len(out_axes) if ("*",) not in out_axes else None, axes=None,
                               key_axis=None, perhead=True, token_major=False, pending=None, kT=False, dims=(),
                               split_node=None)
        perhead = t.perhead
        flat = [a for ax in out_axes for a in ax]
        if any(ax == ("H",) for ax in out_axes) and out_axes and out_axes[-1] in (("d",), ("REST",)):
            perhead = True
        if len(out_axes) >= 2 and out_axes[-1] == ("d",) and "H" in flat:
            perhead = True
        key_axis = None
        if t.scores and t.key_axis == -1:
            lv = vals[-1] if vals else None
            ls = self.as_sym(lv) if lv is not None and not isinstance(lv, tuple) else None
            if ls is not None and ls.is_literal() and ls.coef == -1 or t.axes is not None and out_axes and out_axes[-1] == t.axes[-1]:
                key_axis = -1
        token_major = t.token_major and out_axes[-1:] == (("H", "d"),) if out_axes else False
        if last_dim is None and out_axes and out_axes[-1] == ("d",) and t.last is not None and t.last.role == "d":
            last_dim = t.last
        if last_dim is not None and last_dim.role != "d" and perhead and out_axes and out_axes[-1] == ("d",):
            last_dim = replace(last_dim, role="d")
        if last_dim is None and out_axes and out_axes[-1] == ("d",):
            ls = vals[-1] if vals else None
            ls = self.as_sym(ls) if ls is not None and not isinstance(ls, tuple) else None
            if ls is not None and not ls.opaque and len(ls.pows) == 2 and ls.coef == 1 \
                    and sorted(e for _, e in ls.pows) == [-1, 1]:
                num = next(d for d, e in ls.pows if e == 1)
                den = next(d for d, e in ls.pows if e == -1)
                last_dim = Dim(f"{num.text} // {den.text}", "d", ls.value())
            else:
                last_dim = Dim("head_dim", "d")
        split_node = None
        if not t.scores and len(out_axes) >= 3 and out_axes[-2:] == (("H",), ("d",)) and \
                any(ax in (("L",), ("*",)) for ax in out_axes[:-2]) and \
                (t.token_major or (t.axes is not None and t.axes[-1:] == (("H", "d"),))):
            split_node = node  # (…, L, H·d) → (…, L, H, d): heads still after the tokens
        return replace(t, rank=rank, axes=out_axes, key_axis=key_axis if t.scores else None,
                       perhead=perhead, token_major=token_major, last=last_dim, pending=None, kT=False, dims=(),
                       split_node=split_node, split_axes=(t.axes, out_axes) if split_node is not None else ((), ()))

    def _infer_heads(self, t: Tensor, vals: list) -> None:
        """``x.view(B, L, X, -1)`` / ``view(B, L, X, head_dim)`` of a projection output (…, H·d): the
        unnamed ``X`` before the per-head axis is the head count, whatever it is called."""
        if len(vals) < 4 or not (t.token_major or (t.axes is not None and t.axes[-1:] == (("H", "d"),))):
            return
        last, prev = vals[-1], vals[-2]
        ls = self.as_sym(last) if not isinstance(last, tuple) else None
        ps = self.as_sym(prev) if not isinstance(prev, (tuple, _ParamRef)) or (
            isinstance(prev, _ParamRef)) else None
        if isinstance(prev, _ParamRef) and prev.glob:
            ps = _glob_sym(prev, self.an.heads)
        if ls is None or ps is None or ps.opaque or ps.coef != 1 or len(ps.pows) != 1 or ps.pows[0][1] != 1:
            return
        d = ps.pows[0][0]
        if d.role != "?" or d.atoms is not None or d.value == 1:
            return
        rest = ls.is_literal() and ls.coef == -1
        per_head = not ls.opaque and ls.coef == 1 and len(ls.pows) >= 1 and _role_of_sym(ls, self.an.heads) == "d"
        if rest or per_head:
            leaf = _leaf(d.text)
            if leaf.isidentifier():
                self.an.heads.add(leaf)

    def softmax(self, v: Any, node: cst.Call, dim_node: Any, func: str, mod: ModVal | None = None) -> Any:
        t = self.tensorize(v)
        if t is None:
            return UNK
        if t.scores and self.record:
            if func != "exp/sum":  # a written-out softmax needs the scores' own product first
                self._attention_formed()
            implicit = False
            dim = None
            if mod is not None:
                if mod.has_dim:
                    dim = mod.dim
                    if dim is None:
                        dim = "?"
                else:
                    implicit = True
            elif dim_node is None:
                implicit = True
            else:
                dim = int_of(dim_node)
                if dim is None:
                    dim = "?"
            evs: tuple = ()
            ev = ScaleEvent("softmax", node, t.factors, t.q, t.k, t, uncertain=t.uncertain, partial=t.partial)
            if dim != "?":
                sev = SoftmaxEvent(node, dim, implicit, t.rank, t.key_axis, func, scale_event=ev)
                self.an.result.softmax_events.append(sev)
                evs = (sev,)
            self.an.result.scale_events.append(ev)
            return replace(t, scores=False, softmaxed=True, factors=(), event=ev, softmax_evs=evs,
                           weight_axes=(-2, -1) if evs else None)
        return replace(t, scores=False, softmaxed=True, factors=(), softmax_evs=())

    def _int_value(self, node: cst.BaseExpression | None, default: int | None) -> int | None:
        """A literal int argument, or one that evaluates to a literal (an inlined default)."""
        if node is None:
            return default
        i = int_of(node)
        if i is not None:
            return i
        v = self.eval(node)
        if isinstance(v, Sym) and v.is_literal() and float(v.coef).is_integer():
            return int(v.coef)
        if type(node) is cst.Name and isinstance(v, _ParamRef) and not v.glob and v.name == node.value \
                and self.an.stack:
            # a parameter no caller passed here: its literal default (``def l1norm(t, dim=-1)``)
            ps = self.an.stack[-1].params
            for prm in (*ps.posonly_params, *ps.params, *ps.kwonly_params):
                if prm.name.value == node.value and prm.default is not None:
                    return int_of(prm.default)
        return None

    def row_sum(self, t: Tensor, dim: int | None, keepdim: bool) -> Tensor:
        """``t.sum(dim, keepdim=True)`` of softmax weights: remembers which rows it sums."""
        evs = tuple(e for e in t.softmax_evs if keepdim and e.is_key_axis(dim))
        return replace(t, scores=False, softmaxed=False, event=None, softmax_evs=(), row_sum_of=evs,
                       factors=(), rank=t.rank if keepdim else None, axes=t.axes if keepdim else None)

    @staticmethod
    def renormalise(t: Tensor, evs: tuple) -> Tensor:
        """Weights divided by their own row sums over the key axis: the events are renormalised."""
        for e in t.softmax_evs:
            if any(e is x for x in evs):
                e.renormalised = True
        return t

    def sdpa(self, node: cst.Call, pos: list, kw: dict, kernel: ops.Op | None = None) -> Any:
        """SDPA (``kernel`` ``None``) or another fused kernel of the catalog (flash-attn's
        ``softmax_scale``, xformers' ``scale``; both default to ``1/√d`` as SDPA does): the scale
        factors q and k reach it with."""
        if kernel is None:
            q = self.tensorize(pos[0]) if pos else self.tensorize(kw.get("query"))
            k = self.tensorize(pos[1]) if len(pos) > 1 else self.tensorize(kw.get("key"))
            v = self.tensorize(pos[2]) if len(pos) > 2 else self.tensorize(kw.get("value"))
            scale_node = arg_value(node, 6, "scale")
        else:
            def at(a: ops.Arg | None) -> Any:
                if a is None:
                    return None
                if a.pos is not None and a.pos < len(pos):
                    return self.tensorize(pos[a.pos])
                return self.tensorize(kw.get(a.kw))
            q, k, v = at(kernel.q), at(kernel.k), at(kernel.v)
            scale_node = kernel.scale.of(node) if kernel.scale is not None else None
        if q is None or k is None:
            return UNK
        self._attention_formed()
        factors = tuple(replace(f, where="q") for f in q.factors) + tuple(replace(f, where="k") for f in k.factors)
        if scale_node is None:
            d = q.last or Dim("q.size(-1)", "d")
            factors += (Factor(Sym(pows=((replace(d, role="d"), -0.5),), name="sdpa-default"), "sdpa-default", node),)
        else:
            sv = self.eval(scale_node)
            s = self.as_sym(sv) if not isinstance(sv, _ParamRef) or not sv.glob else _glob_sym(sv, self.an.heads)
            if isinstance(sv, Unknown) and type(scale_node) is cst.Name and scale_node.value == "None":
                d = q.last or Dim("q.size(-1)", "d")
                s = Sym(pows=((replace(d, role="d"), -0.5),), name="sdpa-default")
                factors += (Factor(s, "sdpa-default", node),)
            else:
                if s is None:
                    s = Sym(coef=None, opaque=True, name=short_code(scale_node))
                if s.is_literal() and s.coef == 1.0 and not s.default_one:
                    s = Sym(coef=1.0, explicit_one=True)
                factors += (Factor(s, "sdpa", node),)
        # q, k, v all (B, L, H, d) at SDPA is ATT404's (layout-mismatch at the call); a split that
        # missed its transpose while the others got theirs is ATT401's, reported at the split
        bad = [t for t in (q, k, v) if t is not None and self._heads_last(t)] if kernel is None else []
        if bad and len(bad) < 3:
            for t in bad:
                self._split_event(t)
        if self.record:
            self.an.result.scale_events.append(ScaleEvent("sdpa", node, factors, q, k, None,
                                                          uncertain=q.uncertain or k.uncertain,
                                                          partial=q.partial or k.partial))
        axes = q.axes if q.axes is not None else None
        if kernel is not None and axes is not None and not self._heads_last(q):
            axes = None  # q not (B, L, H, d): ATT404's at the call; the output's layout is unknown
        return Tensor(rank=q.rank, axes=axes, origin="proj", perhead=q.perhead, last=v.last if v else None)


@dataclass(frozen=True)
class _ParamRef:
    """A name whose value is a function parameter (``glob=False``) or something not tracked."""

    name: str
    glob: bool = False


#: call targets whose value is the callee (``f(x)``, ``functools.partial(f, a)(x)``,
#: ``(lambda a: ...)(x)``, ``fns[0](x)``); attribute targets are methods on their receiver
_CALLEE_EXPRS = frozenset({cst.Name, cst.Call, cst.Lambda, cst.Subscript})


def _zip(pos: list) -> Any:
    """``zip(a, b, ...)``: tuples of known length pair item by item (to the shortest); like values
    (:class:`Many`, the parts of a split) give like tuples."""
    return zip_values([Many(replace(p, parts=False)) if isinstance(p, Tensor) and p.parts else p
                       for p in pos], UNK)


def _qk_factors(ta: Tensor, tb: Tensor) -> tuple:
    """Factors of q·kᵀ.  A factor applied once to a tensor that later yields both q and k (feature
    matching: ``f = f / f.shape[-1] ** 0.5; f0 @ f1.T``) is a similarity temperature, not an
    attention scale: it becomes opaque."""
    shared = {id(f.node) for f in ta.factors if f.node is not None} & {
        id(f.node) for f in tb.factors if f.node is not None}
    out = []
    for f, w in [(f, "q") for f in ta.factors] + [(f, "k") for f in tb.factors]:
        if id(f.node) in shared:
            if w == "k":
                continue
            f = Factor(Sym(coef=None, opaque=True, name="shared q/k normalization"), "q", f.node)
        out.append(replace(f, where=w))
    return tuple(out)


#: op families whose output has its input's layout (the weights' axes stay where they are; a
#: softmax sets them)
_LAYOUT_KEEPING = frozenset({"softmax", "dropout", "copy", "cast", "pointwise", "fill", "identity"})


def _layout_kept(node: cst.Call, qualname: str | None, v: Any) -> Any:
    """``v`` (the value of the call ``node``) without :attr:`Tensor.weight_axes` unless the call
    keeps its input's layout or is a transpose/permute (which update them)."""
    if not isinstance(v, Tensor) or v.weight_axes is None:
        return v
    op = ops.method(node.func.attr.value) if type(node.func) is cst.Attribute else None
    op = op or ops.function(qualname) or ops.module(qualname)
    if op is not None and (op.family in _LAYOUT_KEEPING or op.kind in ("transpose", "permute")):
        return v
    return replace(v, weight_axes=None)


def _swap_last_two(wa: tuple, i: int, j: int, rank: int | None) -> tuple | None:
    """Weight axes after ``transpose(i, j)``: swapped when it swaps the last two axes, kept when
    it touches neither of them, else unknown."""
    last = {-2, -1}
    if rank is not None:
        i, j = (i % rank) - rank, (j % rank) - rank
    elif i >= 0 or j >= 0:
        return None
    if {i, j} == last:
        return wa[::-1]
    if i in last or j in last:
        return None
    return wa


#: ``nn.Module`` methods that return the module itself, moved or cast (PyTorch ``nn.Module`` docs)
_MODULE_MOVES = frozenset({"to", "double", "float", "half", "bfloat16", "cuda", "cpu", "type",
                           "requires_grad_", "train", "eval", "to_empty"})


def _projected_params(calls: list[tuple[str, str]], selfv: SelfVal, env: dict) -> list[str]:
    """Parameters of a function (still unbound values, no default) that its body passes as the
    first argument of a linear projection stored on ``self`` (``self.qkv(x)``); ``calls``: the
    function's :func:`_self_calls`."""
    out: list[str] = []
    for attr, name in calls:
        mv = selfv.attrs.get(attr)
        if isinstance(mv, ModVal) and mv.kind == "linear" and env.get(name) == ("param", name) \
                and name not in out:
            out.append(name)
    return out


def _self_calls(fn: cst.FunctionDef) -> list[tuple[str, str]]:
    """``(attr, name)`` of every call ``self.attr(name, ...)`` in ``fn``'s body (a plain name as
    first positional argument), nested scopes included."""
    out: list[tuple[str, str]] = []
    call = cst.Call
    for n in scope_nodes(fn.body, nested=True):
        if type(n) is call and n.args and n.args[0].keyword is None and not n.args[0].star \
                and type(n.func) is cst.Attribute and type(n.func.value) is cst.Name \
                and n.func.value.value == "self" and type(n.args[0].value) is cst.Name:
            out.append((n.func.attr.value, n.args[0].value.value))
    return out


def _inplace_receiver(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The name (or attribute) that an in-place method call writes: ``s`` in ``s.mul_(a)`` and in
    the chain ``s.mul_(a).add_(b)``; None when ``expr`` is not such a call."""
    receiver = None
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        op = ops.method(expr.func.attr.value)
        if op is None or not op.inplace:
            return None
        expr = receiver = expr.func.value
    return receiver if type(receiver) in (cst.Name, cst.Attribute) else None


def _glob_sym(v: _ParamRef, heads: Collection[str]) -> Sym:
    # an untracked attribute / global: a dimension when its name says so, else opaque
    role = role_by_name(v.name, heads)
    if role != "?":
        return Sym.dim(Dim(v.name, role))
    return Sym.dim(Dim(v.name, "?"))


def _unparam(v: Any) -> Any:
    if isinstance(v, _ParamRef) and not v.glob:
        return ("param", v.name)
    if isinstance(v, _ParamRef):
        return v
    return v


def _role_of_sym(s: Sym, heads: set[str]) -> str:
    _note_heads(s, heads)
    at = s.atoms(heads)
    if at is None:
        return "?"
    if at == ("d",):
        return "d"
    if at == ("H",):
        return "H"
    if at == ("H", "d") or at == ("d", "H"):
        return "E"
    if len(at) == 1 and at[0] in ("B", "L"):
        return at[0]
    return "?"


def _note_heads(s: Sym, heads: set[str]) -> None:
    """``width · X^-1`` with ``X`` an unnamed, non-literal dimension: ``X`` is the head count
    (added to ``heads``, the analysed scope's :attr:`Analyzer.heads`)."""
    if s.opaque or s.coef != 1 or len(s.pows) != 2:
        return
    ps = dict(s.pows)
    wid = [d for d, e in ps.items() if e == 1 and d.role == "E"]
    den = [d for d, e in ps.items() if e == -1 and d.role == "?" and d.atoms is None]
    if len(wid) == 1 and len(den) == 1 and den[0].value != 1:
        leaf = _leaf(den[0].text)
        if leaf.isidentifier():
            heads.add(leaf)


def _named(v: Any, name: str, heads: set[str]) -> Any:
    """A local ``name = <dim expr>`` keeps the expression's role but gets ``name`` for messages."""
    if isinstance(v, Sym) and not v.opaque and v.coef == 1 and len(v.pows) == 1 and v.pows[0][1] == 1:
        d = v.pows[0][0]
        role = d.role
        if role == "?" and not (d.atoms and d.atoms[0].startswith("?!")):
            role = role_by_name(name, heads)
            if role == "?":
                role = role_by_name(d.text, heads)  # H = self.n_head, heads found by structure
            return Sym.dim(Dim(name, role, d.value))
        return Sym.dim(replace(d, text=name))
    if isinstance(v, Sym) and not v.opaque and v.pows and all(e in (1, -1) for _, e in v.pows):
        role = _role_of_sym(v, heads)
        if role in ("d", "E", "H"):
            return Sym.dim(Dim(name, role, v.value()))
        nrole = role_by_name(name, heads)
        if nrole != "?" and v.coef == 1:
            return Sym.dim(Dim(name, nrole, v.value()))
    if isinstance(v, Many):
        return replace(v.t, parts=True) if isinstance(v.t, Tensor) else v.t
    return v


def _named_attr(v: Sym, name: str, heads: set[str]) -> Sym:
    if v.is_literal() and v.coef is not None and float(v.coef).is_integer():
        role = role_by_name(name, heads)
        if role == "?":
            return replace(v, name=name)  # self.scaling = 1.0: a number, not a dimension
        return Sym.dim(Dim(name, role, v.coef))
    if v.pows and all(e in (1, -1) for _, e in v.pows):
        return _named(v, name, heads)
    return replace(v, name=name)


def _join(a: Any, b: Any) -> Any:
    if a is b or a == b:
        return a
    if isinstance(a, Unknown):
        return b if isinstance(b, (FuncRef,)) else (UNK if not isinstance(b, Tensor) else replace(b, partial=True))
    if isinstance(b, Unknown):
        return a if isinstance(a, (FuncRef,)) else (UNK if not isinstance(a, Tensor) else replace(a, partial=True))
    if isinstance(a, FuncRef):
        return a
    if isinstance(b, FuncRef):
        return b
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        same_f = a.factors == b.factors
        return Tensor(
            rank=a.rank if a.rank == b.rank else None,
            axes=a.axes if a.axes == b.axes else None,
            factors=a.factors if same_f else a.factors + b.factors,
            origin=a.origin if a.origin == b.origin else "unknown",
            scores=a.scores and b.scores,
            key_axis=a.key_axis if a.key_axis == b.key_axis else None,
            kT=a.kT and b.kT,
            last=a.last if a.last == b.last else None,
            perhead=a.perhead and b.perhead,
            token_major=a.token_major and b.token_major,
            normalized=a.normalized or b.normalized,
            softmaxed=a.softmaxed and b.softmaxed,
            uncertain=a.uncertain or b.uncertain or not same_f,
            partial=a.partial or b.partial,
            q=a.q, k=a.k, node=a.node,
            pname=a.pname if a.pname == b.pname else None,
            split_node=a.split_node if a.split_node is b.split_node else None,
            split_axes=a.split_axes,
            event=a.event if a.event is b.event else None,
            biased=a.biased or b.biased,
            softmax_evs=a.softmax_evs + tuple(e for e in b.softmax_evs
                                              if not any(e is x for x in a.softmax_evs)),
            row_sum_of=a.row_sum_of + tuple(e for e in b.row_sum_of
                                            if not any(e is x for x in a.row_sum_of)),
            weight_axes=a.weight_axes if a.weight_axes == b.weight_axes else None,
        )
    if isinstance(a, Sym) and isinstance(b, Sym):
        return Sym(coef=None, opaque=True, name=a.name or b.name)
    if isinstance(a, Tensor):
        return replace(a, uncertain=True)
    if isinstance(b, Tensor):
        return replace(b, uncertain=True)
    return UNK


def _reorder(in_axes: tuple, out_axes: tuple, token_major: bool) -> str | None:
    """ATT401 when heads packed after the tokens move before them; ATT402 when heads before tokens
    are merged after them.  A view keeps the memory order of atoms; only H vs L/leading matter."""
    inf = [a for ax in in_axes for a in ax]
    outf = [a for ax in out_axes for a in ax]
    if "H" not in inf or "H" not in outf or inf.count("H") != 1 or outf.count("H") != 1:
        return None
    hi_in = inf.index("H")
    ho = outf.index("H")
    tokens = ("L", "*")
    in_before = [a for a in inf[:hi_in] if a in tokens]
    in_after = [a for a in inf[hi_in + 1:] if a in tokens]
    out_before = [a for a in outf[:ho] if a in tokens]
    out_after = [a for a in outf[ho + 1:] if a in tokens]
    if in_before and not in_after and out_after:
        # heads were after the tokens (B, L, H·d) and now come before them
        if token_major or inf[-2:] == ["H", "d"] or inf[-1:] == ["d"]:
            return "ATT401"
    if in_after and not in_before and out_before and not out_after:
        return "ATT402"
    return None


def analyze(ctx: Any) -> Provenance:
    """Run score provenance over ``ctx.module`` (a :class:`FileContext`)."""
    an = Analyzer(ctx)
    try:
        return an.run()
    except RecursionError:  # pragma: no cover - pathological nesting
        return an.result


def _index_axes(t: Tensor, sl: Any) -> tuple | None:
    """Axes left after indexing ``t`` with integer literals and full slices (``x[0]``,
    ``x[:, 1]``): each integer removes its axis; ``None`` for anything else (bounded slices,
    ``None``, ellipsis, tensors) or when ``t``'s layout is unknown."""
    if t.axes is None or t.rank is None or any("*" in ax for ax in t.axes) or len(sl) > t.rank:
        return None
    out = list(t.axes)
    drop = []
    for i, e in enumerate(sl):
        s = e.slice
        if type(s) is cst.Index:
            if int_of(s.value) is None:
                return None
            drop.append(i)
        elif not (type(s) is cst.Slice and s.lower is None and s.upper is None and s.step is None):
            return None
    if not drop:
        return None
    return tuple(ax for i, ax in enumerate(out) if i not in drop)


def _einsum_axes(sa: str, sb: str, out: str, ta: Tensor, tb: Tensor) -> tuple | None:
    """Output axes of a two-operand einsum from its operands' known axes, letter by letter
    (``'bhij,bhjd->bhid'`` on (B, H, L, L) and (B, H, L, d) gives (B, H, L, d)); ``None`` when a
    letter's axis is unknown or the operands disagree on it."""
    if "…" in sa + sb + out:
        return None
    known: dict[str, tuple] = {}
    for letters, t in ((sa, ta), (sb, tb)):
        if t.axes is None or len(t.axes) != len(letters) or any("*" in ax for ax in t.axes):
            continue
        for c, ax in zip(letters, t.axes):
            if known.setdefault(c, ax) != ax and not (ax == ("L",) or known[c] == ("L",)):
                return None
    if any(c not in known for c in out):
        return None
    return tuple(known[c] for c in out)


#: einops axis names → layout atoms, where the input's layout does not say (the letters of
#: einops patterns in attention code: ``b n (h d)``, ``b h i j``, ``(b h) n d``)
_EINOPS_ROLE = {"b": "B", "batch": "B", "h": "H", "heads": "H", "d": "d", "dh": "d", "dim_head": "d",
                "n": "L", "i": "L", "j": "L", "t": "L", "l": "L", "s": "L", "seq": "L"}


def _einops_axes(lhs: str, rhs: str, t: Tensor, sized: set[str]) -> tuple | None:
    """The output layout of ``einops.rearrange(t, 'lhs -> rhs', **sizes)``.

    Letters take the atoms of the input axis they name (a group ``(h d)`` over an axis of atoms
    ``(H, d)`` splits it letter by letter); letters the input does not determine fall back to
    their conventional role (``b`` batch, ``h`` heads, ``d`` head dim, ``n``/``i``/``j`` tokens);
    a letter sized by a keyword (``three=3``) is a literal axis.  ``None`` when any output letter
    stays unknown."""
    tok = re.compile(r"\([^)]*\)|\S+")
    ltoks, rtoks = tok.findall(lhs), tok.findall(rhs)
    if "..." in lhs or "..." in rhs or "…" in lhs:
        return None
    atoms: dict[str, tuple] = {}
    in_axes = t.axes
    if in_axes is not None and any("*" in ax for ax in in_axes):
        # leading axes unknown: align from the right
        known = [ax for ax in in_axes if "*" not in ax]
        in_axes = tuple([None] * max(0, len(ltoks) - len(known)) + known) if len(known) <= len(ltoks) else None
    if in_axes is not None and len(in_axes) == len(ltoks):
        for lt, ax in zip(ltoks, in_axes):
            if ax is None:
                continue
            letters = lt.strip("()").split()
            if len(letters) == 1:
                atoms[letters[0]] = ax
            elif len(letters) == len(ax):
                for c, a in zip(letters, ax):
                    atoms[c] = (a,)
    for lt in ltoks + rtoks:
        for c in lt.strip("()").split():
            if c in atoms:
                continue
            if c in _EINOPS_ROLE:
                atoms[c] = (_EINOPS_ROLE[c],)
            elif c in sized:
                atoms[c] = (f"#{c}",)
            else:
                return None
    out = []
    for rt in rtoks:
        letters = rt.strip("()").split()
        out.append(tuple(a for c in letters for a in atoms[c]) if letters else ("#1",))
    return tuple(out)


def _token_prefix(sv: ShapeVal, t: Tensor) -> bool:
    """``x.shape[:-1]`` of an input parameter ``x`` of unknown rank, used to view ``t``: the
    (batch, tokens) prefix of a (B, L, E) input (``hidden_shape = (*input_shape, -1, head_dim)``
    on a projection of ``x``; ``reshape(*input_shape, -1)`` of a tensor laid out over B and L;
    ``t.unflatten(-1, (H, d))`` of a projection ``(…, L, H·d)`` itself, as for its input)."""
    if sv.start != 0 or sv.stop_minus != 1:
        return False
    if sv.t is t and t.token_major and t.rank is None and t.axes is not None and len(t.axes) == 2 \
            and t.axes[0] == ("*",):
        return True
    if sv.t.axes is not None or sv.t.origin != "param":
        return False
    if t.token_major:
        return True
    atoms = {a for ax in (t.axes or ()) for a in ax}
    return t.rank is not None and {"B", "L"} <= atoms
