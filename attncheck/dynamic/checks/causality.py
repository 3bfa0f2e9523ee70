"""``causality``: an exact leak map over (query, key) positions, and the current token visible.

Method (docs/checks.md): *batched perturbation*, no autograd.  For a base example with ``B = 1`` the
check builds one batch of ``L_k + 2`` variants: variant 0 and the last one are unperturbed
controls, variant ``j + 1`` adds large finite noise (N(0, 4²), never NaN: NaN in masked K/V
turns correct outputs into NaN through ``0 × NaN``) to key position ``j`` only — to ``k`` and
``v`` for kernels and q/k/v layers, to the input ``x`` for self-attention layers.  One forward
gives the dependency map ``D[i, j]`` = "output at query i changed when key j was perturbed",
compared exactly against the control in the *same* batch (so batch-size-dependent kernel
blocking cannot cause differences).
NaN is compared explicitly: a NaN appearing or disappearing counts as a change.
The control row must also equal the same example run alone (``B = 1``) within the dtype
tolerance; otherwise the perturbed rows moved it (the target attends along the batch axis, e.g. a
sequence-first ``nn.MultiheadAttention`` fed ``(B, L, E)``) and the check fails with that
diagnosis instead of reading a meaningless map.

- **leaks** — ``D[i, j]`` for ``j`` in the causal future of ``i``: ``j > i`` (top-left, SDPA's
  ``is_causal``) or ``j > i + L_k − L_q`` (bottom-right, flash-attention / KV cache), the
  target's ``alignment`` (default top-left).  Correct models give Δ = 0 *exactly* (masked
  weights are exactly 0; measured on every correct fixture in fp16 / bf16 / fp32 / fp64), so the
  comparison is exact: a leak is any Δ above ``tolerance`` = 4 × the difference between two
  unperturbed copies placed in the same batch (0 when batch rows are computed identically).
- **current token** — each query must depend on the key at its own position: kernels and q/k/v
  layers from ``D`` directly; self-attention layers ``m(x)`` (where perturbing ``x_i`` also moves
  the query) from the attention weights the probe records for an unperturbed forward (weight of
  the diagonal 0 or NaN in every head ⇒ hidden).  Masking the diagonal is over-masking: SDPA
  returns 0 for the now fully-masked row 0, a hand-written softmax NaN.
- **alignment** — when the target allows ``L_q != L_k``, a second map at ``L_q < L_k`` says
  which alignment the target follows; a mismatch with an explicit ``alignment`` hint fails, with
  the default (top-left, not declared) a bottom-right target gets a warning that names both.

Targets declared non-causal (``causal=False``) are checked the other way: a warning when the
future is masked anyway.  Targets with unknown causality are classified from the probe (SDPA
``is_causal=True`` or weights exactly 0 above the diagonal) and otherwise skipped with the
observed pattern.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._compare import compare
from attncheck.dynamic.probe import Probe
from attncheck.dynamic.targets import Example, Inputs, Target, causal_blocked
from attncheck.results import CheckResult

__all__ = [
    "LEAK_MAP_MAX",
    "NOISE_SCALE",
    "DependencyMap",
    "check_causality",
    "dependency_map",
    "dependency_pattern",
    "hidden_message",
    "hidden_queries",
    "leak_message",
    "leak_pairs",
    "query_delta",
    "variant_deltas",
]

#: leak maps larger than this (per side) are not put into the metrics
LEAK_MAP_MAX = 64
#: standard deviation of the perturbation noise (inputs are N(0, 1))
NOISE_SCALE = 4.0
#: square run length and the cross run's (L_q, L_k)
DEFAULT_L = 12
CROSS_LQ, CROSS_LK = 5, 9
#: variants per forward (chunks share a control)
MAX_VARIANTS = 64


class DependencyMap:
    """Result of :func:`dependency_map`.

    Attributes:
        depends: bool ``(L_q, L_k)``: output at query i changed when key j was perturbed.
        delta: float64 ``(L_q, L_k)``: max |Δ| at query i (``inf`` where NaN appeared/vanished).
        nan_rows: query positions whose *control* output contains NaN.
        probe: the :class:`Probe` of the unperturbed control forward (B = 1).
        tolerance: the Δ above which ``depends`` is True: 4 × ``jitter``, i.e. 0 — an exact
            comparison — when two unperturbed copies in the same batch are bit-identical.
        jitter: max |Δ| between the two unperturbed copies of the batch.
        batch_delta: max |Δ| between the unperturbed control run alone (``B = 1``) and its copy
            in the perturbed batch; ``batch_mixed`` is True when that exceeds the dtype
            tolerance, i.e. the perturbed rows moved the control row: the target mixes along
            the batch axis and ``depends`` is meaningless.
    """

    def __init__(self, depends, delta, nan_rows, probe, tolerance, example):
        self.depends: torch.Tensor = depends
        self.delta: torch.Tensor = delta
        self.nan_rows: list[int] = nan_rows
        self.probe: Probe = probe
        self.tolerance: float = tolerance
        self.example: Example = example
        self.jitter: float = 0.0
        self.batch_delta: float = 0.0
        self.batch_mixed: bool = False


def _perturb(target: Target, inputs: Inputs, keys: list[int], gen: torch.Generator,
             noise: float) -> Inputs:
    """Batch ``[control] + [variant perturbing key j for j in keys] + [control]`` from a B=1
    ``inputs`` (the second control measures batch-position jitter)."""
    n = len(keys) + 2
    ex = inputs.example

    def rep(t):
        return t.detach().expand(n, *t.shape[1:]).clone()

    def noise_like(shape, like):
        z = torch.randn(*shape, generator=gen, dtype=torch.float64) * noise
        return z.to(like.device, like.dtype)

    seq_dim = 2 if target.is_kernel else 1   # canonical: kernel (B,H,L,d), layers (B,L,E)
    q = rep(inputs.q)
    if target.self_attention:
        x = q
        for b, j in enumerate(keys, start=1):
            sl = x[b].select(seq_dim - 1, j)
            sl += noise_like(sl.shape, sl)
        return replace(inputs, example=replace(ex, B=n), q=x, k=x, v=x)
    same_kv = inputs.k is inputs.v
    k = rep(inputs.k)
    v = k if same_kv else rep(inputs.v)
    for b, j in enumerate(keys, start=1):
        sk = k[b].select(seq_dim - 1, j)
        sk += noise_like(sk.shape, sk)
        if not same_kv:
            sv = v[b].select(seq_dim - 1, j)
            sv += noise_like(sv.shape, sv)
    return replace(inputs, example=replace(ex, B=n), q=q, k=k, v=v)


def query_delta(a: torch.Tensor, b: torch.Tensor, qdim: int) -> torch.Tensor:
    """The leak measurement: max |a − b| per query position, float64 ``(L_q,)``, for two outputs
    of one sample (the control ``b`` and a run with one input position perturbed ``a``, same
    shape, query axis ``qdim``).  NaN-aware: NaN on both sides counts as no change, on one side
    only as an infinite change.  ``attncheck check`` and ``attncheck audit`` both read their
    dependency maps with it."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    na, nb = torch.isnan(a64), torch.isnan(b64)
    d = (a64 - b64).abs()
    d = torch.where(na | nb, torch.zeros_like(d), d)
    d = torch.where(na != nb, torch.full_like(d, float("inf")), d)
    d = d.movedim(qdim, 0).reshape(d.shape[qdim], -1)
    return d.max(dim=1).values


