"""The catalog of tensor operations the static analyses and rules know.

One table maps each PyTorch / einops / flash-attn / xformers callable the linter understands to an
:class:`Op` record: its *family* (what it does to attention tensors), its *kind* within the family,
and where its arguments are (:class:`Arg`: position and keyword, as in the PyTorch signature).  The
abstract interpreters (:mod:`~attncheck.lint.analysis.provenance`, :mod:`~attncheck.lint.analysis.masks`)
and the rules look operations up here instead of keeping their own name lists, so that teaching the
linter a new spelling of an op (``torch.special.softmax``, an ``opt_einsum`` contraction) is one
entry in this file.

Three tables, by how a call names the op:

* :data:`FUNCTIONS` — a qualified name resolved through the file's imports (``torch.softmax``,
  ``F.softmax`` → ``torch.nn.functional.softmax``);
* :data:`METHODS` — a ``Tensor`` method name (``x.masked_fill(m, v)``, ``x.view(...)``); the
  receiver is argument ``self`` and not counted in the positions;
* :data:`MODULES` — an ``nn.Module`` class whose instances are called (``nn.Softmax(dim=-1)``).

and :data:`DTYPES` for ``torch.dtype`` names (kind, width and exponent bits, for type promotion
and the fp16 range checks).  Attention kernels (SDPA, flash-attn, xformers) also carry the layout
of their q/k/v arguments (:attr:`Op.layout`).

Nothing here imports torch: the names are strings, checked against ``FileContext.qualname``.
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Arg:
    """Where an argument is: positional index ``pos`` (``None``: keyword-only) and keyword ``kw``."""

    pos: int | None
    kw: str | None = None

    def of(self, call: cst.Call) -> cst.BaseExpression | None:
        """The argument's expression in ``call`` (``None`` when absent or after a ``*args``)."""
        from attncheck.lint.analysis.syntax import arg_value

        return arg_value(call, self.pos, self.kw)


@dataclass(frozen=True)
class Op:
    """What one callable does, for the analyses.

    ``family``: ``matmul`` (q·kᵀ, weights·v), ``softmax``, ``attention`` (fused kernels: SDPA,
    flash-attn, xformers), ``mha`` (``nn.MultiheadAttention`` / ``nn.Transformer*``), ``dropout``,
    ``identity``, ``fill`` (``masked_fill``), ``where``, ``cast`` (dtype conversion), ``copy`` (same
    values: ``clone``, ``contiguous``, device moves), ``shape`` (views and copies that move axes),
    ``split`` (``chunk``/``split``/``unbind``), ``einops``, ``pointwise``, ``compare``, ``logical``,
    ``create`` (``torch.ones``, ``torch.full``, …), ``triangle`` (``tril``/``triu``), ``exp``,
    ``reduce``, ``linear``, ``norm``, ``pad``.

    ``kind`` refines the family: for ``matmul`` one of ``matmul``/``bmm``/``baddbmm``/``mm``/
    ``einsum``; ``softmax``/``log_softmax``; for ``shape`` ``reshape`` (``view``/``reshape``/
    ``unflatten``), ``insert`` (``unsqueeze``/``squeeze``), ``broadcast`` (``expand``, ``repeat``,
    …), ``flatten``, ``transpose``, ``permute``; for ``cast`` the target dtype's kind
    (``float``/``int``/``bool``; empty when an argument gives it).

    Argument slots (``None`` when the op has none): ``input``, ``other`` (second operand),
    ``dim``, ``mask``, ``value`` (the fill), ``dtype``, ``q``/``k``/``v``, ``attn_mask``,
    ``dropout`` (drop probability), ``scale``.  ``inplace``: the op writes its receiver
    (``masked_fill_``).  ``dtype_name``: the dtype a cast method converts to.  ``layout``: the
    (B, H, L, d) ``"BHLD"`` / (B, L, H, d) ``"BLHD"`` layout an attention kernel expects of q, k, v.
    ``batched``: a matmul over batched (≥3-D) operands (``torch.mm`` is 2-D only).
    """

    family: str
    kind: str = ""
    input: Arg | None = None
    other: Arg | None = None
    dim: Arg | None = None
    mask: Arg | None = None
    value: Arg | None = None
    dtype: Arg | None = None
    q: Arg | None = None
    k: Arg | None = None
    v: Arg | None = None
    attn_mask: Arg | None = None
    dropout: Arg | None = None
    scale: Arg | None = None
    inplace: bool = False
    dtype_name: str | None = None
    layout: str | None = None
    batched: bool = True


