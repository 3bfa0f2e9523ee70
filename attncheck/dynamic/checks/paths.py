"""``paths``: two code paths of one target compute the same attention.

Attention modules often carry two implementations behind a switch — a fused kernel and a manual
one (``F.scaled_dot_product_attention`` vs ``softmax(q·kᵀ)·v``), transformers'
``config._attn_implementation`` ``"eager"`` vs ``"sdpa"``, a ``use_flash`` argument — and only one
of them is exercised by most tests.  transformers checks its own pairs the same way (eager vs SDPA
within fp32 1e-6 / 1e-4, ``test_modeling_common``).  The switch is declared with the ``paths``
hint:

- ``paths={"arg": NAME, "values": [A, B]}``: a keyword argument of the call (``f(..., NAME=A)``);
- ``paths={"attr": "a.b.c", "values": [A, B]}``: an attribute of the module (dotted path, e.g.
  ``config._attn_implementation`` with ``["eager", "sdpa"]``), set before each call and restored.

For hypothesis-drawn examples (with the target's causal flag and, on every other example, a
random mask when it takes one) both paths run on the same inputs; their outputs must agree
within the dtype tolerance (fp32 atol 1e-5, rtol 1e-4).  A failure names the two
values, the example and the largest difference.  Not in the default suite.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.checks._compare import compare, hint
from attncheck.dynamic.strategies import Fail, run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult

__all__ = ["check_paths", "paths_convention"]


def paths_convention(target: Target) -> dict[str, Any] | None:
    """The ``paths`` hint as ``{"arg" | "attr": name, "values": [A, B]}``, or None."""
    p = hint(target, "paths")
    if not isinstance(p, dict) or not (p.get("arg") or p.get("attr")):
        return None
    vals = p.get("values", [True, False])
    if not isinstance(vals, (list, tuple)) or len(vals) != 2:
        return None
    return {**p, "values": list(vals)}


def _applies(target: Target) -> bool | str:
    conv = paths_convention(target)
    if conv is None:
        return ("no second code path declared (hint paths={'arg': NAME, 'values': [A, B]} or "
                "{'attr': 'config._attn_implementation', 'values': ['eager', 'sdpa']})")
    if conv.get("attr") and target.module is None:
        return "paths={'attr': ...} needs a module target"
    return True


def _resolve(obj: Any, dotted: str) -> tuple[Any, str]:
    parts = dotted.split(".")
    for p in parts[:-1]:
        obj = getattr(obj, p)
    return obj, parts[-1]


def _run_path(target: Target, conv: dict[str, Any], value: Any, inputs) -> torch.Tensor:
    if conv.get("arg"):
        return replace(target, obj=partial(target.obj, **{conv["arg"]: value}))(inputs).out
    owner, name = _resolve(target.module, conv["attr"])
    missing = object()
    old = getattr(owner, name, missing)
    setattr(owner, name, value)
    try:
        return target(inputs).out
    finally:
        if old is missing:
            delattr(owner, name)
        else:
            setattr(owner, name, old)


@register_check("paths", applies=_applies, default=False,
                description="two code paths of one target (a flag, argument or backend switch) "
                            "agree")
def check_paths(target: Target, ctx: RunContext) -> CheckResult:
    conv = paths_convention(target)
    a, b = conv["values"]
    switch = f"{'argument' if conv.get('arg') else 'attribute'} " \
             f"{conv.get('arg') or conv.get('attr')}"
    atol, rtol = ctx.tolerances
    worst = {"max_abs_diff": 0.0}

    def prop(ex: Example) -> Any:
        keep = target.random_keep(ex, device=ctx.device) if (
            target.accepts_mask and ex.seed % 2 == 1) else None
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep)
        with torch.no_grad():
            oa = _run_path(target, conv, a, inputs)
            ob = _run_path(target, conv, b, inputs)
        if tuple(oa.shape) != tuple(ob.shape):
            raise Fail(f"{switch}={a!r} returns shape {tuple(oa.shape)}, {b!r} "
                       f"{tuple(ob.shape)}")
        cmp = compare(ob, oa, atol, rtol)
        worst["max_abs_diff"] = max(worst["max_abs_diff"], cmp.max_abs)
        if not cmp.ok:
            err = Fail(f"the two code paths disagree: {switch}={a!r} vs {b!r} differ by max "
                       f"|Δ|={cmp.max_abs:.3g} (atol {atol:g}, rtol {rtol:g})"
                       + (" with a mask" if keep is not None else "")
                       + (", causal" if inputs.causal else ""))
            err.data = {"fail_max_abs_diff": cmp.max_abs, "masked": keep is not None}
            raise err
        return {}

    outcome = run_property(prop, target, ctx)
    metrics = {"switch": switch, "values": [a, b], "examples": outcome.examples_run,
               "max_abs_diff": worst["max_abs_diff"], "atol": atol, "rtol": rtol}
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    return ctx.result("pass", f"{outcome.examples_run} examples: {switch}={a!r} and {b!r} agree "
                              f"(max |Δ|={worst['max_abs_diff']:.3g})", metrics)
