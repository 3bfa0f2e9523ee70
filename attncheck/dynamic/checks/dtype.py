"""``dtype``: float16 and bfloat16 runs stay finite and mask fills do not overflow.

The target runs once in float32 and then in ``torch.float16`` and ``torch.bfloat16`` (module
parameters and inputs cast; the runner restores the module afterwards) on the check's device —
CPU, or CUDA when present (``--device cuda`` / ``auto``).  For each dtype (``B = 2``, ``L = 8``,
the declared causal flag, a random mask when the target takes one):

- an exception whose message says the value "cannot be converted ... without overflow" (e.g.
  ``masked_fill(-1e9)`` in float16, whose largest finite value is 65504) **fails**: a mask fill
  that overflows the dtype; other exceptions fail with the reason, except "not implemented for
  'Half'"-style errors, which mean the device lacks the op: that dtype is skipped (reported);
- NaN / inf in the output **fails** (a fill that became ``-inf`` on a fully masked row, an
  overflowing q·kᵀ);
- not in the default suite (two extra full forwards with the module re-cast): run it with
  ``--checks dtype``;
- the relative error against the float32 output, ``max|out − out32| / max|out32|``, is reported
  and **warns** above ``WARN_REL`` (5e-2 fp16, 1e-1 bf16: ~50× the dtype's eps of 9.8e-4 /
  7.8e-3 — a correct layer stays well below).
"""
from __future__ import annotations

from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.targets import Target
from attncheck.results import CheckResult

__all__ = ["LOW_DTYPES", "WARN_REL", "check_dtype"]

LOW_DTYPES = (torch.float16, torch.bfloat16)
WARN_REL = {torch.float16: 5e-2, torch.bfloat16: 1e-1}


def _name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def _run(target: Target, ctx: RunContext, dt: torch.dtype, keep: torch.Tensor | None):
    ex = ctx.example(target)
    m = target.module
    if m is not None:
        with torch.no_grad():
            m.to(dt)
    inputs = target.make_inputs(ex, device=ctx.device, dtype=dt, keep=keep)
    with torch.no_grad():
        return target(inputs).out


@register_check("dtype", default=False,
                description="fp16 / bf16 runs stay finite; mask fills do not overflow")
def check_dtype(target: Target, ctx: RunContext) -> CheckResult:
    """float16 / bfloat16 forward: no overflow on mask fills, finite outputs."""
    ex = ctx.example(target)
    keep = target.random_keep(ex, device=ctx.device) if (
        target.accepts_mask and target.mask_shape != "QK") else None
    ref = _run(target, ctx, torch.float32, keep).double()
    mag = float(ref.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if ref.numel() else 0.0
    per: dict[str, Any] = {}
    fails: list[str] = []
    warns: list[str] = []
    skipped: list[str] = []
    for dt in LOW_DTYPES:
        ctx.check_time()
        n = _name(dt)
        try:
            out = _run(target, ctx, dt, keep)
        except Exception as exc:  # noqa: BLE001 - classified below
            msg = str(exc)
            if "overflow" in msg:
                per[n] = {"status": "overflow", "error": msg[:200]}
                fails.append(f"{n}: mask fill overflows the dtype ({msg.strip()[:120]}); use "
                             "torch.finfo(scores.dtype).min or -inf")
            elif "not implemented for" in msg or "Unsupported" in msg:
                per[n] = {"status": "unsupported", "error": msg[:200]}
                skipped.append(f"{n} not supported on {ctx.device.type} ({msg.strip()[:80]})")
            else:
                per[n] = {"status": "raised", "error": f"{type(exc).__name__}: {msg[:200]}"}
                fails.append(f"{n}: the target raised {type(exc).__name__}: {msg.strip()[:120]}")
            continue
        finite = bool(torch.isfinite(out).all())
        rel = float((out.double() - ref).abs().nan_to_num(nan=float("inf")).max()) / max(mag, 1e-30)
        per[n] = {"status": "ok" if finite else "nonfinite", "finite": finite,
                  "rel_err_vs_fp32": rel if finite else "inf",
                  "n_nonfinite": int((~torch.isfinite(out)).sum())}
        if not finite:
            fails.append(f"{n}: {per[n]['n_nonfinite']} NaN/inf outputs for finite inputs (a "
                         "mask fill or q·kᵀ overflowing the dtype?)")
        elif rel > WARN_REL[dt]:
            warns.append(f"{n}: relative error vs float32 {rel:.3g} > {WARN_REL[dt]:g}")
    metrics = {"device": ctx.device.type, "dtypes": per, "masked": keep is not None}
    if fails:
        return ctx.result("fail", "; ".join(fails + skipped), metrics, example=ex)
    if len(skipped) == len(LOW_DTYPES):
        return ctx.result("skip", "; ".join(skipped), metrics)
    tested = [n for n, v in per.items() if v["status"] == "ok"]
    msg = ", ".join(f"{n} finite (rel. err {per[n]['rel_err_vs_fp32']:.2g})" for n in tested)
    if skipped:
        msg += "; " + "; ".join(skipped)
    if warns:
        return ctx.result("warn", "; ".join(warns) + "; " + msg, metrics)
    return ctx.result("pass", msg + f" on {ctx.device.type}", metrics)
