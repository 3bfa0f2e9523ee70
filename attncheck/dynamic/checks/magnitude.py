"""``magnitude``: masks still hide keys, and outputs stay finite, when the logits are large.

Inputs drawn from N(0, 1) give logits of a few units, where a weak mask fill (``-1e4``, ``-100``,
a ``min`` of the wrong dtype) still looks like ``-inf``: the masked key's weight is
``exp(fill − max)`` ≈ 0.  Real activations are not that tame (logits of 10³–10⁴ appear in
unnormalised, long-trained or fp16 models), and then the fill stops dominating: a masked key gets
weight, or a sentinel such as ``-1e9`` overflows a float16 tensor to ``-inf`` and a row becomes
``NaN``.  The check sweeps the logit magnitude ``M`` over ``MAGNITUDES`` (10 … 10⁵) in the check's dtype and, when that is
float32, in float16 too, up to 10⁴ (its largest finite value is 65504; the module re-cast; the
runner restores it):

- kernels: q is rescaled so that ``max |q·kᵀ| / √d = M``, with both signs (``q`` and ``−q``: a
  weak fill such as ``-1e4`` leaks in the rows whose visible logits are all far below 0); layers: the input is multiplied by
  ``√(M / m₁)`` (logits are quadratic in it; ``m₁`` the largest logit the probe saw at scale 1,
  else 1);
- the masked keys — the causal future (``causal=True``; the last key is hidden from every other
  query) and, for targets that take a mask, a key padding mask hiding the last ``⌈L/3⌉`` keys —
  are perturbed with large finite noise (keys and values for kernels, the input token for
  self-attention layers); every query row that cannot see them must be unchanged (8 ulp of the
  output magnitude) and finite.

A failure names the magnitude and dtype where it first appeared.  Not in the default suite.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._compare import exact_tol
from attncheck.dynamic.probe import MASK_THRESHOLD, Probe
from attncheck.dynamic.targets import Inputs, Target
from attncheck.results import CheckResult

__all__ = ["MAGNITUDES", "check_magnitude"]

MAGNITUDES = (1e1, 1e2, 1e3, 1e4, 1e5)
#: float16's largest finite value is 65504: its sweep stops at 1e4
_MAX_MAG = {torch.float16: 1e4, torch.bfloat16: 1e4}
_L = 6


def _applies(target: Target) -> bool | str:
    if target.causal is not True and not target.mask_arg:
        return ("nothing is masked: the sweep needs a causal target (--causal) or a mask "
                "argument")
    return True


def _keep(target: Target, ex, device) -> torch.Tensor | None:
    if not target.accepts_mask:
        return None
    keep = torch.ones(ex.B, 1, 1, ex.L_k, dtype=torch.bool, device=device)
    keep[..., ex.L_k - max(1, math.ceil(ex.L_k / 3)):] = False
    if target.mask_shape == "QK":
        return keep[0, 0].expand(ex.L_q, ex.L_k).clone()
    if target.key_only_mask:
        return keep
    return keep.expand(ex.B, 1, ex.L_q, ex.L_k).clone()


def _hidden_rows_and_keys(target: Target, inputs: Inputs) -> tuple[list[int], list[int]]:
    """(query rows, keys) such that every listed key is hidden from every listed row."""
    ex = inputs.example
    if inputs.keep is not None:
        blocked_keys = [j for j in range(ex.L_k)
                        if not bool(inputs.keep.reshape(-1, ex.L_k)[:, j].any())]
        rows = list(range(ex.L_q))
        if target.self_attention:  # perturbing token j also changes query j
            rows = [i for i in rows if i not in blocked_keys]
        return rows, blocked_keys
    # causal: the last key is hidden from every query but the last (self-attention: L_q = L_k)
    return list(range(ex.L_q - 1)), [ex.L_k - 1]


def _max_logit(target: Target, inputs: Inputs) -> float:
    with torch.no_grad(), Probe(max_records=8) as probe:
        target(inputs)
    best = 0.0
    for r in probe.records:
        if r.logits is not None:
            lg = r.logits.detach().double()
            lg = lg[torch.isfinite(lg) & (lg > MASK_THRESHOLD)]
            if lg.numel():
                best = max(best, float(lg.abs().max()))
    return best or 1.0


def _scaled(target: Target, inputs: Inputs, M: float, m1: float) -> Inputs:
    if target.is_kernel:
        d = inputs.q.shape[-1]
        lg = (inputs.q.double() @ inputs.k.double().transpose(-2, -1)) / math.sqrt(d)
        f = M / max(float(lg.abs().max()), 1e-12)   # M < 0: q negated
        return inputs.with_tensors(q=(inputs.q.double() * f).to(inputs.q.dtype))
    f = math.sqrt(abs(M) / m1)
    if target.self_attention:
        x = (inputs.q.double() * f).to(inputs.q.dtype)
        return inputs.with_tensors(q=x, k=x, v=x)
    return inputs.with_tensors(q=(inputs.q.double() * f).to(inputs.q.dtype),
                               k=(inputs.k.double() * f).to(inputs.k.dtype))


def _perturbed(target: Target, inputs: Inputs, keys: list[int], seed: int) -> Inputs:
    g = torch.Generator(device="cpu").manual_seed(seed)

    def bump(t: torch.Tensor, dim: int) -> torch.Tensor:
        t = t.clone()
        idx = torch.tensor(keys, device=t.device)
        sel = t.index_select(dim, idx)
        scale = float(t.detach().abs().max()) or 1.0
        noise = (torch.randn(*sel.shape, generator=g, dtype=torch.float64) * scale).to(t)
        return t.index_copy(dim, idx, sel + noise)

    if target.is_kernel:
        return inputs.with_tensors(k=bump(inputs.k, 2), v=bump(inputs.v, 2))
    if target.self_attention:
        x = bump(inputs.q, 1)
        return inputs.with_tensors(q=x, k=x, v=x)
    k = bump(inputs.k, 1)
    return inputs.with_tensors(k=k, v=k if inputs.v is inputs.k else bump(inputs.v, 1))


@register_check("magnitude", applies=_applies, default=False,
                description="masked keys stay hidden and outputs finite for logits up to 1e4 "
                            "(fp32 and fp16)")
def check_magnitude(target: Target, ctx: RunContext) -> CheckResult:
    dtypes = [ctx.dtype] + ([torch.float16] if ctx.dtype == torch.float32 else [])
    ex0 = target.fit_example(replace(ctx.example(target), B=2, L_q=_L, L_k=_L))
    tried: list[dict[str, Any]] = []
    m = target.module
    for dt in dtypes:
        if m is not None:
            with torch.no_grad():
                m.to(dt)
        keep = _keep(target, ex0, ctx.device)
        base = target.make_inputs(ex0, device=ctx.device, dtype=dt, keep=keep,
                                  causal=target.causal is True)
        if keep is None and target.causal is not True:
            return ctx.result("skip", "the target's mask could not be passed (no convention "
                                      f"found: {target.mask_note()}) and it is not causal")
        try:
            m1 = 1.0 if target.is_kernel else _max_logit(target, base)
        except Exception as exc:  # noqa: BLE001 - a dtype the device cannot run
            if dt != ctx.dtype and "not implemented" in str(exc).lower():
                tried.append({"dtype": str(dt)[6:], "skipped": str(exc)[:80]})
                continue
            raise
        rows, keys = _hidden_rows_and_keys(target, base)
        sweep = [(M, sg) for M in MAGNITUDES if M <= _MAX_MAG.get(dt, math.inf)
                 for sg in ((1.0, -1.0) if target.is_kernel else (1.0,))]
        for M, sg in sweep:
            ctx.check_time()
            inp = _scaled(target, base, M * sg, m1)
            with torch.no_grad():
                out = target(inp).out
                out2 = target(_perturbed(target, inp, keys, ctx.seed + int(M))).out
            qdim = 2 if target.is_kernel else 1
            a, b = out.index_select(qdim, torch.tensor(rows, device=out.device)), \
                out2.index_select(qdim, torch.tensor(rows, device=out.device))
            entry = {"dtype": str(dt)[6:], "magnitude": M * sg}
            tried.append(entry)
            what = (f"{'causally masked future key' if inputs_causal(base) else 'padded keys'}"
                    f" {keys}")
            if not bool(torch.isfinite(a).all()):
                entry["nan"] = True
                return ctx.result(
                    "fail", f"logits ~{M * sg:g} in {str(dt)[6:]}: NaN/inf output in query rows that "
                            f"see unmasked keys (an overflowing mask sentinel or fill?)",
                    {"sweep": tried, "masked": what}, example=ex0)
            d = float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
            entry["max_abs_diff"] = d
            tol = exact_tol(a)
            if d > tol:
                return ctx.result(
                    "fail", f"logits ~±{M:g} in {str(dt)[6:]}: the {what} leak into "
                            f"rows that must not see them (max |Δ|={d:.3g} > {tol:.2g}): the "
                            "mask fill is too weak for large logits — fill with -inf or "
                            "torch.finfo(dtype).min, not a fixed -1e4 / -100",
                    {"sweep": tried, "masked": what}, example=ex0)
    return ctx.result("pass", f"masked keys stay hidden and outputs finite for logits up to "
                              f"{max(MAGNITUDES):g} in "
                              f"{', '.join(sorted({e['dtype'] for e in tried}))}",
                      {"sweep": tried})


def inputs_causal(inputs: Inputs) -> bool:
    return inputs.keep is None and inputs.causal
