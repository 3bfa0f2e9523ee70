"""``reference``: attention outputs against a float64 scaled-dot-product-attention reference.

**Kernels** ``f(q, k, v)`` — for hypothesis-drawn examples (with a random mask on every other
example when the target takes one) the output is compared with
:func:`~attncheck.dynamic.probe.sdpa_reference` in float64 on the same q, k, v, mask, causal
flag (with the target's alignment), ``scale`` hint (default ``1/√head_dim``) and GQA hint
(``num_kv_heads``: k/v get that many heads, the reference repeats them with
``repeat_interleave``, i.e. ``enable_gqa=True``).  Kernels that declare rotary embeddings
(hint ``rope={"offset_arg": NAME}``) cannot be compared with plain SDPA; for them the reference
property is RoPE's: q·kᵀ depends on relative positions only (Su et al. 2021, RoFormer §3.4), so
the output must not change when every position is shifted (``NAME = 0`` vs ``3`` and ``17``).

Declared conventions: ``positions="alibi"`` adds the ALiBi bias ``−m_h·|i' − j|`` (declared
``slopes``, else measured, else ``2^(−8h/H)``) to the reference; a relative or absolute position
term (declared or detected, :mod:`attncheck.dynamic.positions`) cannot be rebuilt, so such kernels
are judged like layers, through the computations the probe captures; ``qk_norm="l2"`` compares
with SDPA on L2-normalised q and k (cosine attention, at the declared ``scale``); ``scale=
"learned"`` compares at the kernel's own measured scale.

**Layers** — the forward runs under the :class:`~attncheck.dynamic.probe.Probe`:

- every SDPA call: its output vs the float64 recomputation from its own arguments; and, when the
  logits scale relative to the raw q·kᵀ (``effective_scale``: scalars folded into q / k count)
  is not the expected one (``scale`` hint, else ``1/√head_dim``), its output vs the reference at
  the expected scale;
- every hand-written softmax whose q·kᵀ the probe recovered (``effective_scale`` known): the
  captured probabilities vs ``softmax(q·kᵀ · expected_scale)`` over the key axis (the last axis
  of q·kᵀ), masked entries (``-inf`` or ≤ ``MASK_THRESHOLD`` = −5e3) kept masked;
- modules with ``nn.MultiheadAttention``'s parameter layout (``in_proj_weight``,
  ``in_proj_bias``, ``out_proj``) — drop-in replacements — against
  ``F.multi_head_attention_forward`` in float64 with the same parameters.

**Tolerances** (PyTorch's SDPA tests, flash-attention): fp32 atol 1e-5, rtol 1e-4; fp64 1e-10.  fp16 / bf16 follow
flash-attention's and PyTorch's SDPA tests: the target's max error against the float64
reference must be ≤ ``max(1e-5, K_OUT × e_torch)`` where ``e_torch`` is the larger of the errors
of PyTorch's own low-precision math in that dtype (``F.scaled_dot_product_attention`` and the
composite ``softmax(q·kᵀ·s + mask) @ v``) against the same reference; ``K_OUT = 5`` (PyTorch's
``test_transformers`` uses fudge factors of 4–5 for outputs; flash-attention 2× against its
low-precision reference implementation).  The metrics report the error ratio
``error / (K_OUT × e_torch)``.
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result, fmt_diff
from attncheck.dynamic.checks._compare import compare, hint
from attncheck.dynamic.checks.scale import learned_scale_hint
from attncheck.dynamic.probe import MASK_THRESHOLD, Probe, sdpa_reference
from attncheck.dynamic.strategies import Fail, examples, run_property
from attncheck.dynamic.targets import Example, Inputs, Target, causal_blocked
from attncheck.results import CheckResult

__all__ = [
    "K_OUT",
    "ROPE_OFFSETS",
    "check_reference",
    "declared_window",
    "judge",
    "low_precision_baseline",
    "window_blocked",
]

#: allowed multiple of PyTorch's own low-precision error (outputs)
K_OUT = 5.0
#: position shifts used for RoPE targets
ROPE_OFFSETS = (3, 17)
#: relative deviation of the effective logits scale from the expected one that triggers the
#: expected-scale comparison
SCALE_RTOL = 1e-3

_LOW = (torch.float16, torch.bfloat16)


def low_precision_baseline(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           mask: torch.Tensor | None, scale: float | None, gqa: bool,
                           ref: torch.Tensor, is_causal: bool = False) -> float:
    """Max error of PyTorch's own math in ``q.dtype`` against the float64 ``ref``: the larger of
    ``F.scaled_dot_product_attention`` and the composite ``softmax(q·kᵀ·s + mask) @ v``."""
    errs = []
    if is_causal:  # SDPA's top-left causal mask as an explicit keep-mask
        tri = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril(0)
        mask = tri if mask is None else (mask & tri if mask.dtype == torch.bool else
                                         mask.masked_fill(~tri, float("-inf")))
    with torch.no_grad():
        try:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                               enable_gqa=gqa)
            errs.append(float((o.double() - ref).abs().nan_to_num(nan=0.0).max()))
        except Exception:  # noqa: BLE001, S110 - a backend without that dtype: composite only
            pass
        kk, vv = k, v
        if gqa and k.size(-3) != q.size(-3):
            kk = k.repeat_interleave(q.size(-3) // k.size(-3), dim=-3)
            vv = v.repeat_interleave(q.size(-3) // k.size(-3), dim=-3)
        s = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        lg = (q @ kk.transpose(-2, -1)) * s
        if mask is not None:
            lg = lg.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else lg + mask
        o2 = torch.softmax(lg, dim=-1).nan_to_num(nan=0.0) @ vv
        errs.append(float((o2.double() - ref).abs().nan_to_num(nan=0.0).max()))
    return max(errs) if errs else 0.0


def judge(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, atol: float, rtol: float,
          baseline: float | None = None) -> tuple[bool, dict[str, Any]]:
    """(ok, metrics) for ``out`` against the float64 ``ref``: allclose(atol, rtol) in fp32 / fp64;
    in fp16 / bf16 ``max|out − ref| ≤ max(1e-5, K_OUT × baseline)``."""
    cmp = compare(out, ref, atol, rtol)
    m = cmp.metrics()
    if dtype in _LOW and baseline is not None:
        bound = max(1e-5, K_OUT * baseline)
        m.update(torch_error=baseline, k=K_OUT, bound=bound,
                 error_ratio=(cmp.max_abs / bound) if math.isfinite(cmp.max_abs) else "inf")
        return bool(cmp.max_abs <= bound), m
    return cmp.ok, m


def declared_window(target: Target) -> int | None:
    """Sliding window w (keys visible per query, the current one included) declared by the hints
    ``mask_pattern={"kind": "sliding_window", "window": w}`` or ``pattern="sliding_window",
    window=w``; None otherwise."""
    mp = hint(target, "mask_pattern")
    kind, w = None, None
    if isinstance(mp, dict):
        kind, w = mp.get("kind", mp.get("pattern")), mp.get("window")
    elif isinstance(mp, str):
        kind = mp
    kind = kind or hint(target, "pattern")
    w = w if w is not None else hint(target, "window")
    if kind in ("sliding_window", "sliding-window", "local") and isinstance(w, int) and w > 0:
        return int(w)
    return None


def window_blocked(L_q: int, L_k: int, w: int, alignment: str | None = "top_left",
                   device: Any = None) -> torch.Tensor:
    """Bool ``(L_q, L_k)``: True where a causal sliding window of ``w`` keys (the current one and
    ``w − 1`` before it; Mistral's ``sliding_window``) blocks key j for query i: ``i' − j ≥ w``
    with ``i' = i`` (top-left) or ``i + L_k − L_q`` (bottom-right)."""
    i = torch.arange(L_q, device=device).unsqueeze(1)
    j = torch.arange(L_k, device=device).unsqueeze(0)
    off = (L_k - L_q) if alignment == "bottom_right" else 0
    return (i + off - j) >= w


def _declared_scale(target: Target) -> Any:
    """The ``scale`` hint as the ``scale`` check reads it (a number, ``"learned"`` or None)."""
    from attncheck.dynamic.checks.scale import declared_scale

    s = declared_scale(target)
    return hint(target, "softmax_scale") if s is None else s


def _learned_scale(target: Target) -> bool:
    return isinstance(_declared_scale(target), str)


def _expected_scale(target: Target, head_dim: int | None) -> float | None:
    """The logits scale the reference uses: the numeric ``scale`` hint, else ``1/√head_dim``;
    None for ``scale="learned"`` (a learned temperature / cosine attention: the reference then
    keeps the target's own effective scale)."""
    s = _declared_scale(target)
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        return float(s)
    if isinstance(s, str):
        return None
    return None if not head_dim else 1.0 / math.sqrt(head_dim)


def _applies(target: Target) -> bool | str:
    return True


# ---------------------------------------------------------------------------------- kernels
def _kernel(target: Target, ctx: RunContext) -> CheckResult:
    if hint(target, "rope"):
        return _rope(target, ctx)
    from attncheck.dynamic.positions import describe, position_kind

    pos = position_kind(target)
    if pos is not None and pos["kind"] == "rotary":
        return ctx.result("skip", f"{describe(pos)}: plain SDPA is no reference after RoPE; "
                                  "give rope={'offset_arg': NAME} to test that q·kᵀ depends on "
                                  "relative positions only")
    if pos is not None and pos["kind"] in ("relative", "absolute"):
        # a learned bias cannot be rebuilt: judge the attention the probe captures instead
        res = _layer(target, ctx)
        res.message = f"{describe(pos)}: captured computations compared — {res.message}"
        return res
    alibi = pos if pos is not None and pos["kind"] == "alibi" else None
    qk_norm = hint(target, "qk_norm")
    if isinstance(qk_norm, str) and qk_norm.lower() not in ("l2", "true", "cosine"):
        return ctx.result("skip", f"qk_norm={qk_norm!r}: the kernel reference knows L2 "
                                  "normalisation only (qk_norm=l2); a learned norm is judged "
                                  "on layers through the captured attention")
    atol, rtol = ctx.tolerances
    hkv = hint(target, "num_kv_heads", "num_key_value_heads")
    causal = target.causal is True
    worst: dict[str, Any] = {"max_abs_diff": 0.0, "error_ratio": 0.0}
    # causality not declared: a kernel that is causal in fact (SDPA is_causal=True, a
    # triangular zero pattern) is compared with the causal reference, in either alignment
    inferred = _inferred_causal(target, ctx) if target.causal is None else None
    if inferred:
        causal = True

    def prop(ex: Example) -> Any:
        keep = target.random_keep(ex, device=ctx.device) if (
            target.accepts_mask and ex.seed % 2 == 1) else None
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep,
                                    causal=causal)
        if inferred and ex.L_q != ex.L_k:
            return _either_alignment(target, ctx, inputs, atol, rtol, worst)
        gqa = False
        if hkv and ex.H % int(hkv) == 0 and int(hkv) != ex.H:
            inputs = inputs.with_tensors(k=inputs.k[:, :int(hkv)].contiguous(),
                                         v=inputs.v[:, :int(hkv)].contiguous())
            gqa = True
        with torch.no_grad():
            out = target(inputs).out
        blocked = target.blocked(inputs)
        w = declared_window(target)
        if w is not None:
            band = window_blocked(ex.L_q, ex.L_k, w, target.alignment, inputs.q.device)
            blocked = band if blocked is None else (blocked | band)
        mask = None if blocked is None else ~blocked
        if mask is not None:
            mask = mask.expand(ex.B, 1, ex.L_q, ex.L_k) if mask.dim() == 4 else mask
        if alibi is not None:
            mask = _with_alibi(mask, alibi, target, ex, inputs.q.device)
        scale = _expected_scale(target, ex.d)
        if _learned_scale(target):
            # a learned temperature: compare at the target's own, measured scale
            from attncheck.dynamic.checks.scale import own_scale

            scale = own_scale(target, inputs)
            if scale is None:
                raise Fail("scale='learned': the target's own logits scale is not observable "
                           "(no softmax over q·kᵀ seen and the V = identity weights do not "
                           "follow softmax(s·q·kᵀ)), so no reference at its temperature exists")
        rq, rk = inputs.q, inputs.k
        if qk_norm:  # cosine attention: L2-normalised q and k (Henry et al. 2020)
            rq, rk = (F.normalize(t.detach().double(), dim=-1) for t in (rq, rk))
        _, _, ref = sdpa_reference(rq, rk, inputs.v, mask, False, scale, gqa)
        if tuple(out.shape) != tuple(ref.shape):
            raise Fail(f"output shape {tuple(out.shape)} ≠ reference {tuple(ref.shape)}")
        base = None
        if ctx.dtype in _LOW:
            base = low_precision_baseline(inputs.q, inputs.k, inputs.v, mask, scale, gqa, ref)
        ok, m = judge(out, ref, ctx.dtype, atol, rtol, base)
        worst["max_abs_diff"] = max(worst["max_abs_diff"], _num(m["max_abs_diff"]))
        if "error_ratio" in m:
            worst["error_ratio"] = max(worst["error_ratio"], _num(m["error_ratio"]))
        if not ok:
            what = (f"max |Δ|={m['max_abs_diff']:.3g}" if m["max_abs_diff"] != "inf"
                    else "NaN/inf where the reference is finite")
            err = Fail(f"output differs from the float64 SDPA reference ({what}; "
                       + (f"{K_OUT:g}× PyTorch's own {str(ctx.dtype)[6:]} error = "
                          f"{m['bound']:.3g}" if "bound" in m else
                          f"atol {atol:g}, rtol {rtol:g}")
                       + f"; reference: scale={scale:.4g}"
                       + (" (the target's own learned temperature)"
                          if _learned_scale(target) else "")
                       + (f", GQA {ex.H}/{hkv} heads (repeat_interleave)" if gqa else "")
                       + (", causal" if causal else "") + (", masked" if keep is not None else "")
                       + (", L2-normalised q and k (qk_norm)" if qk_norm else "")
                       + (f", {describe(alibi)} with slopes " + str(
                           [round(x, 4) for x in _slopes(alibi, ex.H, target, ctx.device)][:4])
                          + ("…" if ex.H > 4 else "") if alibi is not None else "")
                       + ")")
            err.data = dict(m, gqa=gqa, masked=keep is not None)
            raise err
        return {}

    outcome = run_property(prop, target, ctx, strategy=examples(target, max_l=10))
    metrics = dict({k: (v if math.isfinite(v) else "inf") for k, v in worst.items()},
                   examples=outcome.examples_run, atol=atol, rtol=rtol,
                   dtype=str(ctx.dtype).replace("torch.", ""))
    if inferred:
        metrics["causal_inferred"] = inferred
    if ctx.dtype in _LOW:
        metrics["k"] = K_OUT
    else:
        metrics.pop("error_ratio", None)
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    return ctx.result("pass", f"{outcome.examples_run} examples match the float64 SDPA "
                              f"reference (max |Δ|={worst['max_abs_diff']:.3g}"
                              + (f", error ratio {worst['error_ratio']:.3g}"
                                 if ctx.dtype in _LOW else "") + ")", metrics)


