"""Check ``finite``: no NaN / inf in outputs or gradients for finite inputs.

Two properties: (1) hypothesis-drawn sizes with N(0, 1) inputs, forward and backward (gradients
of the inputs and of the module's parameters); (2) large-magnitude inputs (entries N(0, s²),
s = 30 in fp32/fp64, 8 in fp16/bf16, i.e. logits of hundreds to thousands): a correct softmax
subtracts the row maximum and stays finite (e.g. exp(x) / sum(exp(x)) overflows past
~88.7 in fp32).  Causal targets run with their causal mask.  (3) targets with a key padding
mask (mask shape ``(B, L_k)`` / ``(B, 1, 1, L_k)``): one fully padded sample must give finite
outputs (SDPA returns 0 there; ``softmax`` over a row of ``-inf`` gives NaN) — ``warn`` for the
built-in ``nn.MultiheadAttention`` adapters and for layers whose attention the probe sees run
through ``F.multi_head_attention_forward`` (known upstream behaviour), ``fail`` otherwise.
"""
from __future__ import annotations

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.strategies import run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult


def _nonfinite(t: torch.Tensor | None) -> int:
    """Number of NaN/inf entries (one reduction when there are none: a sum is finite iff every
    term is, barring overflow, which the exact count then settles)."""
    if t is None or t.numel() == 0:
        return 0
    if bool(torch.isfinite(t.sum(dtype=torch.float64))):
        return 0
    return int((~torch.isfinite(t)).sum())


def _run(target: Target, ctx: RunContext, ex: Example, scale: float, backward: bool):
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, scale=scale,
                                requires_grad=backward)
    with torch.enable_grad() if backward else torch.no_grad():
        out = target(inputs)
        bad = _nonfinite(out.out.detach())
        if bad:
            return f"{bad} non-finite output value(s) (NaN/inf) for finite inputs (scale {scale:g})"
        if out.weights is not None and _nonfinite(out.weights.detach()):
            return f"non-finite attention weights for finite inputs (scale {scale:g})"
        if not backward or not out.out.requires_grad:
            return None
        g = torch.Generator(device="cpu").manual_seed(ex.seed + 7)
        cot = torch.randn(out.out.shape, generator=g, dtype=torch.float64).to(out.out)
        leaves = [t for t in inputs.leaves() if t.requires_grad]
        mod = target.module
        params = [(n, p) for n, p in (mod.named_parameters() if mod is not None else [])
                  if p.requires_grad]
        grads = torch.autograd.grad(out.out, leaves + [p for _, p in params], cot,
                                    allow_unused=True)
        names = ["q", "k", "v"][:len(leaves)] if len(leaves) > 1 else ["x"]
        names = names + [n for n, _ in params]
        for n, gr in zip(names, grads):
            if gr is not None and _nonfinite(gr):
                return f"non-finite gradient of {n} for finite inputs (scale {scale:g})"
    return None


@register_check("finite", description="no NaN/inf in outputs or gradients, incl. large logits")
def check_finite(target: Target, ctx: RunContext) -> CheckResult:
    big = 8.0 if ctx.dtype in (torch.float16, torch.bfloat16) else 30.0
    n_normal = max(1, ctx.max_examples // 2)
    out1 = run_property(lambda ex: _run(target, ctx, ex, 1.0, True), target, ctx,
                        max_examples=n_normal)
    if out1.failure is not None:
        return failure_result(ctx, out1.failure, metrics={"input_scale": 1.0})
    out2 = run_property(lambda ex: _run(target, ctx, ex, big, False), target, ctx,
                        max_examples=max(1, ctx.max_examples - n_normal))
    if out2.failure is not None:
        f = out2.failure
        if f.error is not None:
            return failure_result(ctx, f, metrics={"input_scale": big})
        # Magnitude is the cause only if the same example is finite at ordinary scale under the
        # same (no-grad) path; NaN there too points at a query row whose every key is masked
        # (softmax over a row of -inf is 0/0) — e.g. a mask whose polarity is inverted for its
        # consumer — or at an inference fast path that differs from the autograd path.
        ordinary = _run(target, ctx, f.example, 1.0, False)
        if ordinary is not None:
            with_grad = ("finite with gradients enabled" if _run(target, ctx, f.example, 1.0, True)
                         is None else "also with gradients enabled")
            return failure_result(
                ctx, f, ordinary + f" under torch.no_grad() ({with_grad}) — "
                "not an overflow: NaN for ordinary inputs usually means a query row with every "
                "key masked (softmax over a row of -inf is 0/0): check the mask's polarity for "
                "its consumer (nn.MultiheadAttention: True = blocked; SDPA: True = attend)",
                metrics={"input_scale": 1.0, "no_grad_only": True})
        return failure_result(ctx, f, f.message + " — large logits overflow: subtract the row "
                              "max before exp (use torch.softmax)", metrics={"input_scale": big})
    n = out1.examples_run + out2.examples_run
    metrics = {"examples": n, "large_input_scale": big}
    note = ""
    if target.accepts_mask and target.key_only_mask:
        # degenerate rows (docs/checks.md): a fully padded sample through a key padding mask — a
        # realistic input (an empty sequence in a batch).  SDPA returns 0 there, F.softmax over
        # a row of -inf returns NaN.  General (L_q, L_k) masks are not probed this way: a fully
        # masked query row there is the caller's choice.
        ex = ctx.example(target, B=2, L_q=4, L_k=4)
        keep = target.random_keep(ex, device=ctx.device)
        keep[0] = False                     # sample 0: every key padded
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep)
        from attncheck.dynamic.probe import Probe

        with torch.no_grad(), Probe(max_records=8, track_matmuls=False) as probe:
            out = target(inputs)
        # the NaN comes from nn.MultiheadAttention's own fully-masked rows when the probe saw
        # its F.multi_head_attention_forward (a user layer that forwards key_padding_mask)
        via_mha = any(r.kind == "mha" for r in probe.records)
        bad = _nonfinite(out.out)
        metrics["fully_masked_row_nonfinite"] = bad
        if bad:
            msg = (f"a fully padded sample (every key masked) gives "
                   f"{bad} NaN/inf output value(s): softmax over a row of -inf is 0/0; fill with "
                   "torch.finfo(dtype).min or zero such rows (SDPA returns 0)")
            if target.kind in ("mha", "encoder_layer") or via_mha:
                return ctx.result("warn", msg + " — known nn.MultiheadAttention behaviour "
                                  "(pytorch/pytorch#41508), not a bug in your code",
                                  metrics=metrics, example=ex)
            return ctx.result("fail", msg, metrics=metrics, example=ex)
        note = "; a fully padded sample stays finite"
    return ctx.result("pass", f"outputs and gradients finite for {n} drawn inputs "
                      f"(N(0,1) and N(0,{big:g}²)){note}", metrics=metrics)