@dataclass(frozen=True)
class Dtype:
    """A ``torch.dtype``: ``kind`` (``float``/``int``/``bool``), total ``bits`` and, for floats,
    exponent bits (PyTorch ``torch.finfo``: float16 has 5, bfloat16 and float32 8, float64 11)."""

    kind: str
    bits: int
    exp_bits: int = 0

    @property
    def wide(self) -> bool:
        """Float32's exponent range or wider: ``finfo(float16).min`` (-65504) is far inside it."""
        return self.kind == "float" and self.exp_bits >= 8

    @property
    def low_precision(self) -> bool:
        """A 16-bit float (float16, bfloat16): softmax sums lose precision (ATT604)."""
        return self.kind == "float" and self.bits <= 16


_X = Arg(0, "input")

# --------------------------------------------------------------------------- functions

_ATTN_Q, _ATTN_K, _ATTN_V = Arg(0, "query"), Arg(1, "key"), Arg(2, "value")
#: ``F.scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
#: is_causal=False, scale=None, enable_gqa=False)`` (PyTorch docs): q, k, v are (N, ..., L, E)
_SDPA = Op("attention", "sdpa", q=_ATTN_Q, k=_ATTN_K, v=_ATTN_V, attn_mask=Arg(3, "attn_mask"),
           dropout=Arg(4, "dropout_p"), scale=Arg(None, "scale"), layout="BHLD")