def _slopes(pos: dict[str, Any], H: int, target: Target | None = None,
            device: Any = "cpu") -> list[float]:
    """ALiBi slopes: declared (``positions={"kind": "alibi", "slopes": [..]}``), measured by
    detection when they fit H heads, else measured again on an H-head forward of ``target``
    (a kernel computes its slopes from its head count, and for H not a power of two
    implementations differ: the reference code interleaves, many write ``2^(−8h/H)``), else
    the paper's slopes (:func:`alibi_slopes`)."""
    from attncheck.dynamic.positions import alibi_slopes, detect_positions

    for key in ("slopes", "measured_slopes"):
        sl = pos.get(key)
        if isinstance(sl, (list, tuple)) and len(sl) == H:
            return [float(x) for x in sl]
    if target is not None and "measured_slopes" in pos:
        by_heads = pos.setdefault("measured_slopes_by_heads", {})
        if H not in by_heads:
            try:
                det = detect_positions(target, device=device, n_heads=H)
            except Exception:  # noqa: BLE001 - the target's own failure: other checks report it
                det = {}
            by_heads[H] = det.get("measured_slopes") if det.get("kind") == "alibi" else None
        sl = by_heads[H]
        if isinstance(sl, list) and len(sl) == H:
            return [float(x) for x in sl]
    return alibi_slopes(H)


