"""The probe: capture every attention computation inside an arbitrary forward.

:class:`Probe` is a :class:`torch.overrides.TorchFunctionMode` (PyTorch's ``__torch_function__``
protocol, https://pytorch.org/docs/stable/notes/extending.html#extending-torch-python-api).
While it is active it records, in call order:

- every softmax: ``torch.nn.functional.softmax``, ``torch.softmax``, ``Tensor.softmax``,
  ``torch.special.softmax``, ``torch._softmax`` (``nn.Softmax`` goes through ``F.softmax``);
  ``log_softmax`` is *not* recorded; a softmax written by hand, ``e = exp(s - s.amax(dim,
  keepdim=True))`` (or no shift) then ``e / e.sum(dim, keepdim=True)``, is recorded as a
  softmax of ``s`` when ``s`` derives from a q·kᵀ product;
- every ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) call, with q, k, v, attn_mask,
  is_causal, scale, enable_gqa, dropout_p and the attention weights recomputed in float64
  (:func:`sdpa_reference`; PyTorch documents SDPA's semantics by the same reference code:
  https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html);
- every ``torch.nn.functional.multi_head_attention_forward`` call (``nn.MultiheadAttention`` and
  ``nn.TransformerEncoderLayer`` show nothing else under a function mode): the probe re-runs the
  composite once more with ``need_weights=True, average_attn_weights=False, dropout_p=0`` under
  ``torch.no_grad()``, which yields per-head weights (and, with ``mha_logits=True``, the
  pre-softmax logits through a dispatch mode).
  The caller still gets the output of its own call, unchanged.

Calls it sees but cannot look into (flex attention, custom / fused attention ops, anything whose
name mentions attention that is not SDPA or MHA, code traced by ``torch.compile``) are listed in
:attr:`Probe.not_observable` — a check must report those as "not observable", never as a pass.
TorchScript and ``torch.compile``'d callables run without calling back into Python, so nothing
inside them is seen; :func:`opaque_reason` detects them on the target object before the run.

With ``track_matmuls=True`` (default) the probe also follows scalar multiplications and the
matmuls (``@``, ``matmul``, ``bmm``, ``baddbmm``, ``einsum``, ``mm``) that produce the softmax
input, so each softmax record carries the *effective* scale of its logits relative to the raw
q·kᵀ product (:attr:`AttentionRecord.effective_scale`), including scales folded into q or k
beforehand (``q = q * d ** -0.5``) and into ``baddbmm(alpha=...)``.

The mode is always popped, also when the forward raises (context manager protocol).
"""
from __future__ import annotations

import collections
import dataclasses
import math
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["MASK_THRESHOLD", "AttentionRecord", "Probe", "opaque_reason", "sdpa_reference"]

#: Logits at or below this value (or non-finite) are treated as masked entries, not scores.
#: Real fills are ``-inf``, ``torch.finfo(dtype).min``, ``-1e9`` or ``-1e4`` (old BERT, additive
#: masks of transformers' eager layers); an additive fill lands at ``fill + score``, so the
#: threshold is half the weakest fill: raw scores of a layer at initialisation are orders of
#: magnitude smaller than 5e3.
MASK_THRESHOLD = -5e3

_SOFTMAX_NAMES = {"softmax", "_softmax", "special_softmax"}
_SDPA_NAMES = {"scaled_dot_product_attention"}
_MHA_NAMES = {"multi_head_attention_forward"}
_MATMUL_NAMES = {"matmul", "__matmul__", "__rmatmul__", "bmm", "baddbmm", "einsum", "mm"}
_SCALAR_NAMES = {"mul", "__mul__", "__rmul__", "mul_", "__imul__", "multiply",
                 "div", "__truediv__", "div_", "__itruediv__", "true_divide", "divide"}
_PASS_NAMES = {"view", "reshape", "transpose", "permute", "contiguous", "flatten", "unflatten",
               "unsqueeze", "squeeze", "expand", "__getitem__", "split", "chunk", "unbind",
               "narrow", "select", "to", "float", "double", "half", "bfloat16", "type", "type_as",
               "clone", "movedim", "moveaxis", "swapaxes", "swapdims", "repeat_interleave",
               "repeat", "view_as", "reshape_as", "expand_as", "mT", "T", "transpose_", "t",
               "tensor_split", "split_with_sizes", "detach"}
#: ops that carry q·kᵀ provenance from their input to their output: shape ops, elementwise
#: arithmetic with masks / biases / scalars, soft-capping, concatenation (attention sinks).
#: Projections (``linear``, matmuls with a weight), norms and the softmax itself end it.
_CARRY_NAMES = _PASS_NAMES | _SCALAR_NAMES | {
    "add", "__add__", "__radd__", "add_", "__iadd__", "sub", "__sub__", "__rsub__", "sub_", "__isub__",
    "masked_fill", "masked_fill_", "where", "tanh", "tanh_", "cat", "concat", "concatenate", "clamp",
    "clamp_", "clamp_min", "clamp_max", "neg", "__neg__", "float", "contiguous", "nan_to_num",
    "maximum", "minimum", "masked_scatter"}
