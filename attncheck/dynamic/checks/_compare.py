"""Comparison and tolerance helpers shared by the equivalence checks (padding,
batch-independence, permutation-equivariance, reference, dtype, kv-cache, mask-pattern) and by the
model-level checks of ``attncheck audit``.  Not a check module.

One tolerance policy (:func:`within_noise`): ``|got − ref| ≤ atol + rtol·|ref| + NOISE_FACTOR ·
noise`` elementwise, with (atol, rtol) of the dtype (:func:`attncheck.dynamic.base.tolerances`)
and ``noise = max |ref − ref₆₄|`` the dtype's own error on the reference computation, measured
against a float64 run on the same inputs when one is available (flash-attention's tests bound
the error by a multiple of PyTorch's own error against a float64 reference; PyTorch's SDPA tests
use a factor 4–5)."""
from __future__ import annotations

import math
from typing import Any

import torch

from attncheck.dynamic.targets import Target

__all__ = [
    "NOISE_FACTOR",
    "NOISE_SCALE",
    "Cmp",
    "NotComparable",
    "compare",
    "dtype_noise",
    "exact_tol",
    "fmt_positions",
    "hint",
    "noise_like",
    "seq_dim",
    "within_noise",
]

#: standard deviation of the perturbation noise added to inputs drawn from N(0, 1): large but
#: finite (NaN in masked K/V turns correct outputs into NaN through 0 × NaN)
NOISE_SCALE = 4.0
#: a result may differ from its reference by NOISE_FACTOR × the dtype's own error on the same
#: computation (PyTorch's SDPA tests use 4-5 ×, flash-attention 2 ×)
NOISE_FACTOR = 4.0


class NotComparable(ValueError):
    """Two outputs to compare have different shapes (e.g. a model whose output length depends on
    the batch, or whose incremental outputs are not per position): a check skips with this
    reason instead of failing."""


class Cmp:
    """Result of :func:`compare`: ``max_abs`` (max |a − b|, ``inf`` where NaN appears on one
    side only), ``ratio`` (max |a − b| / (atol + rtol·|b|): ≤ 1 means within tolerance),
    ``worst`` (index of the largest ratio), ``ok``."""

    def __init__(self, max_abs: float, ratio: float, worst: tuple[int, ...] | None,
                 atol: float, rtol: float):
        self.max_abs, self.ratio, self.worst = max_abs, ratio, worst
        self.atol, self.rtol = atol, rtol
        #: the dtype noise included in ``atol`` (:func:`within_noise`), else 0
        self.noise = 0.0

    @property
    def ok(self) -> bool:
        return self.ratio <= 1.0

    def metrics(self, prefix: str = "") -> dict[str, Any]:
        def j(x: float) -> Any:
            return x if math.isfinite(x) else "inf"

        return {f"{prefix}max_abs_diff": j(self.max_abs), f"{prefix}tolerance_ratio": j(self.ratio),
                f"{prefix}atol": self.atol, f"{prefix}rtol": self.rtol}


def compare(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> Cmp:
    """Compare ``a`` (tested) against ``b`` (expected), same shape, NaN-aware in float64 (NaN on
    both sides at the same place counts as equal; on one side only as an infinite error —
    Python's ``max`` would skip NaN).  Raises :class:`NotComparable` (a ValueError) on a shape
    mismatch."""
    if tuple(a.shape) != tuple(b.shape):
        raise NotComparable(f"outputs of shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                            "compared")
    if a.numel() == 0:
        return Cmp(0.0, 0.0, None, atol, rtol)
    a64, b64 = a.detach().to(torch.float64).cpu(), b.detach().to(torch.float64).cpu()
    na, nb = torch.isnan(a64), torch.isnan(b64)
    d = (a64 - b64).abs()
    d = torch.where(na & nb, torch.zeros_like(d), d)
    d = torch.where(na ^ nb, torch.full_like(d, math.inf), d)
    same_inf = torch.isinf(a64) & torch.isinf(b64) & (a64 == b64)
    d = torch.where(same_inf, torch.zeros_like(d), d)
    bound = atol + rtol * torch.nan_to_num(b64.abs(), nan=0.0, posinf=0.0)
    r = d / bound if atol > 0 else torch.where(d > 0, torch.full_like(d, math.inf),
                                               torch.zeros_like(d))
    r = torch.nan_to_num(r, nan=math.inf)
    idx = int(torch.argmax(r))
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx), r.shape))
    return Cmp(float(d.max()), float(r.max()), worst, atol, rtol)


def dtype_noise(ref: torch.Tensor, ref64: torch.Tensor | None) -> float:
    """``max |ref − ref64|``: the error of a computation in its own dtype against the same
    computation in float64 (0.0 without a float64 run, on a shape mismatch or when not finite)."""
    if ref64 is None or tuple(ref64.shape) != tuple(ref.shape) or ref.numel() == 0:
        return 0.0
    d = (ref.detach().double().cpu() - ref64.detach().double().cpu()).abs()
    noise = float(d.max())
    return noise if math.isfinite(noise) else 0.0


def within_noise(got: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None = None,
                 dtype: torch.dtype | None = None) -> Cmp:
    """The one tolerance policy (see the module docstring): compare ``got`` against ``ref`` (same
    shape, any float dtype) with the (atol, rtol) of ``dtype`` (default ``ref.dtype``; pass the
    least precise dtype the computation ran in, e.g. float32 for a float64 model whose attention
    softmax is computed in float32) plus
    ``NOISE_FACTOR ×`` :func:`dtype_noise` of ``ref`` against its float64 run ``ref64``.  The
    returned :class:`Cmp` carries ``noise``.  Raises :class:`NotComparable` on a shape mismatch."""
    from attncheck.dynamic.base import tolerances

    atol, rtol = tolerances(dtype or ref.dtype)
    noise = dtype_noise(ref, ref64)
    cmp = compare(got, ref, atol + NOISE_FACTOR * noise, rtol)
    cmp.noise = noise
    return cmp


def exact_tol(ref: torch.Tensor, ulps: int = 8) -> float:
    """A near-exact absolute tolerance: ``ulps`` × eps(dtype) × max(1, max|ref|)."""
    mag = float(torch.nan_to_num(ref.detach().abs(), nan=0.0, posinf=0.0).max()) \
        if ref.numel() else 0.0
    return ulps * torch.finfo(ref.dtype).eps * max(1.0, mag)


def seq_dim(target: Target) -> int:
    """Sequence axis of canonical inputs / outputs: kernels ``(B, H, L, d)`` → 2, layers
    ``(B, L, E)`` → 1."""
    return 2 if target.is_kernel else 1


def noise_like(t: torch.Tensor, gen: torch.Generator, scale: float = NOISE_SCALE) -> torch.Tensor:
    """N(0, scale²) noise shaped like ``t`` from the CPU generator ``gen`` (finite, never NaN)."""
    z = torch.randn(*t.shape, generator=gen, dtype=torch.float64) * scale
    return z.to(t.device, t.dtype)


def hint(target: Target, *names: str, default: Any = None) -> Any:
    """First hint among ``names`` present in ``target.hints`` (extra hints that are not Target
    fields are kept there), else ``default``."""
    for n in names:
        if n in target.hints and target.hints[n] is not None:
            return target.hints[n]
    return default


def fmt_positions(pos: list[Any], n: int = 8) -> str:
    s = ", ".join(str(p) for p in pos[:n])
    return s + (", …" if len(pos) > n else "")
