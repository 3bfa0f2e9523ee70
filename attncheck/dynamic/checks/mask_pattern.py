"""``mask-pattern``: the observed attention pattern equals the declared one.

Declared pattern (hints): ``mask_pattern={"kind": "sliding_window", "window": w}`` or
``pattern="full" | "causal" | "sliding_window"`` with ``window=w``; without them ``causal=True``
declares ``"causal"`` and ``causal=False`` ``"full"``.  The window ``w`` counts the keys a query
sees, the current one included (Mistral's ``sliding_window``; flash-attention's
``window_size=(left, 0)`` is ``w = left + 1``).

Observed pattern, one sample, ``L = max(12, 2w + 2)``, no mask passed (causal flag passed when
the declared pattern is causal or a window): the *exact zero structure* of the attention
weights, visible[i, j] = some head gives key j a non-zero weight for query i —

- kernels: read through V = identity (:mod:`attncheck.dynamic.opaque`: the output then *is* the
  attention matrix, exact zeros stay exact);
- layers: the probe's softmax / SDPA / MHA records with an ``(L, L)`` matrix; without any, the
  perturbation dependency map of the ``causality`` check.

The observed pattern is classified as ``full``, ``causal``, ``sliding_window`` with its ``w``
(every row i sees keys ``max(0, i − w + 1) … i``), or ``other``; the check fails when it differs
from the declared one and reports the observed ``w`` (a window off by one shows as w + 1).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._compare import hint
from attncheck.dynamic.checks.reference import declared_window
from attncheck.dynamic.opaque import OpaqueKernelError, target_probs_via_identity
from attncheck.dynamic.probe import Probe
from attncheck.dynamic.targets import Target
from attncheck.results import CheckResult

__all__ = ["check_mask_pattern", "classify", "classify_map", "declared_pattern"]


def declared_pattern(target: Target) -> tuple[str | None, int | None]:
    """(pattern, window) declared by the hints (see the module docstring); (None, None) when
    nothing is declared."""
    w = declared_window(target)
    if w is not None:
        return "sliding_window", w
    mp = hint(target, "mask_pattern")
    p = mp.get("kind") if isinstance(mp, dict) else mp
    p = p or hint(target, "pattern")
    if p in ("full", "causal"):
        return p, None
    if target.causal is True:
        return "causal", None
    if target.causal is False:
        return "full", None
    return None, None


def classify(visible: torch.Tensor) -> tuple[str, int | None]:
    """Classify a bool ``(L, L)`` visibility map: ("full", None), ("causal", None),
    ("sliding_window", w) or ("other", None) (:func:`classify_map` with the patterns a target
    cannot declare folded into "other")."""
    pat, w = classify_map(visible.cpu())
    if pat in ("full", "causal"):
        return pat, None
    if pat == "sliding":
        return "sliding_window", w
    return "other", None


def classify_map(allowed: torch.Tensor) -> tuple[str, int | None]:
    """Name the mask pattern of an ``(L_q, L_k)`` bool map (bottom-right aligned when L_q < L_k).

    Returns ``("full", None)``, ``("causal", None)``, ``("sliding", w)`` (query i sees keys
    ``i - w < j <= i``), ``("strict-causal", None)`` (diagonal masked: over-masking),
    ``("causal shifted +s (sees s future keys)", None)``, ``("inverted causal (future only)",
    None)``, ``("anti-causal", None)``, ``("band", r)`` (square maps: ``|i − j| ≤ r``) or
    ``("other", None)``.  ``attncheck audit`` reports these names; :func:`classify` folds them
    into the four patterns a target can declare.
    """
    lq, lk = allowed.shape
    if bool(allowed.all()):
        return "full", None
    i = torch.arange(lq)[:, None] + (lk - lq)
    j = torch.arange(lk)[None, :]
    causal = j <= i
    if torch.equal(allowed, causal):
        return "causal", None
    if torch.equal(allowed, j < i):
        return "strict-causal", None
    for s in range(1, lk):
        if torch.equal(allowed, j <= i + s):
            return f"causal shifted +{s} (sees {s} future key{'s' if s > 1 else ''})", None
    if torch.equal(allowed, j > i):
        return "inverted causal (future only)", None
    if torch.equal(allowed, j >= i):
        return "anti-causal", None
    if lq == lk:
        d = (i - j).abs()
        r = int(d[allowed].max()) if allowed.any() else -1
        if r >= 1 and torch.equal(allowed, d <= r):
            return "band", r
    if bool((allowed & ~causal).any()):
        return "other", None
    dist = (i - j).expand(lq, lk)[allowed]
    if dist.numel():
        w = int(dist.max()) + 1
        if torch.equal(allowed, causal & (i - j < w)):
            return "sliding", w
    return "other", None


def _visible_from_probe(probe: Probe, L: int) -> torch.Tensor | None:
    vis = None
    for r in probe.records:
        rows = r.rows()
        if rows is None or rows.dim() < 2 or tuple(rows.shape[-2:]) != (L, L):
            continue
        v = ((rows != 0) & ~torch.isnan(rows)).reshape(-1, L, L).any(dim=0)
        vis = v if vis is None else (vis | v)
    return vis


def _describe(p: str, w: int | None) -> str:
    return f"sliding window w={w}" if p == "sliding_window" else p


@register_check("mask-pattern",
                description="observed attention pattern (full / causal / sliding window w) "
                            "equals the declared one")
def check_mask_pattern(target: Target, ctx: RunContext) -> CheckResult:
    """Exact zero structure of the weights vs the declared pattern; reports the observed w."""
    pattern, w = declared_pattern(target)
    L = max(12, 2 * (w or 0) + 2)
    ex = ctx.example(target, B=1, L_q=L, L_k=L)
    ex = replace(ex, B=1, L_q=L, L_k=L)
    causal = pattern in ("causal", "sliding_window")
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=causal)
    source = None
    vis = None
    with torch.no_grad():
        if target.is_kernel:
            try:
                probs = target_probs_via_identity(target, inputs)
                vis = ((probs != 0) & ~torch.isnan(probs)).reshape(-1, L, L).any(dim=0)
                source = "V = identity"
            except OpaqueKernelError as exc:
                source = f"V = identity failed ({exc})"
        if vis is None:
            with Probe(max_records=64, track_matmuls=False) as probe:
                target(inputs)
            vis = _visible_from_probe(probe, L)
            if vis is not None:
                source = "probe"
    if vis is None:
        from attncheck.dynamic.checks.causality import dependency_map

        dm = dependency_map(target, ctx, ex, causal=causal)
        vis = dm.depends
        source = "perturbation dependency map"
    obs, w_obs = classify(vis)
    metrics: dict[str, Any] = {
        "declared": pattern, "declared_window": w, "observed": obs, "observed_window": w_obs,
        "L": L, "source": source, "keys_per_row": vis.sum(dim=-1).tolist(),
        "visibility": vis.to(torch.int64).tolist() if L <= 32 else None,
    }
    if pattern is None:
        return ctx.result("skip", f"no pattern declared (hints pattern= / mask_pattern= / "
                                  f"causal=); observed: {_describe(obs, w_obs)}", metrics)
    if obs == pattern and (w is None or w_obs == w):
        return ctx.result("pass", f"observed {_describe(obs, w_obs)} as declared (L={L}, "
                                  f"from {source})", metrics)
    msg = f"declared {_describe(pattern, w)}, observed {_describe(obs, w_obs)}"
    if pattern == "sliding_window" and obs == "sliding_window" and w_obs is not None:
        msg += (f": each query sees {w_obs} keys (itself and {w_obs - 1} before), not {w}"
                + (" — off by one" if abs(w_obs - w) == 1 else ""))
    elif obs == "other":
        rows = vis.sum(dim=-1).tolist()
        msg += f" (keys visible per query: {rows})"
    return ctx.result("fail", msg, metrics, example=ex)
