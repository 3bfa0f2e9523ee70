"""Empirical detection of a target's mask convention.

A target that takes a mask argument (``Target.mask_arg``) but was given no ``mask_convention``
hint may expect any of three conventions (``attncheck.dynamic.targets``):

- ``"keep"``: bool, True = the query may attend to the key (``F.scaled_dot_product_attention``'s
  bool ``attn_mask``, PyTorch docs; the textbook ``masked_fill(mask == 0, -1e9)`` layer);
- ``"blocked"``: bool, True = masked (``nn.MultiheadAttention``'s bool ``attn_mask`` /
  ``key_padding_mask``, PyTorch docs);
- ``"additive"``: float, 0 = kept, ``finfo(dtype).min`` = blocked, added to the logits (HF transformers'
  prepared ``attention_mask`` of shape ``(B, 1, L_q, L_k)``).

Guessing wrong turns a correct layer into a false failure (an additive layer given a bool mask
adds 0/1 to its logits and blocks nothing).  So, once per target, each candidate is tried in the
order keep, blocked, additive on a small example (B=2, L_q = L_k = 5): key position 0 is blocked
for every query row ≥ 1 (row 0 keeps it, so no row is fully masked — also under a causal mask,
which is folded into the mask; with a key-padding shape ``(B, L_k)`` / ``(B, 1, 1, L_k)`` key 0 is
blocked for every row and row 0 is ignored).  Then the input at position 0 (the key / value
sequence, or x for self-attention) is perturbed with large finite noise, once with each sign
(a visible key whose logit the noise drives to −∞ looks blocked; the opposite sign drives it to
+∞).  A candidate is accepted when

- the call succeeds and output rows ≥ 1 are finite and unchanged under both perturbations
  (near-exact: ``8 ulp × max|out|``; a blocked key contributes exactly ``0 × v``), and
- returned weights ``(..., L_q, L_k)``, when the target returns them, are exactly 0 on the
  blocked key for rows ≥ 1.

When no candidate hides the key completely, the candidate under which the perturbation changes
rows ≥ 1 least is still taken if that change is at most ``LEAKY_RATIO`` (1 %) of the change with
no mask at all: the target does mask in that convention, only leakily (a fill of -5 instead of
-inf), and the mask checks must see it fail rather than skip it (the wrong conventions either
leave the key visible or make it the *only* visible key, so they do not damp it).

A layer whose mask shape is not known (neither hinted nor implied by a key-padding name) is
tried with per-query shapes ``(B, 1, L_q, L_k)`` / ``(B, L_q, L_k)`` first, then, when no candidate
works there, with a key padding mask ``(B, L_k)`` (``attention_mask`` of a transformers encoder,
handed on to ``nn.MultiheadAttention``'s ``key_padding_mask``).

The first accepted candidate is used (``Target.mask_convention``) and recorded in
``Target.mask_detection`` (``{"convention", "source": "detected", "message", "tried"}``); checks
report it in their metrics (``mask_convention``, ``mask_convention_source``).  When no candidate
works (the layer ignores the mask, or uses it for something else), masks are not passed at all
(``source: "failed"``, ``Target.accepts_mask`` False) and the mask-based checks say so
(``warn`` / ``skip`` with the reason) — never a false failure.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.targets import Example, Inputs, Target

__all__ = ["detect_mask_convention", "CANDIDATES", "NOISE_SCALE"]

#: tried in this order (the first that works wins)
CANDIDATES: tuple[str, ...] = ("keep", "blocked", "additive")
#: std of the noise added at position 0 (fp32 / fp64); fp16 / bf16 use 1/10 of it
NOISE_SCALE = 100.0
_LEN = 5
#: a convention that damps the blocked key's influence at least this much (but not to 0) is
#: taken as the intended one with a leaky mask (e.g. a fill of -5 instead of -inf)
LEAKY_RATIO = 1e-2
_SEED = 1729


def _detection_keep(target: Target, ex: Example, device: Any) -> torch.Tensor:
    """Canonical keep-mask blocking key 0 (rows ≥ 1; every row for key-padding shapes)."""
    if target.key_only_mask:
        keep = torch.ones(ex.B, 1, 1, ex.L_k, dtype=torch.bool)
        keep[..., 0] = False
    elif target.mask_shape == "QK":
        keep = torch.ones(ex.L_q, ex.L_k, dtype=torch.bool)
        keep[1:, 0] = False
    else:
        keep = torch.ones(ex.B, 1, ex.L_q, ex.L_k, dtype=torch.bool)
        keep[:, :, 1:, 0] = False
    return keep.to(device)


def _perturbed(target: Target, inputs: Inputs, noise: torch.Tensor) -> Inputs:
    """``inputs`` with ``noise`` added at sequence position 0 of the key/value input."""
    sd = 2 if target.is_kernel else 1

    def bump(t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        idx = [slice(None)] * t.dim()
        idx[sd] = 0
        t[tuple(idx)] = t[tuple(idx)] + noise.to(t.dtype)
        return t

    if target.self_attention:
        x = bump(inputs.q)
        return inputs.with_tensors(q=x, k=x, v=x)
    k = bump(inputs.k)
    v = k if inputs.v is inputs.k else bump(inputs.v)
    return inputs.with_tensors(k=k, v=v)


def _rows(t: torch.Tensor, qdim: int) -> torch.Tensor:
    return t.narrow(qdim, 1, t.shape[qdim] - 1)


def _sensitivity(target: Target, conv: str | None, ex: Example, device: Any,
                 dtype: torch.dtype) -> tuple[float, str, Target]:
    """max |Δ| of output rows ≥ 1 when position 0 is perturbed (± noise), with key 0 blocked in
    convention ``conv`` (None: no mask passed); ``inf`` for NaN / a changed shape / a raise.
    Returns (Δ, reason when not 0-ish, the probing copy of the target)."""
    t = replace(target, mask_convention=conv or "keep", mask_detection={"source": "probing"})
    keep = _detection_keep(t, ex, device) if conv else None
    inputs = t.make_inputs(ex, device=device, dtype=dtype, keep=keep)
    qdim = 2 if t.is_kernel else 1
    scale = NOISE_SCALE if dtype in (torch.float32, torch.float64) else NOISE_SCALE / 10
    g = torch.Generator(device="cpu").manual_seed(_SEED)
    pos0 = inputs.k[:, :, 0] if t.is_kernel else inputs.k[:, 0]
    noise = (torch.randn(*pos0.shape, generator=g, dtype=torch.float64) * scale).to(device)
    inf = float("inf")
    try:
        with torch.no_grad():
            base = t(inputs)
            outs = [t(_perturbed(t, inputs, s * noise)).out for s in (1.0, -1.0)]
    except Exception as exc:  # noqa: BLE001 - a convention the target rejects
        return inf, f"{conv}: the call raised {type(exc).__name__}: {str(exc)[:80]}", t
    ref = _rows(base.out, qdim)
    if not torch.isfinite(ref).all():
        return inf, f"{conv}: NaN/inf in the output", t
    tol = 8 * torch.finfo(ref.dtype).eps * max(1.0, float(ref.abs().max()))
    worst = 0.0
    for o in outs:
        if o.shape != base.out.shape:
            return inf, f"{conv}: output shape changed", t
        d = (_rows(o, qdim).double() - ref.double()).abs()
        worst = max(worst, float(d.nan_to_num(inf).max()) if d.numel() else 0.0)
    if worst > tol:
        return worst, (f"{conv}: the blocked key still changes other rows (max |Δ| "
                       f"{worst:.3g})"), t
    w = base.weights
    if conv and isinstance(w, torch.Tensor) and w.dim() >= 2 and \
            tuple(w.shape[-2:]) == (ex.L_q, ex.L_k):
        leak = float(w[..., 1:, 0].detach().double().abs().max())
        if leak != 0.0:
            return max(worst, tol * 2, 1e-30), (f"{conv}: returned weights on the blocked key "
                                                f"are {leak:.3g}, not 0"), t
    return 0.0, "", t


def detect_mask_convention(target: Target, device: torch.device | str = "cpu",
                           dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Try ``CANDIDATES`` on ``target`` (see the module docstring); return
    ``{"convention": str | None, "source": "detected" | "failed", "message": str,
    "tried": [str, ...]}``.  Never raises for a misbehaving target (its exceptions reject the
    candidate).  Runs the module in eval mode (training flags restored afterwards).  Leaves
    ``target`` unchanged except ``mask_shape`` (the shape that worked)."""
    module = target.module
    modes = [(m, m.training) for m in module.modules()] if module is not None else []
    if module is not None:
        module.eval()  # dropout off: the convention does not depend on the mode
    try:
        return _detect(target, device, dtype)
    finally:
        for m, mode in modes:
            m.training = mode