FUNCTIONS: dict[str, Op] = {
    # q·kᵀ and weights·v (PyTorch docs of each; einops.einsum takes the equation last)
    "torch.matmul": Op("matmul", "matmul", input=_X, other=Arg(1, "other")),
    "torch.bmm": Op("matmul", "bmm", input=_X, other=Arg(1, "mat2")),
    "torch.baddbmm": Op("matmul", "baddbmm", input=Arg(1, "batch1"), other=Arg(2, "batch2")),
    "torch.mm": Op("matmul", "mm", input=_X, other=Arg(1, "mat2"), batched=False),
    "torch.einsum": Op("matmul", "einsum"),
    "torch.functional.einsum": Op("matmul", "einsum"),
    "numpy.einsum": Op("matmul", "einsum"),
    "einops.einsum": Op("matmul", "einsum"),
    "opt_einsum.contract": Op("matmul", "einsum"),
    # softmax over ``dim`` (torch.softmax(input, dim, dtype=None))
    "torch.softmax": Op("softmax", "softmax", input=_X, dim=Arg(1, "dim"), dtype=Arg(None, "dtype")),
    "torch.nn.functional.softmax": Op("softmax", "softmax", input=_X, dim=Arg(1, "dim"),
                                      dtype=Arg(None, "dtype")),
    "torch.special.softmax": Op("softmax", "softmax", input=_X, dim=Arg(1, "dim"),
                                dtype=Arg(None, "dtype")),
    "torch.log_softmax": Op("softmax", "log_softmax", input=_X, dim=Arg(1, "dim"),
                            dtype=Arg(None, "dtype")),
    "torch.nn.functional.log_softmax": Op("softmax", "log_softmax", input=_X, dim=Arg(1, "dim"),
                                          dtype=Arg(None, "dtype")),
    "torch.special.log_softmax": Op("softmax", "log_softmax", input=_X, dim=Arg(1, "dim"),
                                    dtype=Arg(None, "dtype")),
    # fused attention kernels
    "torch.nn.functional.scaled_dot_product_attention": _SDPA,
    "torch._C._nn.scaled_dot_product_attention": _SDPA,
    # dropout (F.dropout(input, p=0.5, training=True, inplace=False); torch.dropout(input, p, train))
    "torch.nn.functional.dropout": Op("dropout", "dropout", input=_X, dropout=Arg(1, "p")),
    "torch.nn.functional.dropout1d": Op("dropout", "dropout", input=_X, dropout=Arg(1, "p")),
    "torch.nn.functional.dropout2d": Op("dropout", "dropout", input=_X, dropout=Arg(1, "p")),
    "torch.nn.functional.dropout3d": Op("dropout", "dropout", input=_X, dropout=Arg(1, "p")),
    "torch.nn.functional.alpha_dropout": Op("dropout", "alpha", input=_X, dropout=Arg(1, "p")),
    "torch.nn.functional.feature_alpha_dropout": Op("dropout", "alpha", input=_X,
                                                    dropout=Arg(1, "p")),
    "torch.dropout": Op("dropout", "torch", input=_X, dropout=Arg(1, "p")),
    # masks
    "torch.masked_fill": Op("fill", input=_X, mask=Arg(1, "mask"), value=Arg(2, "value")),
    "torch.where": Op("where", mask=Arg(0, "condition"), input=Arg(1, "input"),
                      other=Arg(2, "other")),
    "torch.tril": Op("triangle", "tril", input=_X, dim=Arg(1, "diagonal")),
    "torch.triu": Op("triangle", "triu", input=_X, dim=Arg(1, "diagonal")),
    "torch.tril_indices": Op("triangle", "tril_indices", dim=Arg(2, "offset")),
    "torch.triu_indices": Op("triangle", "triu_indices", dim=Arg(2, "offset")),
    "torch.logical_not": Op("logical", "not", input=_X),
    "torch.bitwise_not": Op("logical", "not", input=_X),
    "torch.logical_and": Op("logical", "and", input=_X, other=Arg(1, "other")),
    "torch.bitwise_and": Op("logical", "and", input=_X, other=Arg(1, "other")),
    "torch.logical_or": Op("logical", "or", input=_X, other=Arg(1, "other")),
    "torch.bitwise_or": Op("logical", "or", input=_X, other=Arg(1, "other")),
    "torch.logical_xor": Op("logical", "xor", input=_X, other=Arg(1, "other")),
    "torch.bitwise_xor": Op("logical", "xor", input=_X, other=Arg(1, "other")),
    "torch.mul": Op("pointwise", "mul", input=_X, other=Arg(1, "other")),
    "torch.add": Op("pointwise", "add", input=_X, other=Arg(1, "other")),
    "torch.maximum": Op("pointwise", "maximum", input=_X, other=Arg(1, "other")),
    "torch.minimum": Op("pointwise", "minimum", input=_X, other=Arg(1, "other")),
    "torch.nan_to_num": Op("pointwise", "nan_to_num", input=_X),
    "torch.exp": Op("exp", input=_X),
    "numpy.exp": Op("exp", input=_X),
    "torch.sum": Op("reduce", "sum", input=_X, dim=Arg(1, "dim")),
    "torch.nn.functional.pad": Op("pad", input=_X),
    # creation (the fill and dtype of a mask built from them)
    "torch.ones": Op("create", "ones", dtype=Arg(None, "dtype")),
    "torch.zeros": Op("create", "zeros", dtype=Arg(None, "dtype")),
    "torch.ones_like": Op("create", "ones_like", input=_X, dtype=Arg(None, "dtype")),
    "torch.zeros_like": Op("create", "zeros_like", input=_X, dtype=Arg(None, "dtype")),
    "torch.full": Op("create", "full", value=Arg(1, "fill_value"), dtype=Arg(None, "dtype")),
    "torch.full_like": Op("create", "full_like", input=_X, value=Arg(1, "fill_value"),
                          dtype=Arg(None, "dtype")),
    "torch.empty": Op("create", "empty", dtype=Arg(None, "dtype")),
    "torch.randn": Op("create", "randn", dtype=Arg(None, "dtype")),
    "torch.rand": Op("create", "rand", dtype=Arg(None, "dtype")),
    "torch.arange": Op("create", "arange", dtype=Arg(None, "dtype")),
    "torch.tensor": Op("create", "tensor", value=Arg(0, "data"), dtype=Arg(None, "dtype")),
    "torch.as_tensor": Op("create", "tensor", value=Arg(0, "data"), dtype=Arg(None, "dtype")),
    "torch.scalar_tensor": Op("create", "tensor", value=Arg(0, "s"), dtype=Arg(None, "dtype")),
    # layout
    "torch.transpose": Op("shape", "transpose", input=_X),
    "torch.swapaxes": Op("shape", "transpose", input=_X),
    "torch.tile": Op("shape", "tile", input=_X),
    "torch.cat": Op("shape", "cat"),
    "torch.concat": Op("shape", "cat"),
    "torch.concatenate": Op("shape", "cat"),
    "einops.rearrange": Op("einops", "rearrange", input=Arg(0, "tensor")),
    "rearrange": Op("einops", "rearrange", input=Arg(0, "tensor")),
    "torch.nn.functional.linear": Op("linear", input=_X),
    "torch.nn.functional.normalize": Op("norm", "normalize", input=_X, dim=Arg(2, "dim")),
}

