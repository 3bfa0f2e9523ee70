"""Check ``shapes``: output (and weights) shapes for hypothesis-drawn B, L_q, L_k, H, d.

Drawn sizes include L = 1 and, where the target allows (kernels, q/k/v layers), L_q != L_k.
Expected canonical shapes (``attncheck.dynamic.targets``): kernels ``(B, H, L_q, d_v)``, layers
``(B, L_q, E)``; returned weights ``(B, H, L_q, L_k)`` (layers also ``(B, L_q, L_k)``).
"""
from __future__ import annotations

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.strategies import run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult


@register_check("shapes", description="output / weights shapes for drawn B, L_q, L_k, H, d")
def check_shapes(target: Target, ctx: RunContext) -> CheckResult:
    seen = {"cross": False, "L1": False}

    def prop(ex: Example):
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype)
        with torch.no_grad():
            out = target(inputs)
        want = target.expected_out_shape(inputs)
        got = tuple(out.out.shape)
        if got != want:
            return (f"output shape {got}, expected {want}", {"got": list(got), "want": list(want)})
        if out.weights is not None:
            wshape = tuple(out.weights.shape)
            ok = target.expected_weights_shapes(inputs)
            free_heads = (not target.is_kernel and target.num_heads is None and len(wshape) == 4
                          and wshape[0] == ex.B and wshape[2:] == (ex.L_q, ex.L_k))
            if wshape not in ok and not free_heads:  # free_heads: the layer's own head count
                return (f"weights shape {wshape}, expected {' or '.join(map(str, ok))}",
                        {"got": list(wshape), "want": [list(s) for s in ok]})
        seen["cross"] |= ex.L_q != ex.L_k
        seen["L1"] |= min(ex.L_q, ex.L_k) == 1
        return {}

    # always try the edge cases first, then hypothesis' draws
    fixed = [ctx.example(target, B=1, L_q=1, L_k=1)]
    if target.allows_cross:
        fixed.append(ctx.example(target, B=1, L_q=3, L_k=5))
    for ex in fixed:
        r = prop(ex)
        if isinstance(r, tuple):
            return ctx.result("fail", r[0], metrics=r[1], example=ex)
    outcome = run_property(prop, target, ctx)
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure,
                              metrics={"examples": outcome.examples_run})
    n = outcome.examples_run + len(fixed)
    note = "incl. L=1" + (" and L_q != L_k" if target.allows_cross else
                          " (self-attention: L_q = L_k)")
    return ctx.result("pass", f"output shapes correct for {n} drawn sizes ({note})",
                      metrics={"examples": n, "cross_tested": target.allows_cross})