def _with_alibi(mask: torch.Tensor | None, pos: dict[str, Any], target: Target, ex: Example,
                device: Any) -> torch.Tensor:
    """The reference mask as an additive float64 ``(B, H, L_q, L_k)`` mask holding the ALiBi
    bias (``−m_h·|i' − j|``, the target's alignment), ``-inf`` where ``mask`` blocks."""
    from attncheck.dynamic.positions import alibi_bias

    slopes = _slopes(pos, ex.H, target, device)
    bias = alibi_bias(ex.H, ex.L_q, ex.L_k, target.alignment, slopes,
                      device=device).unsqueeze(0).expand(ex.B, ex.H, ex.L_q, ex.L_k)
    if mask is None:
        return bias
    return bias.masked_fill(~mask, float("-inf"))


def _inferred_causal(target: Target, ctx: RunContext) -> str | None:
    """Evidence (from one probed forward, L_q = L_k) that an undeclared kernel is causal."""
    from attncheck.dynamic.checks.causality import _probe_says_causal

    ex = ctx.example(target)
    ex = replace(ex, L_k=ex.L_q)
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=False)
    try:
        with torch.no_grad(), Probe(max_records=16, track_matmuls=False) as probe:
            target(inputs)
    except Exception:  # noqa: BLE001 - the property reports the target's errors
        return None
    return _probe_says_causal(probe, ex.L_q)


