"""Read the attention matrix of an opaque kernel: pass V = identity.

For any kernel computing ``out = P @ V`` with attention weights ``P`` of shape
``(B, H, L_q, L_k)`` (SDPA, flash / fused / compiled kernels, a softmax written with exp and sum),
passing ``V = I_{L_k}`` (broadcast over B and H) makes the output *be* ``P``:
``P @ I = P``.  This works where the probe sees nothing, as long as the kernel is linear in V and
accepts ``d_v != d`` (a kernel requiring ``d_v == d`` raises; :func:`attention_probs_via_identity`
turns that into :class:`OpaqueKernelError`).

PyTorch's SDPA accepts ``E_v != E`` (docs of ``scaled_dot_product_attention``: value
``(N, ..., S, Ev)``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "OpaqueKernelError",
    "attention_probs_via_identity",
    "fit_scale_from_probs",
    "target_probs_via_identity",
]


class OpaqueKernelError(RuntimeError):
    """The kernel cannot be read through V = identity (raised, wrong shape, not linear in V)."""


def _identity_v(B: int, H: int, L_k: int, like: torch.Tensor) -> torch.Tensor:
    eye = torch.eye(L_k, dtype=like.dtype, device=like.device)
    return eye.expand(B, H, L_k, L_k).contiguous()


def attention_probs_via_identity(kernel: Callable[..., Any], q: torch.Tensor, k: torch.Tensor,
                                 *, verify: bool = False, **kwargs: Any) -> torch.Tensor:
    """Attention weights of ``kernel`` for ``q, k``, read by calling it with V = identity.

    Args:
        kernel: ``kernel(q, k, v, **kwargs)`` on ``(B, H, L, d)`` tensors returning
            ``(B, H, L_q, d_v)`` or a tuple whose first element is that.
        q: ``(B, H, L_q, d)``; k: ``(B, H_k, L_k, d)`` (``H_k`` may divide ``H`` for GQA kernels).
        verify: also call the kernel with a random V and check ``out == P @ V`` (fp tolerance
            ``1e-4`` relative) — proves the kernel is linear in V, at the cost of a second call.
        kwargs: passed to the kernel (``attn_mask=..``, ``is_causal=..``, ``scale=..``).

    Returns:
        ``(B, H, L_q, L_k)`` tensor, the kernel's dtype and device (not detached).

    Raises:
        OpaqueKernelError: the kernel raised on V = identity, returned the wrong shape, or failed
            the ``verify`` comparison.
    """
    B, Hk, L_k = k.shape[0], k.shape[1], k.shape[2]
    v = _identity_v(B, Hk, L_k, k)
    try:
        out = kernel(q, k, v, **kwargs)
    except Exception as exc:
        raise OpaqueKernelError(f"kernel raised with V = identity ({L_k}×{L_k}): "
                                f"{type(exc).__name__}: {exc}") from exc
    if isinstance(out, (tuple, list)):
        out = out[0]
    expected = (q.shape[0], q.shape[1], q.shape[2], L_k)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise OpaqueKernelError(f"V = identity returned {got}, expected {expected}")
    if verify:
        g = torch.Generator(device="cpu").manual_seed(0)
        vr = torch.randn(B, Hk, L_k, max(1, q.shape[-1]), generator=g, dtype=torch.float64)
        vr = vr.to(q.device, q.dtype)
        ref = kernel(q, k, vr, **kwargs)
        if isinstance(ref, (tuple, list)):
            ref = ref[0]
        H = q.shape[1]
        vrr = vr.repeat_interleave(H // Hk, dim=1) if Hk != H else vr
        mine = out.to(torch.float64) @ vrr.to(torch.float64)
        err = float((ref.to(torch.float64) - mine).abs().max())
        scale = float(mine.abs().max()) + 1e-12
        if not math.isfinite(err) or err > 1e-4 * scale + 1e-5:
            raise OpaqueKernelError(f"kernel is not linear in V: |out - P@V| = {err:.3g}")
    return out


def target_probs_via_identity(target: Any, inputs: Any) -> torch.Tensor:
    """Attention weights ``(B, H, L_q, L_k)`` of a kernel :class:`~attncheck.dynamic.targets.
    Target` for canonical ``inputs`` (their ``v`` is replaced by the identity).

    Raises:
        OpaqueKernelError: the target is not a kernel, raised, or returned the wrong shape.
    """
    if not getattr(target, "is_kernel", False):
        raise OpaqueKernelError("V = identity needs a kernel target (f(q, k, v))")
    ex = inputs.example
    v = _identity_v(ex.B, inputs.k.shape[1], ex.L_k, inputs.k)
    try:
        out = target(inputs.with_tensors(v=v)).out
    except Exception as exc:
        raise OpaqueKernelError(f"kernel raised with V = identity: {type(exc).__name__}: "
                                f"{exc}") from exc
    want = (ex.B, inputs.q.shape[1], ex.L_q, ex.L_k)
    if tuple(out.shape) != want:
        raise OpaqueKernelError(f"V = identity returned {tuple(out.shape)}, expected {want}")
    return out


def fit_scale_from_probs(probs: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> \
        tuple[float, float] | None:
    """Least-squares scale ``s`` with ``log P ≈ s·q·kᵀ + c(row)`` over the visible keys.

    Row-wise centring removes the log-sum-exp constant (and any per-row additive term), so the
    fit needs only ``probs`` and the kernel's own ``q``, ``k``.  Keys with ``p = 0`` (masked) are
    left out; rows with fewer than two visible keys too.

    Args:
        probs: ``(B, H, L_q, L_k)`` attention weights; q: ``(B, H, L_q, d)``; k: ``(B, H, L_k, d)``.

    Returns:
        ``(s, r2)`` — the scale and the fit's coefficient of determination — or None when nothing
        can be fitted (shapes disagree, no row with two visible keys).
    """
    if probs.dim() != 4 or q.dim() != 4 or k.dim() != 4 or q.shape[1] != k.shape[1]:
        return None
    p = probs.detach().to(torch.float64)
    x = q.detach().to(torch.float64) @ k.detach().to(torch.float64).transpose(-2, -1)
    if p.shape != x.shape:
        return None
    vis = (p > 0) & torch.isfinite(p)
    n = vis.sum(-1, keepdim=True)
    ok = (n >= 2)
    if not bool(ok.any()):
        return None
    lp = torch.where(vis, p.clamp_min(1e-300).log(), torch.zeros_like(p))
    xv = torch.where(vis, x, torch.zeros_like(x))
    nn_ = n.clamp_min(1).to(torch.float64)
    lpc = torch.where(vis & ok, lp - lp.sum(-1, keepdim=True) / nn_, torch.zeros_like(p))
    xc = torch.where(vis & ok, xv - xv.sum(-1, keepdim=True) / nn_, torch.zeros_like(p))
    sxx = float((xc * xc).sum())
    if sxx == 0.0:
        return None
    s = float((xc * lpc).sum()) / sxx
    resid = float(((lpc - s * xc) ** 2).sum())
    tot = float((lpc * lpc).sum())
    r2 = 1.0 - resid / tot if tot > 0 else 1.0
    return s, r2
