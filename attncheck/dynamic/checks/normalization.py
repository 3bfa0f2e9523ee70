"""Check ``normalization``: attention weights are ≥ 0, rows sum to 1, masked keys get exactly 0.

Where the weights come from, for each drawn example (all available sources are judged):

1. the weights the target returns (``(out, weights)``);
2. the probe (:class:`attncheck.dynamic.probe.Probe`): every softmax / SDPA / MHA record whose
   key axis has L_k entries — the axis the weights·v product sums over, else the one q·kᵀ puts
   the keys on, else the last — so a softmax over another axis shows up as rows that do not
   sum to 1;
3. kernels: V = identity ``(L_k × L_k)`` (docs/checks.md): the output of a kernel linear in v is then
   its effective attention matrix ``(B, H, L_q, L_k)`` — this also sees opaque (fused, compiled)
   kernels and masks applied after the softmax.

Masked keys: the causal triangle for causal targets (``Target.causal``) and, when the target takes
a mask (in its convention: the ``mask_convention`` hint, else detected empirically once per target
— :mod:`attncheck.dynamic.maskconv`; reported as metrics ``mask_convention`` /
``mask_convention_source``; when no convention works, masks are not passed and the result is
``warn`` with the reason), a random keep-mask (key 0 always kept, so no row is fully masked);
their weights must be exactly 0 (``exp(-inf) = 0``; a -1e9 fill underflows to exactly 0 as well).

A query with no visible key (bottom-right causal alignment with L_q > L_k; a fully masked row)
has no distribution to normalise: its row is not required to sum to 1 (SDPA / flash-attention
return 0 there); the ``finite`` check still reports NaN.

Tolerance on row sums (dtype): fp64 1e-10, fp32 1e-4, fp16 1e-2, bf16 2e-2.  Weights must be
≥ -tol.  A layer whose weights cannot be observed (no returned weights, nothing captured) is
reported as ``skip`` with the reason ("not observable"), never as a pass.

Modules run in eval mode (dropout off).  In training mode (``train=True``) dropout on the weights
zeroes entries and rescales the survivors by 1/(1-p) (``nn.Dropout`` docs), so rows sum to 1 only
in expectation: the check then reports ``warn`` and says so.
"""
from __future__ import annotations

from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import dropout_modules, failure_result, weight_sources
from attncheck.dynamic.strategies import Fail, run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult

SUM_TOL = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def _probe():
    try:
        from attncheck.dynamic.probe import Probe
    except ImportError:  # pragma: no cover - probe not installed
        return None
    return Probe


def row_sum_error(w: torch.Tensor, exempt: torch.Tensor | None = None) -> float:
    """The normalization measurement: max |Σ_k w − 1| over the rows of attention weights ``w``
    ``(..., L_k)`` (in float64), leaving out the rows where ``exempt`` (bool, shaped like
    ``w.sum(-1)``: rows with no key to normalise over, NaN rows) is True; 0.0 when no row is
    left.  Shared by ``attncheck check`` and ``attncheck audit``."""
    sums = w.detach().double().sum(-1)
    if exempt is not None:
        sums = sums[~exempt.to(sums.device)]
    return float((sums - 1).abs().max()) if sums.numel() else 0.0


def _judge(name: str, w: torch.Tensor, blocked: torch.Tensor | None, tol: float,
           ex: Example) -> tuple[str | None, dict[str, Any]]:
    w = w.detach().double()
    m: dict[str, Any] = {}
    if w.numel() == 0:
        return None, m
    if torch.isnan(w).any():
        return f"{name} weights contain NaN", {"nan": int(torch.isnan(w).sum())}
    mn = float(w.min())
    sums = w.sum(-1)
    empty = _empty_rows(blocked, w, ex)
    if empty is not None and bool(empty.any()):
        # a query with no visible key (bottom-right alignment with L_q > L_k, a fully padded
        # row): there is no distribution to normalise; SDPA and flash-attention return 0
        # (weights all 0), HF eager attention a uniform row — both accepted, the row is not
        # required to sum to 1
        m["empty_rows"] = int(empty.sum())
        sums = torch.where(empty, torch.ones_like(sums), sums)
    err = row_sum_error(w, empty)
    m.update(min_weight=mn, max_row_sum_error=err)
    if mn < -tol:
        return f"{name} weights negative (min {mn:.3g})", m
    if err > tol:
        worst = sums.flatten()[(sums - 1).abs().flatten().argmax()]
        return (f"{name} rows do not sum to 1 over the keys: a row sums to {float(worst):.3g} "
                f"(|sum-1| max {err:.3g} > tol {tol:g})"), m
    if blocked is not None and w.dim() >= 2 and tuple(w.shape[-2:]) == (ex.L_q, ex.L_k):
        b = blocked
        try:
            if b.dim() == 4 and w.dim() != 4:
                b = b if b.shape[0] == 1 and b.shape[1] == 1 else None
                b = None if b is None else b[0, 0]
            if b is not None:
                bb = torch.broadcast_to(b, w.shape)
                leak = float(w.masked_select(bb).abs().max()) if bb.any() else 0.0
                m["max_masked_weight"] = leak
                if leak != 0.0:
                    return (f"{name} weights on masked keys are not 0 (max {leak:.3g})"), m
        except RuntimeError:
            pass
    return None, m