#: the steps of a softmax written by hand, ``e = exp(s - s.amax(dim, keepdim=True))`` then
#: ``e / e.sum(dim, keepdim=True)``: row statistic, shift, exponential, row sum, division
_ROWSTAT_NAMES = {"amax", "max", "logsumexp"}
_SHIFT_NAMES = {"sub", "__sub__"}
_EXP_NAMES = {"exp", "exp_"}
_SUM_NAMES = {"sum"}
_DIV_NAMES = {"div", "__truediv__", "div_", "__itruediv__", "true_divide", "divide"}
_HAND_SOFTMAX_NAMES = _ROWSTAT_NAMES | _SHIFT_NAMES | _EXP_NAMES | _SUM_NAMES | _DIV_NAMES
_FIT_MAX = 1 << 16   # entries used to fit a softmax's scale against a matmul
_OPAQUE_HINTS = ("flex_attention", "flash_attn", "flash_attention", "efficient_attention",
                 "memory_efficient_attention", "xformers")


def _func_name(func: Callable) -> str:
    name = getattr(func, "__name__", "")
    if name == "__get__":  # property access, e.g. Tensor.mT
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    return name


def _func_qualname(func: Callable) -> str:
    mod = getattr(func, "__module__", None) or ""
    qn = getattr(func, "__qualname__", None) or _func_name(func)
    if mod.startswith("torch._C"):
        mod = "torch"
    if qn.startswith("TensorBase."):
        return "torch.Tensor." + qn.split(".", 1)[1]
    if qn.startswith("_VariableFunctionsClass."):
        return "torch." + qn.split(".", 1)[1]
    return f"{mod}.{qn}" if mod else qn


@dataclass
class AttentionRecord:
    """One softmax / SDPA / MHA call seen by the :class:`Probe`.

    Attributes:
        index: position in call order among the probe's records.
        kind: ``"softmax"``, ``"sdpa"`` or ``"mha"``.
        op: qualified name of the function called (e.g. ``torch.nn.functional.softmax``).
        shape: shape of the softmax input / of the attention weights ``(B, H, L_q, L_k)`` for SDPA
            and MHA.
        dim: softmax axis, non-negative (``ndim - 1`` for SDPA / MHA).
        dtype: dtype of the softmax input / of ``q``.
        logits: detached clone of the softmax input (SDPA: ``scale·q·kᵀ`` plus mask in float64,
            masked entries ``-inf``; MHA: pre-softmax scores ``(B, H, L_q, L_k)`` only with
            ``mha_logits=True``, else None);
            ``None`` with ``keep_tensors=False``.
        probs: detached output of the softmax (SDPA: float64 weights recomputed by
            :func:`sdpa_reference`, fully masked rows are 0 like SDPA's own output; MHA: per-head
            weights before dropout, ``(B, H, L_q, L_k)``).
        q, k, v, attn_mask, is_causal, scale, enable_gqa, dropout_p: SDPA arguments (detached);
            ``scale`` is the value passed (``None`` = SDPA default ``1/√E``).
        output: detached output of the SDPA / MHA call.
        num_heads: heads, when known (SDPA/MHA: from shapes/arguments; softmax: ``shape[-3]`` of a
            4-D input).
        head_dim: the contracted dimension of q·kᵀ, when known.
        effective_scale: factor ``s`` with ``logits = s · (q·kᵀ) (+ mask)`` where q, k are the
            tensors before any scalar multiplication; ``None`` when no q·kᵀ relation was found.
        scale_source: how ``effective_scale`` was obtained (``"sdpa"``, ``"matmul"``, ``"mha"``).
        scale_fit: for ``"matmul"``: share of unmasked entries consistent with the fitted scale.
    """

    index: int
    kind: str
    op: str
    shape: tuple[int, ...]
    dim: int
    dtype: torch.dtype
    logits: torch.Tensor | None = None
    probs: torch.Tensor | None = None
    q: torch.Tensor | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    attn_mask: torch.Tensor | None = None
    is_causal: bool = False
    scale: float | None = None
    enable_gqa: bool = False
    dropout_p: float = 0.0
    output: torch.Tensor | None = None
    num_heads: int | None = None
    head_dim: int | None = None
    effective_scale: float | None = None
    scale_source: str | None = None
    scale_fit: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key_axis(self) -> int:
        """Axis of the logits / probabilities that runs over the keys (non-negative): the axis a
        later ``weights @ v`` sums over (``k @ qᵀ`` logits used as ``p.transpose(-2, -1) @ v``:
        the second-to-last), else read from the q·kᵀ product that produced the logits
        (``einsum("bihd,bjhd->bijh")``: axis 2, the later of the two free indices that are not
        shared by the operands; ``q @ kᵀ``: the last axis), else the last axis."""
        ax = self.extra.get("key_axis")
        return int(ax) if isinstance(ax, int) else max(len(self.shape) - 1, 0)

    @property
    def query_axis(self) -> int:
        """Axis over the queries, read like :attr:`key_axis` (default: the second-to-last)."""
        ax = self.extra.get("query_axis")
        return int(ax) if isinstance(ax, int) else max(len(self.shape) - 2, 0)

    def canonical(self, t: torch.Tensor | None) -> torch.Tensor | None:
        """``t`` (logits or probabilities of this record) with the query and key axes moved
        last: ``(..., L_q, L_k)``."""
        if t is None or t.dim() < 2:
            return t
        qa, ka = self.query_axis, self.key_axis
        if (qa, ka) == (t.dim() - 2, t.dim() - 1) or max(qa, ka) >= t.dim():
            return t
        return t.movedim((qa, ka), (-2, -1))

    def rows(self) -> torch.Tensor | None:
        """Probabilities with the softmax axis moved last: ``(..., L_k)``; ``None`` if not kept."""
        if self.probs is None:
            return None
        return self.probs.movedim(self.dim, -1)

    def row_logits(self) -> torch.Tensor | None:
        """Logits with the softmax axis moved last: ``(..., L_k)``; ``None`` if not kept."""
        if self.logits is None:
            return None
        return self.logits.movedim(self.dim, -1)

    def summary(self) -> dict[str, Any]:
        """JSON-serialisable description (no tensors)."""
        return {"index": self.index, "kind": self.kind, "op": self.op, "shape": list(self.shape),
                "dim": self.dim, "dtype": str(self.dtype).replace("torch.", ""),
                "is_causal": self.is_causal, "scale": self.scale, "enable_gqa": self.enable_gqa,
                "num_heads": self.num_heads, "head_dim": self.head_dim,
                "effective_scale": self.effective_scale, "scale_source": self.scale_source}