def _either_alignment(target: Target, ctx: RunContext, inputs: Inputs, atol: float,
                      rtol: float, worst: dict[str, Any]) -> Any:
    """Undeclared causal kernel, L_q ≠ L_k: accept the causal reference in either alignment
    (SDPA's top-left or flash-attention's bottom-right); declare ``alignment=`` to pin one."""
    ex = inputs.example
    with torch.no_grad():
        out = target(inputs).out
    best = None
    for al in ALIGN:
        blocked = causal_blocked(ex.L_q, ex.L_k, al, inputs.q.device)
        if inputs.keep is not None:
            blocked = blocked | ~inputs.keep.to(inputs.q.device)
        mask = ~blocked
        if mask.dim() == 4:
            mask = mask.expand(ex.B, 1, ex.L_q, ex.L_k)
        _, _, ref = sdpa_reference(inputs.q, inputs.k, inputs.v, mask, False,
                                   _expected_scale(target, ex.d), False)
        base = (low_precision_baseline(inputs.q, inputs.k, inputs.v, mask,
                                       _expected_scale(target, ex.d), False, ref)
                if ctx.dtype in _LOW else None)
        ok, m = judge(out, ref, ctx.dtype, atol, rtol, base)
        if ok:
            worst["max_abs_diff"] = max(worst["max_abs_diff"], _num(m["max_abs_diff"]))
            return {}
        best = m if best is None else best
    err = Fail(f"output differs from the float64 causal SDPA reference in both alignments "
               f"(top-left and bottom-right; max |Δ|={fmt_diff(best['max_abs_diff'])})")
    err.data = dict(best)
    raise err


