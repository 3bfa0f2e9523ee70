"""Check ``gradient-flow``: every parameter and every input gets a finite, non-zero gradient.

One backward of ``<out, c>`` with a random cotangent ``c`` per drawn example (L ≥ 2: with a
single key the softmax is constant and q/k gradients are legitimately 0).  A gradient is judged
by its RMS *relative to the largest RMS* among the parameters (inputs: among the inputs), not by
``grad is not None``: with a saturated softmax the q/k gradients were ~1e-15 — present but dead
(docs/checks.md).  Verdicts: ``None`` (unused in forward), non-finite, exactly zero, or relative RMS
below ``REL_TOL`` (1e-6 in fp32/fp64, 1e-3 in fp16/bf16) → fail.

Exempt after a test: a parameter or input whose gradient is zero (or vanishes) is perturbed
*strongly* (parameters: additive N(0, 1) noise times max(1, 3 × their RMS); inputs:
``x·exp(z)``, z ~ N(0, 1), which keeps every sign) and the forward repeated; when the output does
not change (max |Δ| within the dtype's tolerance), the zero gradient is exact mathematics, not a
broken graph (a saturated softmax, whose gradient is only *locally* ~0, changes its output under
such a perturbation and still fails): e.g. the bias of a key projection adds ``q·b_k`` to every logit of a row and softmax
is invariant to such shifts (Vaswani et al. 2017 eq. 1), and qk-norm with head_dim 1 maps q to
its sign.  These are reported in ``no_effect``.  A zero gradient on something that *does* change
the output (a ``detach()``, an in-place overwrite) still fails.
Frozen parameters (``requires_grad=False``) are not judged.
"""
from __future__ import annotations

from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.checks._compare import noise_like
from attncheck.dynamic.strategies import run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult

def noise(t: torch.Tensor, seed: int) -> torch.Tensor:
    """N(0, 1) noise shaped like ``t`` from a CPU generator seeded with ``seed``."""
    return noise_like(t.detach(), torch.Generator(device="cpu").manual_seed(seed), 1.0)


def _rel_tol(dtype: torch.dtype) -> float:
    return 1e-3 if dtype in (torch.float16, torch.bfloat16) else 1e-6


def _rms(g: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(g.detach(), dtype=torch.float64)) / g.numel() ** 0.5 \
        if g.numel() else 0.0


def _suspects(named: list[tuple[str, torch.Tensor | None]], rel_tol: float) -> list[str]:
    """Names whose gradient is present and finite but zero or vanishing (relative RMS)."""
    rms = {n: _rms(g) for n, g in named
           if g is not None and bool(torch.isfinite(g).all())}
    top = max(rms.values(), default=0.0)
    return [n for n, r in rms.items() if r == 0.0 or (top > 0 and r / top < rel_tol)]


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
    exempt: set[str] = set()
    no_effect: dict[str, float] = {}
    last: dict[str, Any] = {}
    atol, rtol = ctx.tolerances

    def unchanged(inputs, base: torch.Tensor, tweak) -> float | None:
        """max |Δ| of the output after ``tweak()`` (it returns an undo callable), or None
        when the output changed beyond the dtype's tolerance."""
        with torch.no_grad():
            undo, inp = tweak()
            try:
                out2 = target(inp).out
            finally:
                undo()
        d = float((out2.double() - base.double()).abs().max()) if out2.numel() else 0.0
        bound = atol + rtol * float(base.double().abs().max()) if base.numel() else atol
        return d if d <= bound else None

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
        in_named = list(zip(in_names, grads[:len(leaves)]))
        p_named = [(n, g) for (n, _), g in zip(params, grads[len(leaves):])]
        base = out.out.detach()
        in_exempt: set[str] = set()
        for n in _suspects(in_named, rel_tol):
            i = in_names.index(n)

            def tweak_input(i=i):
                z = noise(leaves[i], ex.seed + 23)
                new = [t.detach() for t in leaves]
                new[i] = new[i] * torch.exp(z)
                if len(new) == 1:
                    inp = inputs.with_tensors(q=new[0], k=new[0], v=new[0])
                elif len(new) == 2:
                    inp = inputs.with_tensors(q=new[0], k=new[1], v=new[1])
                else:
                    inp = inputs.with_tensors(q=new[0], k=new[1], v=new[2])
                return (lambda: None), inp

            d = unchanged(inputs, base, tweak_input)
            if d is not None:
                in_exempt.add(n)
                no_effect[f"input {n}"] = d
        for n in _suspects(p_named, rel_tol):
            if n in exempt:
                continue
            p = dict(params)[n]

            def tweak_param(p=p):
                old = p.detach().clone()
                with torch.no_grad():
                    p.add_(noise(p, ex.seed + 29) * max(1.0, 3.0 * _rms(old)))

                def undo():
                    with torch.no_grad():
                        p.copy_(old)
                return undo, inputs

            d = unchanged(inputs, base, tweak_param)
            if d is not None:
                exempt.add(n)
                no_effect[n] = d
        msg, in_rms = _judge("input", in_named, rel_tol, in_exempt)
        if msg:
            return msg, {"input_grad_rms": in_rms}
        msg, p_rms = _judge("parameter", p_named, rel_tol, exempt)
        if msg:
            return msg, {"param_grad_rms": p_rms}
        last.update(input_grad_rms=in_rms, min_param_rel=(
            min(p_rms.values()) / max(p_rms.values()) if p_rms and max(p_rms.values()) else None))
        return {}

    outcome = run_property(prop, target, ctx, max_examples=max(2, ctx.max_examples // 3),
                           min_l=2)
    metrics = {"examples": outcome.examples_run, "parameters": len(params),
               "rel_tol": rel_tol, "exempt": sorted(exempt), "no_effect": no_effect}
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    metrics.update(last)
    ex_note = (f" ({', '.join(sorted(no_effect))}: zero gradient and no effect on the output "
               "— exact, e.g. softmax shift invariance of a key bias)" if no_effect else "")
    return ctx.result("pass", f"{len(params)} parameter(s) and the inputs get finite, non-zero "
                      f"gradients (relative RMS ≥ {rel_tol:g}){ex_note}", metrics=metrics)
