"""``padding``: a key padding mask hides the padded keys completely.

For targets that take a mask (``mask_arg``; convention and shape from the hints, e.g.
``mask={"arg": "attention_mask", "convention": "keep", "shape": "(B, L_k)"}``) the check builds
one padded batch (``L = 8``; sample lengths ``[8, 5, 0]`` for kernels — the empty sample is
the degenerate *fully padded* case — and ``[8, 5, 3]`` for layers: ``nn.MultiheadAttention``
itself returns NaN for a fully padded sample on CPU, a documented PyTorch behaviour that a layer
check should not blame on the user's code), padded on the right, or on the left with the hint ``padding_side="left"``, and
passes the canonical key padding mask (``(B, 1, 1, L_k)``, True = real key) in the target's own
convention.  It asserts:

1. **perturbation** — adding large finite noise (N(0, 4²), never NaN: 0 × NaN is NaN) to the padded
   keys/values (to the padded tokens ``x`` of a self-attention layer) leaves every *real* output
   row unchanged, near-exactly (≤ 8 ulp × max|output|; masked weights are exactly 0 in correct
   code, so Δ = 0);
2. **unpadded equivalence** — each sample's real rows equal the run of that sample alone,
   without padding (``L_k`` = its length, no mask), within the dtype tolerance (fp32 atol 1e-5,
   rtol 1e-4; as transformers' eager-vs-SDPA tests) — this catches position ids that ignore left padding;
3. **degenerate rows** — outputs of real rows are finite, and a fully padded sample (kernels)
   gives finite outputs: softmax over an all ``-inf`` row is NaN (0/0), while
   PyTorch's SDPA returns 0; NaN there poisons the next layer (0 × NaN).

Real rows are the query rows of non-padded tokens (all query rows for kernels and cross
attention) that see at least one key.  A target whose mask shape is ``(L_q, L_k)`` (one mask
for the whole batch) cannot express per-sample padding: skipped.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._compare import (
    NOISE_SCALE,
    compare,
    exact_tol,
    hint,
    noise_like,
    seq_dim,
)
from attncheck.dynamic.targets import Inputs, Target
from attncheck.results import CheckResult

__all__ = ["LENGTHS_KERNEL", "LENGTHS_SELF", "check_padding", "padded_content_leaks",
           "padding_keep", "padding_leak_message", "unpadded_difference"]

L_PAD = 8
LENGTHS_KERNEL = (8, 5, 0)
LENGTHS_SELF = (8, 5, 3)


def padding_keep(lengths: list[int], L: int, side: str = "right",
                 device: Any = "cpu") -> torch.Tensor:
    """Canonical key padding keep-mask ``(B, 1, 1, L)`` bool, True = real key; sample b has
    ``lengths[b]`` real tokens at the start (``side="right"``: padding after) or at the end
    (``side="left"``)."""
    pos = torch.arange(L, device=device)
    rows = []
    for n in lengths:
        rows.append(pos < n if side == "right" else pos >= L - n)
    return torch.stack(rows)[:, None, None, :]


def padded_content_leaks(changed: torch.Tensor, ctrl: torch.Tensor, rows: list[int], qdim: int,
                         tol: float) -> tuple[float, list[int]]:
    """The padding-leak measurement: one sample's real output rows before (``ctrl``) and after
    (``changed``) its padded inputs were changed, query axis ``qdim`` of length ``len(rows)``
    (``rows``: their positions).  Returns max |Δ| (inf where NaN appears on one side) and the
    positions whose |Δ| exceeds the absolute ``tol`` (masked weights are exactly 0 in correct
    code, so Δ = 0).  Shared by ``attncheck check`` and ``attncheck audit``."""
    from attncheck.dynamic.checks.causality import query_delta

    cmp = compare(changed, ctrl, tol, 0.0)
    if cmp.ok:
        return cmp.max_abs, []
    per_row = query_delta(changed, ctrl, qdim)
    return cmp.max_abs, [i for ri, i in enumerate(rows) if float(per_row[ri]) > tol]


def padding_leak_message(leaks: list[list[int]], worst: float, what: str = "keys") -> str:
    """The failure message of padded ``what`` (keys, tokens) that moved real outputs; ``leaks``:
    the ``[sample, position]`` pairs (:func:`padded_content_leaks`)."""
    return (f"padded {what} leak into real positions: perturbing padded {what} changed "
            f"{len(leaks)} real (sample, query) rows, first {tuple(leaks[0])} (max Δ={worst:.3g})")


def unpadded_difference(cmp: Any, what: str) -> str | None:
    """The failure message of padded real positions that differ from the unpadded run
    (``cmp``: the :class:`~attncheck.dynamic.checks._compare.Cmp` of the caller's tolerance
    policy), or None when within tolerance."""
    if cmp.ok:
        return None
    return (f"{what}: padded vs unpadded max |Δ|={cmp.max_abs:.3g} (> atol {cmp.atol:g} + "
            f"rtol {cmp.rtol:g}·|ref|)")


def _real_positions(n: int, L: int, side: str) -> list[int]:
    return list(range(n)) if side == "right" else list(range(L - n, L))


def _applies(target: Target) -> bool | str:
    if target.mask_arg and not target.accepts_mask:
        return target.mask_note()
    if not target.accepts_mask:
        return "the target takes no mask argument (give the mask hint: mask={'arg': ...})"
    if target.mask_shape == "QK":
        return "mask shape (L_q, L_k) is shared by the batch: per-sample padding cannot be expressed"
    return True


def _rows(t: torch.Tensor, b: int, qdim: int, rows: list[int]) -> torch.Tensor:
    """Sample ``b``'s output rows ``rows`` (query axis ``qdim`` of the canonical output)."""
    s = t[b]
    idx = torch.tensor(rows, dtype=torch.long, device=s.device)
    return s.index_select(qdim - 1, idx)