ALIGN = ("top_left", "bottom_right")


def _num(x: Any) -> float:
    return math.inf if x == "inf" else float(x)


def _rope(target: Target, ctx: RunContext) -> CheckResult:
    rope = hint(target, "rope")
    arg = rope.get("offset_arg") if isinstance(rope, dict) else None
    if not arg:
        return ctx.result("skip", "rotary kernel without rope={'offset_arg': NAME}: no "
                                  "reference (plain SDPA does not apply after RoPE)")
    atol, rtol = ctx.tolerances
    # angles θ·offset lose ~offset·eps of relative precision in cos/sin: scale atol with it
    atol_r = atol * max(ROPE_OFFSETS)
    worst = {"diff": 0.0}

    def prop(ex: Example) -> Any:
        if ex.d % 2 or ex.d < 4:
            # rotary embeddings rotate pairs of features: an even head_dim, and at least two
            # pairs, since with one pair the interleaved and split-half layouts coincide
            ex = target.fit_example(replace(ex, d=max(4, ex.d + ex.d % 2)))
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype)
        with torch.no_grad():
            base = target(inputs).out
            for off in ROPE_OFFSETS:
                shifted = replace(target, obj=partial(target.obj, **{arg: off}))
                out = shifted(inputs).out
                cmp = compare(out, base, atol_r, rtol)
                worst["diff"] = max(worst["diff"], cmp.max_abs)
                if not cmp.ok:
                    err = Fail(f"rotary embedding is not relative: shifting every position by "
                               f"{off} ({arg}={off}) changed the output (max |Δ|="
                               f"{cmp.max_abs:.3g} > atol {atol_r:g}); q·kᵀ must depend on "
                               "i − j only (interleaved vs split-half RoPE layouts mixed?)")
                    err.data = {"offset": off, "fail_max_abs_diff": cmp.max_abs}
                    raise err
        return {}

    outcome = run_property(prop, target, ctx, strategy=examples(target, max_l=10, max_d=16))
    metrics = {"examples": outcome.examples_run, "offsets": list(ROPE_OFFSETS),
               "max_abs_diff": worst["diff"], "atol": atol_r, "rtol": rtol,
               "reference": "RoPE relative-position invariance"}
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    return ctx.result("pass", f"{outcome.examples_run} examples: output invariant to position "
                              f"shifts {list(ROPE_OFFSETS)} (max |Δ|={worst['diff']:.3g})",
                      metrics)


