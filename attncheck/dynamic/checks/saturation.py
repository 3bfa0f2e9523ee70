"""``saturation``: is the softmax already saturated at default initialisation?

The target runs once, as constructed (default initialisation, eval mode), on random inputs of
the documented scale — N(0, 1) entries: hidden states ``(B, L, E)`` for layers (what a LayerNorm
hands over), ``q, k, v`` ``(B, H, L, d)`` for kernels — with ``B = 2``, ``L_q = L_k = 32``
(16, then 8, when the target raises at 32, e.g. a causal buffer of block size 16).
The :class:`~attncheck.dynamic.probe.Probe` records the attention weights (SDPA recomputed in
float64, MHA re-run with weights, hand-written softmax as is); for a kernel the probe cannot see
into, the weights are read with V = identity.  Per row of attention weights over its ``n``
visible keys (rows with ``n < 2`` are left out: one visible key always has weight 1):

- ``saturated_share``: share of rows whose largest weight exceeds 0.99;
- ``entropy_norm``: ``H(p) / log n`` (1 = uniform, 0 = one-hot), mean and minimum;
- ``jacobian_fro``: Frobenius norm of the softmax Jacobian ``diag(p) − p pᵀ``,
  ``√(Σp² − 2Σp³ + (Σp²)²)``, between 0 (one-hot: no gradient reaches the logits) and 0.5
  (two keys at ½); uniform over n keys gives ``√(1/n − 1/n²)``.  Reported with the share of rows
  below ``1e-3`` (``dead_gradient_share``);
- ``logit_std``: per-row standard deviation of the visible logits, when logits are known.

Thresholds, on the worst recorded attention (lowest mean normalized entropy):

=========  ==========================================================
fail       ``saturated_share > 0.20`` or ``entropy_norm_mean < 0.60``
warn       ``saturated_share > 0.05`` or ``entropy_norm_mean < 0.70``
=========  ==========================================================

A layer without parameters has no initialisation: its result is ``skip`` with the figures
(parameter-free self-attention compares x with itself, so the diagonal dominates by design).

Declared temperature (hint ``scale=<number>``, e.g. qk-norm attention whose logits are
cosine similarities times a fixed 10, T5's unscaled ``scale=1.0``) is judged like a learned one:
the temperature is a design choice, so the entropy thresholds do not apply and the verdict is the
dead-gradient share below.

Learned temperature (hint ``scale="learned"``, e.g. Swin V2 cosine attention, whose logits are
cosine similarities times a learned ``logit_scale.exp()`` initialised at 10): the entropy and
saturated-share thresholds above assume logits scaled by 1/√d_k to unit variance, a premise the
learned temperature deliberately replaces — its initial value is a design choice (peaky rows are
intended) and training moves it.  What still matters at init is that gradients reach the logits
*and the temperature itself*: ∂L/∂τ flows through the softmax Jacobian, so rows with
``‖J‖_F < 1e-3`` cannot learn their way out.  For ``scale="learned"`` the verdict therefore uses
the dead-gradient share with the same limits (``fail > 0.20``, ``warn > 0.05``, else pass) and
the message reports the entropy figures without judging them.

Why: for logits N(0, σ²) over 32 keys the mean normalized entropy is 0.98 at σ = 0.33, 0.87 at
σ = 1 (unit-variance logits, the premise of scaling by 1/√d_k — Vaswani et al. 2017, §3.2.1),
0.74 at σ = 1.5, 0.62 at σ = 2, 0.47 at σ = 2.7 (4000 rows each).  Measured at default
``nn.Linear`` init, d_model 512, 8 heads: textbook layer 0.98 (logit std 0.33), the same layer
without the 1/√d_k scale 0.46–0.51 (logit std 2.7) for L = 8…128, scale inverted (×√d_k)
0.05 with 60 % of rows saturated.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.probe import MASK_THRESHOLD, Probe
from attncheck.dynamic.targets import Target
from attncheck.results import CheckResult

__all__ = [
    "FAIL_ENTROPY",
    "FAIL_SATURATED",
    "SATURATION_L",
    "WARN_ENTROPY",
    "WARN_SATURATED",
    "check_saturation",
    "row_stats",
]

SATURATED_P = 0.99
FAIL_SATURATED, WARN_SATURATED = 0.20, 0.05
FAIL_ENTROPY, WARN_ENTROPY = 0.60, 0.70
DEAD_JACOBIAN = 1e-3
SATURATION_L = 32


def row_stats(probs: torch.Tensor, visible: torch.Tensor | None = None,
              logits: torch.Tensor | None = None) -> dict[str, Any] | None:
    """Saturation statistics of attention rows.

    Args:
        probs: ``(..., L_k)`` attention weights (softmax axis last).
        visible: bool, broadcastable to ``probs``: keys that are not masked (default: ``p > 0``).
        logits: ``(..., L_k)`` pre-softmax scores, for ``logit_std`` (optional).

    Returns:
        dict with ``rows``, ``nan_rows``, ``saturated_share``, ``entropy_norm_mean``,
        ``entropy_norm_min``, ``jacobian_fro_mean``, ``jacobian_fro_uniform``,
        ``dead_gradient_share`` and ``logit_std`` (or None); None when no row has two visible
        keys.
    """
    p = probs.detach().to(torch.float64)
    p = p.reshape(-1, p.shape[-1])
    if visible is None:
        vis = p > 0
    else:
        vis = visible.expand(probs.shape).reshape(-1, p.shape[-1]).to(p.device)
    nan = torch.isnan(p).any(-1)
    # a row whose mass lies outside the keys declared visible (a mask that is not the declared
    # one, e.g. inverted) is judged on the keys it actually attends to
    off = (torch.where(vis, p, torch.zeros_like(p)).sum(-1) - 1).abs() > 1e-3
    vis = torch.where(off[:, None], p > 0, vis)
    n = vis.sum(-1)
    keep = (~nan) & (n >= 2)
    nan_rows = int(nan.sum())
    if not bool(keep.any()):
        return None
    p, vis, n = p[keep], vis[keep], n[keep].to(torch.float64)
    pv = torch.where(vis, p, torch.zeros_like(p))
    ent = -(pv * pv.clamp_min(1e-300).log()).sum(-1) / n.log()
    s2 = (pv ** 2).sum(-1)
    s3 = (pv ** 3).sum(-1)
    jf = (s2 - 2 * s3 + s2 ** 2).clamp_min(0).sqrt()
    ju = (1 / n - 1 / n ** 2).sqrt()
    out: dict[str, Any] = {
        "rows": int(keep.sum()), "nan_rows": nan_rows,
        "saturated_share": float((pv.max(-1).values > SATURATED_P).double().mean()),
        "entropy_norm_mean": float(ent.mean()), "entropy_norm_min": float(ent.min()),
        "jacobian_fro_mean": float(jf.mean()), "jacobian_fro_uniform": float(ju.mean()),
        "dead_gradient_share": float((jf < DEAD_JACOBIAN).double().mean()),
        "logit_std": None,
    }
    if logits is not None:
        lg = logits.detach().to(torch.float64).reshape(-1, logits.shape[-1])[keep]
        lv = torch.where(vis, lg, torch.zeros_like(lg))
        mean = lv.sum(-1) / n
        var = (torch.where(vis, (lg - mean[:, None]) ** 2, torch.zeros_like(lg))).sum(-1) / n
        out["logit_std"] = float(var.sqrt().mean())
    return out


def _visible(rec, blocked: torch.Tensor | None) -> torch.Tensor | None:
    lg = rec.row_logits()
    if lg is not None and lg.shape == rec.rows().shape:
        return torch.isfinite(lg) & (lg > MASK_THRESHOLD)
    rows = rec.rows()
    if blocked is not None and tuple(rows.shape[-2:]) == tuple(blocked.shape[-2:]):
        return ~blocked.to(rows.device)
    return None


def _applies(target: Target) -> bool | str:
    return True


def _verdict(st: dict[str, Any]) -> str:
    if st["saturated_share"] > FAIL_SATURATED or st["entropy_norm_mean"] < FAIL_ENTROPY:
        return "fail"
    if st["saturated_share"] > WARN_SATURATED or st["entropy_norm_mean"] < WARN_ENTROPY:
        return "warn"
    return "pass"


def _declared(target: Target) -> Any:
    """The declared temperature (``scale`` hint: a number or ``"learned"``), or None."""
    from attncheck.dynamic.checks.scale import declared_scale

    return declared_scale(target)


def _learned_verdict(st: dict[str, Any]) -> str:
    if st["dead_gradient_share"] > FAIL_SATURATED:
        return "fail"
    if st["dead_gradient_share"] > WARN_SATURATED:
        return "warn"
    return "pass"


@register_check("saturation", applies=_applies,
                description="attention rows are not saturated at default initialisation")
def check_saturation(target: Target, ctx: RunContext) -> CheckResult:
    """Share of saturated rows, normalized entropy and softmax Jacobian norm at init."""
    err: Exception | None = None
    for L in (SATURATION_L, 16, 8):   # shorter when the target has a maximum length
        ex = target.fit_example(replace(ctx.example(target), B=2, L_q=L, L_k=L))
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype)
        try:
            with torch.no_grad(), Probe() as probe:
                out = target(inputs)
            err = None
            break
        except Exception as exc:  # noqa: BLE001 - retried shorter, re-raised below
            err = exc
    if err is not None:
        raise err
    probe.note_opaque(target.obj)
    blocked = target.blocked(inputs)
    if blocked is not None:
        blocked = blocked.cpu()
    recs = probe.attention_records() or [
        r for r in probe.records if r.kind == "softmax" and r.probs is not None
        and r.probs.dim() >= 2 and r.shape[r.dim] > 1]
    sources: list[tuple[str, dict[str, Any]]] = []
    for r in recs:
        rows = r.rows()
        if rows is None:
            continue
        vis = _visible(r, blocked)
        st = row_stats(rows.cpu(), None if vis is None else vis.cpu(),
                       r.row_logits().cpu() if r.row_logits() is not None and
                       r.row_logits().shape == rows.shape else None)
        if st is not None:
            sources.append((f"#{r.index} {r.op}", st))
    how = "probe"
    if not sources and out.weights is not None and out.weights.dim() >= 2:
        w = out.weights
        vis = None
        if blocked is not None and tuple(w.shape[-2:]) == tuple(blocked.shape[-2:]):
            vis = ~blocked
        st = row_stats(w.cpu(), vis)
        if st is not None:
            sources.append(("weights returned by the target", st))
            how = "returned weights"
    if not sources and target.is_kernel:
        from attncheck.dynamic.opaque import (
            OpaqueKernelError,
            target_probs_via_identity,
        )
        try:
            with torch.no_grad():
                P = target_probs_via_identity(target, inputs)
            vis = None if blocked is None else ~blocked
            st = row_stats(P.cpu(), vis)
            if st is not None:
                sources.append(("V = identity (opaque kernel)", st))
                how = "V = identity"
        except OpaqueKernelError as exc:
            probe.not_observable.append(str(exc))
    if not sources:
        why = ", ".join(probe.not_observable) or "no softmax / SDPA call seen"
        return ctx.result("skip", f"not observable: {why}",
                          {"not_observable": list(probe.not_observable)})
    worst_name, worst = min(sources, key=lambda s: s[1]["entropy_norm_mean"])
    decl = _declared(target)
    learned = decl is not None
    if learned:
        worst_name, worst = max(sources, key=lambda s: s[1]["dead_gradient_share"])
        status = _learned_verdict(worst)
    else:
        status = _verdict(worst)
    first = ("saturated_share", "entropy_norm_mean", "logit_std", "jacobian_fro_mean")
    metrics: dict[str, Any] = {k: worst[k] for k in first}
    metrics.update((k, v) for k, v in worst.items() if k not in metrics)
    metrics.update(
        source=how, worst=worst_name, L=ex.L_q, example=ex.as_dict(),
        thresholds={"saturated_p": SATURATED_P, "fail_saturated_share": FAIL_SATURATED,
                    "warn_saturated_share": WARN_SATURATED, "fail_entropy_norm": FAIL_ENTROPY,
                    "warn_entropy_norm": WARN_ENTROPY},
        attentions=[{"op": n, "saturated_share": round(s["saturated_share"], 4),
                     "entropy_norm_mean": round(s["entropy_norm_mean"], 4)}
                    for n, s in sources[:16]],
    )
    if probe.not_observable:
        metrics["not_observable"] = list(probe.not_observable)
    lstd = "" if worst["logit_std"] is None else f", logit std {worst['logit_std']:.3g}"
    desc = (f"{worst['saturated_share']:.0%} of rows with max weight > {SATURATED_P}, "
            f"normalized entropy {worst['entropy_norm_mean']:.3f}{lstd}, "
            f"softmax Jacobian ‖J‖_F {worst['jacobian_fro_mean']:.3g} "
            f"(uniform {worst['jacobian_fro_uniform']:.3g})")
    where = f" in {worst_name}" if len(sources) > 1 else ""
    if worst["nan_rows"]:
        desc += f"; {worst['nan_rows']} row(s) of NaN weights left out (see the finite check)"
    if learned:
        metrics["scale"] = decl
        metrics["judged_by"] = "dead_gradient_share"
        dead = f"{worst['dead_gradient_share']:.0%} of rows with ‖J‖_F < {DEAD_JACOBIAN:g}"
        what = ("learned temperature (scale='learned')" if isinstance(decl, str) else
                f"declared temperature (scale={decl:g})")
        if isinstance(decl, str):
            reach, none = "the logits and the temperature", "neither the logits nor the " \
                "temperature get a gradient"
        else:
            reach, none = "the logits", "the logits get no gradient"
        if status == "pass":
            msg = (f"{what}: gradients reach {reach}{where} ({dead}); entropy thresholds "
                   f"not applied: {desc}")
        else:
            msg = (f"{what}: {dead}{where} — the softmax Jacobian is ~0 there, so {none}; "
                   f"{desc}")
        return ctx.result(status, msg, metrics, example=ex if status == "fail" else None)
    m = target.module
    if status != "pass" and m is not None and not target.is_kernel and \
            not any(True for _ in m.parameters()):
        # nothing is initialised: a parameter-free self-attention layer compares x with itself,
        # whose logit |x_i|²/√E ≈ √E dominates its row by design — a property of the inputs
        metrics["parameters"] = 0
        return ctx.result("skip", f"not applicable: the layer has no parameters, so there is no "
                                  f"initialisation to judge (q = k = x: each token's logit with "
                                  f"itself, |x|²/√E ≈ √E, dominates by design); {desc}", metrics)
    if status == "pass":
        msg = f"not saturated at init{where}: {desc}"
    else:
        msg = (f"softmax {'saturated' if status == 'fail' else 'close to saturation'} at "
               f"default initialisation{where}: {desc} — check the 1/√d_k scale and the "
               "initialisation")
    return ctx.result(status, msg, metrics, example=ex if status == "fail" else None)