_query_delta = query_delta


def variant_deltas(out: torch.Tensor, n: int, qdim: int) -> torch.Tensor:
    """The leak measurement over one batched forward: ``out`` ``(B·(n + 1), ...)`` holds the
    control (``B`` samples) followed by ``n`` copies of it along axis 0, each with one input
    position perturbed; returns float64 ``(n, B, L_q)``: the :func:`query_delta` of each copy's
    sample against the control's, per query (axis ``qdim`` of one sample's output)."""
    B = out.shape[0] // (n + 1)
    o = out.reshape(n + 1, B, *out.shape[1:])
    return torch.stack([torch.stack([query_delta(o[1 + v, b], o[0, b], qdim) for b in range(B)])
                        for v in range(n)])


def _query_axis(shape: tuple[int, ...], L_q: int, canonical: int) -> int:
    """Axis of one sample's output that indexes queries: the canonical one (kernel
    ``(H, L_q, d_v)`` → 1, layer ``(L_q, E)`` → 0) when it has length ``L_q``, else the last
    axis before the feature axis with that length (e.g. a layer returning ``(H, L_q, d)``).

    Raises ValueError when no axis has length ``L_q``."""
    if canonical < len(shape) and shape[canonical] == L_q:
        return canonical
    for ax in range(len(shape) - 2, -1, -1):
        if shape[ax] == L_q:
            return ax
    raise ValueError(f"output of shape {shape} per sample has no query axis of length {L_q}")