# ---------------------------------------------------------------------------------- layers
def _mha_layout(target: Target) -> bool:
    m = target.module
    if m is None or target.kind != "layer" or not target.num_heads:
        return False
    w = getattr(m, "in_proj_weight", None)
    op = getattr(m, "out_proj", None)
    return (isinstance(w, torch.Tensor) and w.dim() == 2 and w.shape[0] == 3 * w.shape[1]
            and isinstance(op, torch.nn.Linear) and target.causal is not None)


def _mha_reference(target: Target, inputs: Inputs) -> torch.Tensor:
    """float64 ``F.multi_head_attention_forward`` with the module's own parameters,
    canonical ``(B, L_q, E)``."""
    m = target.module
    ex = inputs.example
    d = torch.float64
    q, k, v = (t.detach().to(d).transpose(0, 1) for t in (inputs.q, inputs.k, inputs.v))
    b = getattr(m, "in_proj_bias", None)
    mask = None
    if target.causal:
        mask = causal_blocked(ex.L_q, ex.L_k, target.alignment, q.device)
    out, _ = F.multi_head_attention_forward(
        q, k, v, m.in_proj_weight.shape[1], target.num_heads, m.in_proj_weight.detach().to(d),
        None if b is None else b.detach().to(d), None, None, False, 0.0,
        m.out_proj.weight.detach().to(d),
        None if m.out_proj.bias is None else m.out_proj.bias.detach().to(d),
        training=False, need_weights=False, attn_mask=mask)
    return out.transpose(0, 1)


