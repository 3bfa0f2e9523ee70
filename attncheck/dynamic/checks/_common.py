"""Helpers shared by the framework's checks (not a check module)."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attncheck.dynamic.targets import Inputs, Output, Target


def bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical comparison that treats NaN == NaN (same positions) as equal."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    na, nb = torch.isnan(a), torch.isnan(b)
    return bool(torch.equal(na, nb) and torch.equal(a[~na], b[~nb]))


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| in float64; NaN if either has NaN where the other does not (never skipped)."""
    d = (a.double() - b.double()).abs()
    both_nan = torch.isnan(a) & torch.isnan(b)
    d = d.masked_fill(both_nan, 0.0)
    if torch.isnan(d).any():
        return float("nan")
    return float(d.max()) if d.numel() else 0.0


def dropout_modules(module: nn.Module | None) -> list[tuple[str, float]]:
    """(name, p) of dropout submodules with p > 0, plus float attributes named like dropout
    (``attn_dropout``, ``dropout_p``, ``dropout``) > 0 — functional dropout."""
    if module is None:
        return []
    out = []
    for name, m in module.named_modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            out.append((name or "(root)", float(m.p)))
        for attr in ("dropout", "dropout_p", "attn_dropout", "attn_pdrop", "attention_dropout"):
            v = m.__dict__.get(attr)
            if isinstance(v, float) and v > 0:
                out.append((f"{name + '.' if name else ''}{attr}", v))
    return out


def weight_sources(target: Target, inputs: Inputs, out: Output,
                   probe_records: list[Any] | None) -> list[tuple[str, torch.Tensor]]:
    """Attention-weight tensors ``(..., L_q, L_k)`` to judge, with their source names:
    ``"returned"`` weights, ``"probe:<op>#i"`` softmax / SDPA / MHA records whose key axis has
    L_k entries, with the query and key axes moved last (the key axis is the one the q·kᵀ product puts the keys on —
    :attr:`AttentionRecord.key_axis`, e.g. axis 2 of ``einsum("bihd,bjhd->bijh")`` — else the
    last one, so a softmax over the wrong axis shows up as rows that do not sum to 1)."""
    ex = inputs.example
    srcs: list[tuple[str, torch.Tensor]] = []
    if out.weights is not None:
        srcs.append(("returned", out.weights.detach()))
    for r in probe_records or []:
        p = r.probs
        if p is None or p.dim() < 2:
            continue
        p = r.canonical(p)
        if p.shape[-1] != ex.L_k:
            continue
        srcs.append((f"probe:{r.kind}#{r.index}", p.detach()))
    return srcs


def fmt_diff(x: Any) -> str:
    """A measured difference for a message, to 3 significant digits (``0.095``, ``2.19``,
    ``3.16e-07``); a non-number (``"inf"``, the JSON stand-in for infinity) as is."""
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)


def failure_result(ctx, failure, message: str | None = None, metrics: dict | None = None):
    """CheckResult for a :class:`~attncheck.dynamic.strategies.PropertyFailure`: ``"error"``
    when the target raised (the reason is the exception) or attncheck itself did (metric
    ``internal_error`` True, message asking to report it), ``"fail"`` otherwise (also for a
    wrong return type, ``TargetOutputError``).

    ``metrics`` (aggregated over every example run) are merged with ``failure.data`` (the
    numbers of the reported, shrunk example); where both name a metric the example's value
    wins, so that the message and the metrics describe the same example."""
    from attncheck.dynamic.targets import TargetOutputError

    from attncheck.dynamic.base import (INTERNAL_ERROR, diagnose_target_error,
                                        raised_by_attncheck)

    err = failure.error
    m = dict(metrics or {})
    m.update(failure.data)
    if err is not None and raised_by_attncheck(err):
        return ctx.result("error", f"{INTERNAL_ERROR}: {type(err).__name__}: {err}",
                          metrics=dict(m, exception=type(err).__name__, internal_error=True),
                          details=_traceback(err), example=failure.example)
    if err is not None and not isinstance(err, TargetOutputError):
        cause = diagnose_target_error(err)
        return ctx.result("error", f"the target raised {type(err).__name__}: {err}"
                          + (f" ({cause})" if cause else ""),
                          metrics=dict(m, exception=type(err).__name__), example=failure.example)
    return ctx.result("fail", message or failure.message, metrics=m, example=failure.example)


def _traceback(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-8:])