#: flash-attn (``flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False)``,
#: flash-attention README) and xformers (``memory_efficient_attention(query, key, value,
#: attn_bias=None, p=0.0, scale=None)``, xformers docs) take (B, L, H, d).  Looked up by the
#: callable's last name component (:func:`kernel`): these libraries are often imported under
#: several module paths or vendored.
KERNELS: dict[str, Op] = {
    "flash_attn_func": Op("attention", "flash", q=Arg(0, "q"), k=Arg(1, "k"), v=Arg(2, "v"),
                          dropout=Arg(None, "dropout_p"), scale=Arg(None, "softmax_scale"),
                          layout="BLHD"),
    "flash_attn_kvpacked_func": Op("attention", "flash", q=Arg(0, "q"),
                                   dropout=Arg(None, "dropout_p"),
                                   scale=Arg(None, "softmax_scale"), layout="BLHD"),
    "flash_attn_qkvpacked_func": Op("attention", "flash", dropout=Arg(None, "dropout_p"),
                                    scale=Arg(None, "softmax_scale")),
    "flash_attn_varlen_func": Op("attention", "flash", dropout=Arg(None, "dropout_p"),
                                 scale=Arg(None, "softmax_scale")),
    "flash_attn_varlen_qkvpacked_func": Op("attention", "flash", dropout=Arg(None, "dropout_p"),
                                           scale=Arg(None, "softmax_scale")),
    "flash_attn_varlen_kvpacked_func": Op("attention", "flash", dropout=Arg(None, "dropout_p"),
                                          scale=Arg(None, "softmax_scale")),
    "flash_attn_with_kvcache": Op("attention", "flash", q=Arg(0, "q"), k=Arg(1, "k_cache"),
                                  v=Arg(2, "v_cache"), scale=Arg(None, "softmax_scale"),
                                  layout="BLHD"),
    "memory_efficient_attention": Op("attention", "xformers", q=Arg(0, "query"),
                                     k=Arg(1, "key"), v=Arg(2, "value"),
                                     attn_mask=Arg(3, "attn_bias"), dropout=Arg(4, "p"),
                                     scale=Arg(None, "scale"), layout="BLHD"),
}

# --------------------------------------------------------------------------- Tensor methods


def _cast(dtype: str | None, kind: str) -> Op:
    return Op("cast", kind, dtype=None if dtype else Arg(0, "dtype"), dtype_name=dtype)