def dependency_map(target: Target, ctx: RunContext, ex: Example, *, causal: bool,
                   noise: float = NOISE_SCALE) -> DependencyMap:
    """Exact (query, key) dependency map of ``target`` for ``ex`` (``B`` forced to 1).

    Returns a :class:`DependencyMap`.  Raises whatever the target raises.
    """
    ex = replace(target.fit_example(replace(ex, B=1)), B=1)
    inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=causal)
    with torch.no_grad():
        with Probe(max_records=64, track_matmuls=False) as probe:
            ctrl = target(inputs).out
        probe.note_opaque(target.obj)
        L_q, L_k = ex.L_q, ex.L_k
        qdim = _query_axis(tuple(ctrl.shape[1:]), L_q, 1 if target.is_kernel else 0)
        delta = torch.zeros(L_q, L_k, dtype=torch.float64)
        ctrl0 = ctrl[0]
        nan_rows = []
        if torch.isnan(ctrl0).any():
            nr = torch.isnan(ctrl0.movedim(qdim, 0).reshape(L_q, -1)).any(dim=1)
            nan_rows = [int(i) for i in torch.nonzero(nr).flatten()]
        keys = list(range(L_k))
        step = MAX_VARIANTS - 2
        jitter = 0.0
        batch_delta, batch_mixed = 0.0, False
        atol, rtol = ctx.tolerances
        for start in range(0, L_k, step):
            ctx.check_time()
            chunk = keys[start:start + step]
            batch = _perturb(target, inputs, chunk, ctx.generator, noise)
            out = target(batch).out
            jitter = max(jitter, float(_query_delta(out[-1], out[0], qdim).max()))
            if out.shape[1:] == ctrl.shape[1:]:
                alone = compare(out[0], ctrl0, atol, rtol)
                batch_delta = max(batch_delta, alone.max_abs)
                batch_mixed = batch_mixed or not alone.ok
            d = variant_deltas(out[:len(chunk) + 1], len(chunk), qdim)  # (keys, 1, L_q)
            delta[:, chunk] = d[:, 0, :].T.cpu()
    if math.isfinite(jitter):
        tol = 4.0 * jitter          # 0 when identical rows of one batch are bit-identical
    else:                           # NaN appearing in an unperturbed copy: fall back to 8 ulp
        mag = float(torch.nan_to_num(ctrl0.abs(), nan=0.0, posinf=0.0).max()) \
            if ctrl0.numel() else 0.0
        tol = 8 * torch.finfo(ctx.dtype).eps * max(1.0, mag)
    depends = delta > tol
    dm = DependencyMap(depends, delta, nan_rows, probe, tol, ex)
    dm.jitter = jitter
    dm.batch_delta, dm.batch_mixed = batch_delta, batch_mixed
    return dm


def _current_key(i: int, L_q: int, L_k: int, alignment: str) -> int:
    return i + (L_k - L_q if alignment == "bottom_right" else 0)


def hidden_queries(depends: torch.Tensor, alignment: str = "top_left",
                   rows: list[int] | None = None) -> list[int]:
    """Queries (of ``rows``, default all) whose output does not depend on the key at their own
    position (over-masking: the mask covers the diagonal), from a bool dependency map
    ``(L_q, L_k)``."""
    L_q, L_k = depends.shape
    out = []
    for i in range(L_q) if rows is None else rows:
        j = _current_key(i, L_q, L_k, alignment)
        if 0 <= j < L_k and not bool(depends[i, j]):
            out.append(i)
    return out


def _hidden_from_map(dm: DependencyMap, alignment: str) -> list[int]:
    return hidden_queries(dm.depends, alignment)


def _hidden_from_probe(probe: Probe, L_q: int, L_k: int, alignment: str) -> list[int] | None:
    """Rows whose current key gets weight 0 / NaN in every head of some recorded attention
    (None when no record has a ``(L_q, L_k)`` attention matrix)."""
    seen = False
    hidden: set[int] = set()
    for r in probe.records:
        rows = r.rows()
        if rows is None or rows.dim() < 2 or tuple(rows.shape[-2:]) != (L_q, L_k):
            continue
        seen = True
        flat = rows.reshape(-1, L_q, L_k)
        for i in range(L_q):
            j = _current_key(i, L_q, L_k, alignment)
            if 0 <= j < L_k:
                w = flat[:, i, j]
                if bool(((w == 0) | torch.isnan(w)).all()):
                    hidden.add(i)
    return sorted(hidden) if seen else None