def sdpa_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None = None,
                   attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                   scale: float | None = None, enable_gqa: bool = False,
                   dtype: torch.dtype = torch.float64):
    """Reference SDPA in ``dtype`` (float64 by default), following PyTorch's documented semantics.

    Args:
        q: ``(..., H_q, L_q, E)``; k: ``(..., H_k, L_k, E)``; v: ``(..., H_k, L_k, E_v)`` or None.
        attn_mask: bool (True = attend) or additive float, broadcastable to
            ``(..., H_q, L_q, L_k)``.
        is_causal: top-left causal mask ``ones(L_q, L_k).tril()`` (SDPA's convention).
        scale: logits factor; ``None`` → ``1/√E``.
        enable_gqa: repeat K/V heads (``repeat_interleave`` over dim -3) to ``H_q``.

    Returns:
        ``(logits, probs, out)``: logits ``(..., H_q, L_q, L_k)`` with masked entries ``-inf``,
        probs of the same shape (fully masked rows are 0, as SDPA returns 0 for them),
        out ``(..., H_q, L_q, E_v)`` or ``None`` when ``v`` is None.

    Raises:
        ValueError: ``enable_gqa`` with ``H_q`` not a multiple of ``H_k``.
    """
    q64, k64 = q.detach().to(dtype), k.detach().to(dtype)
    v64 = v.detach().to(dtype) if v is not None else None
    if enable_gqa and q64.dim() >= 3 and k64.size(-3) != q64.size(-3):
        hq, hk = q64.size(-3), k64.size(-3)
        if hq % hk:
            raise ValueError(f"enable_gqa: {hq} query heads not a multiple of {hk} key heads")
        k64 = k64.repeat_interleave(hq // hk, dim=-3)
        if v64 is not None:
            v64 = v64.repeat_interleave(hq // hk, dim=-3)
    s = (1.0 / math.sqrt(q64.size(-1))) if scale is None else float(scale)
    logits = (q64 @ k64.transpose(-2, -1)) * s
    lq, lk = q64.size(-2), k64.size(-2)
    if is_causal:
        keep = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(0)
        logits = logits.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            logits = logits.masked_fill(~attn_mask.to(q.device), float("-inf"))
        else:
            logits = logits + attn_mask.detach().to(dtype)
    probs = torch.softmax(logits, dim=-1)
    probs = torch.nan_to_num(probs, nan=0.0)  # rows with every key masked: SDPA returns 0
    out = probs @ v64 if v64 is not None else None
    return logits, probs, out


def opaque_reason(obj: Any) -> str | None:
    """Why nothing inside ``obj`` can be observed by a function mode, or None.

    Detects TorchScript (``torch.jit.ScriptModule`` / ``ScriptFunction``), ``torch.compile``
    (``OptimizedModule``, ``_torchdynamo_orig_callable``), also on submodules of an ``nn.Module``.
    """
    def one(o: Any) -> str | None:
        if isinstance(o, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
            return "TorchScript"
        if type(o).__name__ == "OptimizedModule" or hasattr(o, "_torchdynamo_orig_callable"):
            return "torch.compile"
        fwd = getattr(o, "forward", None)
        if fwd is not None and hasattr(fwd, "_torchdynamo_orig_callable"):
            return "torch.compile"
        return None

    r = one(obj)
    if r:
        return f"{r}: {type(obj).__name__}"
    if isinstance(obj, torch.nn.Module):
        for name, sub in obj.named_modules():
            r = one(sub)
            if r:
                return f"{r}: submodule {name or '(root)'} ({type(sub).__name__})"
    return None


def _arg(args, kwargs, i, name, default=None):
    if name in kwargs:
        return kwargs[name]
    if len(args) > i:
        return args[i]
    return default


def _detach(t):
    return t.detach().clone() if isinstance(t, torch.Tensor) else t


def _scalar_value(x) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, torch.Tensor) and x.numel() == 1 and x.dtype.is_floating_point:
        try:
            return float(x.detach().reshape(()).item())
        except Exception:  # noqa: BLE001 - meta / fake tensors
            return None
    return None


class _Tags:
    """An object attached to tensors (weakly keyed by id), e.g. the matmul a tensor derives from."""

    def __init__(self) -> None:
        self._d: dict[int, tuple[weakref.ref, Any]] = {}

    def get(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return None
        e = self._d.get(id(t))
        if e is None or e[0]() is not t:
            return None
        return e[1]

    def set(self, t: Any, tag: Any) -> None:
        if not isinstance(t, torch.Tensor):
            return
        try:
            self._d[id(t)] = (weakref.ref(t), tag)
        except TypeError:
            return
        if len(self._d) > 20000:
            self._d = {k: v for k, v in self._d.items() if v[0]() is not None}

    def __bool__(self) -> bool:
        return bool(self._d)


class _Factors(_Tags):
    """Scalar factors carried by tensors since their last non-scalar op (weakly keyed by id);
    1.0 when none."""

    def get(self, t: Any) -> float:
        f = super().get(t)
        return 1.0 if f is None else f

    def set(self, t: Any, f: float) -> None:
        if f == 1.0:
            if isinstance(t, torch.Tensor):
                self._d.pop(id(t), None)
            return
        super().set(t, f)


@dataclass
class _Matmul:
    out: torch.Tensor
    factor: float        # alpha × prescale(A) × prescale(B)
    contracted: int      # size of the contracted dimension(s)
    op: str
    key_axis: int | None = None  # axis of ``out`` that runs over the keys (non-negative)
    query_axis: int | None = None  # axis of ``out`` that runs over the queries
    compound: bool = False  # joined with other q·kᵀ products (no single product to fit against)
    key: torch.Tensor | None = None  # the second operand (kᵀ for ``q @ kᵀ``, k for an einsum)


class Probe(TorchFunctionMode):
    """Record softmax / SDPA / MHA calls made while active.

    Usage::

        with Probe() as p:
            out = layer(x)
        for r in p.records: ...        # AttentionRecord, call order
        p.not_observable               # names of calls seen but not looked into

    Args:
        keep_tensors: keep logits/probs/q/k/v/mask/output clones (``False``: metadata only).
        max_records: store at most this many records (the rest counted in :attr:`dropped`).
        observe_mha: re-run ``F.multi_head_attention_forward`` to expose its weights (2× cost for
            MHA layers); ``False`` lists MHA calls as not observable.
        track_matmuls: follow q·kᵀ matmuls and scalar factors to compute
            :attr:`AttentionRecord.effective_scale` for hand-written softmax attention.
        recompute_sdpa: recompute SDPA weights in float64 (needs q, k in memory).
        mha_logits: also capture MHA's pre-softmax logits with a ``TorchDispatchMode`` (its first
            use imports ``torch._dynamo``, about 5 s once per process); otherwise MHA records
            have ``logits=None``.

    Not thread-safe: a function mode is per-thread state in PyTorch.
    """

    def __init__(self, keep_tensors: bool = True, max_records: int | None = None,
                 observe_mha: bool = True, track_matmuls: bool = True,
                 recompute_sdpa: bool = True, mha_logits: bool = False) -> None:
        super().__init__()
        self.keep_tensors = keep_tensors
        self.max_records = max_records
        self.observe_mha = observe_mha
        self.track_matmuls = track_matmuls
        self.recompute_sdpa = recompute_sdpa
        self.mha_logits = mha_logits
        self.records: list[AttentionRecord] = []
        self.not_observable: list[str] = []
        self.errors: list[str] = []
        self.dropped = 0
        self.calls = 0
        self._factors = _Factors()
        self._qk = _Tags()  # tensor → the activation·activation matmul it derives from
        self._matmuls: collections.deque[_Matmul] = collections.deque(maxlen=6)
        # recent softmax outputs (live tensors, not clones) with their records: a later
        # ``weights @ v`` on one of them, or on a transposed view of it, tells its key axis
        self._weights: collections.deque[tuple[AttentionRecord, torch.Tensor]] = collections.deque(maxlen=6)
        self._count = 0
        # a softmax written by hand: row statistic → its input; shifted logits → unshifted;
        # exp output → the (unshifted) logits; row sum of an exp output → (that output, dim)
        self._rowstat, self._shifted, self._exps, self._expsums = _Tags(), _Tags(), _Tags(), _Tags()

    # -- public helpers -------------------------------------------------------------------------
    @property
    def observed(self) -> bool:
        """True when at least one attention computation was recorded."""
        return self._count > 0

    def note_opaque(self, obj: Any) -> str | None:
        """Add ``opaque_reason(obj)`` (if any) to :attr:`not_observable` and return it."""
        r = opaque_reason(obj)
        if r and r not in self.not_observable:
            self.not_observable.append(r)
        return r

    def attention_records(self) -> list[AttentionRecord]:
        """Records that are attention: SDPA, MHA, or a softmax whose input *derives* from a
        matmul between two activations (not a weight) — a q·kᵀ product followed only by shape
        ops and elementwise arithmetic (scale, mask, position bias, soft-capping, a concatenated
        sink column), tracked tensor by tensor (``extra["qk_matmul"]``).  A softmax over a
        projection's output (an MoE router, a classifier head) is not attention.  With
        ``track_matmuls=False`` only SDPA / MHA qualify."""
        return [r for r in self.records
                if r.kind in ("sdpa", "mha") or r.scale_source == "matmul"
                or "qk_matmul" in r.extra]

    # -- mode -----------------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _func_name(func)
        self.calls += 1
        if _is_compiling():
            self._opaque("torch.compile (traced code runs without the probe)")
            return func(*args, **kwargs)
        if name in _SOFTMAX_NAMES:
            out = func(*args, **kwargs)
            self._guard(self._on_softmax, func, args, kwargs, out)
            return out
        if name in _SDPA_NAMES:
            out = func(*args, **kwargs)
            self._guard(self._on_sdpa, func, args, kwargs, out)
            return out
        if name in _MHA_NAMES:
            out = func(*args, **kwargs)
            if self.observe_mha:
                self._guard(self._on_mha, func, args, kwargs, out)
            else:
                self._opaque("torch.nn.functional.multi_head_attention_forward")
            return out
        lname = name.lower()
        if any(h in lname for h in _OPAQUE_HINTS) or "attention" in lname or "attn" in lname:
            self._opaque(_func_qualname(func))
            return func(*args, **kwargs)
        if not self.track_matmuls:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if self._qk and name in _HAND_SOFTMAX_NAMES:
            self._guard(self._on_hand_softmax_step, name, args, kwargs, out)
        if self._qk and name in _CARRY_NAMES:
            self._guard(self._carry, args, kwargs, out)
        if name in _MATMUL_NAMES:
            self._guard(self._on_matmul, func, args, kwargs, out, name)
        elif name in _SCALAR_NAMES:
            self._guard(self._on_scalar, func, args, kwargs, out, name)
        elif name in _PASS_NAMES and self._factors:
            src = args[0] if args else kwargs.get("input", kwargs.get("self"))
            f = self._factors.get(src)
            if f != 1.0:
                outs = out if isinstance(out, (tuple, list)) else (out,)
                for o in outs:
                    self._factors.set(o, f)
        return out

    # -- internals ------------------------------------------------------------------------------
    def _carry(self, args, kwargs, out) -> None:
        src = None
        for a in list(args[:3]) + list(kwargs.values()):
            if isinstance(a, (list, tuple)):  # torch.cat([scores, sinks])
                found = [t for t in (self._qk.get(e) for e in a) if t is not None]
                if len(found) > 1:  # scores of several q·kᵀ products side by side (global + local)
                    src = dataclasses.replace(found[0], compound=True)
                elif found:
                    src = found[0]
            else:
                src = src or self._qk.get(a)
            if src is not None:
                break
        if src is None:
            return
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            self._qk.set(o, src)

    def _guard(self, fn, *a):
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001 - the probe must never break the forward
            self.errors.append(f"{type(e).__name__}: {e}")

    def _opaque(self, what: str) -> None:
        if what not in self.not_observable:
            self.not_observable.append(what)

    def _add(self, rec: AttentionRecord) -> None:
        self._count += 1
        if self.max_records is not None and len(self.records) >= self.max_records:
            self.dropped += 1
            return
        self.records.append(rec)

    def _keep(self, t):
        return _detach(t) if self.keep_tensors else None

    def _on_softmax(self, func, args, kwargs, out):
        name = _func_name(func)
        x = _arg(args, kwargs, 0, "input", kwargs.get("self"))
        dim = _arg(args, kwargs, 1, "dim")
        if not isinstance(x, torch.Tensor):
            return
        if dim is None:  # F.softmax's legacy implicit dim
            dim = 0 if x.dim() in (0, 1, 3) else 1
        op = "torch.special.softmax" if name == "special_softmax" else _func_qualname(func)
        self._record_softmax(op, x, dim, out)

    def _on_hand_softmax_step(self, name, args, kwargs, out) -> None:
        """Follow ``exp(s - s.amax(dim, keepdim=True)) / sum(dim, keepdim=True)`` over logits
        ``s`` that derive from a q·kᵀ product; the division is recorded as a softmax of the
        unshifted ``s`` (the row shift cancels in the quotient)."""
        a = args[0] if args else kwargs.get("input", kwargs.get("self"))
        if not isinstance(a, torch.Tensor):
            return
        if name in _ROWSTAT_NAMES:
            if self._qk.get(a) is not None:
                self._rowstat.set(out[0] if isinstance(out, tuple) else out, a)
        elif name in _SHIFT_NAMES:
            b = args[1] if len(args) > 1 else kwargs.get("other")
            if b is not None and self._rowstat.get(b) is a:
                self._shifted.set(out, a)
        elif name in _EXP_NAMES:
            logits = self._shifted.get(a) if self._shifted.get(a) is not None else a
            if self._qk.get(a) is not None and logits is not out:  # ``s.exp_()`` lost ``s``
                self._exps.set(out, logits)
        elif name in _SUM_NAMES:
            dim = _arg(args, kwargs, 1, "dim")
            if isinstance(dim, (tuple, list)) and len(dim) == 1:
                dim = dim[0]
            if self._exps.get(a) is not None and isinstance(dim, int) and _arg(args, kwargs, 2, "keepdim"):
                self._expsums.set(out, (a, dim))
        else:
            b = args[1] if len(args) > 1 else kwargs.get("other")
            summed = self._expsums.get(b)
            logits = self._exps.get(a)
            if logits is not None and summed is not None and summed[0] is a:
                self._record_softmax("softmax written by hand (exp / sum)", logits, summed[1], out)

    def _record_softmax(self, op: str, x: torch.Tensor, dim: int, out: torch.Tensor) -> None:
        """Add a ``kind="softmax"`` record of ``out = softmax(x, dim)``."""
        dim = int(dim) % max(x.dim(), 1)
        rec = AttentionRecord(index=self._count, kind="softmax", op=op,
                              shape=tuple(x.shape), dim=dim, dtype=x.dtype,
                              logits=self._keep(x), probs=self._keep(out))
        if x.dim() == 4 and dim == 3:
            rec.num_heads = int(x.shape[1])
        src = self._qk.get(x) if self.track_matmuls else None
        if src is not None:
            rec.extra["qk_matmul"] = src.op
            if not src.compound and src.out.dim() == x.dim() and tuple(src.out.shape[:-1]) == tuple(x.shape[:-1]) \
                    and 0 < src.out.shape[-1] < x.shape[-1] and dim == x.dim() - 1:
                rec.extra["qk_columns"] = int(src.out.shape[-1])  # extra columns: sink logits
            self._fit_scale(rec, x, dim, src)
        self._add(rec)
        if self.track_matmuls and isinstance(out, torch.Tensor) and out.dim() >= 2:
            self._weights.append((rec, out.detach()))  # an alias: same storage, no graph

    def _fit_scale(self, rec: AttentionRecord, x: torch.Tensor, dim: int, src: _Matmul) -> None:
        with torch.no_grad():
            if "qk_columns" in rec.extra:
                x = x.narrow(-1, 0, rec.extra["qk_columns"])
            lg = x.detach().reshape(-1)
            sub = None
            if lg.numel() > _FIT_MAX:      # a fixed strided subset keeps big maps cheap
                sub = torch.arange(0, lg.numel(), lg.numel() // _FIT_MAX + 1, device=lg.device)
                lg = lg[sub]
            lg = lg.to(torch.float64)
            valid_l = torch.isfinite(lg) & (lg > MASK_THRESHOLD)
            best = None
            for mm in [src] + [c for c in reversed(self._matmuls) if c is not src]:
                if mm.out.numel() != x.numel() or mm.out.device != x.device:
                    continue
                if "qk_product" not in rec.extra and mm.out.shape == x.shape:
                    # kept for position-bias analysis when the logits are not proportional
                    # to it (an additive bias): see attncheck.dynamic.positions
                    rec.extra["qk_product"] = mm.out
                    rec.extra["qk_factor"] = mm.factor
                    rec.extra["qk_contracted"] = mm.contracted
                    if mm.key is not None:
                        rec.extra["qk_key"] = mm.key
                    if mm.key_axis is not None and mm.query_axis is not None:
                        rec.extra["key_axis"] = mm.key_axis
                        rec.extra["query_axis"] = mm.query_axis
                m = mm.out.reshape(-1)
                m = (m if sub is None else m[sub]).to(torch.float64)
                mmax = m.abs().max() if m.numel() else torch.tensor(0.0)
                valid = valid_l & torch.isfinite(m) & (m.abs() > 1e-3 * mmax)
                nvalid = int(valid.sum())
                if nvalid == 0:
                    continue
                lv, mv = lg[valid], m[valid]
                ratio = float((lv / mv).median())
                if ratio == 0.0 or not math.isfinite(ratio):
                    continue
                err = (lv - ratio * mv).abs()
                tol = 1e-3 * (ratio * mv).abs() + 1e-6 * float((ratio * mv).abs().max())
                fit = float((err <= tol).double().mean())
                if fit >= 0.9 and (best is None or fit > best[0]):
                    best = (fit, ratio, mm)
                    if fit == 1.0:
                        break
            if best is not None:
                fit, ratio, mm = best
                rec.effective_scale = ratio * mm.factor
                rec.head_dim = mm.contracted
                rec.scale_source = "matmul"
                rec.scale_fit = fit
                rec.extra["matmul_op"] = mm.op
                if mm.key_axis is not None and mm.query_axis is not None:
                    rec.extra["key_axis"] = mm.key_axis
                    rec.extra["query_axis"] = mm.query_axis

    def _on_matmul(self, func, args, kwargs, out, name):
        if not isinstance(out, torch.Tensor) or out.dim() < 2:
            return
        alpha, contracted = 1.0, None
        key_axis, query_axis = out.dim() - 1, out.dim() - 2
        if name == "einsum":
            eq = args[0] if args else kwargs.get("equation")
            ops = list(args[1:]) if len(args) > 1 else []
            if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
                ops = list(ops[0])
            if not isinstance(eq, str) or len(ops) != 2:
                return
            a, b = ops
            eq = _einsum_without_ellipsis(eq, a, b)
            contracted = _einsum_contracted(eq, a, b)
            if contracted is None:
                return
            key_axis = _einsum_key_axis(eq)
            query_axis = _einsum_query_axis(eq)
        else:
            if name == "baddbmm":
                a, b = _arg(args, kwargs, 1, "batch1"), _arg(args, kwargs, 2, "batch2")
                alpha = _scalar_value(kwargs.get("alpha", 1.0)) or 1.0
            elif name == "__rmatmul__":
                b, a = args[0], args[1]
            else:
                a = args[0] if args else kwargs.get("input")
                b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
            if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() < 2:
                return
            self._note_weights_axes(a)
            contracted = int(a.shape[-1])
        if _is_weight(a) or _is_weight(b):   # a projection (x @ W), not q·kᵀ
            return
        factor = alpha * self._factors.get(a) * self._factors.get(b)
        # a clone: the scores are often scaled / masked in place afterwards (``s /= √d``)
        mm = _Matmul(out.detach().clone(), factor, contracted, name, key_axis, query_axis,
                     key=b.detach() if self.keep_tensors else None)
        self._matmuls.append(mm)
        self._qk.set(out, mm)

    def _note_weights_axes(self, a: torch.Tensor) -> None:
        """``a @ v`` where ``a`` is softmax weights or a transposed view of them: ``@`` sums over
        the last axis of ``a``, so that axis of the weights is the key axis and the one before it
        the query axis (``k @ q.transpose(-2, -1)`` lays the keys out on axis -2 of the weights,
        used as ``p.transpose(-2, -1) @ v``)."""
        for rec, w in self._weights:
            if a.dim() != w.dim() or a.data_ptr() != w.data_ptr():
                continue
            axes = [_view_axis(w, a, i) for i in (a.dim() - 2, a.dim() - 1)]
            if None not in axes and axes[0] != axes[1]:
                rec.extra["query_axis"], rec.extra["key_axis"] = axes
            return

    def _on_scalar(self, func, args, kwargs, out, name):
        a = args[0] if args else kwargs.get("input", kwargs.get("self"))
        b = args[1] if len(args) > 1 else kwargs.get("other")
        if name == "__rmul__":
            a, b = b, a
        divide = name in ("div", "__truediv__", "div_", "__itruediv__", "true_divide", "divide")
        if kwargs.get("rounding_mode") is not None:
            return
        if isinstance(a, torch.Tensor) and _scalar_value(b) is not None and (
                not isinstance(b, torch.Tensor) or b.numel() == 1):
            s = _scalar_value(b)
            if divide:
                if s == 0:
                    return
                s = 1.0 / s
            self._factors.set(out, self._factors.get(a) * s)
        elif (not divide and isinstance(b, torch.Tensor) and _scalar_value(a) is not None
              and not isinstance(a, torch.Tensor)):
            self._factors.set(out, self._factors.get(b) * _scalar_value(a))

    def _on_sdpa(self, func, args, kwargs, out):
        q = _arg(args, kwargs, 0, "query")
        k = _arg(args, kwargs, 1, "key")
        v = _arg(args, kwargs, 2, "value")
        mask = _arg(args, kwargs, 3, "attn_mask")
        dropout_p = float(_arg(args, kwargs, 4, "dropout_p", 0.0) or 0.0)
        is_causal = bool(_arg(args, kwargs, 5, "is_causal", False))
        scale = _arg(args, kwargs, 6, "scale")
        gqa = bool(_arg(args, kwargs, 7, "enable_gqa", False))
        scale = None if scale is None else float(scale)
        lq, lk = q.size(-2), k.size(-2)
        shape = tuple(q.shape[:-2]) + (lq, lk)
        rec = AttentionRecord(index=self._count, kind="sdpa", op="torch.nn.functional."
                              "scaled_dot_product_attention", shape=shape, dim=len(shape) - 1,
                              dtype=q.dtype, is_causal=is_causal, scale=scale, enable_gqa=gqa,
                              dropout_p=dropout_p)
        rec.num_heads = int(q.shape[-3]) if q.dim() >= 3 else 1
        rec.head_dim = int(q.shape[-1])
        base = (1.0 / math.sqrt(q.size(-1))) if scale is None else scale
        rec.effective_scale = base * self._factors.get(q) * self._factors.get(k)
        rec.scale_source = "sdpa"
        if self.keep_tensors:
            rec.q, rec.k, rec.v = _detach(q), _detach(k), _detach(v)
            rec.attn_mask = _detach(mask)
            rec.output = _detach(out)
            if self.recompute_sdpa:
                with torch.no_grad():
                    lg, pr, _ = sdpa_reference(q, k, None, mask, is_causal, scale, gqa)
                rec.logits, rec.probs = lg, pr
        self._add(rec)

    def _grabber(self, captured: list):
        if not self.mha_logits:
            import contextlib
            return contextlib.nullcontext()
        return _softmax_grabber(captured)

    def _on_mha(self, func, args, kwargs, out):
        import inspect

        sig = inspect.signature(F.multi_head_attention_forward)
        ba = sig.bind(*args, **kwargs)
        ba.apply_defaults()
        a = ba.arguments
        num_heads = int(a["num_heads"])
        query, key = a["query"], a["key"]
        batched = query.dim() == 3
        embed = int(query.shape[-1])
        head_dim = embed // num_heads
        rec = AttentionRecord(index=self._count, kind="mha",
                              op="torch.nn.functional.multi_head_attention_forward",
                              shape=(), dim=3, dtype=query.dtype)
        rec.num_heads, rec.head_dim = num_heads, head_dim
        rec.dropout_p = float(a["dropout_p"]) if a["training"] else 0.0
        rec.is_causal = bool(a["is_causal"])
        rec.scale = None
        rec.effective_scale = 1.0 / math.sqrt(head_dim)  # q * sqrt(1/E_head) in PyTorch's source
        rec.scale_source = "mha"
        lq = query.shape[0]
        lk = key.shape[0]
        bsz = query.shape[1] if batched else 1
        rec.shape = (bsz, num_heads, lq, lk)
        if self.keep_tensors:
            captured: list[torch.Tensor] = []
            a2 = dict(a)
            a2.update(need_weights=True, average_attn_weights=False, dropout_p=0.0)
            if a2["is_causal"] and a2["attn_mask"] is None:
                a2["is_causal"] = False
            with torch.no_grad(), self._grabber(captured):
                _, w = func(**a2)
            if w is not None:
                w = w.detach()
                if w.dim() == 3:
                    w = w.unsqueeze(0)
                rec.probs = w
            if captured:
                rec.logits = captured[-1].reshape(rec.shape)
            o = out[0] if isinstance(out, tuple) else out
            rec.output = _detach(o)
        self._add(rec)


def _softmax_grabber(captured: list):
    """A dispatch mode recording the input of every aten softmax (the MHA composite's logits)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Grab(TorchDispatchMode):
        def __torch_dispatch__(self, f, types, fargs=(), fkw=None):
            r = f(*fargs, **(fkw or {}))
            name = str(f)
            if "softmax" in name and "backward" not in name:
                captured.append(fargs[0].detach().clone())
            return r

    return _Grab()


def _view_axis(base: torch.Tensor, view: torch.Tensor, i: int) -> int | None:
    """The axis of ``base`` that axis ``i`` of ``view`` (a permuted view of the same storage)
    walks: the only one with the same size and stride; None when there is not exactly one."""
    match = [j for j in range(base.dim())
             if base.size(j) == view.size(i) and base.stride(j) == view.stride(i)]
    return match[0] if len(match) == 1 else None


def _is_weight(t: Any) -> bool:
    if isinstance(t, torch.nn.Parameter):
        return True
    base = getattr(t, "_base", None)
    return isinstance(base, torch.nn.Parameter)


def _einsum_without_ellipsis(eq: str, a: Any, b: Any) -> str:
    """``eq`` with each ``...`` spelled out as letters for the broadcast dims it stands for
    (``"... i d, ... j d -> ... i j"`` on two 4-d operands → ``"ABid,ABjd->ABij"``): broadcast
    dims line up from the right, as ``torch.einsum`` documents; ``eq`` unchanged when it has no
    ellipsis or the operands are not tensors."""
    if "..." not in eq or not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return eq
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    if len(parts) != 2:
        return eq
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    counts = [t.dim() - len(p.replace("...", "")) if "..." in p else 0 for p, t in zip(parts, (a, b))]
    n = max(counts)
    if min(counts) < 0 or n > len(free):
        return eq
    letters = "".join(free[:n])
    parts = [p.replace("...", letters[n - c:]) for p, c in zip(parts, counts)]
    return ",".join(parts) + (arrow + rhs.replace("...", letters) if arrow else "")


def _einsum_contracted(eq: str, a: Any, b: Any) -> int | None:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or "..." in eq:
        return None
    eq = eq.replace(" ", "")
    if "->" not in eq:
        return None
    lhs, rhs = eq.split("->")
    parts = lhs.split(",")
    if len(parts) != 2 or len(parts[0]) != a.dim() or len(parts[1]) != b.dim():
        return None
    sizes = dict(zip(parts[0], a.shape))
    sizes.update(zip(parts[1], b.shape))
    contracted = [c for c in set(parts[0]) & set(parts[1]) if c not in rhs]
    if not contracted:
        return None
    n = 1
    for c in contracted:
        n *= int(sizes[c])
    return n


def _einsum_key_axis(eq: str) -> int | None:
    """Output axis of a q·kᵀ einsum that runs over the keys: of the two output indices that
    come from one operand only (query and key positions), the later one — ``"bhid,bhjd->bhij"``
    → 3, ``"bihd,bjhd->bijh"`` → 2 — whatever the operand order; None when it is not that form."""
    eq = eq.replace(" ", "")
    lhs, rhs = eq.split("->")
    a, b = lhs.split(",")
    own = [i for i, c in enumerate(rhs) if (c in a) != (c in b)]
    return own[-1] if len(own) == 2 else None


def _einsum_query_axis(eq: str) -> int | None:
    """Output axis of a q·kᵀ einsum that runs over the queries (see :func:`_einsum_key_axis`)."""
    eq = eq.replace(" ", "")
    lhs, rhs = eq.split("->")
    a, b = lhs.split(",")
    own = [i for i, c in enumerate(rhs) if (c in a) != (c in b)]
    return own[0] if len(own) == 2 else None


def _is_compiling() -> bool:
    # torch.compiler.is_compiling() imports torch._dynamo (~5 s) — if dynamo was never imported,
    # nothing can be compiling
    if "torch._dynamo" not in sys.modules:
        return False
    try:
        return bool(torch.compiler.is_compiling())
    except Exception:  # noqa: BLE001
        return False