METHODS: dict[str, Op] = {
    "matmul": Op("matmul", "matmul", other=Arg(0, "other")),
    "bmm": Op("matmul", "bmm", other=Arg(0, "mat2")),
    "baddbmm": Op("matmul", "baddbmm", input=Arg(0, "batch1"), other=Arg(1, "batch2")),
    #: ``<module>.einsum(...)`` of a library the imports do not resolve (``np.einsum``)
    "einsum": Op("matmul", "einsum"),
    "softmax": Op("softmax", "softmax", dim=Arg(0, "dim"), dtype=Arg(None, "dtype")),
    "log_softmax": Op("softmax", "log_softmax", dim=Arg(0, "dim"), dtype=Arg(None, "dtype")),
    "masked_fill": Op("fill", mask=Arg(0, "mask"), value=Arg(1, "value")),
    "masked_fill_": Op("fill", mask=Arg(0, "mask"), value=Arg(1, "value"), inplace=True),
    "masked_scatter": Op("fill", "scatter", mask=Arg(0, "mask"), value=Arg(1, "source")),
    # dtype casts (PyTorch Tensor docs: float() is self.to(torch.float32), …)
    "float": _cast("torch.float32", "float"),
    "half": _cast("torch.float16", "float"),
    "bfloat16": _cast("torch.bfloat16", "float"),
    "double": _cast("torch.float64", "float"),
    "long": _cast("torch.int64", "int"),
    "int": _cast("torch.int32", "int"),
    "byte": _cast("torch.uint8", "int"),
    "short": _cast("torch.int16", "int"),
    "bool": _cast("torch.bool", "bool"),
    "to": _cast(None, ""),
    "type": _cast(None, ""),
    "type_as": Op("cast", "", other=Arg(0, "other")),
    # same values
    "contiguous": Op("copy"), "clone": Op("copy"), "detach": Op("copy"), "cuda": Op("copy"),
    "cpu": Op("copy"), "requires_grad_": Op("copy", inplace=True), "pin_memory": Op("copy"),
    "to_dense": Op("copy"),
    # layout
    "view": Op("shape", "reshape"), "reshape": Op("shape", "reshape"),
    "unflatten": Op("shape", "reshape", dim=Arg(0, "dim")),
    "unsqueeze": Op("shape", "insert", dim=Arg(0, "dim")),
    "squeeze": Op("shape", "insert", dim=Arg(0, "dim")),
    "expand": Op("shape", "broadcast"), "expand_as": Op("shape", "broadcast"),
    "broadcast_to": Op("shape", "broadcast"), "repeat": Op("shape", "broadcast"),
    "repeat_interleave": Op("shape", "broadcast", dim=Arg(1, "dim")),
    "flatten": Op("shape", "flatten"),
    "transpose": Op("shape", "transpose"), "swapaxes": Op("shape", "transpose"),
    "swapdims": Op("shape", "transpose"),
    "permute": Op("shape", "permute"),
    "t": Op("shape", "t"),
    "tile": Op("shape", "tile"),
    "chunk": Op("split", "chunk", dim=Arg(1, "dim")),
    "split": Op("split", "split", dim=Arg(1, "dim")),
    "tensor_split": Op("split", "split", dim=Arg(1, "dim")),
    "unbind": Op("split", "unbind", dim=Arg(0, "dim")),
    # pointwise (keep the facts the provenance analysis tracks: scores stay scores)
    "clamp": Op("pointwise", "clamp"), "clamp_": Op("pointwise", "clamp", inplace=True),
    "add": Op("pointwise", "add", other=Arg(0, "other")),
    "add_": Op("pointwise", "add", other=Arg(0, "other"), inplace=True),
    "sub": Op("pointwise", "sub", other=Arg(0, "other")),
    "nan_to_num": Op("pointwise", "nan_to_num"),
    "tanh": Op("pointwise", "tanh"),
    "mul": Op("pointwise", "mul", other=Arg(0, "other")),
    "mul_": Op("pointwise", "mul", other=Arg(0, "other"), inplace=True),
    "div": Op("pointwise", "div", other=Arg(0, "other")),
    "div_": Op("pointwise", "div", other=Arg(0, "other"), inplace=True),
    "exp": Op("exp"),
    # comparisons and boolean logic (a mask's pattern)
    "eq": Op("compare", "=="), "ne": Op("compare", "!="), "gt": Op("compare", ">"),
    "lt": Op("compare", "<"), "ge": Op("compare", ">="), "le": Op("compare", "<="),
    "logical_not": Op("logical", "not"),
    "logical_and": Op("logical", "and", other=Arg(0, "other")),
    "bitwise_and": Op("logical", "and", other=Arg(0, "other")),
    "logical_or": Op("logical", "or", other=Arg(0, "other")),
    "bitwise_or": Op("logical", "or", other=Arg(0, "other")),
    "isinf": Op("logical", "test"), "isnan": Op("logical", "test"),
    "isfinite": Op("logical", "test"),
    "tril": Op("triangle", "tril", dim=Arg(0, "diagonal")),
    "triu": Op("triangle", "triu", dim=Arg(0, "diagonal")),
    "tril_": Op("triangle", "tril", dim=Arg(0, "diagonal"), inplace=True),
    "triu_": Op("triangle", "triu", dim=Arg(0, "diagonal"), inplace=True),
    "sum": Op("reduce", "sum", dim=Arg(0, "dim")), "nansum": Op("reduce", "sum", dim=Arg(0, "dim")),
    "new_ones": Op("create", "ones", dtype=Arg(None, "dtype")),
    "new_zeros": Op("create", "zeros", dtype=Arg(None, "dtype")),
    "new_full": Op("create", "full", value=Arg(1, "fill_value"), dtype=Arg(None, "dtype")),
    "new_tensor": Op("create", "tensor", value=Arg(0, "data"), dtype=Arg(None, "dtype")),
}

