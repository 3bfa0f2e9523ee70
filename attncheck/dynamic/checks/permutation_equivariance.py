"""``permutation-equivariance``: unmasked attention without positions commutes with a
permutation of the tokens.

Scaled dot-product attention treats its keys as a set and each query on its own (Vaswani et al.
2017, §3.2; Lee et al. 2019, "Set Transformer", Lemma 1): for permutations ``p`` of the queries
and ``p'`` of the keys/values, ``f(q[p], k[p'], v[p']) = f(q, k, v)[p]``.  For hypothesis-drawn
examples (``L ≥ 2``) and a permutation drawn from the example's seed the check compares, within
the dtype tolerance (fp32 atol 1e-5, rtol 1e-4):

- kernels ``(B, H, L, d)``: queries permuted by ``p``, keys and values by ``p'``;
- self-attention layers ``m(x)``: ``m(x[:, p]) = m(x)[:, p]``;
- q/k/v layers: ``q`` permuted by ``p``, ``k`` and ``v`` by ``p'``.

No mask is passed.  **Causal targets** (``causal=True``) treat each query's visible prefix as a
set instead: permuting tokens ``0 … m−1`` among themselves (``m = ⌊L/2⌋ + 1``, self-attention
``L_q = L_k``) must leave every output row ``i ≥ m`` unchanged, since row ``i`` attends to the
same set of keys ``{0 … i}`` with the same query.  An example whose last row does not depend on
token 0 (a sliding window narrower than ``L``) proves nothing and is not counted; targets
that declare a window (``pattern`` / ``window`` / ``mask_pattern`` hints) are skipped.
Skipped with the reason: targets of unknown causality found causal by the probe (SDPA
``is_causal=True`` / a triangular zero pattern), and targets with a position
term: declared (hint ``positions=`` absolute / rotary / alibi / relative, see
:mod:`attncheck.dynamic.positions`, or ``positional=True``) or found by experiment on the
logits (:func:`~attncheck.dynamic.positions.detect_positions`: an additive relative-position
bias, or logits that do not follow a permutation of the tokens while each token's content
reaches only its own row and column); ``positional=False`` checks anyway.
Catches heads split with a bare ``view`` (tokens mixed into heads), layout mix-ups
(``(B, H, L, d)`` fed to a ``(B, L, H, d)`` kernel) and head merges without transpose.
"""
from __future__ import annotations

from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._common import failure_result
from attncheck.dynamic.checks._compare import compare, hint, seq_dim
from attncheck.dynamic.checks.causality import _probe_says_causal
from attncheck.dynamic.positions import draw_permutation
from attncheck.dynamic.probe import Probe
from attncheck.dynamic.strategies import Fail, examples, run_property
from attncheck.dynamic.targets import Example, Target
from attncheck.results import CheckResult

#: examples per run at most (the default suite's time budget: bench/dynamic_bench.py)
MAX_EXAMPLES = 4

__all__ = ["check_permutation_equivariance", "draw_permutation"]


def _applies(target: Target) -> bool | str:
    if target.causal is True and (hint(target, "window") or hint(target, "pattern", "mask_pattern")
                                  not in (None, "causal", {"kind": "causal"})):
        return ("causal target with a declared mask pattern: its visible prefix is not the "
                "whole past, so prefix permutations prove nothing")
    from attncheck.dynamic.positions import describe, position_kind

    if hint(target, "positional") is False:
        return True   # "check anyway"
    try:
        decl = position_kind(target)
    except ValueError:
        decl = None
    if decl is not None and decl["kind"] != "none":
        return (f"the target has a position term — {describe(decl)}: not permutation "
                "equivariant by design")
    if hint(target, "positional"):
        return "the target declares positions (positional=True): not permutation equivariant"
    return True


@register_check("permutation-equivariance", applies=_applies,
                description="f(x[:, p]) = f(x)[:, p] for unmasked, position-free attention")
def check_permutation_equivariance(target: Target, ctx: RunContext) -> CheckResult:
    """Permute tokens (queries by p, keys/values by p'); the output rows must follow p."""
    # a target of unknown causality that is causal in fact: skip, do not blame it
    if target.causal is None:
        ex0 = ctx.example(target)
        inp = target.make_inputs(ex0, device=ctx.device, dtype=ctx.dtype, causal=False)
        with torch.no_grad(), Probe(max_records=16, track_matmuls=False) as probe:
            target(inp)
        why = _probe_says_causal(probe, ex0.L_q) if ex0.L_q == ex0.L_k else None
        if why:
            return ctx.result("skip", f"the target is causal ({why}): a causal mask is not "
                                      "permutation equivariant", {"causal_evidence": why})
    if target.causal is True:
        return _causal_prefix(target, ctx)
    atol, rtol = ctx.tolerances
    sd = seq_dim(target)
    worst = {"diff": 0.0}

    def prop(ex: Example) -> Any:
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=False)
        p = draw_permutation(ex.L_q, ex.seed).to(ctx.device)
        pk = p if target.self_attention else draw_permutation(ex.L_k, ex.seed + 7).to(ctx.device)
        with torch.no_grad():
            out = target(inputs).out
            if target.self_attention:
                x = inputs.q.index_select(sd, p)
                perm = inputs.with_tensors(q=x, k=x, v=x)
            else:
                k = inputs.k.index_select(sd, pk)
                v = k if inputs.k is inputs.v else inputs.v.index_select(sd, pk)
                perm = inputs.with_tensors(q=inputs.q.index_select(sd, p), k=k, v=v)
            outp = target(perm).out
        if outp.shape != out.shape or out.dim() <= sd or out.shape[sd] != ex.L_q:
            raise Fail(f"output shape {tuple(out.shape)} has no query axis {sd} of length "
                       f"{ex.L_q}")
        expected = out.index_select(sd, p)
        cmp = compare(outp, expected, atol, rtol)
        worst["diff"] = max(worst["diff"], cmp.max_abs)
        if not cmp.ok:
            pos = cmp.worst[sd] if cmp.worst else 0
            err = Fail(f"not permutation equivariant: f(x[p]) ≠ f(x)[p] at query row {pos} "
                       f"(max |Δ|={cmp.max_abs:.3g} > atol {atol:g} + rtol {rtol:g}·|ref|; "
                       f"p={p.tolist()}) — tokens are mixed across positions (head split / "
                       "merge without transpose, or a layout mix-up)")
            err.data = {"permutation": p.tolist(), "key_permutation": pk.tolist(),
                        "worst_row": pos, "fail_max_abs_diff": cmp.max_abs}
            raise err
        return {"last_perm": p.tolist()}

    outcome = run_property(prop, target, ctx, strategy=examples(target, max_l=8, min_l=2),
                           max_examples=min(ctx.max_examples, MAX_EXAMPLES))
    metrics = {"examples": outcome.examples_run, "max_abs_diff": worst["diff"], "atol": atol,
               "rtol": rtol}
    experiment = target.position_detection
    if experiment and experiment.get("record"):
        # what the position experiment saw (e.g. tokens mixed before attention)
        metrics["position_experiment"] = experiment["message"]
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    return ctx.result("pass", f"{outcome.examples_run} examples: f(x[p]) = f(x)[p] "
                              f"(max |Δ|={worst['diff']:.3g})", metrics)