def _triangle(zero: torch.Tensor) -> str | None:
    """Name of the triangle that ``zero`` (bool ``(L, L)``: weight exactly 0 everywhere) is."""
    L = zero.shape[-1]
    one = torch.ones(L, L, dtype=torch.bool, device=zero.device)
    for name, tri in (("above the diagonal", one.triu(1)),
                      ("on and above the diagonal", one.triu(0)),
                      ("below the diagonal", one.tril(-1)),
                      ("on and below the diagonal", one.tril(0))):
        if bool((zero == tri).all()):
            return name
    return None


def _probe_says_causal(probe: Probe, L: int) -> str | None:
    """Evidence of causal intent in the unperturbed forward: SDPA ``is_causal=True``, or a
    triangular pattern of exactly-zero weights (a triangular mask in either orientation, with or
    without the diagonal — an inverted or diagonal-masking causal mask is still causal intent)."""
    for r in probe.records:
        if r.kind == "sdpa" and r.is_causal:
            return "SDPA called with is_causal=True"
    if L < 2:
        return None
    for r in probe.records:
        rows = r.rows()
        if rows is None or tuple(rows.shape[-2:]) != (L, L):
            continue
        zero = ((rows == 0) | torch.isnan(rows)).reshape(-1, L, L).all(dim=0)
        tri = _triangle(zero)
        if tri is not None:
            return f"{r.op}: weights exactly 0 {tri} (a triangular mask)"
    return None


def dependency_pattern(depends: torch.Tensor) -> str:
    """Name the bool ``(L_q, L_k)`` map *query i depends on key j*: ``causal``, ``causal,
    current token hidden``, ``full``, ``causal with extra masking``, ``other``, or ``n/a`` when
    ``L_q != L_k``."""
    depends = depends.cpu()
    L_q, L_k = depends.shape
    if L_q != L_k:
        return "n/a"
    tri = torch.ones(L_q, L_k, dtype=torch.bool).tril(0)
    strict = tri.tril(-1)
    if bool((depends == tri).all()):
        return "causal"
    if bool((depends == strict).all()):
        return "causal, current token hidden"
    if bool(depends.all()):
        return "full"
    if not bool((depends & ~tri).any()):
        return "causal with extra masking"
    return "other"


_pattern = dependency_pattern


def _pairs(mask: torch.Tensor, delta: torch.Tensor) -> tuple[list[list[int]], list[int] | None]:
    idx = torch.nonzero(mask)
    pairs = [[int(a), int(b)] for a, b in idx.tolist()]
    worst = None
    if pairs:
        vals = delta[mask]
        worst = pairs[int(torch.argmax(torch.nan_to_num(vals, posinf=1e308)))]
    return pairs, worst


def _map_list(m: torch.Tensor) -> list[list[int]] | None:
    if max(m.shape) > LEAK_MAP_MAX:
        return None
    return m.to(torch.int64).tolist()


def _fmt_rows(rows: list[int], n: int = 8) -> str:
    s = ", ".join(str(r) for r in rows[:n])
    return s + (", …" if len(rows) > n else "")


_FIRST = ("n_leaks", "max_delta", "hidden_diagonal", "observed_pattern", "causal")


def _result(ctx: RunContext, status: str, message: str, metrics: dict[str, Any],
            **kw: Any) -> CheckResult:
    """``ctx.result`` with the headline numbers first (the terminal table shows the first few
    scalar metrics)."""
    ordered = {k: metrics[k] for k in _FIRST if k in metrics}
    ordered.update((k, v) for k, v in metrics.items() if k not in ordered)
    return ctx.result(status, message, ordered, **kw)


def _applies(target: Target) -> bool | str:
    # every kind: undeclared targets are classified at run time (probe / observed pattern)
    return True


def _delta_str(x: float) -> str:
    return "NaN appeared" if x == float("inf") else f"Δ={x:.3g}"


def leak_pairs(depends: torch.Tensor, delta: torch.Tensor, blocked: torch.Tensor
               ) -> tuple[list[list[int]], list[int] | None]:
    """The leaks of a dependency map: ``(pairs, worst)`` — every ``[query, key]`` with
    ``depends`` and ``blocked`` (bool ``(L_q, L_k)``: the causal future), in row-major order,
    and the pair with the largest ``delta`` (float ``(L_q, L_k)``; None without leaks)."""
    return _pairs(depends & blocked, delta)