# --------------------------------------------------------------------------- nn modules

#: ``nn.MultiheadAttention`` / ``nn.Transformer*``: boolean masks are True where *blocked*
#: (PyTorch nn docs); their mask keywords are :data:`MHA_MASK_KWARGS`
_MHA = Op("mha")
MODULES: dict[str, Op] = {
    "torch.nn.MultiheadAttention": _MHA,
    "torch.nn.modules.activation.MultiheadAttention": _MHA,
    "torch.nn.Transformer": _MHA,
    "torch.nn.TransformerEncoder": _MHA,
    "torch.nn.TransformerDecoder": _MHA,
    "torch.nn.TransformerEncoderLayer": _MHA,
    "torch.nn.TransformerDecoderLayer": _MHA,
    "torch.nn.Softmax": Op("softmax", "softmax", dim=Arg(0, "dim")),
    "torch.nn.modules.activation.Softmax": Op("softmax", "softmax", dim=Arg(0, "dim")),
    "torch.nn.LogSoftmax": Op("softmax", "log_softmax", dim=Arg(0, "dim")),
    "torch.nn.Dropout": Op("dropout", "dropout", dropout=Arg(0, "p")),
    "torch.nn.Dropout1d": Op("dropout", "dropout", dropout=Arg(0, "p")),
    "torch.nn.Dropout2d": Op("dropout", "dropout", dropout=Arg(0, "p")),
    "torch.nn.Identity": Op("identity"),
    "torch.nn.Linear": Op("linear"),
    "torch.nn.LazyLinear": Op("linear"),
}

#: keyword arguments of ``nn.MultiheadAttention`` / ``nn.Transformer*`` that take masks
MHA_MASK_KWARGS = frozenset({
    "attn_mask", "key_padding_mask", "mask", "src_mask", "tgt_mask", "memory_mask",
    "src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
})

# --------------------------------------------------------------------------- dtypes

DTYPES: dict[str, Dtype] = {
    "torch.float16": Dtype("float", 16, 5), "torch.half": Dtype("float", 16, 5),
    "torch.bfloat16": Dtype("float", 16, 8),
    "torch.float32": Dtype("float", 32, 8), "torch.float": Dtype("float", 32, 8),
    "torch.float64": Dtype("float", 64, 11), "torch.double": Dtype("float", 64, 11),
    "float": Dtype("float", 64, 11),
    "torch.int8": Dtype("int", 8), "torch.uint8": Dtype("int", 8),
    "torch.int16": Dtype("int", 16), "torch.short": Dtype("int", 16),
    "torch.int32": Dtype("int", 32), "torch.int": Dtype("int", 32),
    "torch.int64": Dtype("int", 64), "torch.long": Dtype("int", 64), "int": Dtype("int", 64),
    "torch.bool": Dtype("bool", 8), "bool": Dtype("bool", 8),
}


