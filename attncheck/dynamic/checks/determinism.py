"""Check ``determinism``: in eval mode two forwards on the same inputs are bit-identical.

Catches dropout left active at inference (``F.dropout`` without ``training=self.training``, SDPA
``dropout_p`` not gated by ``self.training``) and other hidden randomness.  NaN compares equal
to NaN at the same position.  In training mode (``train=True``) the check is skipped.

When the forwards differ, the failure names the cause it can see: a forward that writes in
place into its inputs or the module's parameters (the tensors' version counters, which every
in-place operation bumps, differ after the first call) rather than randomness; a buffer
written in place (a cache, a counter) is named next to randomness, since a cache rewritten
with the same values changes nothing.
"""
from __future__ import annotations

from typing import Any

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
        watched = _watched_tensors(target, inputs)
        versions = [t._version for _, t in watched]
        with torch.no_grad():
            a = target(inputs)
            written = [name for (name, t), v in zip(watched, versions) if t._version != v]
            b = target(inputs)
        if not bit_equal(a.out, b.out):
            d = max_abs_diff(a.out, b.out)
            randomness = "randomness at inference, e.g. dropout not gated by self.training"
            # inputs and parameters written by an eval forward are a bug in themselves; a
            # buffer may be a cache rewritten with the same values, so it is only a suspect
            blamed = [w for w in written if not w.startswith("buffer ")]
            if written:
                names = blamed or written
                shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
                why = (f"the forward writes in place into {shown}, so the second call sees "
                       "other values (modify a copy, or keep state out of forward)" if blamed
                       else f"the forward writes in place into {shown} (state kept between "
                            f"calls), or {randomness}")
                return (f"two eval-mode forwards differ (max |Δ| = {d:.3g}): {why}",
                        {"max_abs_diff": d, "written_in_place": written})
            return (f"two eval-mode forwards differ (max |Δ| = {d:.3g}): {randomness}",
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


def _watched_tensors(target: Target, inputs: Any) -> list[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` for the call's inputs (``input q``, ...; one for self-attention) and
    the module's parameters and buffers (``parameter W_q.weight``, ``buffer cache``)."""
    out: list[tuple[str, torch.Tensor]] = []
    for name in ("q", "k", "v"):
        t = getattr(inputs, name)
        if not any(t is o for _, o in out):
            out.append((f"input {name}", t))
    module = target.module
    if module is not None:
        out += [(f"parameter {n}", p) for n, p in module.named_parameters()]
        out += [(f"buffer {n}", b) for n, b in module.named_buffers()]
    return out
