"""Check ``determinism``: in eval mode two forwards on the same inputs are bit-identical.

Catches dropout left active at inference (``F.dropout`` without ``training=self.training``, SDPA
``dropout_p`` not gated by ``self.training``) and other hidden randomness.  NaN compares equal
to NaN at the same position.  In training mode (``train=True``) the check is skipped.
"""
from __future__ import annotations

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import bit_equal, failure_result, max_abs_diff
from attncheck.dynamic.strategies import run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult


@register_check("determinism", description="eval mode: two forwards are bit-identical")
def check_determinism(target: Target, ctx: RunContext) -> CheckResult:
    if ctx.train:
        return ctx.result("skip", "training mode: dropout makes forwards differ by design")

    def prop(ex: Example):
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype)
        with torch.no_grad():
            a = target(inputs)
            b = target(inputs)
        if not bit_equal(a.out, b.out):
            d = max_abs_diff(a.out, b.out)
            return (f"two eval-mode forwards differ (max |Δ| = {d:.3g}): randomness at "
                    "inference, e.g. dropout not gated by self.training",
                    {"max_abs_diff": d})
        wa, wb = a.weights, b.weights
        if wa is not None and wb is not None and not bit_equal(wa, wb):
            d = max_abs_diff(a.weights, b.weights)
            return (f"returned weights differ between two eval-mode forwards (max |Δ| = {d:.3g})",
                    {"max_abs_diff": d})
        return {}

    outcome = run_property(prop, target, ctx, max_examples=max(2, ctx.max_examples // 2))
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure)
    return ctx.result("pass", f"eval mode: repeated forwards bit-identical on "
                      f"{outcome.examples_run} drawn inputs",
                      metrics={"examples": outcome.examples_run, "max_abs_diff": 0.0})