def _bump_first(t: torch.Tensor, sd: int) -> torch.Tensor:
    """``t`` with 4 added to every entry of token 0 (sequence axis ``sd``)."""
    t = t.clone()
    t.select(sd, 0).add_(4.0)
    return t


def _causal_prefix(target: Target, ctx: RunContext) -> CheckResult:
    """Causal targets: permuting the tokens of a prefix ``0 … m−1`` leaves rows ``i ≥ m``
    unchanged (each such row attends to the same key set with the same query)."""
    atol, rtol = ctx.tolerances
    sd = seq_dim(target)
    worst = {"diff": 0.0, "windowed": 0}

    def permuted(inputs, index):
        if target.self_attention:
            x = inputs.q.index_select(sd, index)
            return inputs.with_tensors(q=x, k=x, v=x)
        k = inputs.k.index_select(sd, index)
        v = k if inputs.k is inputs.v else inputs.v.index_select(sd, index)
        return inputs.with_tensors(q=inputs.q.index_select(sd, index), k=k, v=v)

    def prop(ex: Example) -> Any:
        L = ex.L_q
        m = L // 2 + 1
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=True)
        p = torch.cat([draw_permutation(m, ex.seed), torch.arange(m, L)]).to(ctx.device)
        with torch.no_grad():
            out = target(inputs).out
            if out.dim() <= sd or out.shape[sd] != L:
                raise Fail(f"output shape {tuple(out.shape)} has no query axis {sd} of length {L}")
            # does the last row see token 0?  (a sliding window narrower than L does not)
            if target.self_attention:
                x = _bump_first(inputs.q, sd)
                moved = inputs.with_tensors(q=x, k=x, v=x)
            else:
                k = _bump_first(inputs.k, sd)
                moved = inputs.with_tensors(k=k, v=k if inputs.k is inputs.v else
                                            _bump_first(inputs.v, sd))
            if torch.equal(target(moved).out.select(sd, L - 1), out.select(sd, L - 1)):
                worst["windowed"] += 1
                return {"windowed": True}
            outp = target(permuted(inputs, p)).out
        cmp = compare(outp.narrow(sd, m, L - m), out.narrow(sd, m, L - m), atol, rtol)
        worst["diff"] = max(worst["diff"], cmp.max_abs)
        if not cmp.ok:
            row = m + (cmp.worst[sd] if cmp.worst else 0)
            err = Fail(f"causal prefix not treated as a set: permuting tokens 0…{m - 1} among "
                       f"themselves changed the output at row {row} ≥ {m} (max |Δ|="
                       f"{cmp.max_abs:.3g} > atol {atol:g} + rtol {rtol:g}·|ref|; p={p.tolist()})"
                       " — tokens are mixed across positions (head split / merge without "
                       "transpose, or a layout mix-up), or a position term not declared")
            err.data = {"permutation": p.tolist(), "worst_row": row,
                        "fail_max_abs_diff": cmp.max_abs, "prefix": m}
            raise err
        return {"last_perm": p.tolist()}

    outcome = run_property(prop, target, ctx,
                           strategy=examples(target, max_l=8, min_l=3, cross=False),
                           max_examples=min(ctx.max_examples, MAX_EXAMPLES))
    metrics = {"examples": outcome.examples_run, "max_abs_diff": worst["diff"], "atol": atol,
               "rtol": rtol, "causal_prefix": True, "windowed_examples": worst["windowed"]}
    if outcome.failure is not None:
        return failure_result(ctx, outcome.failure, metrics=metrics)
    if worst["windowed"] >= outcome.examples_run:
        return ctx.result("skip", "causal target whose last row does not see token 0 (a sliding "
                                  "window?): prefix permutations prove nothing", metrics)
    return ctx.result("pass", f"{outcome.examples_run} examples: permuting a causal prefix "
                              f"leaves the later rows unchanged (max |Δ|={worst['diff']:.3g})",
                      metrics)