def leak_message(pairs: list[list[int]], worst: list[int], delta: torch.Tensor,
                 n_future: int) -> str:
    """The failure message of a leak map (:func:`leak_pairs`) over ``n_future`` future pairs."""
    i, j = worst
    return (f"future leak: output at query {i} depends on key {j} "
            f"({_delta_str(float(delta[i, j]))}); {len(pairs)} of {n_future} future "
            f"pairs leak, first ({pairs[0][0]}, {pairs[0][1]})")


def hidden_message(hidden: list[int], nan_rows: list[int] | None = None) -> str:
    """The failure message of queries that do not see their own key (:func:`hidden_queries`)."""
    return (f"current token hidden at quer{'y' if len(hidden) == 1 else 'ies'} "
            f"{_fmt_rows(hidden)} (the mask also covers the diagonal: over-masking"
            + (f"; NaN output rows {_fmt_rows(nan_rows)}" if nan_rows else "") + ")")


@register_check("causality", applies=_applies,
                description="perturbing future keys leaves earlier outputs unchanged; each "
                            "query depends on its own key")
def check_causality(target: Target, ctx: RunContext) -> CheckResult:
    """Leak map over (query, key), current-token visibility, alignment when L_q != L_k."""
    declared = target.causal
    explicit_align = "alignment" in target.hints
    align = target.alignment or "top_left"
    base = ctx.example(target)
    L = DEFAULT_L
    err: Exception | None = None
    for L in (DEFAULT_L, 8, 4):      # shorter when the target has a maximum length
        try:
            dm = dependency_map(target, ctx, replace(base, B=1, L_q=L, L_k=L),
                                causal=bool(declared))
            err = None
            break
        except Exception as exc:  # noqa: BLE001 - retried shorter, re-raised below
            err = exc
    if err is not None:
        raise err
    L_q, L_k = dm.depends.shape
    blocked = causal_blocked(L_q, L_k, align)
    metrics: dict[str, Any] = {
        "L_q": L_q, "L_k": L_k, "alignment": align, "alignment_declared": explicit_align,
        "tolerance": dm.tolerance, "control_jitter": dm.jitter, "noise_std": NOISE_SCALE,
        "observed_pattern": _pattern(dm.depends),
        "dependency_map": _map_list(dm.depends),
        "example": dm.example.as_dict(),
    }
    if dm.probe.not_observable:
        metrics["not_observable"] = list(dm.probe.not_observable)
    if dm.nan_rows:
        metrics["nan_rows"] = dm.nan_rows
    metrics["batch_delta"] = dm.batch_delta
    if dm.batch_mixed:
        # each sample of the perturbation batch must be computed on its own; when the perturbed
        # rows move the unperturbed control, the target attends along the batch axis (e.g. a
        # sequence-first nn.MultiheadAttention fed (B, L, E)) and no leak map can be read
        return _result(ctx, "fail",
                       f"an unperturbed sample's output changed when other samples of the "
                       f"batch were perturbed (max Δ={dm.batch_delta:.3g}): the target mixes "
                       "along the batch axis, so causality over the sequence cannot be "
                       "observed; is the sequence axis where the target expects it "
                       "(batch_first?)",
                       metrics, example=dm.example)

    causal = declared
    how = "declared" if declared is not None else None
    if causal is None:
        why = _probe_says_causal(dm.probe, L)
        causal_like = ("causal", "causal, current token hidden")
        if why is None and metrics["observed_pattern"] in causal_like:
            why = "observed dependency pattern is causal"
        if why is None:
            pat = metrics["observed_pattern"]
            return _result(ctx, "skip", f"not declared causal (observed pattern: {pat}); "
                                        "declare causal=True (--causal) to check for leaks",
                           metrics)
        causal, how = True, f"detected: {why}"
    metrics["causal"] = f"{bool(causal)} ({how})"

    if causal is False:
        fut = dm.depends & blocked
        metrics["future_visible_pairs"] = int(fut.sum())
        if L_q > 1 and not bool(fut.any()):
            return _result(ctx, "warn", "declared non-causal but masks the future: no "
                                        "output depends on any later key", metrics)
        return _result(ctx, "pass", f"non-causal as declared: {int(fut.sum())} of "
                                    f"{int(blocked.sum())} future (query, key) pairs visible",
                       metrics)

    # ---- causal
    leak = dm.depends & blocked
    pairs, worst = leak_pairs(dm.depends, dm.delta, blocked)
    fut_delta = dm.delta[blocked]
    max_delta = float(fut_delta.max()) if fut_delta.numel() else 0.0
    metrics.update(leak_map=_map_list(leak), n_leaks=len(pairs),
                   max_delta=max_delta if max_delta != float("inf") else "inf",
                   first_leak=pairs[0] if pairs else None, worst_leak=worst)
    if target.self_attention:
        hidden = _hidden_from_probe(dm.probe, L_q, L_k, align)
        hidden_src = "attention weights (probe)"
    else:
        hidden = _hidden_from_map(dm, align)
        hidden_src = "perturbation"
    metrics["hidden_diagonal"] = hidden
    metrics["hidden_diagonal_source"] = hidden_src if hidden is not None else "not observable"

    problems: list[str] = []
    if pairs:
        problems.append(leak_message(pairs, worst, dm.delta, int(blocked.sum())))
    if hidden:
        problems.append(hidden_message(hidden, dm.nan_rows))
    elif dm.nan_rows:
        problems.append(f"NaN in the outputs of queries {_fmt_rows(dm.nan_rows)} for finite "
                        "inputs")
    if problems:
        return _result(ctx, "fail", "; ".join(problems), metrics, example=dm.example)

    # ---- alignment, L_q != L_k
    notes = []
    status = "pass"
    if target.allows_cross:
        ctx.check_time()
        ex2 = replace(base, B=1, L_q=CROSS_LQ, L_k=CROSS_LK)
        try:
            dm2 = dependency_map(target, ctx, ex2, causal=True)
        except Exception as exc:  # noqa: BLE001
            dm2 = None
            notes.append(f"L_q={CROSS_LQ} ≠ L_k={CROSS_LK} not checked: the target raised "
                         f"{type(exc).__name__}: {exc}")
    if target.allows_cross and dm2 is not None:
        verdict = {}
        for a in ("top_left", "bottom_right"):
            b2 = causal_blocked(CROSS_LQ, CROSS_LK, a)
            lk = dm2.depends & b2
            hid = _hidden_from_map(dm2, a)
            verdict[a] = (int(lk.sum()), hid)
        matches = [a for a, (n, hid) in verdict.items() if n == 0 and not hid]
        metrics["cross"] = {
            "L_q": CROSS_LQ, "L_k": CROSS_LK, "matches": matches,
            "dependency_map": _map_list(dm2.depends),
            "leaks": {a: v[0] for a, v in verdict.items()},
            "hidden_diagonal": {a: v[1] for a, v in verdict.items()},
        }
        if align in matches:
            notes.append(f"L_q={CROSS_LQ} < L_k={CROSS_LK}: {align.replace('_', '-')} "
                         f"alignment{' (declared)' if explicit_align else ' (default, SDPA)'}")
        else:
            b2 = causal_blocked(CROSS_LQ, CROSS_LK, align)
            lk_pairs, w2 = _pairs(dm2.depends & b2, dm2.delta)
            other = "bottom_right" if align == "top_left" else "top_left"
            what = (f"with L_q={CROSS_LQ} < L_k={CROSS_LK} the target follows "
                    f"{other.replace('_', '-')} alignment, not "
                    f"{align.replace('_', '-')}" if other in matches else
                    f"with L_q={CROSS_LQ} < L_k={CROSS_LK} the pattern is neither top-left nor "
                    "bottom-right causal")
            if lk_pairs:
                what += (f" (query {w2[0]} sees key {w2[1]}, {len(lk_pairs)} pairs beyond "
                         f"{align.replace('_', '-')})")
            hid = verdict[align][1]
            if hid:
                what += f" (current key hidden at queries {_fmt_rows(hid)})"
            if explicit_align or other not in matches:
                metrics["leak_map_cross"] = _map_list(dm2.depends & b2)
                return _result(ctx, "fail", what, metrics, example=dm2.example)
            status = "warn"
            notes.append(what + "; top-left is SDPA's is_causal convention, bottom-right "
                                "flash-attention's / KV-cache decoding's: declare "
                                f"alignment='{other}' if intended")
    if hidden is None:
        notes.append("current-token visibility not observable (no attention weights seen"
                     + (f": {', '.join(dm.probe.not_observable)}" if dm.probe.not_observable
                        else "") + ")")
    msg = (f"no future leak over {int(blocked.sum())} future (query, key) pairs at L={L_q} "
           f"(max Δ={max_delta:.3g}); every query sees its own key")
    if hidden is None:
        msg = (f"no future leak over {int(blocked.sum())} future (query, key) pairs at L={L_q} "
               f"(max Δ={max_delta:.3g})")
    if notes:
        msg += "; " + "; ".join(notes)
    return _result(ctx, status, msg, metrics)