def dtype_kind(name: str) -> str | None:
    """``float`` / ``int`` / ``bool`` for a dtype's qualified name (also the float8 and unsigned
    families by prefix), ``None`` when not a known dtype."""
    d = DTYPES.get(name)
    if d is not None:
        return d.kind
    if name.startswith("torch.float"):
        return "float"
    if name.startswith(("torch.int", "torch.long", "torch.uint")):
        return "int"
    return None


# --------------------------------------------------------------------------- look-ups


def function(qualname: str | None) -> Op | None:
    """The op a call of the qualified name is, or ``None``."""
    return FUNCTIONS.get(qualname) if qualname else None


def method(name: str) -> Op | None:
    """The op ``x.name(...)`` is when ``x`` is a tensor, or ``None``."""
    return METHODS.get(name)


def module(qualname: str | None) -> Op | None:
    """The op an instance of the ``nn.Module`` class ``qualname`` computes, or ``None``."""
    return MODULES.get(qualname) if qualname else None


def kernel(qualname: str | None) -> Op | None:
    """A fused attention kernel: SDPA by qualified name, flash-attn / xformers by last component."""
    if not qualname:
        return None
    op = FUNCTIONS.get(qualname)
    if op is not None:
        return op if op.family == "attention" else None
    return KERNELS.get(qualname.rsplit(".", 1)[-1])


def functions(family: str, *kinds: str, batched: bool | None = None) -> frozenset[str]:
    """Qualified names of the functions of ``family`` (restricted to ``kinds`` when given)."""
    return frozenset(n for n, op in FUNCTIONS.items() if op.family == family
                     and (not kinds or op.kind in kinds)
                     and (batched is None or op.batched == batched))


def methods(family: str, *kinds: str) -> frozenset[str]:
    """Tensor method names of ``family`` (restricted to ``kinds`` when given)."""
    return frozenset(n for n, op in METHODS.items() if op.family == family
                     and (not kinds or op.kind in kinds))


def modules(family: str, *kinds: str) -> frozenset[str]:
    """``nn.Module`` class names of ``family`` (restricted to ``kinds`` when given)."""
    return frozenset(n for n, op in MODULES.items() if op.family == family
                     and (not kinds or op.kind in kinds))


def dtypes(pred) -> frozenset[str]:
    """Qualified ``torch`` dtype names whose :class:`Dtype` satisfies ``pred``."""
    return frozenset(n for n, d in DTYPES.items() if n.startswith("torch.") and pred(d))


# Name sets derived from the tables, for membership tests on hot paths.
SOFTMAX = functions("softmax", "softmax")
SOFTMAX_OR_LOG = functions("softmax")
SDPA = functions("attention", "sdpa")
MATMUL = functions("matmul")
BATCHED_MATMUL = functions("matmul", batched=True)
MHA_CLASSES = modules("mha")
SOFTMAX_CLASSES = modules("softmax")
PASSTHROUGH_CLASSES = modules("dropout") | modules("identity")
F_DROPOUT = functions("dropout")
EXP = functions("exp")
WIDE_DTYPES = dtypes(lambda d: d.wide)
LOW_PRECISION_DTYPES = dtypes(lambda d: d.low_precision)
HIGH_PRECISION_DTYPES = dtypes(lambda d: d.kind == "float" and d.bits >= 32)
FLOAT_CASTS = frozenset(n for n, op in METHODS.items() if op.family == "cast" and op.kind == "float")
INT_CASTS = frozenset(n for n, op in METHODS.items() if op.family == "cast" and op.kind == "int")
LOW_PRECISION_CASTS = frozenset(n for n in FLOAT_CASTS if DTYPES[METHODS[n].dtype_name].low_precision)
HIGH_PRECISION_CASTS = FLOAT_CASTS - LOW_PRECISION_CASTS
COMPARE_METHODS = {n: op.kind for n, op in METHODS.items() if op.family == "compare"}