def _layer(target: Target, ctx: RunContext) -> CheckResult:
    atol, rtol = ctx.tolerances
    ex = ctx.example(target)
    causal = target.causal is True
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=causal)
    with torch.no_grad(), Probe(max_records=64, track_matmuls=True) as probe:
        out = target(inputs).out
    probe.note_opaque(target.obj)
    compared: list[dict[str, Any]] = []
    problems: list[str] = []
    for r in probe.records:
        mapping = _gqa_head_mapping(target, r)
        if mapping is not None:
            compared.append({"record": f"{r.kind}#{r.index}", "what": "GQA: key head read by "
                             "each query head", "ok": mapping[0], "mapping": mapping[1]})
            if not mapping[0]:
                problems.append(f"{r.kind} #{r.index}: {mapping[1]}")
        if r.kind == "sdpa" and r.q is not None:
            _, _, ref = sdpa_reference(r.q, r.k, r.v, r.attn_mask, r.is_causal, r.scale,
                                       r.enable_gqa)
            base = (low_precision_baseline(r.q, r.k, r.v, r.attn_mask, r.scale, r.enable_gqa,
                                           ref, r.is_causal) if r.dtype in _LOW else None)
            ok, m = judge(r.output, ref, r.dtype, *_tol(r.dtype, atol, rtol), base)
            entry = {"record": f"sdpa#{r.index}", "what": "output vs float64 recomputation",
                     **m}
            compared.append(entry)
            if not ok:
                problems.append(f"SDPA call #{r.index}: output differs from its float64 "
                                f"recomputation (max |Δ|={fmt_diff(m['max_abs_diff'])})")
            exp = _expected_scale(target, r.head_dim)
            eff = r.effective_scale
            if exp and eff and abs(eff - exp) > SCALE_RTOL * exp:
                base_s = r.scale if r.scale is not None else 1.0 / math.sqrt(r.q.size(-1))
                s_ref = exp * base_s / eff
                _, _, ref2 = sdpa_reference(r.q, r.k, r.v, r.attn_mask, r.is_causal, s_ref,
                                            r.enable_gqa)
                ok2, m2 = judge(r.output, ref2, r.dtype, *_tol(r.dtype, atol, rtol), None)
                compared.append({"record": f"sdpa#{r.index}",
                                 "what": "output vs reference at the expected scale",
                                 "effective_scale": eff, "expected_scale": exp, **m2})
                if not ok2:
                    problems.append(
                        f"SDPA call #{r.index}: logits scaled by {eff:.4g} × q·kᵀ (scalars "
                        f"folded into q/k included), reference {exp:.4g} = 1/√{r.head_dim}: "
                        f"output off by max |Δ|={m2['max_abs_diff']:.3g}"
                        + learned_scale_hint(eff, r.head_dim, expected=exp))
        elif r.kind == "softmax" and r.effective_scale and r.logits is not None \
                and r.probs is not None and r.logits.dim() >= 2:
            exp = _expected_scale(target, r.head_dim) or r.effective_scale
            lg = r.canonical(r.logits.detach().to(torch.float64))
            masked = ~torch.isfinite(lg) | (lg <= MASK_THRESHOLD)
            raw = torch.where(masked, torch.zeros_like(lg), lg / r.effective_scale)
            ref = torch.softmax((raw * exp).masked_fill(masked, float("-inf")), dim=-1)
            ref = ref.nan_to_num(nan=0.0)
            probs = r.canonical(r.probs.detach())
            full = masked.all(dim=-1, keepdim=True).expand_as(masked)
            probs_c = torch.where(full, torch.zeros_like(probs), probs)
            ok, m = judge(probs_c, ref, r.dtype, *_tol(r.dtype, atol, rtol), None)
            entry = {"record": f"softmax#{r.index}",
                     "what": "captured probabilities vs softmax(q·kᵀ·scale) over the key axis",
                     "effective_scale": r.effective_scale, "expected_scale": exp,
                     "softmax_dim": r.dim, "key_axis": r.key_axis, **m}
            compared.append(entry)
            if not ok:
                why = []
                if abs(r.effective_scale - exp) > SCALE_RTOL * exp:
                    why.append(f"logits scaled by {r.effective_scale:.4g}, reference "
                               f"{exp:.4g} = 1/√{r.head_dim}"
                               + learned_scale_hint(r.effective_scale, r.head_dim,
                                                    expected=exp))
                if r.dim != r.key_axis:
                    why.append(f"softmax over dim {r.dim}, not the key axis {r.key_axis}")
                problems.append(f"softmax #{r.index}: attention weights differ from the "
                                f"reference (max |Δ|={fmt_diff(m['max_abs_diff'])})"
                                + (f": {'; '.join(why)}" if why else ""))
    if _mha_layout(target):
        ref = _mha_reference(target, inputs)
        if tuple(ref.shape) == tuple(out.shape):
            ok, m = judge(out, ref, ctx.dtype, atol, rtol, None)
            compared.append({"record": "module", "what": "output vs F.multi_head_attention_"
                                                         "forward (float64, same parameters)",
                             **m})
            if not ok:
                problems.append("output differs from nn.MultiheadAttention's computation with "
                                f"the same parameters (max |Δ|={fmt_diff(m['max_abs_diff'])}): heads "
                                "split/merged in the wrong order?")
    metrics: dict[str, Any] = {"compared": compared, "n_compared": len(compared),
                               "records": len(probe.records), "atol": atol, "rtol": rtol}
    if probe.not_observable:
        metrics["not_observable"] = list(probe.not_observable)
    if problems:
        return ctx.result("fail", "; ".join(problems), metrics, example=ex)
    if not compared:
        what = (", ".join(probe.not_observable) if probe.not_observable else
                "no SDPA call and no softmax whose q·kᵀ could be recovered")
        return ctx.result("skip", f"nothing comparable observed ({what}): not observable",
                          metrics)
    return ctx.result("pass", f"{len(compared)} captured attention computation(s) match the "
                              "float64 reference", metrics)


