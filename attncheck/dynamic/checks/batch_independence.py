"""``batch-independence``: a sample's output does not depend on the other samples of the batch.

For hypothesis-drawn examples (``B ≥ 2``; L_q, L_k, heads, head_dim, seed as in
:func:`~attncheck.dynamic.strategies.examples`) the check runs, with a distinct random mask per
sample when the target takes one (key padding / ``(B, 1, L_q, L_k)`` masks; key 0 always kept):

1. **perturb another sample** — the last sample's inputs, then the first sample's, get large
   finite noise (N(0, 4²)) and, with a mask, a different random mask; every other sample's
   output must stay the same (both ends, so mixing that runs only forward along the batch, as
   a causal mask over a batch axis taken for the sequence, is caught too),
   near-exactly (≤ 64 ulp × max|output|: the batch shape is unchanged, so correct code computes
   each sample bit-identically; measured Δ = 0 on every correct fixture);
2. **alone vs in a batch** — sample 0 run alone (``B = 1``) equals sample 0 of the batch within
   the dtype tolerance (fp32 atol 1e-5, rtol 1e-4).

Catches per-sample masks expanded with ``.repeat`` instead of ``repeat_interleave`` (the
``(B·H, L, L)`` mask of ``nn.MultiheadAttention`` is read at ``b·H + h``), heads merged with a
bare ``view`` (tokens of different samples mixed), batch-first / sequence-first mix-ups, and
statistics taken over the batch axis (softmax over ``dim=0``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.checks._compare import (
    NOISE_SCALE,
    Cmp,
    compare,
    exact_tol,
    noise_like,
)
from attncheck.dynamic.strategies import Fail, examples, run_property
from attncheck.dynamic.targets import Example, Inputs, Target
from attncheck.results import CheckResult

#: examples per run at most (the default suite's time budget: bench/dynamic_bench.py)
MAX_EXAMPLES = 4

__all__ = ["ULPS", "alone_vs_batched", "check_batch_independence", "other_samples_effect"]

#: near-exact tolerance of the perturbation comparison, in ulps of the output magnitude
ULPS = 64


def other_samples_effect(out: torch.Tensor, out_changed: torch.Tensor, kept: list[int],
                         changed: list[int], tol: float) -> tuple[Cmp, str | None]:
    """The batch-mixing measurement: the outputs ``(B, ...)`` of the samples ``kept`` before
    (``out``) and after (``out_changed``) the inputs of the samples ``changed`` were changed must
    agree within the absolute ``tol`` (near-exact: the batch shape is unchanged, so correct code
    computes each sample identically).  Returns the comparison and the failure message (None
    when they agree).  Shared by ``attncheck check`` and ``attncheck audit``."""
    cmp = compare(out_changed[kept], out[kept], tol, 0.0)
    if cmp.ok:
        return cmp, None
    moved = kept[cmp.worst[0]] if cmp.worst else kept[0]
    who = (f"sample {changed[0]} was" if len(changed) == 1
           else f"samples {', '.join(map(str, changed))} were")
    return cmp, (f"sample {moved}'s output changed when {who} perturbed (max Δ={cmp.max_abs:.3g}, "
                 f"B={out.shape[0]}): samples are mixed")


def alone_vs_batched(cmp: Cmp, B: int) -> str | None:
    """The failure message of sample 0 run alone (``B = 1``) against sample 0 in a batch of
    ``B``, compared by ``cmp`` (the caller's tolerance policy); None when within tolerance."""
    if cmp.ok:
        return None
    return (f"sample 0 alone (B=1) differs from sample 0 in a batch of {B} "
            f"(max |Δ|={cmp.max_abs:.3g} > atol {cmp.atol:g} + rtol {cmp.rtol:g}·|ref|)")


def _keep_for(target: Target, ex: Example, ctx: RunContext) -> torch.Tensor | None:
    if not target.accepts_mask or target.mask_shape == "QK":
        return None
    return target.random_keep(ex, device=ctx.device)


def _perturb_sample(target: Target, inputs: Inputs, gen: torch.Generator, b: int) -> Inputs:
    """Copy of ``inputs`` whose sample ``b`` has noisy tensors and (if any) a different mask."""

    def pert(t: torch.Tensor) -> torch.Tensor:
        t = t.detach().clone()
        t[b] += noise_like(t[b], gen)
        return t

    if target.self_attention:
        x = pert(inputs.q)
        new = replace(inputs, q=x, k=x, v=x)
    else:
        k = pert(inputs.k)
        new = replace(inputs, q=pert(inputs.q), k=k, v=k if inputs.k is inputs.v else pert(inputs.v))
    if inputs.keep is not None and inputs.keep.shape[0] == inputs.example.B:
        keep = inputs.keep.clone()
        flip = torch.rand(keep[b].shape, generator=gen) < 0.5
        keep[b] = keep[b] ^ flip.to(keep.device)
        keep[b][..., 0] = True
        new = replace(new, keep=keep)
    return new


@register_check("batch-independence",
                description="a sample's output does not depend on the other samples")
def check_batch_independence(target: Target, ctx: RunContext) -> CheckResult:
    """Perturb the last, then the first sample (inputs and mask), compare the others; sample 0
    alone vs batched."""
    atol, rtol = ctx.tolerances
    worst = {"perturb": 0.0, "alone": 0.0}
    gen = ctx.generator

    def prop(ex: Example) -> Any:
        keep = _keep_for(target, ex, ctx)
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep)
        with torch.no_grad():
            out = target(inputs).out
            if out.shape[0] != ex.B:
                raise Fail(f"output batch axis has {out.shape[0]} entries for B={ex.B}")
            for b in (ex.B - 1, 0):
                out2 = target(_perturb_sample(target, inputs, gen, b)).out
                others = [i for i in range(ex.B) if i != b]
                cmp, why = other_samples_effect(out, out2, others, [b],
                                                exact_tol(out[others], ULPS))
                worst["perturb"] = max(worst["perturb"], cmp.max_abs)
                if why:
                    raise Fail(why
                               + (" (a per-sample mask expanded in the wrong batch/head order?)"
                                  if keep is not None else
                                  " (is the sequence axis where the target expects it? "
                                  "batch_first?)"))
            one_ex = replace(ex, B=1)
            one = Inputs(one_ex, inputs.q[:1], inputs.k[:1], inputs.v[:1],
                         keep=None if keep is None else keep[:1], causal=inputs.causal)
            alone = target(one).out
            cmp1 = compare(out[:1], alone, atol, rtol)
            worst["alone"] = max(worst["alone"], cmp1.max_abs)
            why = alone_vs_batched(cmp1, ex.B)
            if why:
                raise Fail(why)
        return {"masked": keep is not None}

    strat = examples(target, max_b=3, max_l=8).map(lambda e: replace(e, B=max(2, e.B)))
    outcome = run_property(prop, target, ctx, strategy=strat,
                           max_examples=min(ctx.max_examples, MAX_EXAMPLES))
    metrics = {"examples": outcome.examples_run, "noise_std": NOISE_SCALE,
               "perturb_max_delta": worst["perturb"], "alone_max_diff": worst["alone"],
               "ulps": ULPS}
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    masked = bool(outcome.data.get("masked"))
    return ctx.result("pass", f"{outcome.examples_run} examples: perturbing one sample"
                              + (" (inputs and mask)" if masked else "")
                              + f" leaves the others unchanged (max Δ={worst['perturb']:.3g}); "
                              f"a sample alone matches the batch (max |Δ|={worst['alone']:.3g})",
                      metrics)
