"""Targets: how the dynamic checks call the thing under test.

A :class:`Target` wraps a user object together with its calling convention so that every check can
ask for *canonical* inputs and get *canonical* outputs, whatever the object's own convention:

========================  =====================================================================
kind                      call made by :meth:`Target.forward`
========================  =====================================================================
``"kernel"``              ``f(q, k, v[, attn_mask=..][, is_causal=..])`` on ``(B, H, L, d)``
                          tensors (or ``(B, L, H, d)`` with ``layout="BLHd"``, ``(B, L, d)``
                          with ``layout="BLd"``); returns ``out`` or ``(out, weights)``.
``"layer"``               an ``nn.Module`` called as ``m(x)`` (self-attention, ``call="x"``),
                          ``m(q, kv)`` (``call="q_kv"``) or ``m(q, k, v)`` (``call="q_k_v"``) on
                          ``(B, L, E)`` (``(L, B, E)`` when ``batch_first=False``); returns the
                          output or ``(output, weights)``.
``"mha"``                 ``torch.nn.MultiheadAttention``: built-in adapter, called with
                          ``need_weights=True, average_attn_weights=False`` (weights
                          ``(B, H, L_q, L_k)``); bool masks follow its convention (True = blocked).
``"encoder_layer"``       ``torch.nn.TransformerEncoderLayer``: ``m(src, src_mask=..,
                          is_causal=..)``; self-attention, output only.
========================  =====================================================================

Canonical forms used by the checks (``Inputs`` / ``Output``):

- kernel: ``q, k, v`` are ``(B, H, L_q|L_k, d)``; ``Output.out`` is ``(B, H, L_q, d_v)``;
  ``Output.weights`` (if returned) ``(B, H, L_q, L_k)``.
- layer / mha / encoder_layer: ``q, k, v`` are ``(B, L, E)`` batch-first (for self-attention
  ``q is k is v``); ``Output.out`` is ``(B, L_q, E)``; ``Output.weights`` ``(B, H, L_q, L_k)`` or
  ``(B, L_q, L_k)`` as returned.
- masks: ``Inputs.keep`` is a bool tensor broadcastable to ``(B, H, L_q, L_k)``, ``True`` = the
  query may attend to the key (the convention of ``F.scaled_dot_product_attention``'s bool
  ``attn_mask``, PyTorch docs).  It is converted to the target's own convention
  (``mask_convention``: ``"keep"``, ``"blocked"`` — e.g. ``nn.MultiheadAttention`` — or
  ``"additive"``: 0 kept, ``torch.finfo(dtype).min`` blocked, as transformers prepares it) when the call is made.

Causal alignment when ``L_q != L_k``: ``"top_left"`` (SDPA ``is_causal``, query i sees keys
``j <= i``) or ``"bottom_right"`` (flash-attention, KV-cache decoding: query i sees keys
``j <= i + L_k - L_q``; ``torch.nn.attention.bias.causal_lower_right``).

Public entry point: :func:`target` (exported as ``attncheck.target``).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable

import torch
from torch import nn

# Hints accepted by :func:`target` (and ``attncheck.check(..., **hints)``): the registry
# ``HINTS`` (name -> HintSpec: accepted values, validator, doc, checks that read it)
from attncheck.dynamic.hints import HINTS, HintError, validate_hints

__all__ = [
    "Target", "Inputs", "Output", "Example", "TargetError", "TargetOutputError", "TargetCallError",
    "target",
    "HINTS", "KINDS", "causal_blocked",
]

KINDS = ("kernel", "layer", "mha", "encoder_layer")
LAYOUTS = ("BHLd", "BLHd", "BLd")
MASK_CONVENTIONS = ("keep", "blocked", "additive")
MASK_SHAPES = ("B1QK", "BQK", "B11K", "BK", "QK")
CALLS = ("x", "q_kv", "q_k_v")
_CALL_ALIASES = {"qkv": "q_k_v", "q,k,v": "q_k_v", "q_k_v": "q_k_v", "x": "x", "self": "x",
                 "q_kv": "q_kv", "q,kv": "q_kv", "qkv_": "q_k_v"}
_CONV_ALIASES = {"sdpa": "keep", "keep": "keep", "attend": "keep", "blocked": "blocked",
                 "mask_out": "blocked", "mha": "blocked", "additive": "additive",
                 "float": "additive"}
#: mask shapes that only say which keys are visible (key padding masks)
KEY_ONLY_SHAPES = ("B11K", "BK")
ALIGNMENTS = ("top_left", "bottom_right")

class TargetError(ValueError):
    """The object cannot be used as a target, or a hint is invalid (a usage error)."""


class TargetOutputError(RuntimeError):
    """The target returned something that is not an attention output (wrong type or rank)."""


class TargetCallError(TypeError):
    """The target's signature does not accept the arguments of its calling convention (detected
    or given by hints): a mismatch between the target and the hints, reported as the target's
    error with the hints that fix it, never as an attncheck bug."""


@dataclass(frozen=True)
class Example:
    """One drawn problem size: batch ``B``, query length ``L_q``, key length ``L_k``, heads ``H``,
    head dim ``d`` and the torch ``seed`` used to draw the input values."""

    B: int = 2
    L_q: int = 8
    L_k: int = 8
    H: int = 2
    d: int = 8
    seed: int = 0

    @property
    def E(self) -> int:  # noqa: N802 - field term
        return self.H * self.d

    def as_dict(self) -> dict[str, int]:
        return {"B": self.B, "L_q": self.L_q, "L_k": self.L_k, "H": self.H, "d": self.d,
                "seed": self.seed}

    def __str__(self) -> str:
        return (f"B={self.B}, L_q={self.L_q}, L_k={self.L_k}, H={self.H}, d={self.d}, "
                f"seed={self.seed}")


@dataclass
class Inputs:
    """Canonical inputs for one call (see the module docstring for the layouts).

    ``keep`` (optional) is a bool mask broadcastable to ``(B, H, L_q, L_k)``, True = attend.
    ``causal`` requests causal masking from targets that take it as an argument.
    """

    example: Example
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    keep: torch.Tensor | None = None
    causal: bool = False

    def leaves(self) -> list[torch.Tensor]:
        """Distinct input tensors (self-attention: one)."""
        out: list[torch.Tensor] = []
        for t in (self.q, self.k, self.v):
            if not any(t is o for o in out):
                out.append(t)
        return out

    def with_tensors(self, q=None, k=None, v=None) -> "Inputs":
        """Copy with some tensors replaced (self-attention targets: pass ``q`` only)."""
        return replace(self, q=self.q if q is None else q, k=self.k if k is None else k,
                       v=self.v if v is None else v)


@dataclass
class Output:
    """Canonical output of one call: ``out`` and, when the target returns them, ``weights``.

    ``raw`` is whatever the target returned.
    """

    out: torch.Tensor
    weights: torch.Tensor | None
    raw: Any = None


def causal_blocked(L_q: int, L_k: int, alignment: str = "top_left",
                   device: torch.device | str | None = None) -> torch.Tensor:
    """Bool ``(L_q, L_k)``: True where a causal mask blocks key j for query i.

    top_left (SDPA ``is_causal``): blocked iff ``j > i``; bottom_right: ``j > i + L_k - L_q``.
    """
    i = torch.arange(L_q, device=device).unsqueeze(1)
    j = torch.arange(L_k, device=device).unsqueeze(0)
    off = (L_k - L_q) if alignment == "bottom_right" else 0
    return j > i + off


_EMBED_ATTRS = ("embed_dim", "d_model", "n_embd", "hidden_size", "model_dim", "emb_dim",
                "dim", "d_embed", "embedding_dim")
_HEADS_ATTRS = ("num_heads", "n_head", "n_heads", "nhead", "num_attention_heads", "heads", "h")
_HEAD_DIM_ATTRS = ("head_dim", "d_k", "d_head", "dim_head", "head_size", "attention_head_size")
_MASK_NAMES = ("attn_mask", "mask", "attention_mask", "src_mask", "encoder_attention_mask",
               "key_padding_mask", "src_key_padding_mask", "padding_mask", "attn_bias")
#: kernel mask parameter names, in order of preference
_KERNEL_MASK_NAMES = ("attn_mask", "mask", "attention_mask", "attn_bias", "key_padding_mask")
#: mask names that say the mask is a key padding mask ``(B, L_k)`` (nn.MultiheadAttention,
#: nn.TransformerEncoderLayer: ``key_padding_mask`` / ``src_key_padding_mask``)
_KEY_PADDING_NAMES = ("key_padding_mask", "src_key_padding_mask", "padding_mask")
CONVENTIONS = ("sdpa", "hf_eager", "varlen", "weights")
_CAUSAL_NAMES = ("is_causal", "causal")
_QKV_NAMES = (("q", "k", "v"), ("query", "key", "value"),
              ("query_states", "key_states", "value_states"),  # transformers' names
              ("q_states", "k_states", "v_states"))
_VARLEN_NAMES = ("cu_seqlens", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen", "max_seqlen_q",
                 "max_seqlen_k")


def _positional_params(fn: Callable) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _param_names(fn: Callable) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _accepts_kwargs(fn: Callable) -> bool:
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


def kernel_convention(fn: Any) -> str | None:
    """The kernel calling convention read from ``fn``'s signature (see ``Target.convention``),
    or None when ``fn`` is not a kernel:

    - ``"hf_eager"``: ``(module, query, key, value, attention_mask, scaling, ...)`` —
      transformers' ``eager_attention_forward``;
    - ``"varlen"``: q, k, v then ``cu_seqlens`` / ``cu_seqlens_q`` (flash-attention's
      ``flash_attn_varlen_func``: packed ``(total_tokens, H, d)``);
    - ``"sdpa"``: first parameters q, k, v / query, key, value / query_states, key_states,
      value_states (``F.scaled_dot_product_attention`` included);
    - ``"weights"``: first parameters q, k (or query, key) and no v: returns attention weights.
    """
    if isinstance(fn, nn.Module) or isinstance(fn, type) or not callable(fn):
        return None
    if fn is torch.nn.functional.scaled_dot_product_attention:
        return "sdpa"
    names = [p.name for p in _positional_params(fn)]
    if names[:1] == ["module"] and any(tuple(names[1:4]) == n for n in _QKV_NAMES):
        return "hf_eager"
    if any(tuple(names[:3]) == n for n in _QKV_NAMES):
        return "varlen" if _param_names(fn) & set(_VARLEN_NAMES[:3]) else "sdpa"
    if any(tuple(names[:2]) == n[:2] for n in _QKV_NAMES):
        return "weights"
    return None


def is_kernel_function(fn: Any) -> bool:
    """True when ``fn`` is a plain callable with a kernel signature (:func:`kernel_convention`):
    first parameters q, k, v (also query, key, value / query_states, key_states, value_states),
    transformers' ``eager_attention_forward(module, query, key, value, ...)``, a packed varlen
    kernel, or ``f(q, k)`` returning weights."""
    return kernel_convention(fn) is not None


def _int_attr(m: nn.Module, names: tuple[str, ...]) -> int | None:
    for n in names:
        v = getattr(m, n, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _norm_mask_shape(shape: str) -> str:
    if shape in MASK_SHAPES:
        return shape
    toks = [t.strip() for t in shape.replace("(", "").replace(")", "").split(",") if t.strip()]
    m = {"B": "B", "1": "1", "L_q": "Q", "Lq": "Q", "L_k": "K", "Lk": "K", "L": "K", "T": "K",
         "S": "K"}
    try:
        code = "".join(m[t] for t in toks)
    except KeyError:
        code = ""
    if code == "BK" and len(toks) == 2:
        return "BK"
    if code in MASK_SHAPES:
        return code
    if code == "BKK":  # (B, L, L)
        return "BQK"
    if code == "B1KK":
        return "B1QK"
    if code == "KK":
        return "QK"
    raise TargetError(f"unknown mask shape {shape!r}: use '(B, 1, L_q, L_k)', '(B, L_q, L_k)', "
                      "'(B, 1, 1, L_k)', '(B, L_k)' or '(L_q, L_k)'")


def _normalize_hints(hints: dict[str, Any]) -> dict[str, Any]:
    """Accept the fixture vocabulary: call "qkv", mask dicts, convention "sdpa", layout strings."""
    h = dict(hints)
    mask = h.get("mask")
    if isinstance(mask, dict):
        if "arg" in mask:
            h.setdefault("mask_arg", mask["arg"])
        if "convention" in mask:
            h.setdefault("mask_convention", mask["convention"])
        if "shape" in mask:
            h.setdefault("mask_shape", mask["shape"])
    elif isinstance(mask, str):
        h.setdefault("mask_arg", mask)
    if "call" in h and isinstance(h["call"], str):
        c = h["call"].replace(" ", "").lower()
        if c not in _CALL_ALIASES:
            raise TargetError(f"hint call={h['call']!r}: expected 'x', 'q_kv' or 'qkv'")
        h["call"] = _CALL_ALIASES[c]
    if "mask_convention" in h and isinstance(h["mask_convention"], str):
        c = h["mask_convention"].lower()
        if c not in _CONV_ALIASES:
            raise TargetError(f"hint mask_convention={h['mask_convention']!r}: expected "
                              "'keep' (True = attend, SDPA), 'blocked' (True = masked, "
                              "nn.MultiheadAttention) or 'additive'")
        h["mask_convention"] = _CONV_ALIASES[c]
    if "mask_shape" in h and isinstance(h["mask_shape"], str):
        h["mask_shape"] = _norm_mask_shape(h["mask_shape"])
    if "layout" in h and h["layout"] is not None:
        h["layout"] = _norm_layout(h["layout"])
    return h


def _norm_layout(layout: str | None) -> str:
    if layout is None:
        return "BHLd"
    s = layout.replace("(", "").replace(")", "").replace(",", "").replace(" ", "")
    s = s.replace("L_q", "L").replace("D", "d") if s not in LAYOUTS else s
    if s == "BHLd" or s.upper() == "BHLD":
        return "BHLd"
    if s.upper() == "BLHD":
        return "BLHd"
    if s.upper() == "BLD":
        return "BLd"
    raise TargetError(f"unknown layout {layout!r}: use '(B,H,L,d)', '(B,L,H,d)' or '(B,L,d)'")


@dataclass
class Target:
    """A thing under test plus its calling convention.  Build with :func:`target`.

    Attributes (all may be given as hints):
        obj: the user object (module or function).
        kind: one of ``KINDS``.
        name: display name (the CLI spec, or the class / function name).
        causal: ``True`` the target must be causal, ``False`` it must not be, ``None`` unknown.
        batch_first: layers: inputs ``(B, L, E)`` (True) or ``(L, B, E)`` (False).
        layout: kernels: ``"BHLd"``, ``"BLHd"`` or ``"BLd"`` (no head axis).
        mask_arg: name of the mask parameter, or None when masks cannot be passed.
        mask_convention: ``"keep"``, ``"blocked"`` or ``"additive"`` (see module docstring).
        mask_shape: layers: ``"B1QK"`` or ``"BQK"``.
        mask_required: the mask parameter has no default; calls without ``Inputs.keep`` pass an
            all-keep mask (every key visible) in ``mask_convention``.
        causal_arg: name of the boolean causal parameter, or None.
        num_heads, head_dim, embed_dim: fixed sizes (None = free, drawn by the strategies).
        call: layers: ``"x"``, ``"q_kv"`` or ``"q_k_v"``.
        alignment: ``"top_left"`` or ``"bottom_right"`` causal alignment when ``L_q != L_k``.
        cross: whether ``L_q != L_k`` may be drawn.
        spec: the CLI spec string, if any (used in reproduction lines).
    """

    obj: Any
    kind: str
    name: str
    causal: bool | None = None
    batch_first: bool = True
    layout: str = "BHLd"
    mask_arg: str | None = None
    mask_convention: str = "keep"
    mask_shape: str | None = None
    causal_arg: str | None = None
    #: the mask parameter has no default: a call that varies no mask passes an all-keep mask
    mask_required: bool = False
    num_heads: int | None = None
    head_dim: int | None = None
    embed_dim: int | None = None
    call: str = "q_k_v"
    #: kernels: how q, k, v are handed over and what comes back — "sdpa" (``f(q, k, v)``),
    #: "hf_eager" (``f(module, query, key, value, attention_mask, scaling, dropout)`` returning
    #: ``(out (B, L_q, H, d), weights)``), "varlen" (packed ``(total_tokens, H, d)`` with
    #: ``cu_seqlens`` / ``max_seqlen``), "weights" (``f(q, k)`` returns the weights only)
    convention: str = "sdpa"
    alignment: str = "top_left"
    cross: bool = True
    spec: str | None = None
    hints: dict[str, Any] = field(default_factory=dict)
    #: how ``mask_convention`` was settled: None (not yet), or a dict ``{"convention": str |
    #: None, "source": "hint" | "adapter" | "detected" | "failed", "message": str, ...}``
    #: (see :mod:`attncheck.dynamic.maskconv`); "failed" means masks are not passed
    mask_detection: dict[str, Any] | None = None
    #: whether L_q != L_k works, settled once by :meth:`ensure_cross_support`: None (not yet)
    #: or ``{"cross": bool, "message": str}``
    cross_detection: dict[str, Any] | None = None
    #: position term found by experiment when no ``positions`` hint was given: None (not yet)
    #: or :func:`attncheck.dynamic.positions.detect_positions`'s result
    position_detection: dict[str, Any] | None = None

    # ------------------------------------------------------------------ properties
    @property
    def module(self) -> nn.Module | None:
        """The ``nn.Module`` under test (kernels that are modules too), else None."""
        return self.obj if isinstance(self.obj, nn.Module) else None

    @property
    def is_kernel(self) -> bool:
        return self.kind == "kernel"

    @property
    def self_attention(self) -> bool:
        """True when the target is called with one sequence (``m(x)``): L_q == L_k always."""
        return self.kind == "encoder_layer" or (self.kind == "layer" and self.call == "x")

    @property
    def allows_cross(self) -> bool:
        """True when L_q != L_k may be drawn."""
        return self.cross and not self.self_attention

    @property
    def accepts_mask(self) -> bool:
        """True when masks (``Inputs.keep``) can be passed to the target: it has a mask
        argument and its convention is known (given, or detected — see
        :meth:`ensure_mask_convention`; when detection found none, masks are not passed)."""
        if not self.mask_arg:
            return False
        det = self.mask_detection
        return not (det is not None and det.get("source") == "failed")

    @property
    def mask_convention_known(self) -> bool:
        """True when the convention came from a hint or a built-in adapter (no detection)."""
        return self.kind in ("mha", "encoder_layer") or "mask_convention" in self.hints

    def needs_mask_detection(self) -> bool:
        """True when the target takes a mask whose convention was neither given nor detected."""
        return (bool(self.mask_arg) and not self.mask_convention_known
                and self.mask_detection is None)

    def ensure_mask_convention(self, device: torch.device | str = "cpu",
                               dtype: torch.dtype = torch.float32) -> dict[str, Any]:
        """Settle ``mask_convention`` once: from the hint / adapter, else empirically
        (:func:`attncheck.dynamic.maskconv.detect_mask_convention`).  Returns (and stores in
        ``mask_detection``) the outcome; never raises for a misbehaving target."""
        if self.mask_detection is not None:
            return self.mask_detection
        if not self.mask_arg:
            return {"convention": None, "source": "none", "message": "the target takes no mask"}
        if self.mask_convention_known:
            src = "hint" if "mask_convention" in self.hints else "adapter"
            self.mask_detection = {"convention": self.mask_convention, "source": src,
                                   "message": f"mask convention {self.mask_convention} "
                                              f"({'given' if src == 'hint' else 'built-in'})"}
            return self.mask_detection
        from attncheck.dynamic.maskconv import detect_mask_convention

        self.mask_detection = detect_mask_convention(self, device=device, dtype=dtype)
        if self.mask_detection.get("convention"):
            self.mask_convention = self.mask_detection["convention"]
        return self.mask_detection

    def needs_cross_detection(self) -> bool:
        """True when L_q != L_k would be drawn but nobody said it is supported (no ``cross``
        hint, not yet tried)."""
        return self.allows_cross and "cross" not in self.hints and self.cross_detection is None

    def ensure_cross_support(self, device: torch.device | str = "cpu",
                             dtype: torch.dtype = torch.float32) -> dict[str, Any]:
        """Find out once whether the target accepts L_q != L_k.

        Many self-attention kernels build their causal mask from q's length
        (``tril(ones(L, L))``, ``L = q.size(-2)``): they work for L_q = L_k and raise otherwise.
        One call with L_q = L_k = 6 and one with L_q = 3, L_k = 6 (and L_q = 6, L_k = 3) are
        made; when the equal-length call works and an unequal one raises, ``cross`` becomes
        False (only L_q = L_k is tested from then on) and ``cross_detection["message"]`` says
        why.  A target that raises at L_q = L_k too is left alone (the checks report it).
        """
        if self.cross_detection is not None:
            return self.cross_detection
        det: dict[str, Any] = {"cross": True, "message": "L_q != L_k supported"}
        base = self.fit_example(Example(B=2, L_q=6, L_k=6, H=self.num_heads or 2,
                                        d=self.fixed_head_dim or 8, seed=0))
        try:
            with torch.no_grad():
                self.forward(self.make_inputs(base, device=device, dtype=dtype,
                                              causal=False))
        except Exception:  # noqa: BLE001 - the checks report a target that always raises
            self.cross_detection = det
            return det
        for lq, lk in ((3, 6), (6, 3)):
            ex = replace(base, L_q=lq, L_k=lk)
            try:
                with torch.no_grad():
                    self.forward(self.make_inputs(ex, device=device, dtype=dtype, causal=False))
            except Exception as exc:  # noqa: BLE001
                det = {"cross": False, "L_q": lq, "L_k": lk, "exception": type(exc).__name__,
                       "message": f"self-attention only: tested with L_q = L_k only (the "
                                  f"target raises {type(exc).__name__} for L_q={lq}, L_k={lk}: "
                                  f"{str(exc)[:120]}); give --hint cross=true to test "
                                  "L_q != L_k anyway"}
                self.cross = False
                break
        self.cross_detection = det
        return det

    def convention_notes(self) -> list[str]:
        """What was found out about the target's conventions by experiment (not given as
        hints), one sentence each, for reports."""
        notes = []
        pd = self.position_detection
        if pd is not None and pd.get("kind") not in (None, "none"):
            notes.append(pd["message"] + " (declare it with --hint positions=...)")
        cd = self.cross_detection
        if cd is not None and cd.get("cross") is False:
            notes.append(cd["message"])
        return notes

    def needs_position_detection(self) -> bool:
        """True when no position term was declared and none was looked for yet."""
        return (self.position_detection is None and self.hints.get("positions") is None
                and not self.hints.get("rope"))

    def mask_note(self) -> str:
        """Short description of the mask convention in use, for check messages."""
        det = self.mask_detection
        if not self.mask_arg:
            return ""
        if det is None:
            return f"mask {self.mask_arg!r}: convention {self.mask_convention}"
        if det.get("source") == "failed":
            return f"masks not passed: {det.get('message')}"
        return (f"mask {self.mask_arg!r}: convention {det.get('convention')} "
                f"({det.get('source')})")

    def mask_metrics(self) -> dict[str, Any]:
        """``{"mask_convention": .., "mask_convention_source": ..}`` for check metrics."""
        if not self.mask_arg:
            return {}
        det = self.mask_detection or {}
        return {"mask_convention": det.get("convention", self.mask_convention),
                "mask_convention_source": det.get("source", "default")}

    @property
    def accepts_causal_flag(self) -> bool:
        """True when causality is requested through an argument (is_causal / a causal mask)."""
        return self.causal_arg is not None or self.kind in ("mha", "encoder_layer")

    @property
    def fixed_heads(self) -> int | None:
        return self.num_heads

    @property
    def fixed_head_dim(self) -> int | None:
        if self.head_dim is not None:
            return self.head_dim
        if self.embed_dim is not None and self.num_heads:
            return self.embed_dim // self.num_heads
        return None

    def describe(self) -> str:
        bits = [self.kind]
        if self.causal is not None:
            bits.append("causal" if self.causal else "non-causal")
        if self.kind == "kernel":
            bits.append(self.layout)
        else:
            bits.append(f"call={self.call}")
            if self.embed_dim:
                bits.append(f"E={self.embed_dim}")
        if self.num_heads:
            bits.append(f"H={self.num_heads}")
        return f"{self.name} ({', '.join(bits)})"

    # ------------------------------------------------------------------ examples
    def default_example(self, seed: int = 0) -> Example:
        """A small example valid for this target (B=2, L=8, or the target's fixed sizes)."""
        H = self.num_heads or (1 if self.layout == "BLd" and self.is_kernel else 2)
        d = self.fixed_head_dim or (self.embed_dim // H if self.embed_dim else 8)
        return Example(B=2, L_q=8, L_k=8, H=H, d=d, seed=seed)

    def fit_example(self, ex: Example) -> Example:
        """Force the target's fixed sizes onto ``ex`` (heads, head dim, L_k = L_q for
        self-attention, H = 1 for ``(B, L, d)`` kernels)."""
        H, d = ex.H, ex.d
        if self.num_heads:
            H = self.num_heads
        elif self.is_kernel and self.layout == "BLd":
            H = 1
        fd = self.fixed_head_dim
        if fd:
            d = fd
        elif self.embed_dim and not self.is_kernel:
            d = max(1, self.embed_dim // H)
        L_q = ex.L_q
        L_k = ex.L_k if self.allows_cross else L_q
        cap = self.hints.get("max_length")
        if cap:
            L_q, L_k = min(L_q, cap), min(L_k, cap)
        return replace(ex, H=H, d=d, L_q=L_q, L_k=L_k)

    # ------------------------------------------------------------------ inputs
    def make_inputs(self, ex: Example, *, device: torch.device | str = "cpu",
                    dtype: torch.dtype = torch.float32, keep: torch.Tensor | None = None,
                    causal: bool | None = None, requires_grad: bool = False,
                    scale: float = 1.0, v_identity: bool = False) -> Inputs:
        """Draw canonical inputs for ``ex`` from a CPU ``torch.Generator`` seeded with
        ``ex.seed`` (so values do not depend on the device), N(0, scale²) entries.

        ``v_identity`` (kernels only): ``v`` becomes the identity ``(L_k × L_k)`` per (B, H) so
        that the output of a kernel linear in v *is* its attention matrix ``(B, H, L_q, L_k)``.
        ``causal`` defaults to ``self.causal is True``.
        """
        ex = self.fit_example(ex)
        g = torch.Generator(device="cpu").manual_seed(int(ex.seed))

        def draw(*shape):
            t = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
            t = t.to(device=device, dtype=dtype)
            return t.requires_grad_(requires_grad)

        if self.is_kernel:
            q = draw(ex.B, ex.H, ex.L_q, ex.d)
            k = draw(ex.B, ex.H, ex.L_k, ex.d)
            if v_identity:
                v = torch.eye(ex.L_k, device=device, dtype=dtype).expand(
                    ex.B, ex.H, ex.L_k, ex.L_k).contiguous().requires_grad_(requires_grad)
            else:
                v = draw(ex.B, ex.H, ex.L_k, ex.d)
        else:
            E = self.embed_dim or ex.E
            q = draw(ex.B, ex.L_q, E)
            if self.self_attention:
                k = v = q
            elif self.call == "q_kv":
                k = draw(ex.B, ex.L_k, E)
                v = k
            else:
                k = draw(ex.B, ex.L_k, E)
                v = draw(ex.B, ex.L_k, E)
        if causal is None:
            causal = self.causal is True
        return Inputs(ex, q, k, v, keep=keep, causal=bool(causal))

    @property
    def key_only_mask(self) -> bool:
        """True when the target's mask can only hide keys (key padding shapes)."""
        return self.mask_shape in KEY_ONLY_SHAPES

    def random_keep(self, ex: Example, *, device: torch.device | str = "cpu",
                    p_keep: float = 0.6) -> torch.Tensor:
        """A random canonical keep-mask for ``ex`` (seeded by ``ex.seed + 1``), valid for the
        target's mask shape: ``(B, 1, 1, L_k)`` for key padding shapes, ``(L_q, L_k)`` for
        ``"QK"``, else ``(B, 1, L_q, L_k)``.  Key 0 is always kept, so no row is fully masked
        (also under a causal mask)."""
        g = torch.Generator(device="cpu").manual_seed(int(ex.seed) + 1)
        if self.key_only_mask:
            shape = (ex.B, 1, 1, ex.L_k)
        elif self.mask_shape == "QK":
            shape = (ex.L_q, ex.L_k)
        else:
            shape = (ex.B, 1, ex.L_q, ex.L_k)
        keep = torch.rand(*shape, generator=g) < p_keep
        keep[..., 0] = True
        return keep.to(device)

    def native_mask(self, keep: torch.Tensor, ex: Example, shape: str | None = None
                    ) -> torch.Tensor:
        """Canonical keep-mask → the target's mask shape (bool, True = attend)."""
        shape = shape or self.mask_shape or "B1QK"
        k4 = keep
        while k4.dim() < 4:
            k4 = k4.unsqueeze(0)
        if shape == "QK":
            return k4.expand(1, 1, ex.L_q, ex.L_k)[0, 0] if k4.shape[0] == 1 else k4[0, 0]
        k4 = k4.expand(ex.B, 1, k4.shape[2], ex.L_k) if k4.shape[1] == 1 else k4
        if shape == "B11K":
            return k4[:, :1, :1, :]
        if shape == "BK":
            return k4[:, 0, 0, :]
        full = k4.expand(ex.B, 1, ex.L_q, ex.L_k)
        return full[:, 0] if shape == "BQK" else full

    def blocked(self, inputs: Inputs) -> torch.Tensor | None:
        """Bool mask broadcastable to ``(B, H, L_q, L_k)``: keys that must receive weight 0
        (the causal triangle when ``inputs.causal`` or ``self.causal``, plus ``~inputs.keep``),
        or None when nothing is blocked."""
        ex = inputs.example
        dev = inputs.q.device
        out = None
        if inputs.causal or self.causal:
            out = causal_blocked(ex.L_q, ex.L_k, self.alignment, dev)
        if inputs.keep is not None and (self.accepts_mask or self.kind in ("mha",
                                                                           "encoder_layer")):
            b = ~inputs.keep.to(dev)
            out = b if out is None else (out | b)
        return out

    # ------------------------------------------------------------------ calling
    def _mask_value(self, keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if self.mask_convention == "keep":
            return keep
        if self.mask_convention == "blocked":
            return ~keep
        # transformers' prepared masks: 0 kept, torch.finfo(dtype).min blocked (finite, so a
        # row with every key blocked is uniform instead of 0/0 = NaN)
        z = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
        return z.masked_fill(~keep, torch.finfo(dtype).min)

    def _to_native(self, t: torch.Tensor) -> torch.Tensor:
        if self.is_kernel:
            if self.layout == "BLHd":
                return t.transpose(1, 2)
            if self.layout == "BLd":
                return t[:, 0]
            return t
        return t if self.batch_first else t.transpose(0, 1)

    def _from_native(self, t: torch.Tensor) -> torch.Tensor:
        if self.is_kernel:
            if self.layout == "BLHd":
                return t.transpose(1, 2)
            if self.layout == "BLd":
                return t.unsqueeze(1)
            return t
        return t if self.batch_first else t.transpose(0, 1)

    def _weights_from_native(self, w: Any) -> torch.Tensor | None:
        if not isinstance(w, torch.Tensor):
            return None
        if self.is_kernel and self.layout == "BLd" and w.dim() == 3:
            return w.unsqueeze(1)
        return w

    def _split_output(self, raw: Any) -> tuple[torch.Tensor, Any]:
        if isinstance(raw, torch.Tensor):
            return raw, None
        if isinstance(raw, (tuple, list)) and raw and isinstance(raw[0], torch.Tensor):
            w = raw[1] if len(raw) > 1 else None
            return raw[0], w
        raise TargetOutputError(
            f"{self.name} returned {type(raw).__name__}, expected a tensor or a tuple "
            "(output, weights)")

    def forward(self, inputs: Inputs) -> Output:
        """Call the target on canonical ``inputs``; return the canonical :class:`Output`.

        Raises :class:`TargetOutputError` when the return value is not a tensor or a tuple
        starting with one; whatever the target itself raises propagates unchanged.
        """
        ex = inputs.example
        kwargs: dict[str, Any] = {}
        obj = self.obj
        if self.kind == "mha":
            q, k, v = (self._to_native(t) for t in (inputs.q, inputs.k, inputs.v))
            blocked = self.blocked(inputs)
            if blocked is not None:
                # MHA: bool attn_mask True = blocked; (L_q, L_k) or (B*H, L_q, L_k)
                bm = blocked.expand(ex.B, ex.H, ex.L_q, ex.L_k).reshape(ex.B * ex.H, ex.L_q,
                                                                        ex.L_k)
                if blocked.dim() == 2:
                    bm = blocked
                kwargs["attn_mask"] = bm
            raw = obj(q, k, v, need_weights=True, average_attn_weights=False, **kwargs)
        elif self.kind == "encoder_layer":
            x = self._to_native(inputs.q)
            blocked = self.blocked(inputs)
            if blocked is not None:
                kwargs["src_mask"] = (blocked if blocked.dim() == 2 else
                                      blocked.expand(ex.B, ex.H, ex.L_q, ex.L_k).reshape(
                                          ex.B * ex.H, ex.L_q, ex.L_k))
                if inputs.causal and blocked.dim() == 2 and inputs.keep is None:
                    kwargs["is_causal"] = True
            raw = obj(x, **kwargs)
        else:
            keep = inputs.keep if self.accepts_mask else None
            if inputs.causal:
                if keep is not None and not self.key_only_mask:
                    # fold the causal triangle into the mask: SDPA refuses attn_mask together
                    # with is_causal=True, and HF-style layers take a prepared mask that
                    # already holds the causal part (the mask replaces their own causal mask)
                    keep = keep & ~causal_blocked(ex.L_q, ex.L_k, self.alignment, keep.device)
                elif self.causal_arg:
                    kwargs[self.causal_arg] = True
            if keep is None and self.mask_required and self.mask_arg and (
                    not self.is_kernel or self.convention == "sdpa"):
                # a required mask the call does not vary: every key visible
                keep = torch.ones(ex.B, 1, ex.L_q, ex.L_k, dtype=torch.bool,
                                  device=inputs.q.device)
            if self.is_kernel:
                args = [self._to_native(t) for t in (inputs.q, inputs.k, inputs.v)]
                if self.convention != "sdpa":
                    return self._call_convention(obj, args, kwargs, keep, inputs)
            elif self.call == "x":
                args = [self._to_native(inputs.q)]
            elif self.call == "q_kv":
                args = [self._to_native(inputs.q), self._to_native(inputs.k)]
            else:
                args = [self._to_native(t) for t in (inputs.q, inputs.k, inputs.v)]
            if keep is not None:
                shapes = [self.mask_shape] if self.mask_shape else (
                    ["BQK" if self.layout == "BLd" else "B1QK"] if self.is_kernel
                    else ["B1QK", "BQK"])
                if not self.mask_shape and not self.is_kernel and (
                        keep.shape[-2] == 1 or bool((keep == keep[..., :1, :]).all())):
                    shapes.append("BK")  # the same keys for every query: a key padding mask
                for i, shp in enumerate(shapes):
                    kwargs[self.mask_arg] = self._mask_value(
                        self.native_mask(keep, ex, shp), inputs.q.dtype)
                    try:
                        raw = self._call(obj, args, kwargs)
                    except Exception:
                        if i == len(shapes) - 1:
                            raise
                        continue
                    self.mask_shape = shp
                    break
            else:
                raw = self._call(obj, args, kwargs)
        out, w = self._split_output(raw)
        if not isinstance(out, torch.Tensor):
            raise TargetOutputError(f"{self.name} returned {type(out).__name__} as its output")
        return Output(self._from_native(out), self._weights_from_native(w), raw)

    __call__ = forward

    def _call(self, obj: Any, args: list[torch.Tensor], kwargs: dict[str, Any]) -> Any:
        """``obj(*args, **kwargs)``; a ``TypeError`` because the signature does not take these
        arguments (not one raised inside the target) becomes :class:`TargetCallError`."""
        try:
            return obj(*args, **kwargs)
        except TypeError as exc:
            fn = obj.forward if isinstance(obj, nn.Module) else obj
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except (TypeError, ValueError) as bind_exc:
                if isinstance(bind_exc, ValueError):  # no signature to compare with
                    raise exc from None
                passed = ", ".join([f"<{len(args)} tensor(s)>"] + [f"{k}=..." for k in kwargs])
                raise TargetCallError(
                    f"{self.name} cannot be called as ({passed}): {exc}; give the calling "
                    f"convention as hints: call=x|q_kv|qkv (the tensors before the mask), "
                    f"mask_arg=NAME (or mask_arg= for none)") from exc
            raise

    def _call_convention(self, obj: Any, args: list[torch.Tensor], kwargs: dict[str, Any],
                         keep: torch.Tensor | None, inputs: Inputs) -> Output:
        """Kernels with a non-SDPA convention (``Target.convention``)."""
        ex = inputs.example
        q, k, v = args
        names = _param_names(obj.forward if isinstance(obj, nn.Module) else obj)
        if self.convention == "hf_eager":
            import types

            from attncheck.dynamic.checks._compare import hint as _hint

            scale = _hint(self, "scale", "softmax_scale")
            scale = float(scale) if isinstance(scale, (int, float, str)) and \
                str(scale) != "learned" else 1.0 / (q.shape[-1] ** 0.5)
            # the module attributes eager_attention_forward reads (transformers source)
            module = types.SimpleNamespace(num_key_value_groups=q.shape[1] // k.shape[1],
                                           training=False, scaling=scale,
                                           is_causal=bool(inputs.causal))
            marg = self.mask_arg or "attention_mask"
            kwargs = {key: val for key, val in kwargs.items() if key != self.causal_arg}
            if inputs.causal and keep is None:  # HF eager is causal only through its mask
                keep = ~causal_blocked(ex.L_q, ex.L_k, self.alignment, q.device)
            mask = None if keep is None else self._mask_value(
                self.native_mask(keep, ex, self.mask_shape or "B1QK"), q.dtype)
            kwargs[marg] = mask
            kwargs["scaling" if "scaling" in names or "scaling" not in names and
                   "scale" not in names else "scale"] = scale
            if "dropout" in names:
                kwargs["dropout"] = 0.0
            raw = obj(module, q, k, v, **kwargs)
            out, w = self._split_output(raw)
            if out.dim() == 4:   # (B, L_q, H, d): transformers transposes before returning
                out = out.transpose(1, 2)
            return Output(out, self._weights_from_native(w), raw)
        if self.convention == "varlen":
            B, H, L_q, d = q.shape
            L_k = k.shape[-2]

            def pack(t: torch.Tensor) -> torch.Tensor:
                return t.transpose(1, 2).reshape(-1, t.shape[1], t.shape[-1]).contiguous()

            def cu(L: int) -> torch.Tensor:
                return torch.arange(0, (B + 1) * L, L, dtype=torch.int32, device=q.device)

            given = {"cu_seqlens_q": cu(L_q), "cu_seqlens_k": cu(L_k), "cu_seqlens": cu(L_q),
                     "max_seqlen_q": L_q, "max_seqlen_k": L_k, "max_seqlen": L_q}
            kwargs.update({n: val for n, val in given.items() if n in names})
            raw = obj(pack(q), pack(k), pack(v), **kwargs)
            out, w = self._split_output(raw)
            if out.dim() == 3 and out.shape[0] == B * L_q:
                out = out.reshape(B, L_q, H, -1).transpose(1, 2)
            return Output(out, self._weights_from_native(w), raw)
        # "weights": f(q, k[, mask]) -> (B, H, L_q, L_k); the output is weights @ v
        if keep is not None and self.mask_arg:
            kwargs[self.mask_arg] = self._mask_value(
                self.native_mask(keep, ex, self.mask_shape or "B1QK"), q.dtype)
        raw = obj(q, k, **kwargs)
        w, _ = self._split_output(raw)
        if w.dim() < 2 or w.shape[-1] != ex.L_k:
            raise TargetOutputError(f"{self.name} returned shape {tuple(w.shape)}: a "
                                    "weights-only kernel must return (B, H, L_q, L_k) weights")
        w = self._weights_from_native(w)
        return Output(self._from_native(w.to(v.dtype) @ v), w, raw)

    def expected_out_shape(self, inputs: Inputs) -> tuple[int, ...]:
        """Canonical output shape: kernel ``(B, H, L_q, d_v)``, layers ``(B, L_q, E)``."""
        ex = inputs.example
        if self.is_kernel:
            return (ex.B, ex.H if self.layout != "BLd" else 1, ex.L_q, inputs.v.shape[-1])
        return (ex.B, ex.L_q, inputs.q.shape[-1])

    def expected_weights_shapes(self, inputs: Inputs) -> list[tuple[int, ...]]:
        """Accepted canonical weights shapes: ``(B, H, L_q, L_k)`` and, for layers,
        ``(B, L_q, L_k)`` (head-averaged)."""
        ex = inputs.example
        shapes = [(ex.B, ex.H if not (self.is_kernel and self.layout == "BLd") else 1,
                   ex.L_q, ex.L_k)]
        if not self.is_kernel:
            shapes.append((ex.B, ex.L_q, ex.L_k))
        return shapes

    def cli_args(self) -> str:
        """Every hint that was given, as ``attncheck check`` options (``--causal`` /
        ``--no-causal``, ``--hint KEY=VALUE``; dicts and lists as JSON), shell-quoted, for
        reproduction lines: the printed command rebuilds the same target."""
        return " ".join(hint_options(self.hints))


#: hints that set a :class:`Target` field of the same name (the others stay in ``Target.hints``)
_FIELD_HINTS = frozenset(HINTS) & {f.name for f in fields(Target)} - {"obj", "hints"}

#: hints that are not emitted in reproduction lines (display only, or carried by the spec)
_NOT_REPRODUCED = ("name", "spec", "returns")


def hint_options(hints: dict[str, Any]) -> list[str]:
    """``attncheck check`` options that reproduce ``hints`` (see :meth:`Target.cli_args`).

    A ``mask`` dict is emitted as its parts (``mask_arg``, ``mask_convention``,
    ``mask_shape``); values that are not JSON-serialisable are left out.
    """
    import json
    import shlex

    parts: list[str] = []
    h = dict(hints)
    mask = h.pop("mask", None)
    if isinstance(mask, dict):
        for src, dst in (("arg", "mask_arg"), ("convention", "mask_convention"),
                         ("shape", "mask_shape")):
            if src in mask:
                h.setdefault(dst, mask[src])
    elif isinstance(mask, str):
        h.setdefault("mask_arg", mask)
    for key in sorted(h):
        val = h[key]
        if key in _NOT_REPRODUCED or val is None:
            continue
        if key == "causal" and isinstance(val, bool):
            parts.append("--causal" if val else "--no-causal")
            continue
        if isinstance(val, bool):
            txt = "true" if val else "false"
        elif isinstance(val, (int, float, str)):
            txt = str(val)
        else:
            try:
                txt = json.dumps(val, separators=(",", ":"))
            except (TypeError, ValueError):
                continue
        parts.append(f"--hint {shlex.quote(f'{key}={txt}')}")
    return parts


def _required_params(fn: Callable) -> set[str]:
    """Names of ``fn``'s parameters that have no default (``*args`` / ``**kwargs`` excluded)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _detect_layer(m: nn.Module, h: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fwd = m.forward
    names = _param_names(fwd)
    mask_arg = h["mask_arg"] if "mask_arg" in h else next(
        (n for n in _MASK_NAMES if n in names), None)
    causal_arg = h.get("causal_arg") or next((n for n in _CAUSAL_NAMES if n in names), None)
    out["mask_required"] = bool(mask_arg) and mask_arg in _required_params(fwd)
    # the tensors come before the mask / causal flag: those do not count for the convention
    pos = [p for p in _positional_params(fwd) if p.name not in (mask_arg, causal_arg)]
    required = [p for p in pos if p.default is inspect.Parameter.empty]
    if "call" not in h:
        n = len(required)
        if n >= 3:
            out["call"] = "q_k_v"
        elif n == 2:
            out["call"] = "q_kv"
        elif n == 1:
            out["call"] = "x"
        else:
            # all optional: look at the names
            pn = [p.name for p in pos[:3]]
            out["call"] = "q_k_v" if tuple(pn) in _QKV_NAMES else "x"
    if "mask_arg" not in h:
        out["mask_arg"] = mask_arg
        if out["mask_arg"] in _KEY_PADDING_NAMES and "mask_shape" not in h:
            out["mask_shape"] = "BK"  # (B, L_k): PyTorch's key_padding_mask shape
    if "causal_arg" not in h:
        out["causal_arg"] = causal_arg
    if "embed_dim" not in h:
        out["embed_dim"] = _int_attr(m, _EMBED_ATTRS)
        if out["embed_dim"] is None:
            lin = next((c for c in m.modules() if isinstance(c, nn.Linear)), None)
            if lin is not None:
                out["embed_dim"] = lin.in_features
    cfg = getattr(m, "config", None)  # HF modules keep their sizes on self.config
    if "num_heads" not in h:
        out["num_heads"] = _int_attr(m, _HEADS_ATTRS) or (
            _int_attr(cfg, _HEADS_ATTRS) if cfg is not None else None)
    if "head_dim" not in h:
        out["head_dim"] = _int_attr(m, _HEAD_DIM_ATTRS)
    if out.get("num_heads", h.get("num_heads")) is None:
        # HF style: head_dim on the module, heads implied by the width (embed_dim / head_dim)
        hd = out.get("head_dim", h.get("head_dim"))
        e = out.get("embed_dim", h.get("embed_dim"))
        if hd and e and e % hd == 0:
            out["num_heads"] = e // hd
    if "causal" not in h:
        for a in ("causal", "is_causal"):
            v = getattr(m, a, None)
            if isinstance(v, bool):
                out["causal"] = v
                break
    if "batch_first" not in h and isinstance(getattr(m, "batch_first", None), bool):
        out["batch_first"] = m.batch_first
    return out


def target(obj: Any, **hints: Any) -> Target:
    """Wrap ``obj`` as a :class:`Target`; ``hints`` (see ``HINTS``) override auto-detection.

    ``obj`` may be:

    - a :class:`Target` (hints given here replace its fields);
    - ``torch.nn.MultiheadAttention`` / ``torch.nn.TransformerEncoderLayer`` (built-in adapters;
      ``embed_dim``, ``num_heads``, ``batch_first`` read from the module);
    - another ``nn.Module`` (a *layer*; call convention from ``forward``'s required positional
      parameters: 1 → ``m(x)``, 2 → ``m(q, kv)``, 3+ → ``m(q, k, v)``; sizes from attributes such
      as ``embed_dim``/``d_model``/``n_embd`` and ``num_heads``/``n_head``);
    - a function whose first parameters are ``q, k, v`` or ``query, key, value`` (a *kernel*;
      ``attn_mask`` / ``is_causal`` passed when the signature has them).

    Raises :class:`TargetError` for an unusable object or an unknown / invalid hint.
    """
    try:
        given = validate_hints({k: v for k, v in hints.items() if v is not None})
    except HintError as exc:
        raise TargetError(str(exc)) from None
    all_hints = _normalize_hints(given)
    if (all_hints.get("num_heads") and all_hints.get("num_kv_heads")
            and all_hints["num_heads"] % all_hints["num_kv_heads"]):
        raise TargetError(f"hint num_kv_heads={all_hints['num_kv_heads']}: must divide "
                          f"num_heads={all_hints['num_heads']} (GQA groups of equal size)")
    # hints that are not Target fields (e.g. "num_kv_heads", "rope", "cache", "scale") are kept
    # in Target.hints for the checks that understand them
    hints = {k: v for k, v in all_hints.items() if k in _FIELD_HINTS}
    if isinstance(obj, Target):
        merged = dict(obj.hints)
        merged.update(all_hints)
        t = replace(obj, **{k: v for k, v in hints.items() if k != "name"}, hints=merged)
        if "name" in hints:
            t.name = hints["name"]
        if t.mask_arg == "":
            t.mask_arg = None
        if any(k in hints for k in ("mask_arg", "mask_convention", "mask_shape", "kind")):
            t.mask_detection = None  # the mask convention must be settled again
        return t

    name = hints.pop("name", None)
    spec = hints.get("spec")
    kind = hints.get("kind")
    fields: dict[str, Any] = {}
    if kind is None:
        if isinstance(obj, nn.MultiheadAttention):
            kind = "mha"
        elif isinstance(obj, nn.TransformerEncoderLayer):
            kind = "encoder_layer"
        elif isinstance(obj, nn.Module):
            # a module is always a layer unless kind="kernel" is given: m(q, k, v) on (B, L, E)
            # and a parameter-free kernel module on (B, H, L, d) look the same from outside
            kind = "layer"
        elif isinstance(obj, type):
            raise TargetError(f"{obj.__name__} is a class; pass an instance (or use a spec "
                              "PATH.py:NAME, which instantiates it with no arguments)")
        elif callable(obj):
            if not is_kernel_function(obj):
                raise TargetError(
                    f"{getattr(obj, '__name__', obj)!r} is not a kernel: its first parameters "
                    "must be (q, k, v) or (query, key, value); wrap it or pass kind='kernel'")
            kind = "kernel"
        else:
            raise TargetError(f"cannot use {type(obj).__name__} as a target: expected an "
                              "nn.Module or a function f(q, k, v, ...)")
    if kind in ("mha", "encoder_layer", "layer") and not isinstance(obj, nn.Module):
        raise TargetError(f"kind={kind!r} needs an nn.Module, got {type(obj).__name__}")
    if not callable(obj):
        raise TargetError(f"{type(obj).__name__} is not callable")

    if kind == "mha":
        fields.update(embed_dim=obj.embed_dim, num_heads=obj.num_heads,
                      head_dim=obj.embed_dim // obj.num_heads, batch_first=obj.batch_first,
                      mask_arg="attn_mask", mask_convention="blocked", call="q_k_v",
                      causal_arg=None)
        if getattr(obj, "kdim", obj.embed_dim) != obj.embed_dim or \
                getattr(obj, "vdim", obj.embed_dim) != obj.embed_dim:
            raise TargetError("nn.MultiheadAttention with kdim/vdim != embed_dim is not "
                              "supported by the adapter")
    elif kind == "encoder_layer":
        sa = obj.self_attn
        fields.update(embed_dim=sa.embed_dim, num_heads=sa.num_heads,
                      head_dim=sa.embed_dim // sa.num_heads, batch_first=sa.batch_first,
                      mask_arg="src_mask", mask_convention="blocked", call="x",
                      causal_arg=None, cross=False)
    elif kind == "layer":
        fields.update(_detect_layer(obj, hints))
    else:  # kernel
        fn = obj.forward if isinstance(obj, nn.Module) else obj
        names = _param_names(fn)
        kw = _accepts_kwargs(fn)
        conv = hints.get("convention") or kernel_convention(fn) or "sdpa"
        if all_hints.get("returns") == "weights":
            conv = "weights"
        fields["convention"] = conv
        if "mask_arg" not in hints:
            fields["mask_arg"] = next((n for n in _KERNEL_MASK_NAMES if n in names), None)
        if conv == "hf_eager":
            # transformers' prepared mask: additive, (B, 1, L_q, L_k), causal part included
            fields.setdefault("mask_arg", "attention_mask")
            fields["mask_arg"] = fields["mask_arg"] or "attention_mask"
            if "mask_convention" not in hints:
                fields["mask_convention"] = "additive"
                fields["mask_detection"] = {
                    "convention": "additive", "source": "adapter",
                    "message": "transformers eager attention: additive (B, 1, L_q, L_k) mask"}
        elif conv == "varlen":
            fields["mask_arg"] = hints.get("mask_arg")  # packed kernels take no mask
            if "cu_seqlens" in names and "cu_seqlens_k" not in names and "cross" not in hints:
                fields["cross"] = False  # one cu_seqlens: self-attention only
        elif "mask_arg" not in hints and fields.get("mask_arg") in _KEY_PADDING_NAMES:
            fields.setdefault("mask_shape", "BK")
        if "causal_arg" not in hints:
            fields["causal_arg"] = next((n for n in _CAUSAL_NAMES if n in names), None)
        if fn is torch.nn.functional.scaled_dot_product_attention or (kw and not names - {
                "q", "k", "v", "query", "key", "value", "args", "kwargs"}):
            fields.setdefault("mask_arg", "attn_mask")
            fields["mask_arg"] = fields["mask_arg"] or "attn_mask"
            fields["causal_arg"] = fields["causal_arg"] or "is_causal"
        fields["call"] = "q_k_v"
        mask_arg = hints.get("mask_arg", fields.get("mask_arg"))
        fields["mask_required"] = bool(mask_arg) and mask_arg in _required_params(fn)
    fields.update(hints)
    fields["kind"] = kind
    if name is None:
        name = spec or getattr(obj, "__qualname__", None) or type(obj).__name__
        if isinstance(obj, nn.Module):
            name = spec or type(obj).__name__
    fields.setdefault("name", name)
    if fields.get("mask_arg") == "":
        fields["mask_arg"] = None  # mask_arg="" / --hint mask_arg= : do not pass masks
    # consistency
    t = Target(obj=obj, hints=dict(all_hints), **fields)
    if t.num_heads and t.embed_dim and t.embed_dim % t.num_heads and t.head_dim is None:
        raise TargetError(f"embed_dim={t.embed_dim} is not divisible by num_heads="
                          f"{t.num_heads}; give head_dim")
    if t.self_attention:
        t.cross = False
    return t
