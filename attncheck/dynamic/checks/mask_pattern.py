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
from attncheck.dynamic.checks.reference import declared_window, window_blocked
from attncheck.dynamic.opaque import OpaqueKernelError, target_probs_via_identity
from attncheck.dynamic.probe import Probe
from attncheck.dynamic.targets import Target
from attncheck.results import CheckResult

__all__ = ["check_mask_pattern", "classify", "declared_pattern"]


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
    ("sliding_window", w) or ("other", None)."""
    L = visible.shape[-1]
    vis = visible.cpu()
    if bool(vis.all()):
        return "full", None
    tri = torch.ones(L, L, dtype=torch.bool).tril(0)
    if bool((vis == tri).all()):
        return "causal", None
    if not bool((vis & ~tri).any()):
        w = int(vis.sum(dim=-1).max())
        band = tri & ~window_blocked(L, L, w)
        if bool((vis == band).all()):
            return "sliding_window", w
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