def _empty_rows(blocked: torch.Tensor | None, w: torch.Tensor, ex: Example
                ) -> torch.Tensor | None:
    """Bool, shaped like ``w.sum(-1)``: rows whose keys are all blocked; None if unknown."""
    if blocked is None or w.dim() < 2 or tuple(w.shape[-2:]) != (ex.L_q, ex.L_k):
        return None
    b = blocked
    if b.dim() == 4 and w.dim() != 4:
        if b.shape[0] != 1 or b.shape[1] != 1:
            return None
        b = b[0, 0]
    try:
        return torch.broadcast_to(b.to(w.device), w.shape).all(dim=-1)
    except RuntimeError:
        return None


@register_check("normalization", description="weights ≥ 0, rows sum to 1, masked keys exactly 0")
def check_normalization(target: Target, ctx: RunContext) -> CheckResult:
    tol = SUM_TOL.get(ctx.dtype, 1e-4)
    Probe = _probe()
    info: dict[str, Any] = {"sources": set(), "not_observable": set(), "masked": False,
                            "max_row_sum_error": 0.0}

    def prop(ex: Example):
        keep = target.random_keep(ex, device=ctx.device) if target.accepts_mask else None
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep)
        blocked = target.blocked(inputs)
        info["masked"] |= blocked is not None
        records = None
        with torch.no_grad():
            if Probe is not None:
                with Probe() as p:
                    out = target(inputs)
                records = p.records
                info["not_observable"].update(p.not_observable)
            else:
                out = target(inputs)
            srcs = weight_sources(target, inputs, out, records)
            if target.is_kernel:
                vi = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep,
                                        v_identity=True)
                try:
                    srcs.append(("V=identity", target(vi).out))
                except Exception as exc:  # a kernel that needs d_v == d: source unavailable
                    info["not_observable"].add(f"V=identity ({type(exc).__name__})")
        for name, w in srcs:
            info["sources"].add(name.split("#")[0])
            msg, m = _judge(name, w, blocked, tol, ex)
            info["max_row_sum_error"] = max(info["max_row_sum_error"],
                                            m.get("max_row_sum_error", 0.0))
            if msg:
                raise _fail(msg, m)
        return {}

    outcome = run_property(prop, target, ctx)
    dropout = dropout_modules(target.module)
    metrics = {"examples": outcome.examples_run, "sources": sorted(info["sources"]),
               "masked_keys_tested": info["masked"], "tolerance": tol,
               "max_row_sum_error": info["max_row_sum_error"],
               "mode": "train" if ctx.train else "eval", **target.mask_metrics()}
    if outcome.failure is not None:
        f = outcome.failure
        if ctx.train and dropout and f.error is None:
            ps = ", ".join(f"{n} p={p:g}" for n, p in dropout)
            return ctx.result(
                "warn", f"{f.message} — expected in training mode: dropout ({ps}) zeroes weights "
                "and rescales the survivors by 1/(1-p), so rows sum to 1 only in expectation; "
                "in eval mode (the default) they must sum to 1",
                metrics=dict(metrics, **f.data, dropout=[list(x) for x in dropout]),
                example=f.example)
        return failure_result(ctx, f, metrics=metrics)
    if not info["sources"]:
        why = ", ".join(sorted(info["not_observable"])) or "no softmax/SDPA call seen"
        return ctx.result("skip", f"not observable: the target returns no weights and the probe "
                          f"captured none ({why})", metrics=metrics)
    mode = ("training mode" if ctx.train else
            "eval mode: dropout off" if dropout else "eval mode")
    masked = ", masked keys exactly 0" if info["masked"] else ""
    note = target.mask_note()
    if note:
        masked += f" ({note})" if target.accepts_mask else ""
    status = "pass"
    if target.mask_arg and not target.accepts_mask:
        # the target takes a mask but no convention hid a blocked key: masked keys untested
        status = "warn"
        masked += f"; masked keys not tested — {note}"
    return ctx.result(status, f"weights ≥ 0 and rows sum to 1 (|err| ≤ "
                      f"{info['max_row_sum_error']:.2g}){masked}; sources: "
                      f"{', '.join(sorted(info['sources']))} ({mode})", metrics=metrics)


def _fail(msg: str, data: dict[str, Any]) -> Fail:
    e = Fail(msg)
    e.data = data  # type: ignore[attr-defined]
    return e
