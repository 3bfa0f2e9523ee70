"""Check ``gradient-flow``: every parameter and every input gets a finite, non-zero gradient.

One backward of ``<out, c>`` with a random cotangent ``c`` per drawn example (L ≥ 2: with a
single key the softmax is constant and q/k gradients are legitimately 0).  A gradient is judged
by its RMS *relative to the largest RMS* among the parameters (inputs: among the inputs), not by
``grad is not None``: with a saturated softmax the q/k gradients were ~1e-15 — present but dead
(DESIGN §3).  Verdicts: ``None`` (unused in forward), non-finite, exactly zero, or relative RMS
below ``REL_TOL`` (1e-6 in fp32/fp64, 1e-3 in fp16/bf16) → fail.

Exempt: biases of the *key* projection (names like ``k_proj.bias``, ``W_k.bias``, ``key.bias``):
they add ``q·b_k`` to every logit of a row, and softmax is invariant to such shifts, so their
gradient is 0 in exact arithmetic (Vaswani et al. 2017 eq. 1; a known property of attention).
Frozen parameters (``requires_grad=False``) are not judged.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.strategies import run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult

KEY_BIAS = re.compile(r"(^|\.)(w_?k|k_?proj|key|keys|to_k|k_lin|linear_k|wk|k)\.bias$", re.I)


def _rel_tol(dtype: torch.dtype) -> float:
    return 1e-3 if dtype in (torch.float16, torch.bfloat16) else 1e-6


def _rms(g: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(g.detach(), dtype=torch.float64)) / g.numel() ** 0.5 \
        if g.numel() else 0.0


def _judge(group: str, named: list[tuple[str, torch.Tensor | None]], rel_tol: float,
           exempt: set[str]) -> tuple[str | None, dict[str, float]]:
    rms: dict[str, float] = {}
    for n, g in named:
        if n in exempt:
            continue
        if g is None:
            return f"{group} {n} gets no gradient (not used by the forward?)", {}
        if not bool(torch.isfinite(g.sum(dtype=torch.float64))) and \
                not bool(torch.isfinite(g).all()):
            return f"{group} {n} has a non-finite gradient", {}
        rms[n] = _rms(g)
    if not rms:
        return None, rms
    top = max(rms.values())
    for n, r in rms.items():
        if r == 0.0:
            return f"{group} {n} gets an exactly zero gradient", rms
        if top > 0 and r / top < rel_tol:
            return (f"{group} {n} gradient vanishes: RMS {r:.3g} is {r / top:.2g} of the largest "
                    f"({top:.3g}); e.g. a saturated softmax (missing or wrong scale)"), rms
    return None, rms


@register_check("gradient-flow", description="every parameter and input gets a finite, "
                "non-zero gradient (relative to the others)")
def check_gradient_flow(target: Target, ctx: RunContext) -> CheckResult:
    rel_tol = _rel_tol(ctx.dtype)
    mod = target.module
    params = [(n, p) for n, p in (mod.named_parameters() if mod is not None else [])
              if p.requires_grad]
    exempt = {n for n, _ in params if KEY_BIAS.search(n)}
    last: dict[str, Any] = {}

    def prop(ex: Example):
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, requires_grad=True)
        with torch.enable_grad():
            out = target(inputs)
            if not out.out.requires_grad:
                return "the output does not require grad: no gradient reaches the inputs"
            g = torch.Generator(device="cpu").manual_seed(ex.seed + 11)
            cot = torch.randn(out.out.shape, generator=g, dtype=torch.float64).to(out.out)
            leaves = [t for t in inputs.leaves()]
            grads = torch.autograd.grad(out.out, leaves + [p for _, p in params], cot,
                                        allow_unused=True)
        in_names = {3: ["q", "k", "v"], 2: ["q", "kv"]}.get(len(leaves), ["x"])
        msg, in_rms = _judge("input", list(zip(in_names, grads[:len(leaves)])), rel_tol, set())
        if msg:
            return msg, {"input_grad_rms": in_rms}
        msg, p_rms = _judge("parameter", [(n, g) for (n, _), g in
                                          zip(params, grads[len(leaves):])], rel_tol, exempt)
        if msg:
            return msg, {"param_grad_rms": p_rms}
        last.update(input_grad_rms=in_rms, min_param_rel=(
            min(p_rms.values()) / max(p_rms.values()) if p_rms and max(p_rms.values()) else None))
        return {}

    outcome = run_property(prop, target, ctx, max_examples=max(2, ctx.max_examples // 3),
                           min_l=2)
    metrics = {"examples": outcome.examples_run, "parameters": len(params),
               "rel_tol": rel_tol, "exempt": sorted(exempt)}
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    metrics.update(last)
    ex_note = f" ({len(exempt)} key bias(es) exempt: softmax shift invariance)" if exempt else ""
    return ctx.result("pass", f"{len(params)} parameter(s) and the inputs get finite, non-zero "
                      f"gradients (relative RMS ≥ {rel_tol:g}){ex_note}", metrics=metrics)