@register_check("padding", applies=_applies,
                description="padded keys never influence real positions; padded batch equals "
                            "the unpadded run of each sample")
def check_padding(target: Target, ctx: RunContext) -> CheckResult:
    """Key padding: perturbation of padded keys, unpadded equivalence, degenerate rows."""
    side = hint(target, "padding_side", default="right")  # "left" / "right": the hint registry
    lengths = list(LENGTHS_KERNEL if target.is_kernel else LENGTHS_SELF)
    B, L = len(lengths), L_PAD
    ex = ctx.example(target, B=B, L_q=L, L_k=L)
    ex = replace(ex, B=B, L_q=L, L_k=L)
    causal = target.causal is True
    keep = padding_keep(lengths, L, side, ctx.device)
    base = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, keep=keep, causal=causal)
    sd = seq_dim(target)
    qdim = sd  # canonical output: kernel (B, H, L_q, d), layer (B, L_q, E)
    metrics: dict[str, Any] = {"lengths": lengths, "padding_side": side, "L": L,
                               "noise_std": NOISE_SCALE, "example": ex.as_dict()}

    # rows that see at least one key, per sample
    blocked = target.blocked(base)
    vis = torch.ones(B, L, L, dtype=torch.bool, device=ctx.device)
    if blocked is not None:
        vis = ~blocked.expand(B, 1, L, L)[:, 0]
    sees = vis.any(dim=-1)  # (B, L_q)
    real_rows: list[list[int]] = []
    for b, n in enumerate(lengths):
        cand = _real_positions(n, L, side) if target.self_attention else list(range(L))
        real_rows.append([i for i in cand if bool(sees[b, i])])

    with torch.no_grad():
        ctrl = target(base).out
        ctx.check_time()
        problems: list[str] = []
        # ---- 3. degenerate rows / NaN at real positions
        nan_real = []
        for b in range(B):
            if real_rows[b]:
                r = _rows(ctrl, b, qdim, real_rows[b])
                if not bool(torch.isfinite(r).all()):
                    nan_real.append(b)
        if nan_real:
            problems.append(f"non-finite outputs at real positions of samples {nan_real} "
                            f"(lengths {[lengths[b] for b in nan_real]})")
        degenerate = [b for b, n in enumerate(lengths) if n == 0]
        bad_deg = [b for b in degenerate if not bool(torch.isfinite(ctrl[b]).all())]
        metrics["fully_padded_samples"] = degenerate
        if bad_deg:
            problems.append(f"fully padded sample {bad_deg[0]} gives NaN/inf outputs (softmax "
                            "over a row with every key masked is 0/0; SDPA returns 0 — guard "
                            "fully masked rows)")
        metrics["nonfinite_real_samples"] = nan_real
        metrics["nonfinite_fully_padded"] = bad_deg

        # ---- 1. perturb padded keys
        pad = ~keep[:, 0, 0, :]            # (B, L_k) True = padded
        gen = ctx.generator

        def perturbed(t: torch.Tensor) -> torch.Tensor:
            t = t.detach().clone()
            m = pad.view(B, *([1] * (sd - 1)), L, *([1] * (t.dim() - sd - 1)))
            return torch.where(m, t + noise_like(t, gen), t)

        if target.self_attention:
            x = perturbed(base.q)
            pert = replace(base, q=x, k=x, v=x)
        elif base.k is base.v:
            kv = perturbed(base.k)
            pert = replace(base, k=kv, v=kv)
        else:
            pert = replace(base, k=perturbed(base.k), v=perturbed(base.v))
        out_p = target(pert).out
        ctx.check_time()
        leaks: list[list[int]] = []
        worst = 0.0
        for b in range(B):
            if not real_rows[b]:
                continue
            a, c = _rows(out_p, b, qdim, real_rows[b]), _rows(ctrl, b, qdim, real_rows[b])
            dmax, rows = padded_content_leaks(a, c, real_rows[b], qdim - 1, exact_tol(c))
            worst = max(worst, dmax)
            leaks += [[b, i] for i in rows]
        metrics["perturb_max_delta"] = worst if worst != float("inf") else "inf"
        metrics["leak_positions"] = leaks[:64]
        metrics["n_leaks"] = len(leaks)
        if leaks:
            problems.insert(0, padding_leak_message(leaks, worst) + "; check the mask "
                               f"convention ({target.mask_convention}: "
                               + ("True = attend" if target.mask_convention == "keep" else
                                  "True = masked" if target.mask_convention == "blocked" else
                                  "additive") + ")")

        # ---- 2. unpadded run of each sample
        atol, rtol = ctx.tolerances
        diffs: dict[str, Any] = {}
        mism: list[str] = []
        slice_q = causal or target.self_attention or not target.allows_cross
        for b, n in enumerate(lengths):
            if n == 0 or not real_rows[b]:
                continue
            ctx.check_time()
            pos = torch.tensor(_real_positions(n, L, side), device=ctx.device)

            def sl(t: torch.Tensor, b: int = b, pos: torch.Tensor = pos) -> torch.Tensor:
                return t[b:b + 1].index_select(sd, pos)

            if target.self_attention:
                x1 = sl(base.q)
                ex1 = replace(ex, B=1, L_q=n, L_k=n)
                one = Inputs(ex1, x1, x1, x1, keep=None, causal=causal)
                rows_padded = _real_positions(n, L, side)
                rows_single = list(range(n))
            else:
                qb = sl(base.q) if slice_q else base.q[b:b + 1]
                kb = sl(base.k)
                vb = kb if base.k is base.v else sl(base.v)
                ex1 = replace(ex, B=1, L_q=qb.shape[sd], L_k=n)
                one = Inputs(ex1, qb, kb, vb, keep=None, causal=causal)
                if slice_q:
                    rows_padded = _real_positions(n, L, side)
                    rows_single = list(range(n))
                else:
                    rows_padded = real_rows[b]
                    rows_single = real_rows[b]
            rows_single = [rs for rp, rs in zip(rows_padded, rows_single)
                           if rp in real_rows[b]]
            rows_padded = [rp for rp in rows_padded if rp in real_rows[b]]
            if not rows_padded:
                continue
            single = target(one).out
            a = _rows(ctrl, b, qdim, rows_padded)
            c = _rows(single, 0, qdim, rows_single)
            cmp = compare(a, c, atol, rtol)
            diffs[str(b)] = cmp.max_abs if cmp.max_abs != float("inf") else "inf"
            why = unpadded_difference(cmp, f"sample {b} (length {n})")
            if why:
                mism.append(why)
        metrics["unpadded_max_diff"] = diffs
        if mism:
            problems.append("padded batch differs from the unpadded run: " + "; ".join(mism)
                            + (" (position ids / absolute positions must skip the padding)"
                               if side == "left" else ""))
    metrics.update(target.mask_metrics())
    if problems:
        return ctx.result("fail", "; ".join(problems), metrics, example=ex)
    n_real = sum(len(r) for r in real_rows)
    return ctx.result("pass", f"{side} padding (lengths {lengths}): padded keys invisible to "
                              f"{n_real} real rows (max Δ={worst:.3g}); each sample equals its "
                              "unpadded run" + ("; fully padded sample finite" if degenerate
                                                else "")
                      + (f" ({target.mask_note()})" if target.mask_note() else ""), metrics)