def _detect(target: Target, device: Any, dtype: torch.dtype) -> dict[str, Any]:
    ex = target.fit_example(replace(target.default_example(seed=_SEED), B=2, L_q=_LEN,
                                    L_k=_LEN))
    shape0 = target.mask_shape
    reasons: list[str] = []
    tried: list[str] = []
    partial: list[tuple[float, str, Target]] = []
    # a layer's mask of unknown shape: per-query shapes first, then a key padding mask (B, L_k)
    shapes = [shape0] + (["BK"] if shape0 is None and not target.is_kernel else [])
    for shape in shapes:
        for conv in CANDIDATES:
            if conv not in tried:
                tried.append(conv)
            target.mask_shape = shape
            delta, why, t = _sensitivity(target, conv, ex, device, dtype)
            if delta == 0.0:
                target.mask_shape = t.mask_shape  # the shape the winning call used
                return {"convention": conv, "source": "detected", "tried": tried,
                        "message": (f"mask {target.mask_arg!r}: detected convention {conv} "
                                    f"(blocking a key with it hides the key from every query)")}
            if shape == shape0:
                reasons.append(why)
            partial.append((delta, conv, t))
    # none hides the key completely: a convention that still damps the blocked key's influence
    # by LEAKY_RATIO or more is the intended one, with a leaky mask — use it, so that the
    # mask-based checks report the leak instead of passing it by not masking at all
    target.mask_shape = shape0
    free, _, _ = _sensitivity(target, None, ex, device, dtype)
    delta, conv, t = min(partial, key=lambda x: x[0])
    if free != float("inf") and free > 0 and delta <= LEAKY_RATIO * free:
        target.mask_shape = t.mask_shape
        return {"convention": conv, "source": "detected", "tried": tried, "leaky": True,
                "message": (f"mask {target.mask_arg!r}: detected convention {conv}, but the "
                            f"blocked key still leaks (its influence drops {free / delta:.3g}×, "
                            f"not to 0)")}
    return {"convention": None, "source": "failed", "tried": tried,
            "message": (f"the convention of mask {target.mask_arg!r} could not be determined "
                        f"(none of keep / blocked / additive hid a blocked key: "
                        f"{'; '.join(reasons)}); give mask_convention= to test masks")}
