"""``state``: a module's configuration is not changed by its own forward (train → eval → forward).

A forward must read its configuration, not write it.  Bugs of this kind show only across calls:
a layer that sets ``self.is_causal = False`` when it is given a mask, flips ``self.training``-like
flags, caches a mask built for the first sequence length in a plain attribute, scales a buffer in
place (``self.rel_bias *= ...``), or updates a parameter outside an optimiser.  The check
(modules only):

1. snapshots the *configuration* — every attribute of every submodule whose value is a bool,
   int, float, str, None or a tuple of those (``nn.Module.__dict__``, PyTorch's own flags such as
   ``training`` included), every parameter and every buffer;
2. runs one forward in eval mode (output ``out0``), one in training mode (dropout on), switches
   back to eval mode and runs the eval forward again (``out1``);
3. fails when a configuration attribute changed or appeared, a parameter changed, a buffer changed
   during an *eval* forward, or ``out1`` differs from ``out0`` (a training-mode forward left
   something behind).  Buffers changed by the training-mode forward (BatchNorm's running
   statistics) and tensors stored as plain attributes (last attention weights kept for plots)
   are reported, not judged.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import nn

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._compare import compare
from attncheck.dynamic.targets import Target
from attncheck.results import CheckResult

__all__ = ["check_state", "configuration"]

_SCALARS = (bool, int, float, str, type(None))


def _plain(v: Any) -> bool:
    if isinstance(v, _SCALARS):
        return True
    return isinstance(v, tuple) and len(v) <= 16 and all(isinstance(x, _SCALARS) for x in v)


def configuration(module: nn.Module) -> dict[str, Any]:
    """``{"<submodule>.<attr>": value}`` for every plain-valued attribute (see module doc)."""
    out: dict[str, Any] = {}
    for name, m in module.named_modules():
        for k, v in vars(m).items():
            if k.startswith("_") and k != "_is_hf_initialized":
                continue
            if _plain(v):
                out[f"{name}.{k}" if name else k] = v
    return out


def _tensors(named) -> dict[str, torch.Tensor]:
    return {n: t.detach().clone() for n, t in named if isinstance(t, torch.Tensor)}


def _changed_tensors(before: dict[str, torch.Tensor], module: nn.Module, which: str
                     ) -> list[str]:
    now = dict(module.named_parameters() if which == "parameters" else module.named_buffers())
    bad = []
    for n, t in before.items():
        cur = now.get(n)
        if cur is None or cur.shape != t.shape or not torch.equal(
                torch.nan_to_num(cur.detach(), nan=0.0), torch.nan_to_num(t, nan=0.0)):
            bad.append(n)
    return bad


def _diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    for k, v in after.items():
        if k not in before:
            out.append(f"{k} set to {v!r}")
        elif before[k] != v and not (isinstance(v, float) and v != v and before[k] != before[k]):
            out.append(f"{k}: {before[k]!r} → {v!r}")
    return out


def _applies(target: Target) -> bool | str:
    if target.module is None:
        return "a function has no state of its own (modules only)"
    return True


@register_check("state", applies=_applies, default=False,
                description="forward does not change the module's configuration "
                            "(train → eval → forward)")
def check_state(target: Target, ctx: RunContext) -> CheckResult:
    """Eval forward, training forward, eval forward: configuration, parameters, buffers and
    the eval output are unchanged."""
    m = target.module
    atol, rtol = ctx.tolerances
    ex = target.fit_example(replace(ctx.example(target), B=2, L_q=6, L_k=6))
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype,
                                causal=target.causal is True)
    m.eval()
    conf0 = configuration(m)
    params0, bufs0 = _tensors(m.named_parameters()), _tensors(m.named_buffers())
    problems: list[str] = []
    with torch.no_grad():
        out0 = target(inputs).out.detach().clone()
        changed = _diff(conf0, configuration(m))
        if changed:
            problems.append("the eval forward changed the configuration: " + "; ".join(
                changed[:4]))
        b = _changed_tensors(bufs0, m, "buffers")
        if b:
            problems.append(f"the eval forward changed buffer(s) {', '.join(b[:4])}")
        m.train()
        bufs_t = _tensors(m.named_buffers())
        target(inputs)
        train_bufs = _changed_tensors(bufs_t, m, "buffers")
        m.eval()
        conf_t = configuration(m)
        out1 = target(inputs).out.detach()
    changed = _diff(conf0, conf_t)
    if changed and not problems:
        problems.append("after a training-mode forward and eval() the configuration differs: "
                        + "; ".join(changed[:4]))
    p = _changed_tensors(params0, m, "parameters")
    if p:
        problems.append(f"forward changed parameter(s) {', '.join(p[:4])} (only an optimiser "
                        "should)")
    cmp = compare(out1, out0, atol, rtol)
    metrics: dict[str, Any] = {"configuration_attributes": len(conf0),
                               "parameters": len(params0), "buffers": len(bufs0),
                               "eval_output_max_abs_diff": cmp.max_abs,
                               "buffers_updated_in_training": train_bufs, "example": ex.as_dict()}
    if not cmp.ok:
        problems.append(f"the eval output after a training-mode forward differs from the eval "
                        f"output before it (max |Δ|={cmp.max_abs:.3g}): the training forward left "
                        "state behind")
    if problems:
        return ctx.result("fail", "; ".join(problems), metrics, example=ex)
    note = (f"; training mode updated buffer(s) {', '.join(train_bufs[:4])} (running "
            "statistics, not judged)" if train_bufs else "")
    return ctx.result("pass", f"eval → train → eval forwards leave the configuration "
                              f"({len(conf0)} attributes), {len(params0)} parameter(s) and the "
                              f"eval output unchanged{note}", metrics)
