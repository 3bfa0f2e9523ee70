"""``scale``: the effective softmax scale, compared with 1/√head_dim, and the likely cause.

Scaled dot-product attention divides the logits by √d_k (Vaswani et al. 2017, §3.2.1; SDPA's
default ``scale = 1/√E``, PyTorch docs).  The check runs one forward (B = 2, L = 8) under the
:class:`~attncheck.dynamic.probe.Probe` and reads, for every attention it records, the factor
``s`` with ``logits = s · (q·kᵀ)``, q and k taken *before* any scalar multiplication:

- SDPA: ``s = scale`` (or ``1/√E``) times the scalar factors the probe saw applied to q and k
  (``q = q * d ** -0.5`` then ``scale=...`` counts twice);
- hand-written softmax: the probe follows the matmul that produced the logits (``@``, matmul,
  bmm, baddbmm ``alpha``, einsum) and fits ``s = logits / (q·kᵀ)`` on the unmasked entries
  (median ratio, ≥ 90 % of entries within 1e-3 relative), times the factors on its operands;
  ``head_dim`` is the contracted size of that matmul;
- ``nn.MultiheadAttention``: PyTorch scales q by ``1/√(E/num_heads)`` (``torch.nn.functional``
  source) — reported, not measured;
- a kernel the probe cannot see into: V = identity gives the weights ``P``; ``s`` is the
  least-squares slope of row-centred ``log P`` on row-centred ``q·kᵀ`` (R² ≥ 0.999 required).

``s`` is compared with ``1/√d_k`` (relative tolerance 2 %) and, when it differs, matched against
the usual mistakes (several may coincide, e.g. ``1/d_k`` and ``1/√d_model`` when H = d_k; all
matches are named):

===================================  ============================
cause                                ``s``
===================================  ============================
missing (logits not scaled)          ``1``
d_model instead of head_dim          ``1/√(H·d_k)``
not square-rooted, or applied twice  ``1/d_k``
d_model, not square-rooted           ``1/(H·d_k)``
inverted (× √d_k instead of ÷)       ``√d_k``
===================================  ============================

Intentional scales are declared with the ``scale`` hint: a number (T5 is unscaled:
``scale=1.0``) is the expected ``s``; ``"learned"`` (learned temperature, cosine attention)
reports the values and skips.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.probe import Probe
from attncheck.dynamic.targets import Target
from attncheck.results import CheckResult

__all__ = ["LEARNED_SCALE_HINT", "SCALE_RTOL", "check_scale", "classify_scale", "declared_scale",
           "learned_scale_hint", "own_scale"]

SCALE_RTOL = 0.02
MIN_R2 = 0.999
#: start of :func:`classify_scale`'s text when no known mistake explains the scale
UNRECOGNISED = "unrecognised"
#: the pointer a scale / saturation / reference failure adds when the effective scale matches no
#: known mistake: cosine attention (Swin Transformer V2, Liu et al. 2022) multiplies cos(q, k) by a
#: learned temperature exp(logit_scale) instead of 1/√d_k, judged at its own scale once declared
LEARNED_SCALE_HINT = ("a learned temperature (cosine attention as in Swin V2)? declare it with "
                      "--hint scale=learned (scale='learned' in Python)")


def _close(a: float, b: float, rtol: float = SCALE_RTOL) -> bool:
    if a <= 0 or b <= 0:
        return a == b
    return abs(math.log(a / b)) <= math.log1p(rtol)


def classify_scale(s: float, head_dim: int, num_heads: int | None = None,
                   expected: float | None = None) -> tuple[bool, str]:
    """Judge an effective scale ``s``.

    Args:
        s: effective logit factor (``logits = s · q·kᵀ``).
        head_dim: ``d_k``, the contracted dimension of q·kᵀ.
        num_heads: ``H`` (enables the d_model causes), or None.
        expected: the declared scale; default ``1/√head_dim``.

    Returns:
        ``(ok, text)``: ``ok`` True when ``s`` matches the expected value (2 % relative);
        ``text`` names the cause(s) when not, e.g. ``"missing: logits not scaled (s = 1)"``.
    """
    d = float(head_dim)
    exp = 1.0 / math.sqrt(d) if expected is None else float(expected)
    if not math.isfinite(s):
        return False, f"non-finite scale {s}"
    if _close(s, exp):
        return True, "as declared" if expected is not None else "1/√d_k"
    causes: list[tuple[str, float]] = [
        ("missing: logits not scaled (s = 1)", 1.0),
        ("1/d_k: not square-rooted, or 1/√d_k applied twice", 1.0 / d),
        ("inverted: multiplied by √d_k instead of divided", math.sqrt(d)),
    ]
    if num_heads and num_heads > 1:
        causes += [
            (f"d_model instead of head_dim: 1/√(H·d_k) = 1/√{num_heads * head_dim}",
             1.0 / math.sqrt(num_heads * d)),
            (f"1/d_model: d_model = {num_heads * head_dim}, not square-rooted",
             1.0 / (num_heads * d)),
        ]
    if expected is not None:
        causes.insert(0, ("1/√d_k (the default) instead of the declared scale",
                          1.0 / math.sqrt(d)))
    hits = [c for c, v in causes if _close(s, v)]
    if hits:
        return False, " or ".join(hits)
    return False, f"{UNRECOGNISED}: s/expected = {s / exp:.4g}"


def learned_scale_hint(s: float | None, head_dim: int | None, num_heads: int | None = None,
                       expected: float | None = None) -> str:
    """``"; "`` + :data:`LEARNED_SCALE_HINT` when the effective scale ``s`` is finite, wrong and
    matches none of the causes :func:`classify_scale` knows, else ``""`` (also when ``s`` or
    ``head_dim`` is unknown)."""
    if s is None or not head_dim or not math.isfinite(s):
        return ""
    ok, cause = classify_scale(s, head_dim, num_heads, expected)
    return "" if ok or not cause.startswith(UNRECOGNISED) else f"; {LEARNED_SCALE_HINT}"


def declared_scale(target: Target) -> Any:
    """The ``scale`` hint: a number (numeric strings from ``--hint scale=1.0`` included),
    ``"learned"``, or None (default 1/√head_dim)."""
    v = getattr(target, "scale", None)
    if v is None:
        v = target.hints.get("scale")
    if isinstance(v, str):          # CLI: --hint scale=1.0
        try:
            return float(v)
        except ValueError:
            return v.strip().lower()
    return v


def own_scale(target: Target, inputs: Any) -> float | None:
    """The logits scale ``s`` (``logits = s · q·kᵀ``) the target applies on ``inputs``, measured:
    the first probe record with an effective scale, else (kernels) the log-probability fit on
    V = identity weights (R² ≥ ``MIN_R2``); None when neither is observable.  Used where the
    target declares ``scale="learned"`` and is judged at its own temperature."""
    with torch.no_grad():
        with Probe() as probe:
            target(inputs)
    for r in probe.records:
        if r.effective_scale is not None:
            return float(r.effective_scale)
    if not target.is_kernel:
        return None
    from attncheck.dynamic.opaque import (
        OpaqueKernelError,
        fit_scale_from_probs,
        target_probs_via_identity,
    )
    try:
        with torch.no_grad():
            fit = fit_scale_from_probs(target_probs_via_identity(target, inputs), inputs.q,
                                       inputs.k)
    except OpaqueKernelError:
        return None
    return float(fit[0]) if fit is not None and fit[1] >= MIN_R2 else None


def _toeplitz_scale(lg: torch.Tensor, qk: torch.Tensor) -> float | None:
    """Least-squares ``s`` in ``lg = s·qk + T(i − j)`` (diagonal means removed from both)."""
    from attncheck.dynamic.positions import _diag_means
    from attncheck.dynamic.probe import MASK_THRESHOLD

    valid = torch.isfinite(lg) & (lg > MASK_THRESHOLD)
    lg0 = torch.where(valid, lg, torch.zeros_like(lg))
    a = torch.where(valid, lg0 - _diag_means(lg0, valid), torch.zeros_like(lg))
    b = torch.where(valid, qk - _diag_means(qk, valid), torch.zeros_like(qk))
    den = float((b * b).sum())
    s = float((a * b).sum()) / den if den > 0 else 0.0
    return s if s > 0 and math.isfinite(s) else None


def _applies(target: Target) -> bool | str:
    return True


def _heads_for(rec, target: Target, ex) -> int | None:
    if rec.num_heads:
        return rec.num_heads
    if target.is_kernel and target.layout != "BLd":
        return ex.H
    if target.num_heads:
        return target.num_heads
    if target.embed_dim and rec.head_dim and target.embed_dim % rec.head_dim == 0:
        return target.embed_dim // rec.head_dim
    return None


@register_check("scale", applies=_applies,
                description="effective softmax scale equals 1/√head_dim (or the declared one)")
def check_scale(target: Target, ctx: RunContext) -> CheckResult:
    """Effective scale of every recorded attention vs 1/√head_dim; names the likely cause."""
    ex = target.fit_example(replace(ctx.example(target), B=2, L_q=8, L_k=8))
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype)
    with torch.no_grad():
        with Probe() as probe:
            target(inputs)
        probe.note_opaque(target.obj)
    decl = declared_scale(target)
    learned = isinstance(decl, str)
    expected = None if (decl is None or learned) else float(decl)

    from attncheck.dynamic.positions import TOEPLITZ_RTOL, toeplitz_bias

    found: list[dict[str, Any]] = []
    biased = 0
    for r in probe.records:
        if r.effective_scale is None and isinstance(r.extra.get("qk_product"), torch.Tensor) \
                and r.logits is not None:
            # logits = s·q·kᵀ + T(i − j): an additive relative-position bias (T5, ALiBi)
            got = toeplitz_bias(r.canonical(r.logits), r.canonical(r.extra["qk_product"]))
            qk = r.canonical(r.extra["qk_product"]).double()
            lg = r.canonical(r.logits).double()
            if got is not None and got[1] <= TOEPLITZ_RTOL:
                s_fit = _toeplitz_scale(lg, qk)
                if s_fit:
                    biased += 1
                    r.effective_scale = s_fit * float(r.extra.get("qk_factor", 1.0))
                    r.head_dim = int(r.extra.get("qk_contracted") or 0) or None
                    r.scale_source = "matmul + relative position bias"
        if r.effective_scale is None or not r.head_dim:
            continue
        H = _heads_for(r, target, ex)
        ok, cause = classify_scale(r.effective_scale, r.head_dim, H, expected)
        found.append({"record": r.index, "op": r.op, "kind": r.kind, "source": r.scale_source,
                      "effective_scale": r.effective_scale, "head_dim": r.head_dim,
                      "num_heads": H, "ok": ok, "cause": cause,
                      "expected": expected if expected is not None else
                      1.0 / math.sqrt(r.head_dim)})
    if not found and target.is_kernel:
        from attncheck.dynamic.opaque import (
            OpaqueKernelError,
            fit_scale_from_probs,
            target_probs_via_identity,
        )
        try:
            with torch.no_grad():
                P = target_probs_via_identity(target, inputs)
            fit = fit_scale_from_probs(P, inputs.q, inputs.k)
        except OpaqueKernelError as exc:
            fit = None
            probe.not_observable.append(str(exc))
        if fit is not None and fit[1] >= MIN_R2:
            s, r2 = fit
            d = int(inputs.q.shape[-1])
            H = int(inputs.q.shape[1])
            ok, cause = classify_scale(s, d, H, expected)
            found.append({"record": None, "op": "V = identity (opaque kernel)", "kind": "opaque",
                          "source": "log-prob fit", "effective_scale": s, "head_dim": d,
                          "num_heads": H, "ok": ok, "cause": cause, "r2": r2,
                          "expected": expected if expected is not None else 1 / math.sqrt(d)})
        elif fit is not None:
            probe.not_observable.append(f"V = identity weights do not follow softmax(s·q·kᵀ) "
                                        f"(R² = {fit[1]:.4f})")
    metrics: dict[str, Any] = {"attentions": found[:32], "example": ex.as_dict(),
                               "declared": decl, "rtol": SCALE_RTOL}
    if probe.not_observable:
        metrics["not_observable"] = list(probe.not_observable)
    if not found:
        unfit = [r for r in probe.records if "qk_matmul" in r.extra and r.effective_scale is None]
        if unfit:
            from attncheck.dynamic.positions import describe, position_kind

            pos = position_kind(target)
            cause = (f"the {describe(pos)} is added to them" if pos and pos["kind"] in (
                "relative", "alibi") else "an additive position bias that is not a function "
                "of i − j only, or a non-scalar scale?")
            why = (f"{len(unfit)} softmax(es) over a q·kᵀ product whose logits are not "
                   f"proportional to it ({cause})")
        else:
            why = ", ".join(probe.not_observable) or (
                "no SDPA call and no softmax whose input is a scaled q·kᵀ product "
                f"({len(probe.records)} softmax/SDPA call(s) seen)")
        return ctx.result("skip", f"not observable: {why}", metrics)
    values = sorted({round(f["effective_scale"], 6) for f in found})
    if learned:
        return ctx.result("skip", f"scale declared {decl!r}: effective scale(s) "
                                  f"{', '.join(f'{v:.4g}' for v in values)} not judged", metrics)
    bad = [f for f in found if not f["ok"]]
    head = bad[0] if bad else found[0]
    metrics = {"effective_scale": head["effective_scale"], "expected": head["expected"],
               "head_dim": head["head_dim"], **metrics}
    if bad:
        b = bad[0]
        exp_txt = (f"declared {b['expected']:.4g}" if expected is not None else
                   f"1/√{b['head_dim']} = {b['expected']:.4g}")
        metrics["cause"] = b["cause"]
        return ctx.result(
            "fail", f"{b['op']}: effective softmax scale {b['effective_scale']:.4g}, expected "
                    f"{exp_txt} (head_dim {b['head_dim']}) — {b['cause']}"
                    + (f"; {len(bad)} of {len(found)} attentions affected" if len(found) > 1
                       else "")
                    + learned_scale_hint(b["effective_scale"], b["head_dim"], b["num_heads"],
                                         expected), metrics, example=ex)
    exp_txt = ("the declared scale" if expected is not None else "1/√head_dim")
    srcs = sorted({f["source"] for f in found})
    return ctx.result("pass", f"{len(found)} attention(s) scaled by {exp_txt} "
                              f"({', '.join(f'{v:.4g}' for v in values)}; from {', '.join(srcs)})",
                      metrics)