def _gqa_head_mapping(target: Target, r: Any) -> tuple[bool, str] | None:
    """For a GQA layer (hint ``num_kv_heads`` < heads): which key head each query head reads.

    The keys that reach q·kᵀ (an SDPA call's ``k``, or the second operand of the matmul that
    produced a softmax's logits) have one head per query head after the expansion; heads that
    are copies of one key/value head are bitwise equal.  transformers' ``repeat_kv`` and SDPA's
    ``enable_gqa`` give query head ``h`` key head ``h // n_rep`` (``repeat_interleave``);
    ``repeat`` / ``tile`` / ``cat`` give ``h mod H_kv``, which pairs the query heads with the
    wrong key/value projection slices.  Returns ``(ok, description)``, or None when the keys
    show neither grouping (no expansion seen, or heads not distinct)."""
    hkv = hint(target, "num_kv_heads", "num_key_value_heads")
    key = r.k if r.kind == "sdpa" else r.extra.get("qk_key")
    heads = target.num_heads or r.num_heads
    if not hkv or not heads or heads % hkv or heads == hkv or not isinstance(key, torch.Tensor):
        return None
    axes = [a for a in (1, 2, 0) if a < key.dim() - 1 and key.shape[a] == heads]
    if not axes:
        return None
    k = key.movedim(axes[0], 0)
    n_rep = heads // int(hkv)

    def grouped(source) -> bool:
        return all(torch.equal(k[h], k[source(h)]) for h in range(heads))

    first = [h for h in range(heads) if not any(torch.equal(k[h], k[g]) for g in range(h))]
    if len(first) != int(hkv):
        return None  # not H_kv distinct heads, each copied: no expansion to read
    if grouped(lambda h: h // n_rep * n_rep):
        return True, f"query head h reads key/value head h // {n_rep} (repeat_interleave)"
    if grouped(lambda h: h % int(hkv)):
        return False, (f"GQA key/value heads expanded with repeat/tile: query head h reads key "
                       f"head h mod {hkv}, not h // {n_rep} (repeat_interleave, as transformers' "
                       f"repeat_kv and SDPA's enable_gqa)")
    return None


def _tol(dtype: torch.dtype, atol: float, rtol: float) -> tuple[float, float]:
    from attncheck.dynamic.base import tolerances

    return tolerances(dtype) if dtype != torch.float32 else (atol, rtol)


@register_check("reference", applies=_applies,
                description="kernels and captured attention vs a float64 SDPA reference")
def check_reference(target: Target, ctx: RunContext) -> CheckResult:
    """Compare against float64 SDPA (kernels) or the probe-captured attention (layers)."""
    if target.is_kernel:
        return _kernel(target, ctx)
    return _layer(target, ctx)
