"""Model-level checks of the audit.

Each check takes an :class:`~attncheck.audit.model.AuditModel` (one dispatch variant, e.g. HF
``eager`` or ``sdpa``) and an :class:`AuditContext`, and returns one
:class:`~attncheck.results.CheckResult` named ``"<check>[<variant>]"`` (``metrics["variant"]``
holds the variant).  ``backend-agreement`` compares the variants of one spec.

The measurements and verdicts these checks share with ``attncheck check`` are the dynamic
checks' own functions, called on the adapter's ``forward(x, attention_mask, position_ids)``:
the leak measurement (:func:`~attncheck.dynamic.checks.causality.query_delta`), the leak and
over-masking verdicts and messages (``leak_pairs``, ``leak_message``, ``hidden_queries``,
``hidden_message``, ``dependency_pattern``), the batch-mixing measurement
(:func:`~attncheck.dynamic.checks.batch_independence.other_samples_effect`,
``alone_vs_batched``), the padding-leak measurement
(:func:`~attncheck.dynamic.checks.padding.padded_content_leaks`, ``padding_leak_message``,
``unpadded_difference``), the mask pattern names
(:func:`~attncheck.dynamic.checks.mask_pattern.classify_map`), the row statistics of
``saturation`` and the scale causes of ``scale``; one tolerance policy
(:func:`~attncheck.dynamic.checks._compare.within_noise`, against a float64 copy of the model,
in the dtype the model's softmax runs in: :func:`compute_dtype`).  What stays here is what
only a whole model has: token / pixel inputs and their perturbation (the adapter's), dispatch
paths (padding masks, ``position_ids``, ``output_attentions``), the model's own cache API, and
dispatch variants (``backend-agreement``: ``skip`` when the model has one backend).

Checks (conventions: positions are 0-based; a *leak* (i, j) with j > i means the output at query
position i changes when the input at position j changes):

- ``causality``: exact leak map by batched perturbation — one variant per position j with only
  the input at j replaced (another token id / large finite noise), all variants in one batched
  forward; every dispatch path: no mask, an all-ones ``attention_mask``, left padding
  (``attention_mask`` + ``position_ids``), ``output_attentions=True``.  Correct models give
  Δ = 0 exactly (docs/checks.md); a pair is a leak when Δ > ``leak_atol``.
- ``padding``: right and left padding (with ``position_ids`` where the model takes them) equal
  the unpadded run at the real positions (fp32 atol 1e-5 / rtol 1e-4), and changing the padded
  inputs changes nothing.
- ``batch-independence``: a sample's output alone equals its output in a batch of 3
  (tolerance), and changing the other samples changes nothing (exact up to ``leak_atol``).
- ``kv-cache``: decoding with the model's own cache (prefill then one token per step) equals the
  full forward (fp32 atol 1e-5 / rtol 1e-4).
- ``backend-agreement``: variants with identical weights (eager vs SDPA) agree (fp32 atol 1e-5 /
  rtol 1e-4, as transformers' eager-vs-SDPA test), with and without padding.
- per layer, from the :class:`~attncheck.dynamic.probe.Probe`: ``normalization`` (rows sum to 1,
  weights ≥ 0), ``saturation`` (share of rows with max weight > 0.99, normalized entropy),
  ``scale`` (effective softmax scale vs the declared one), ``mask-pattern`` (full / causal /
  sliding window w, derived from which probabilities are exactly 0), ``gqa`` (K/V heads shared
  by consecutive groups of query heads, ``repeat_interleave`` layout).
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from attncheck.audit.model import AuditModel, Forward
from attncheck.dynamic.base import tolerances
from attncheck.dynamic.checks._compare import NOISE_FACTOR, NotComparable, within_noise
from attncheck.dynamic.checks.batch_independence import alone_vs_batched, other_samples_effect
from attncheck.dynamic.checks.causality import (
    dependency_pattern,
    hidden_message,
    hidden_queries,
    leak_message,
    leak_pairs,
)
from attncheck.dynamic.checks.kv_cache import decoding_difference
from attncheck.dynamic.checks.mask_pattern import classify_map as classify_pattern
from attncheck.dynamic.checks.normalization import SUM_TOL, row_sum_error
from attncheck.dynamic.checks.padding import (
    padded_content_leaks,
    padding_leak_message,
    unpadded_difference,
)
from attncheck.dynamic.checks.saturation import SATURATED_P as SATURATED
from attncheck.dynamic.checks.saturation import row_stats
from attncheck.dynamic.checks.scale import classify_scale
from attncheck.dynamic.targets import TargetOutputError, causal_blocked
from attncheck.results import CheckResult

LEAK_ATOL = 1e-6  # correct models give exactly 0; broken masks measured Δ ≥ 0.09
PAD = 3  # padded positions in padding paths
SAT_SHARE_WARN = 0.2  # share of rows with max weight > SATURATED at initialisation
SAT_ENTROPY_WARN = 0.4  # mean normalized row entropy (1 = uniform) of the least uniform layer


@dataclass
class AuditContext:
    """Run settings shared by the checks: seed, device, and collected arrays for the HTML."""

    seed: int = 0
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    leak_atol: float = LEAK_ATOL
    arrays: dict[str, Any] = field(default_factory=dict)
    layers: list[dict[str, Any]] = field(default_factory=list)
    probe_cache: dict[str, Any] = field(default_factory=dict)
    #: variant label → why the probe's forward looks causal (None: no evidence)
    causal_evidence: dict[str, str | None] = field(default_factory=dict)
    #: variant label → paths a check left out because of the softmax's dtype
    #: (:func:`masked_softmax_nan`), reported once per variant (:func:`softmax_dtype_result`)
    softmax_nan: dict[str, dict[str, str]] = field(default_factory=dict)

    def generator(self, salt: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1000003 + salt)

    @property
    def tolerance(self) -> tuple[float, float]:
        """(atol, rtol) of the run's dtype (:func:`attncheck.dynamic.base.tolerances`)."""
        return tolerances(self.dtype)


def _result(m: AuditModel, check: str, status: str, message: str, **metrics) -> CheckResult:
    metrics = {"variant": m.variant, **metrics} if m.variant else dict(metrics)
    return CheckResult(f"{check}[{m.variant}]" if m.variant else check, status, message, metrics)


def reference64(m: AuditModel, ctx: AuditContext) -> AuditModel | None:
    """The same model in float64 (a copy; None when the adapter cannot change dtype or the run
    is float64 already).  Cached per variant."""
    if m.dtype == torch.float64 or m.retype_fn is None:
        return None
    key = ("float64", m.label)
    if key not in ctx.probe_cache:
        try:
            ctx.probe_cache[key] = m.retype_fn(torch.float64)
        except Exception:  # noqa: BLE001 - no reference: fixed tolerances only
            ctx.probe_cache[key] = None
    return ctx.probe_cache[key]


def ref_out(m64: AuditModel | None, x: torch.Tensor, **kw) -> torch.Tensor | None:
    """Output of the float64 copy on the same inputs, or None (no copy, or it cannot run in
    float64, e.g. kernels without double support)."""
    if m64 is None:
        return None
    try:
        return m64.forward(x, **kw).out
    except Exception:  # noqa: BLE001
        return None


def same_draws(seed: int):
    """A context in which the global RNG starts from ``seed`` and is restored after: forwards that
    draw random numbers themselves (MAE's random patch masking: ``torch.rand`` noise in
    ``forward``) get the same draws in every run compared, so two dispatch paths see the same
    inputs."""
    import contextlib

    @contextlib.contextmanager
    def _ctx():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield

    return _ctx()


def judge(ctx: AuditContext, got: torch.Tensor, ref: torch.Tensor,
          ref64: torch.Tensor | None = None, dtype: torch.dtype | None = None
          ) -> tuple[bool, float, float]:
    """``(ok, max |got − ref|, dtype noise)`` under the one tolerance policy
    (:func:`attncheck.dynamic.checks._compare.within_noise`) in ``dtype`` (default the run's
    dtype; pass :func:`compute_dtype` of the model, the precision its attention really has)."""
    cmp = within_noise(got, ref, ref64, dtype or ctx.dtype)
    return cmp.ok, cmp.max_abs, cmp.noise


def _less_precise(a: torch.dtype, b: torch.dtype) -> bool:
    """Whether floating dtype ``a`` has a coarser resolution (larger eps) than ``b``."""
    return (a.is_floating_point and b.is_floating_point
            and torch.finfo(a).eps > torch.finfo(b).eps)


def softmax_dtype(m: AuditModel, ctx: AuditContext) -> torch.dtype:
    """The dtype the model's attention softmax runs in: the least precise dtype of the attention
    weights the probe saw a ``softmax`` call return, when less precise than the model's dtype
    (transformers' eager attention calls ``softmax(scores, dtype=torch.float32)`` and casts
    back, so the weights of a float64 model carry float32 rounding), else the model's dtype."""
    d = m.dtype
    try:
        maps, _ = probe_layers(m, ctx)
    except Exception:  # noqa: BLE001 - a forward that raises is reported by the checks
        return d
    for lm in maps:
        if lm.kind == "softmax" and _less_precise(lm.probs.dtype, d):
            d = lm.probs.dtype
    return d


def low_precision_ops(m: AuditModel, ctx: AuditContext) -> tuple[torch.dtype, list[str]]:
    """``(dtype, ops)``: the least precise floating dtype that an operator of the model's forward
    returned from tensor inputs, and the ATen operators that returned it, when less precise than
    the model's dtype; else ``(m.dtype, [])``.  Observed, not assumed: one forward of the
    variant's inputs ``(2, seq_len, ...)`` under a ``TorchDispatchMode`` that reads every
    operator's output dtype (a rotary table built with ``.float()``, an SSM scan or a router run
    in float32 inside a float64 model: their rounding is float32's, whatever the model's dtype).
    Operators with no tensor input (factories: ``arange``, ``zeros``) are not counted.  Cached
    per variant; a forward that raises leaves ``(m.dtype, [])`` (the checks report it)."""
    key = ("low_precision_ops", m.label)
    if key in ctx.probe_cache:
        return ctx.probe_cache[key]
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    seen: dict[torch.dtype, dict[str, None]] = {}
    model_dtype = m.dtype

    class _OutputDtypes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if any(isinstance(a, torch.Tensor) for a in tree_leaves((args, kwargs or {}))):
                for t in tree_leaves(out):
                    if (isinstance(t, torch.Tensor) and _less_precise(t.dtype, model_dtype)):
                        seen.setdefault(t.dtype, {})[str(func.overloadpacket.__name__)] = None
            return out

    result: tuple[torch.dtype, list[str]] = (model_dtype, [])
    try:
        x = m.make_inputs(2, m.seq_len, ctx.generator(6), ctx.device)
        with torch.no_grad(), _OutputDtypes():
            m.forward(x)
    except Exception:  # noqa: BLE001 - a forward that raises is reported by the checks
        seen.clear()
    if seen:
        low = max(seen, key=lambda d: torch.finfo(d).eps)
        result = (low, list(seen[low]))
    ctx.probe_cache[key] = result
    return result


def compute_dtype(models: AuditModel | list[AuditModel], ctx: AuditContext) -> torch.dtype:
    """The least precise of the run's dtype, :func:`softmax_dtype` and :func:`low_precision_ops`
    of ``models``: the dtype whose tolerance applies to their outputs (a float64 model whose
    softmax, rotary table or SSM scan runs in float32 is compared with float32 tolerances)."""
    d = ctx.dtype
    for m in models if isinstance(models, list) else [models]:
        for s in (softmax_dtype(m, ctx), low_precision_ops(m, ctx)[0]):
            if _less_precise(s, d):
                d = s
    return d


def masked_softmax_nan(m: AuditModel, x: torch.Tensor, mask: torch.Tensor | None,
                       position_ids: torch.Tensor | None = None) -> str | None:
    """Why a padded forward gives NaN at real positions when the cause is the softmax's dtype
    (None otherwise): a softmax call that returns a less precise dtype than its float input
    (``softmax(scores, dtype=torch.float32)`` in a float64 model) gets a row whose every logit
    lies below that dtype's range (the additive mask's minimum of the model's dtype,
    ``torch.finfo(float64).min`` = −1.8e308) — a fully masked padding query: cast, the row is all
    −inf and softmax returns NaN, which the next layer carries into real positions through
    0 × NaN in weights · V.  Runs one forward of ``x`` ``(B, L, ...)`` with ``mask`` ``(B, L)``
    under the :class:`~attncheck.dynamic.probe.Probe`."""
    from attncheck.dynamic.probe import Probe

    if mask is None or not m.dtype.is_floating_point:
        return None
    p = Probe()
    try:
        with p:
            m.forward(x, attention_mask=mask, position_ids=position_ids)
    except Exception:  # noqa: BLE001 - the attention calls recorded before the raise still tell
        pass
    for r in p.attention_records():
        if r.kind != "softmax" or r.probs is None or r.logits is None:
            continue
        low = r.probs.dtype
        logits, probs = r.row_logits().double(), r.rows()
        if _less_precise(r.logits.dtype, m.dtype):
            # the scores were cast before the call (``softmax(scores.float())``): the overflow
            # already happened, the row arrives as all −inf
            rows = torch.isneginf(logits).all(-1) & torch.isnan(probs).any(-1)
            if bool(rows.any()):
                lo, hi = (str(d).replace("torch.", "") for d in (r.logits.dtype, m.dtype))
                return (f"the scores reach {r.op.rsplit('.', 1)[-1]} cast to {lo}: the additive "
                        f"mask value of the {hi} model (finfo({hi}).min = −1.8e308) overflows to "
                        f"−inf in {lo}, a fully masked padding query row becomes NaN, and the next "
                        f"layer carries the NaN into real positions (0 × NaN in weights · V)")
            continue
        if not _less_precise(low, r.logits.dtype):
            continue
        below = (logits < -torch.finfo(low).max) & torch.isfinite(logits)
        rows = below.all(-1) & torch.isnan(probs).any(-1)
        if bool(rows.any()):
            lo = str(low).replace("torch.", "")
            return (f"{r.op.rsplit('.', 1)[-1]} casts the scores to {lo}: the additive mask "
                    f"value {float(logits[rows].max()):.3g} of the {str(r.logits.dtype).replace('torch.', '')} "
                    f"model overflows to −inf in {lo}, a fully masked padding query row becomes NaN, "
                    f"and the next layer carries the NaN into real positions (0 × NaN in weights · V)")
    return None


def position_offset(m: AuditModel) -> int | None:
    """First position id the model gives itself (``position_ids=None``): 0 for most models, 2
    for RoBERTa-style models deriving positions from ``padding_idx`` (``padding_idx + 1``);
    found by comparing the model's default against ``arange(L) + c``; None when no ``c`` in
    0..4 reproduces it (positions are then never passed).  Cached in ``m.info``."""
    if "position_ids" not in m.supports or m.input_kind not in ("tokens", "features"):
        return None
    if "position_offset" not in m.info:
        off = None
        x = m.make_inputs(1, m.seq_len, torch.Generator().manual_seed(7))
        base = m.forward(x).out
        for c in range(5):
            pids = torch.arange(c, c + m.seq_len, device=x.device)[None]
            try:
                if torch.equal(m.forward(x, position_ids=pids).out, base):
                    off = c
                    break
            except Exception:  # noqa: BLE001
                break
        m.info["position_offset"] = off
    return m.info["position_offset"]


def ignores_position_ids(m: AuditModel) -> bool:
    """Whether the forward ignores the ``position_ids`` it is given (it sets its own positions):
    shifting them by one past :func:`position_offset` leaves the output unchanged."""
    c = position_offset(m)
    if c is None:
        return False
    x = m.make_inputs(1, m.seq_len, torch.Generator().manual_seed(7))
    try:
        shifted = m.forward(x, position_ids=torch.arange(c + 1, c + 1 + m.seq_len, device=x.device)[None])
    except Exception:  # noqa: BLE001 - positions the model cannot take: not ignored
        return False
    return torch.equal(shifted.out, m.forward(x).out)


class NonFiniteOutput(Exception):
    """The model's output is NaN/inf at real positions for finite inputs.

    Comparing such outputs proves nothing (NaN − NaN is NaN, inf − inf is NaN; a leak map would
    read "Δ inf" everywhere), so a comparison check that meets one reports *non-finite output*
    with the positions instead of its own verdict (see :func:`require_finite`)."""

    def __init__(self, what: str, positions: list[tuple[int, int]], nan: int, inf: int) -> None:
        super().__init__(f"{what}: NaN/inf at {len(positions)} position(s)")
        self.what, self.positions, self.nan, self.inf = what, positions, nan, inf

    def message(self, check: str) -> str:
        shown = ", ".join(f"({b}, {i})" for b, i in self.positions[:6])
        more = ", …" if len(self.positions) > 6 else ""
        kinds = " and ".join(k for k, n in (("NaN", self.nan), ("inf", self.inf)) if n)
        return (f"non-finite output: {kinds} in {self.what} at {len(self.positions)} real "
                f"(sample, position) pair(s) {shown}{more} for finite inputs; outputs that are not "
                f"finite cannot be compared, so this is no {check} verdict")

    def metrics(self) -> dict[str, Any]:
        return {"non_finite": True, "non_finite_in": self.what,
                "non_finite_positions": [list(p) for p in self.positions[:64]],
                "non_finite_count": len(self.positions), "nan_values": self.nan,
                "inf_values": self.inf}


def require_finite(out: torch.Tensor, what: str, real: torch.Tensor | None = None) -> None:
    """Raise :class:`NonFiniteOutput` when ``out`` ``(B, L, ...)`` holds NaN/inf at a position
    where ``real`` ``(B, L)`` (1/True = real token; None = all) is set."""
    o = out.detach()
    if bool(torch.isfinite(o).all()):
        return
    if o.dim() == 1:
        o = o.unsqueeze(1)
    bad = ~torch.isfinite(o.reshape(*o.shape[:2], -1)).all(-1)  # (B, L)
    if real is not None:
        bad = bad & real.to(bad.device).bool().reshape(bad.shape)
    if not bool(bad.any()):
        return
    sel = o[bad]  # the rows of the bad positions
    positions = [(int(b), int(i)) for b, i in bad.nonzero().tolist()]
    raise NonFiniteOutput(what, positions, int(torch.isnan(sel).sum()), int(torch.isinf(sel).sum()))


def _positions_for(m: AuditModel, mask: torch.Tensor | None) -> torch.Tensor | None:
    """``position_ids`` (B, L) that give real tokens the positions the model gives an unpadded
    sequence (``c, c+1, …``, :func:`position_offset`; pads get ``c``); None when the model
    takes none or derives them its own way."""
    if mask is None or "position_ids" not in m.supports:
        return None
    c = position_offset(m)
    if c is None:
        return None
    pos = mask.long().cumsum(-1) - 1 + c
    return pos.masked_fill(mask == 0, c)


# ------------------------------------------------------------------------------------------------
# causality
# ------------------------------------------------------------------------------------------------
def _leak_deltas(m: AuditModel, x: torch.Tensor, ctx: AuditContext, mask=None, out_attn=False,
                 salt=0) -> torch.Tensor:
    """Δ[i, j] = max over batch/features of |out_i(x with input j changed) − out_i(x)|, shape
    (L, L), query × key, measured by the leak measurement of ``attncheck check``
    (:func:`attncheck.dynamic.checks.causality.variant_deltas`); 0 at padded queries and keys
    of ``mask``.

    All L perturbed copies and the original run in one batched forward.
    """
    from attncheck.dynamic.checks.causality import variant_deltas

    B, L = x.shape[0], x.shape[1]
    g = ctx.generator(salt)
    variants = [x]
    for j in range(L):
        pos = torch.zeros(x.shape[:2], dtype=torch.bool)
        pos[:, j] = True
        variants.append(m.perturb(x, pos.to(x.device), g))
    xs = torch.cat(variants, 0)
    am = mask.repeat(L + 1, 1) if mask is not None else None
    pids = _positions_for(m, am)
    f = m.forward(xs, attention_mask=am, position_ids=pids, output_attentions=out_attn)
    out = f.out.detach().double().reshape(L + 1, B, *f.out.shape[1:])
    require_finite(out[0], "the output", mask)
    for j in range(L):
        require_finite(out[1 + j], f"the output after changing the input at position {j}", mask)
    d = variant_deltas(f.out.detach(), L, 0).cpu()  # (j, b, i)
    if mask is not None:
        real = mask.bool().cpu()  # (B, L)
        d = d.masked_fill(~real[None, :, :], 0.0)  # ignore pad queries
        d = d.masked_fill(~real.T[:, :, None], 0.0)  # ignore pad keys (padding check covers them)
    return d.amax(1).T  # (i, j)


def check_causality(m: AuditModel, ctx: AuditContext) -> CheckResult:
    if _no_sequence(m):
        return _result(m, "causality", "skip", f"{_why_no_sequence(m)}: bidirectional over its input by design"
                       if m.per_position else f"{_why_no_sequence(m)}: no position to leak into")
    if m.causal is False:
        return _result(m, "causality", "skip", f"{m.kind}: bidirectional by design (not causal)")
    evidence = None if m.causal else causal_evidence(m, ctx)
    L = m.seq_len
    x = m.make_inputs(2, L, ctx.generator(1), ctx.device)
    paths: dict[str, tuple] = {"no-mask": (None, False)}
    if "attention_mask" in m.supports:
        ones = torch.ones(2, L, dtype=torch.long, device=x.device)
        left = ones.clone()
        left[0, :PAD] = 0
        paths["mask-ones"] = (ones, False)
        paths["left-pad"] = (left, False)
    if "output_attentions" in m.supports:
        paths["output_attentions"] = (None, True)
    per_path, union, worst = {}, torch.zeros(L, L, dtype=torch.bool), 0.0
    delta = torch.zeros(L, L, dtype=torch.float64)  # (i, j) max over the paths
    self_blind: set[int] = set()
    errors = {}
    ctx.arrays.setdefault(m.label, {})["leak"] = {}
    for k, (name, (mask, oa)) in enumerate(paths.items()):
        try:
            dq = _leak_deltas(m, x, ctx, mask, oa, salt=10 + k)  # (i, j)
        except NonFiniteOutput:
            why = masked_softmax_nan(m, x, mask, _positions_for(m, mask))
            if why is None:  # the model's output itself: not one path's
                raise
            ctx.softmax_nan.setdefault(m.label, {})[f"causality {name}"] = why
            continue
        except TargetOutputError:
            raise
        except Exception as exc:  # a dispatch path that crashes is an error of that path
            # ... unless the NaN of the softmax's dtype made the model's own code raise
            # (a torch.distributions.Categorical validating NaN logits)
            why = masked_softmax_nan(m, x, mask, _positions_for(m, mask)) if mask is not None else None
            if why is not None:
                ctx.softmax_nan.setdefault(m.label, {})[f"causality {name}"] = why
                continue
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        future = causal_blocked(L, L, "top_left")
        leak = (dq > ctx.leak_atol) & future
        lo = 0 if mask is None else int((mask[0] == 0).sum())
        self_blind.update(hidden_queries(dq > 0, rows=list(range(lo, L))))
        union |= leak
        delta = torch.maximum(delta, dq)
        fmax = float(dq[future].max()) if L > 1 else 0.0
        worst = max(worst, fmax)
        per_path[name] = {"max_future_delta": fmax, "leaks": int(leak.sum())}
        ctx.arrays[m.label]["leak"][name] = dq.float().numpy()
        if name == "no-mask":
            pattern = dependency_pattern(dq > ctx.leak_atol)
    metrics = {"positions": L, "paths": per_path, "leak_map": union.int().tolist(),
               "max_future_delta": worst, "leak_atol": ctx.leak_atol}
    if errors:
        metrics["path_errors"] = errors
    left_out = [p.split(" ", 1)[1] for p in ctx.softmax_nan.get(m.label, {}) if p.startswith("causality ")]
    if left_out:
        metrics["paths_left_out"] = {p: "NaN from the softmax's dtype (softmax-dtype)" for p in left_out}
    if "no-mask" in per_path:
        metrics["observed_pattern"] = pattern
    if not m.causal:
        if evidence is None and "no-mask" in per_path and pattern in CAUSAL_PATTERNS:
            evidence = f"observed dependency pattern is {pattern}"
        if evidence is None:
            seen = f"observed pattern: {pattern}" if "no-mask" in per_path else "no pattern observed"
            return _result(m, "causality", "skip",
                           f"not declared causal ({seen}); declare it with --causal (or a `causal = "
                           "True` attribute on the module) to check for leaks", **metrics)
        metrics["causal"] = f"True (detected: {evidence})"
    else:
        metrics["causal"] = "True (declared)"
    because = f" (causal detected: {evidence})" if evidence else ""
    future = causal_blocked(L, L, "top_left")
    pairs, worst_pair = leak_pairs(union, delta, future)
    if pairs:
        bad = [p for p, v in per_path.items() if v["leaks"]]
        return _result(m, "causality", "fail",
                       f"{leak_message(pairs, worst_pair, delta, int(future.sum()))}; leaking in paths "
                       f"{', '.join(bad)}{because}",
                       first_leak=pairs[0], leaking_pairs=len(pairs), **metrics)
    if self_blind:
        return _result(m, "causality", "fail", hidden_message(sorted(self_blind)),
                       self_blind=sorted(self_blind), **metrics)
    if errors:
        return _result(m, "causality", "error",
                       "dispatch path(s) raised: " + "; ".join(f"{k}: {v}" for k, v in errors.items()),
                       **metrics)
    skipped = (f"; left out: {', '.join(left_out)} (NaN from the softmax's dtype, see softmax-dtype)"
               if left_out else "")
    return _result(m, "causality", "pass",
                   f"no leak over {L} positions × {len(per_path)} dispatch paths "
                   f"({', '.join(per_path)}); max Δ at future positions = {worst:.3g}{because}{skipped}",
                   **metrics)


#: dependency patterns that show causal intent (the second: the diagonal is masked too)
CAUSAL_PATTERNS = ("causal", "causal, current token hidden")


def causal_evidence(m: AuditModel, ctx: AuditContext) -> str | None:
    """Why a module of undeclared causality looks causal (None: no evidence), as ``check``
    infers it: the module's ``config.is_causal`` / ``config.is_decoder``, SDPA called with
    ``is_causal=True`` or a triangular mask of exactly-zero weights seen by the probe (cached per
    variant; :func:`attncheck.dynamic.checks.causality._probe_says_causal`)."""
    if m.causal is False or _no_sequence(m):
        return None
    cfg = getattr(m.module, "config", None)
    for attr in ("is_causal", "is_decoder"):
        if getattr(cfg, attr, None) is True and _forward_default(m.module, attr) in (None, True):
            return f"config.{attr} = True"
    try:
        probe_layers(m, ctx)
    except Exception:  # noqa: BLE001 - a forward that raises is reported by the dispatch paths
        return None
    return ctx.causal_evidence.get(m.label)


def _forward_default(module: torch.nn.Module, name: str) -> Any:
    """Default of the ``name`` parameter of ``module.forward`` (None when it has none or takes
    no such parameter).  A forward with ``is_decoder=False`` (BLIP's text model) builds a
    bidirectional mask unless its caller asks otherwise, whatever its config says; a default of
    None falls back to the config."""
    try:
        p = inspect.signature(module.forward).parameters.get(name)
    except (TypeError, ValueError):
        return None
    return None if p is None or p.default is inspect.Parameter.empty else p.default


# ------------------------------------------------------------------------------------------------
# padding
# ------------------------------------------------------------------------------------------------
def _pad_inputs(m: AuditModel, x: torch.Tensor, side: str, g) -> tuple[torch.Tensor, torch.Tensor]:
    B, L = x.shape[0], x.shape[1]
    if m.input_kind == "tokens":
        pad = torch.full((B, PAD), m.pad_id, dtype=x.dtype, device=x.device)
    else:
        pad = torch.randn((B, PAD, *x.shape[2:]), generator=g).to(x.device, x.dtype)
    ones = torch.ones(B, L, dtype=torch.long, device=x.device)
    zeros = torch.zeros(B, PAD, dtype=torch.long, device=x.device)
    if side == "right":
        return torch.cat([x, pad], 1), torch.cat([ones, zeros], 1)
    return torch.cat([pad, x], 1), torch.cat([zeros, ones], 1)


def _no_sequence(m: AuditModel) -> bool:
    # images, audio and patched time series: the output positions are not the input positions;
    # a model whose output is per sample only (pooled, latent queries) has no output positions
    return m.input_kind in ("pixels", "audio", "series") or not m.per_position


def _why_no_sequence(m: AuditModel) -> str:
    if not m.per_position:
        return f"{m.kind} model: no output row per input position (a per-sample output)"
    return f"{m.kind} model"


def check_padding(m: AuditModel, ctx: AuditContext) -> CheckResult:
    if _no_sequence(m):
        return _result(m, "padding", "skip", f"{_why_no_sequence(m)}: no padding mask over its input"
                       if m.per_position else f"{_why_no_sequence(m)}: no real positions to compare")
    if "attention_mask" not in m.supports:
        return _result(m, "padding", "skip", "the model takes no padding mask")
    L = m.seq_len - PAD
    g = ctx.generator(2)
    x = m.make_inputs(2, L, g, ctx.device)
    ref = m.forward(x).out
    require_finite(ref, "the unpadded output")
    m64 = reference64(m, ctx)
    ref64 = ref_out(m64, x)
    atol, rtol = tolerances(compute_dtype(m, ctx))
    metrics: dict[str, Any] = {"real_positions": L, "padded_positions": PAD, "atol": atol, "rtol": rtol,
                               "pad_id": m.pad_id if m.input_kind == "tokens" else None}
    problems = []
    sides = ["right", "left"]
    # left padding shifts absolute positions unless the model takes position_ids (given the
    # positions the model gives an unpadded run); position-free layers are unaffected
    if m.input_kind != "features" and _positions_for(m, torch.ones(1, 1, dtype=torch.long)) is None:
        sides = ["right"]
        metrics["left"] = ("skipped: the model takes no position_ids" if "position_ids" not in m.supports
                           else "skipped: the model's default positions are not c + arange(L)")
    dtype = compute_dtype(m, ctx)
    for side in list(sides):
        xp, am = _pad_inputs(m, x, side, g)
        pids = _positions_for(m, am)
        try:
            out = m.forward(xp, attention_mask=am, position_ids=pids).out
            real = out[:, :L] if side == "right" else out[:, PAD:]
            require_finite(real, f"the {side}-padded output")
        except Exception:
            # NaN at real positions, or the model's own code raising on them (a
            # torch.distributions.Categorical validating NaN logits): the softmax's dtype?
            why = masked_softmax_nan(m, xp, am, pids)
            if why is None:
                raise
            ctx.softmax_nan.setdefault(m.label, {})[f"padding {side}"] = why
            sides.remove(side)
            metrics[side] = "left out: NaN from the softmax's dtype (softmax-dtype)"
            continue
        cmp = within_noise(real, ref, ref64, dtype)
        ok, dmax, noise = cmp.ok, cmp.max_abs, cmp.noise
        # changing what sits in the padded slots must change nothing at real positions
        pos = (am == 0)
        xq = m.perturb(xp, pos, g)
        out2 = m.forward(xq, attention_mask=am, position_ids=pids).out
        r2 = out2[:, :L] if side == "right" else out2[:, PAD:]
        require_finite(r2, f"the {side}-padded output after changing the padded inputs")
        rows = list(range(L)) if side == "right" else list(range(PAD, PAD + L))
        dpad, leaks = 0.0, []
        for b in range(r2.shape[0]):
            d, moved = padded_content_leaks(r2[b], real[b], rows, 0, ctx.leak_atol)
            dpad, leaks = max(dpad, d), leaks + [[b, i] for i in moved]
        metrics[side] = {"max_abs_diff_vs_unpadded": dmax, "pad_content_delta": dpad, "dtype_noise": noise}
        if side == "left" and not ok and ignores_position_ids(m):
            # left padding shifts the positions the model gives itself, and it cannot be told
            # the unpadded ones: no padding verdict on this side
            sides.remove("left")
            metrics["left"] = "skipped: the model ignores the position_ids it is given"
            break
        if not ok:
            problems.append(unpadded_difference(cmp, f"{side} padding"))
        if leaks:
            problems.append(f"{side} padding: {padding_leak_message(leaks, dpad, 'inputs')}")
    if problems:
        return _result(m, "padding", "fail", "; ".join(problems), **metrics)
    if not sides:
        return _result(m, "padding", "skip", "no padded side left to compare: NaN from the "
                       "softmax's dtype (see softmax-dtype)", **metrics)
    worst = max(metrics[s]["max_abs_diff_vs_unpadded"] for s in sides)
    return _result(m, "padding", "pass",
                   f"{' and '.join(sides)} padding ({PAD} slots) match the unpadded run "
                   f"(max |Δ| {worst:.3g}); padded content has no effect", **metrics)


# ------------------------------------------------------------------------------------------------
# batch independence
# ------------------------------------------------------------------------------------------------
def check_batch(m: AuditModel, ctx: AuditContext) -> CheckResult:
    g = ctx.generator(3)
    x = m.make_inputs(3, m.seq_len, g, ctx.device)
    alone = m.forward(x[:1]).out
    require_finite(alone, "the output of sample 0 alone")
    batch = m.forward(x).out
    require_finite(batch[:1], "the output of sample 0 in a batch of 3")
    m64 = reference64(m, ctx)
    dtype = compute_dtype(m, ctx)
    alone_cmp = within_noise(batch[:1], alone, ref_out(m64, x[:1]), dtype)
    others = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
    others[1:] = True
    if m.input_kind != "tokens":
        x2 = x.clone()
        x2[1:] = torch.randn(x[1:].shape, generator=g).to(x.device)
    else:
        x2 = m.perturb(x, others, g)
    changed = m.forward(x2).out
    require_finite(changed[:1], "the output of sample 0 after changing the other samples")
    other_cmp, mixed = other_samples_effect(batch, changed, [0], [1, 2], ctx.leak_atol)
    dmax, d_other = alone_cmp.max_abs, other_cmp.max_abs
    metrics = {"batch": 3, "max_abs_diff_alone_vs_batched": dmax, "other_samples_delta": d_other,
               "atol": tolerances(dtype)[0], "rtol": tolerances(dtype)[1]}
    if mixed:
        return _result(m, "batch-independence", "fail", mixed, **metrics)
    if not alone_cmp.ok:
        return _result(m, "batch-independence", "fail", alone_vs_batched(alone_cmp, 3), **metrics)
    return _result(m, "batch-independence", "pass",
                   f"sample 0 is the same alone and in a batch of 3 (max |Δ| {dmax:.3g}); "
                   f"other samples have no effect", **metrics)


# ------------------------------------------------------------------------------------------------
# KV cache
# ------------------------------------------------------------------------------------------------
def check_kv_cache(m: AuditModel, ctx: AuditContext) -> CheckResult:
    if m.decode_fn is None or "cache" not in m.supports:
        return _result(m, "kv-cache", "skip", f"{m.kind}: no incremental decoding (no KV cache)")
    x = m.make_inputs(2, m.seq_len, ctx.generator(4), ctx.device)
    full = m.forward(x).out
    require_finite(full, "the full forward")
    m64 = reference64(m, ctx)
    full64 = ref_out(m64, x)
    dtype = compute_dtype(m, ctx)
    atol, rtol = tolerances(dtype)
    metrics: dict[str, Any] = {"positions": m.seq_len, "atol": atol, "rtol": rtol,
                               "noise_factor": NOISE_FACTOR}
    bad = []
    for prefill in (1, m.seq_len // 2):
        try:
            with torch.no_grad():
                inc = m.decode_fn(x, prefill)
        except NotComparable:
            raise
        except Exception as exc:  # noqa: BLE001 - the model's own decoding API, not our analysis
            return _result(m, "kv-cache", "skip",
                           f"the model's incremental decoding raised {type(exc).__name__}: {exc}"[:400], **metrics)
        if not isinstance(inc, torch.Tensor):
            from attncheck.audit.model import main_output

            inc = main_output(inc, f"{m.label} (decoding)")
        require_finite(inc, f"step-by-step decoding (prefill {prefill})")
        cmp = within_noise(inc, full, full64, dtype)
        per_pos, why = decoding_difference(
            inc, full, cmp, 1, f"decoding with the model's cache after a prefill of {prefill}")
        metrics[f"prefill_{prefill}"] = {"max_abs_diff": cmp.max_abs, "dtype_noise": cmp.noise,
                                         "per_position": per_pos}
        if why:
            bad.append(why)
    if bad:
        return _result(m, "kv-cache", "fail", "; ".join(bad), **metrics)
    worst = max(metrics[k]["max_abs_diff"] for k in metrics if k.startswith("prefill_"))
    return _result(m, "kv-cache", "pass",
                   f"step-by-step decoding with the model's cache equals the full forward "
                   f"(prefill 1 and {m.seq_len // 2}, max |Δ| {worst:.3g})", **metrics)


# ------------------------------------------------------------------------------------------------
# backend agreement (cross-variant)
# ------------------------------------------------------------------------------------------------
def check_backend_agreement(models: list[AuditModel], ctx: AuditContext) -> CheckResult:
    name = "backend-agreement"
    if len(models) < 2:
        why = models[0].info.get("sdpa_unavailable") if models else None
        return CheckResult(name, "skip", "one dispatch path only" + (f" (no SDPA variant: {why})" if why else ""),
                           {})
    base = models[0]
    x = base.make_inputs(2, base.seq_len, ctx.generator(5), ctx.device)
    paths: dict[str, Any] = {"no-mask": None}
    if all("attention_mask" in m.supports for m in models) and base.input_kind == "tokens" and base.per_position:
        am = torch.ones(2, base.seq_len, dtype=torch.long, device=x.device)
        am[0, -PAD:] = 0
        paths["right-pad"] = am
    dtype = compute_dtype(models, ctx)
    atol, rtol = tolerances(dtype)
    metrics: dict[str, Any] = {"reference": base.variant, "atol": atol, "rtol": rtol, "pairs": {}}
    bad = []
    m64 = reference64(base, ctx)
    for pname, am in paths.items():
        pids = _positions_for(base, am)
        with same_draws(ctx.seed):
            ref = base.forward(x, attention_mask=am, position_ids=pids).out
        with same_draws(ctx.seed):
            ref64 = ref_out(m64, x, attention_mask=am, position_ids=pids)
        require_finite(ref, f"the {base.variant} output ({pname})", am)
        for other in models[1:]:
            with same_draws(ctx.seed):
                out = other.forward(x, attention_mask=am, position_ids=_positions_for(other, am)).out
            require_finite(out, f"the {other.variant} output ({pname})", am)
            r64 = ref64
            if am is not None:
                keep = am.bool()
                r, o = ref[keep], out[keep]
                r64 = ref64[keep] if ref64 is not None else None
            else:
                r, o = ref, out
            ok, dmax, _ = judge(ctx, o, r, r64, dtype)
            metrics["pairs"][f"{other.variant}/{pname}"] = dmax
            if not ok:
                bad.append(f"{other.variant} vs {base.variant} ({pname}): max |Δ| {dmax:.3g}")
    labels = " vs ".join(m.variant or "?" for m in models)
    if bad:
        return CheckResult(name, "fail", "dispatch paths disagree: " + "; ".join(bad), metrics)
    worst = max(metrics["pairs"].values()) if metrics["pairs"] else 0.0
    return CheckResult(name, "pass", f"{labels} agree on {', '.join(paths)} (max |Δ| {worst:.3g}, "
                       f"atol {atol:g}, rtol {rtol:g})", metrics)


# ------------------------------------------------------------------------------------------------
# per-layer checks from the probe
# ------------------------------------------------------------------------------------------------
@dataclass
class LayerMap:
    """One attention map seen during the forward: probabilities ``(B, H, L_q, L_k)``."""

    index: int
    kind: str
    probs: torch.Tensor
    effective_scale: float | None = None
    scale_source: str | None = None
    k: torch.Tensor | None = None
    enable_gqa: bool = False
    num_heads: int | None = None
    head_dim: int | None = None
    #: facts of the attention module that made the call (:func:`attncheck.audit.hf.module_facts`
    #: plus ``name`` and ``layer``), None when no attention module was running
    module: dict[str, Any] | None = None


def _layer_index(name: str) -> int | None:
    for part in name.split("."):
        if part.isdigit():
            return int(part)
    return None


def passed_mask_allowed(mod: torch.nn.Module, args: tuple, kwargs: dict[str, Any]
                        ) -> torch.Tensor | None:
    """Which keys the mask an attention module is called with lets each query see: a bool
    ``(L_q, L_k)`` map (True = visible, the union over samples and heads), ``(1, L_k)`` for a
    key mask (``(B, L_k)`` in transformers' padding convention, 1 = real key, or ``(..., 1,
    L_k)``); None when no mask is passed or a key mask hides keys (padding, not a pattern).

    The mask is the ``attention_mask`` argument (``encoder_attention_mask`` for a
    cross-attention call, i.e. one given ``encoder_hidden_states``); bool: True = visible.
    For :class:`torch.nn.MultiheadAttention` it is ``attn_mask`` with PyTorch's convention
    (bool: True = *not* allowed).  A float mask is additive: an entry hides its key when it
    lowers the key's weight below :data:`MASKED_WEIGHT` whatever the logits, i.e. at or below
    ``log(MASKED_WEIGHT)`` ≈ −87.3 (the ``finfo.min`` of transformers' masks, and also the −100
    of Swin's shifted-window mask, Liu et al. 2021) — the threshold the observed weights are
    read with (:func:`_allowed`)."""
    bound = dict(kwargs)
    if args:
        try:
            bound.update(inspect.signature(mod.forward).bind_partial(*args).arguments)
        except (TypeError, ValueError):
            pass
    hides = False  # bool convention: True = hidden
    if isinstance(mod, torch.nn.MultiheadAttention):
        mask, hides = bound.get("attn_mask"), True
    else:
        # a cross-attention call (encoder_hidden_states given) is masked by encoder_attention_mask
        cross = bound.get("encoder_hidden_states") is not None and "encoder_attention_mask" in bound
        mask = bound.get("encoder_attention_mask" if cross else "attention_mask")
        if mask is None and "attention_mask" not in bound:  # timm's window attention: ``mask``,
            mask = bound.get("mask")  # additive (Swin's shifted-window mask, Liu et al. 2021)
    if not isinstance(mask, torch.Tensor) or mask.dim() < 2:
        return None
    t = mask.detach()
    if t.dtype == torch.bool:
        allowed = ~t if hides else t
    elif t.is_floating_point():
        allowed = t > math.log(MASKED_WEIGHT)
    else:
        allowed = t != 0
    if t.dim() == 2 and not isinstance(mod, torch.nn.MultiheadAttention):
        # (B, L_k): 1 = real key (HF's padding convention)
        return allowed.any(0, keepdim=True).cpu() if bool(allowed.all()) else None
    allowed = allowed.reshape(-1, *t.shape[-2:]).any(0).cpu()
    if allowed.shape[0] == 1 and not bool(allowed.all()):  # a key mask hiding (padding) keys
        return None
    return allowed


def passed_mask_pattern(mod: torch.nn.Module, args: tuple, kwargs: dict[str, Any]
                        ) -> tuple[str, int | None] | None:
    """The pattern (:func:`classify_pattern`) of the mask an attention module is called with
    (:func:`passed_mask_allowed`); a key mask that hides no key is ``("full", None)``; None when
    no mask is passed or the mask hides padding keys (transformers' attention functions apply
    the module's ``is_causal`` attribute only when no mask is passed; with a mask they use the
    mask alone)."""
    return _passed_pattern(passed_mask_allowed(mod, args, kwargs))


def _passed_pattern(allowed: torch.Tensor | None) -> tuple[str, int | None] | None:
    """The pattern of a :func:`passed_mask_allowed` map: a ``(1, L_k)`` key mask is ``full``."""
    if allowed is None:
        return None
    return ("full", None) if allowed.shape[0] == 1 else classify_pattern(allowed)


def _owner_hooks(m: AuditModel, probe) -> tuple[list, dict[int, dict[str, Any]]]:
    """Forward hooks that attribute each probe record to the innermost attention module running
    when it was made (record index → module facts, plus ``passed_mask``: the pattern of the mask
    the call was given, :func:`passed_mask_pattern`, and ``passed_allowed``: that mask's bool
    map, :func:`passed_mask_allowed`)."""
    from attncheck.audit.hf import module_facts

    owners: dict[int, dict[str, Any]] = {}
    handles = []
    for name, mod in m.attention_modules:
        facts = dict(module_facts(mod), name=name, layer=_layer_index(name))
        start: list[tuple[int, dict[str, Any]]] = []

        def pre(mod_, args, kwargs, start=start, facts=facts):
            try:
                allowed = passed_mask_allowed(mod_, args, kwargs)
            except Exception:  # noqa: BLE001 - a mask the audit cannot read: no fact
                allowed = None
            start.append((len(probe.records),
                          dict(facts, passed_mask=_passed_pattern(allowed), passed_allowed=allowed)))

        def post(_mod, _args, _out, start=start, facts=facts):
            a, call = start.pop() if start else (0, facts)
            for i in range(a, len(probe.records)):
                owners.setdefault(i, call)

        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post))
    return handles, owners


def _with_sdpa_causal_flag(r, facts: dict[str, Any] | None, eager: LayerMap | None) -> dict[str, Any] | None:
    """Module facts of an SDPA call made with ``is_causal=True`` and no ``attn_mask`` by a module
    given no mask, when the eager variant's module of the same name made the same map (``eager``)
    with a causal mask: the flag is then the mask the call was given (transformers' SDPA path
    drops a purely causal mask and passes ``is_causal`` instead), a top-left causal
    ``(L_q, L_k)`` map as SDPA applies it.  Without that eager evidence the facts are unchanged:
    a module whose ``is_causal`` is set by mistake in a bidirectional model also calls SDPA so,
    while its eager path (which ignores ``is_causal``) attends to every key."""
    if (facts is None or r.kind != "sdpa" or not r.is_causal or r.attn_mask is not None
            or facts.get("passed_allowed") is not None or r.probs is None or eager is None):
        return facts
    lq, lk = r.rows().shape[-2:]
    ef = eager.module or {}
    if ef.get("name") != facts.get("name") or tuple(eager.probs.shape[-2:]) != (lq, lk) \
            or ef.get("passed_mask") != ("causal", None):
        return facts
    causal = torch.ones(lq, lk, dtype=torch.bool).tril()
    return dict(facts, passed_mask=_passed_pattern(causal), passed_allowed=causal)


def probe_layers(m: AuditModel, ctx: AuditContext) -> tuple[list[LayerMap], list[str]]:
    """Run one forward under the :class:`~attncheck.dynamic.probe.Probe`; return the attention
    maps (falling back to the model's returned weights) and what could not be observed.
    Cached per variant."""
    if m.label in ctx.probe_cache:
        return ctx.probe_cache[m.label]
    from attncheck.dynamic.probe import Probe

    from attncheck.dynamic.checks.causality import _probe_says_causal

    x = m.make_inputs(2, m.seq_len, ctx.generator(6), ctx.device)
    p = Probe()
    handles, owners = _owner_hooks(m, p)
    try:
        with p:
            f = m.forward(x, output_attentions="output_attentions" in m.supports)
    finally:
        for h in handles:
            h.remove()
    ctx.causal_evidence[m.label] = _probe_says_causal(p, m.seq_len)
    maps = []
    # the eager variant's maps (probed first), read for SDPA's is_causal flag
    eager = ctx.probe_cache.get(f"{m.spec}[eager]", ([], []))[0] if m.variant not in (None, "eager") else []
    for i, r in enumerate(p.attention_records()):
        if r.probs is None or r.probs.dim() < 2:
            continue
        pr = r.rows()
        if "qk_columns" in r.extra:  # sink logits joined the softmax: keep the weights of the keys
            pr = pr[..., :r.extra["qk_columns"]]
        pr = pr.reshape(-1, *pr.shape[-3:]) if pr.dim() >= 3 else pr.reshape(1, 1, *pr.shape[-2:])
        maps.append(LayerMap(i, r.kind, pr.detach(), r.effective_scale, r.scale_source, r.k,
                             bool(r.enable_gqa), r.num_heads, r.head_dim,
                             _with_sdpa_causal_flag(r, owners.get(r.index),
                                                    eager[len(maps)] if len(maps) < len(eager) else None)))
    not_obs = list(p.not_observable)
    if not maps and f.attentions:
        # returned "attentions" count only when shaped like weights (B, H, L_q, L_k) over the
        # input's positions (RWKV returns its recurrent states under that name); for dense inputs, whose length the
        # adapter does not fix, the keys must be the positions of some returned map's queries
        # (Autoformer returns autocorrelations (B, H, L, head_dim) over channels, not keys)
        returned = [a for a in f.attentions if isinstance(a, torch.Tensor) and a.dim() == 4]
        lens = {m.seq_len, m.enc_len} if m.input_kind == "tokens" else {a.shape[-2] for a in returned}
        maps = [LayerMap(i, "returned-weights", a.detach()) for i, a in enumerate(returned) if a.shape[-1] in lens]
    ctx.probe_cache[m.label] = (maps, not_obs)
    return maps, not_obs


def _no_maps(m: AuditModel, check: str, not_obs: list[str]) -> CheckResult:
    why = "; ".join(not_obs) if not_obs else "no softmax / SDPA call seen in the forward"
    return _result(m, check, "skip", f"not observable: {why}")


#: attention weights at or below the smallest normal float32 count as masked.  Softmax gives
#: such a weight only to a logit at least 87 below the row maximum, which no score of a model
#: at initialisation reaches but an additive mask constant does: Swin's shifted-window mask of
#: −100 (Liu et al. 2021) leaves e^−100 ≈ 4e−44, a float32 / bfloat16 subnormal, where float16
#: rounds it to exactly 0.  The threshold lies below float16's smallest subnormal (6e−8), so
#: every dtype reads such a mask the same way.
MASKED_WEIGHT = torch.finfo(torch.float32).tiny


def _allowed(probs: torch.Tensor) -> torch.Tensor:
    """(L_q, L_k) bool: key j got a weight above :data:`MASKED_WEIGHT` from query i in some
    sample/head.  ``probs``: (..., L_q, L_k) attention weights of any float dtype; NaN counts
    as not allowed."""
    return (probs.detach() > MASKED_WEIGHT).reshape(-1, *probs.shape[-2:]).any(0).cpu()


def _expected_label(exp: tuple[str, int | None]) -> str:
    if exp[0] == "band":
        return f"local window ±{exp[1]}" if exp[1] is not None else "local window"
    return f"sliding window {exp[1]}" if exp[0] == "sliding" else exp[0]


def _own_block(allowed: torch.Tensor, m: AuditModel, lm: LayerMap) -> tuple[torch.Tensor, str | None]:
    """The part of an ``(L_q, L_k)`` map that is one sample's self-attention, and how it was
    found (None: the whole map):

    - a *merged* self + cross-attention map (one softmax over the decoder's own keys and the
      ``enc_len`` encoder keys, e.g. T5Gemma 2): keys of one side fully visible, the other side
      of ``L_q`` keys is the self-attention map;
    - a *packed* batch (one sequence holding every sample, a block-diagonal mask keeping samples
      apart, e.g. Pixtral's images): the probe saw one map while the input batch has several
      samples, and the map is block-diagonal with equal blocks; the first block is judged (the
      others must equal it)."""
    lq, lk = allowed.shape
    if m.enc_len and lk == lq + m.enc_len:
        if bool(allowed[:, lq:].all()):
            return allowed[:, :lq], f"merged self ({lq} keys) + cross ({m.enc_len} keys) attention"
        if bool(allowed[:, :m.enc_len].all()):
            return allowed[:, m.enc_len:], f"merged cross ({m.enc_len} keys) + self ({lq} keys) attention"
    nb = 2  # the probe's input batch (:func:`probe_layers`)
    if lm.probs.shape[0] == 1 and lq == lk and lq % nb == 0 and lq > nb:
        n = lq // nb
        blocks = torch.block_diag(*[torch.ones(n, n, dtype=torch.bool)] * nb)
        first = allowed[:n, :n]
        if not bool((allowed & ~blocks).any()) and all(
                torch.equal(allowed[b * n:(b + 1) * n, b * n:(b + 1) * n], first) for b in range(nb)):
            return first, f"packed batch: {nb} samples in one sequence, block-diagonal mask"
    return allowed, None


def _band(allowed: torch.Tensor) -> tuple[int, int] | None:
    """``(a, b)`` when the square map is exactly the band ``i − a ≤ j ≤ i + b`` (a, b ≥ 1)."""
    L = allowed.shape[0]
    if allowed.shape[1] != L or not bool(allowed.diagonal().all()):
        return None
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    d = (j - i)[allowed]
    a, b = int(-d.min()), int(d.max())
    if a < 1 or b < 1 or not torch.equal(allowed, (j - i >= -a) & (j - i <= b)):
        return None
    return a, b


def _window_by_design(facts: dict[str, Any] | None, got: tuple[str, int | None],
                      allowed: torch.Tensor | None = None, m: AuditModel | None = None) -> str | None:
    """Why an observed local window is the attention module's own design (None: it is not):
    the module (or its config) declares a window ``w`` and the map shows exactly that window,
    causal (``sliding w``) where the module declares ``is_causal = True``, or bidirectional (a
    band of ``±(w − 1)`` or ``±w`` around each query) where it declares ``is_causal = False``
    — while the audit expected the model's overall causality or per-layer schedule.  Only when
    the module says more than that expectation (``m`` given): its ``is_causal`` differs from the
    model's, its layer type is local, or the model has no per-layer schedule."""
    if not facts:
        return None
    kind = facts.get("layer_type")
    # the module must say more than the audit's expectation did: its own causality differs
    # from the model's, its own layer type is not global, or no per-layer schedule was read (a
    # window attribute alone is also stored by global layers that never use it)
    if m is not None and not (
            (facts.get("is_causal") is not None and facts.get("is_causal") != m.causal)
            or (kind is not None and not any(t in kind for t in ("full", "global")))
            or m.expected_pattern_fn is None):
        return None
    w = facts.get("sliding_window") or facts.get("config_window")
    where = "" if facts.get("sliding_window") else " (config)"
    if not w:
        return None
    causal = facts.get("is_causal")
    if got == ("sliding", w) and (causal is True or facts.get("sliding_window")):
        return (f"{facts['class']} declares a window of {w}{where}"
                + (" and is_causal = True" if causal is True else "") + ": a causal sliding window")
    band = _band(allowed) if allowed is not None and got[0] == "other" else None
    if band and sum(band) + 1 in (w, w + 1) and causal is False:
        return (f"{facts['class']} declares a window of {w}{where} and is_causal = False: a "
                f"bidirectional window of {band[0]} key(s) before and {band[1]} after each query")
    if got[0] == "band" and got[1] in (w - 1, w) and causal is False:
        return (f"{facts['class']} declares a window of {w}{where} and is_causal = False: the "
                "window is applied on both sides of each query")
    return None


def _restricting_mask(m: AuditModel, lm: LayerMap, exp: tuple[str, int | None],
                      shape: tuple[int, int]) -> torch.Tensor | None:
    """The ``(L_q, L_k)`` bool mask (True = visible) the attention module making ``lm`` was
    called with (:func:`passed_mask_allowed`) when it hides keys that the model's overall
    pattern ``exp`` (``full`` for a bidirectional model, ``causal`` for a causal one) would
    show, and shows none that it would hide; None otherwise.

    Only the overall causality is refined this way: a pattern the model declares further (a
    config window, a per-layer schedule, a module window of known width) stays the expectation, so a mask
    built against the declaration still fails; and a mask that shows more than the overall
    pattern (a causal model given a bidirectional mask) is never the expectation."""
    facts = lm.module or {}
    given = facts.get("passed_allowed")
    # a module window of no known width on a bidirectional map (``("band", None)``, e.g. Swin's
    # window side, while the map is one window of tokens) accepts any band or the full map: a
    # mask the module is given that restricts the full map says more than that (the shifted-
    # window mask of Liu et al. 2021, which the detection Swin keeps at every resolution)
    unsized_window = exp == ("band", None) and not m.causal
    if unsized_window:
        exp = ("full", None)
    if (not isinstance(given, torch.Tensor) or tuple(given.shape) != shape or exp[0] not in ("full", "causal")
            or exp[1] is not None or m.expected_pattern_fn is not None or m.sliding_window
            or (facts.get("sliding_window") and not unsized_window)):
        return None
    lq, lk = shape
    overall = torch.ones(lq, lk, dtype=torch.bool)
    if exp[0] == "causal":  # bottom-right aligned, as :func:`classify_pattern` reads it
        overall = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)
    if torch.equal(given, overall) or bool((given & ~overall).any()):
        return None
    return given


def check_mask_pattern(m: AuditModel, ctx: AuditContext) -> CheckResult:
    maps, not_obs = probe_layers(m, ctx)
    if not maps:
        return _no_maps(m, "mask-pattern", not_obs)
    layers, bad, designed = [], [], []
    for ordinal, lm in enumerate(maps):
        allowed, layout = _own_block(_allowed(lm.probs), m, lm)
        lq, lk = allowed.shape
        got = classify_pattern(allowed)
        exp = m.expected_pattern((lq, lk), ordinal, lm.module)
        in_order = not (m.input_kind == "tokens" and lk not in (m.seq_len, m.enc_len))
        if not in_order:
            # not a (query × key) map in position order (e.g. Longformer's banded storage,
            # (L, H, 2w + 1) relative offsets, a diffusion decoder's canvas): nothing to compare
            # positions with
            exp = ("unknown", None)
        elif lm.module and lm.module.get("sliding_window") and exp[0] in ("unknown", "full"):
            # a module with a local window: causal models see a sliding window, bidirectional
            # ones a band around each query (Longformer); a window ≥ L looks like no window
            exp = ("sliding", lm.module["sliding_window"]) if m.causal else ("band", None)
        elif lm.module and lm.module.get("sliding_window") and lm.module.get("layer_type") and exp[0] == "causal":
            # a module whose own layer type is local (``layer_type = "sliding_attention"``)
            # declares its window; a window attribute alone may be unused by a global layer
            exp = ("sliding", lm.module["sliding_window"])
        passed = (lm.module or {}).get("passed_mask")
        if (exp == ("causal", None) and m.input_kind != "tokens" and passed is not None
                and passed[0] != "causal" and (lm.module or {}).get("is_causal") is True):
            # the module's is_causal attribute (the audit's only evidence of causality for a
            # dense model) applies only to calls without a mask; this call was given one:
            # the expectation is what the model passes
            exp = passed
            layers_note = (f"{lm.module['class']} declares is_causal = True but is called with "
                           f"an explicit {_expected_label(passed)} mask, which transformers' attention "
                           f"functions use instead of is_causal")
        else:
            layers_note = None
        given = _restricting_mask(m, lm, exp, (lq, lk)) if layers_note is None and layout is None else None
        if given is not None:
            # the model restricts this call further than its overall pattern with a mask of its
            # own (phrase blocks of a text, a predicted region of an image): the module must
            # follow the mask it is given, entry by entry
            exp = classify_pattern(given)
            layers_note = (f"{lm.module['class']} is called with a {_expected_label(exp)} mask within the "
                           f"model's {'causal' if m.causal else 'bidirectional'} pattern: the expectation "
                           "is the mask it is given")
        elif exp == ("band", None) and got[0] in ("band", "full"):
            exp = got
        # a sliding window at least as long as the sequence looks causal
        if exp[0] == "sliding" and got[0] == "causal" and exp[1] >= lk:
            exp = ("causal", None)
        ok = exp[0] == "unknown" or got == exp
        if given is not None:
            # rows the given mask hides entirely (a query with no key to attend to: a patch of no
            # bytes) have no defined softmax — an additive mask spreads them uniformly — and
            # are not compared
            rows = given.any(-1)
            ok = torch.equal(allowed[rows], given[rows])
        layers.append({"layer": lm.index, "shape": [lq, lk], "observed": _expected_label(got),
                       "expected": _expected_label(exp), "ok": ok})
        if layout:
            layers[-1]["layout"] = layout
        if layers_note:
            layers[-1]["expected_from"] = layers_note
        why = None if ok else _window_by_design(lm.module, got, allowed, m)
        if why:
            layers[-1]["by_design"] = why
            designed.append(f"layer {lm.index}: {_expected_label(got)} ({why})")
        elif not ok:
            bad.append(f"layer {lm.index}: {_expected_label(got)} (expected {_expected_label(exp)})")
    metrics = {"layers": layers}
    if bad:
        return _result(m, "mask-pattern", "fail", "; ".join(bad), **metrics)
    kinds = sorted({lay["observed"] for lay in layers})
    if designed:
        return _result(m, "mask-pattern", "warn",
                       "window by the model's design, not the pattern the audit expected: "
                       + "; ".join(designed), **metrics)
    if all(lay["expected"] == "unknown" for lay in layers):
        return _result(m, "mask-pattern", "warn",
                       f"observed {', '.join(kinds)} in {len(layers)} layers; nothing declared to compare with",
                       **metrics)
    return _result(m, "mask-pattern", "pass",
                   f"{len(layers)} attention maps match the declared pattern ({', '.join(kinds)})", **metrics)


def check_normalization(m: AuditModel, ctx: AuditContext) -> CheckResult:
    maps, not_obs = probe_layers(m, ctx)
    if not maps:
        return _no_maps(m, "normalization", not_obs)
    worst, negative, empty, nan_rows = 0.0, 0, 0, 0
    per = []
    for lm in maps:
        p = lm.probs.double()
        sums = p.sum(-1)
        nan = torch.isnan(sums)
        nan_rows += int(nan.sum())
        zero_rows = (p.abs().sum(-1) == 0) & ~nan
        empty += int(zero_rows.sum())
        err = row_sum_error(p, nan | zero_rows)
        worst = max(worst, err)
        negative += int((p < 0).sum())
        per.append({"layer": lm.index, "max_row_sum_error": err})
    metrics = {"max_row_sum_error": worst, "negative_weights": negative, "all_zero_rows": empty,
               "nan_rows": nan_rows, "layers": per, "tolerance": SUM_TOL[torch.float32]}
    if nan_rows:
        return _result(m, "normalization", "fail", f"{nan_rows} attention rows are NaN", **metrics)
    if negative:
        return _result(m, "normalization", "fail", f"{negative} negative attention weights", **metrics)
    # the rows are the softmax's own output: its dtype, not that of other operators, bounds the error
    softmax_d = softmax_dtype(m, ctx)
    row_tol = SUM_TOL.get(softmax_d if _less_precise(softmax_d, ctx.dtype) else ctx.dtype,
                          SUM_TOL[torch.float32])
    metrics["tolerance"] = row_tol
    if worst > row_tol:
        sinks = sorted({lm.module["class"] for lm in maps if lm.module and lm.module.get("sinks")})
        if sinks:  # a learned sink logit takes part in the softmax, then is dropped: rows sum < 1
            return _result(m, "normalization", "warn",
                           f"attention rows sum below 1 (max |sum − 1| = {worst:.3g}) by design: "
                           f"{', '.join(sinks)} use attention sinks (a learned logit per head joins "
                           f"the softmax and is dropped from the weights)", sinks=sinks, **metrics)
        return _result(m, "normalization", "fail",
                       f"attention rows do not sum to 1 (max |sum − 1| = {worst:.3g})", **metrics)
    if empty:
        return _result(m, "normalization", "warn",
                       f"{empty} fully masked rows (all weights 0) without padding", **metrics)
    return _result(m, "normalization", "pass",
                   f"rows sum to 1 in {len(maps)} attention maps (max |sum − 1| = {worst:.3g})", **metrics)


def check_saturation(m: AuditModel, ctx: AuditContext) -> CheckResult:
    maps, not_obs = probe_layers(m, ctx)
    if not maps:
        return _no_maps(m, "saturation", not_obs)
    per, shares, ents = [], [], []
    for lm in maps:
        p = torch.nan_to_num(lm.probs, nan=0.0)
        st = row_stats(p, visible=p > MASKED_WEIGHT)  # rows with ≥ 2 visible keys
        if st is None:
            continue
        share, nent = st["saturated_share"], st["entropy_norm_mean"]
        per.append({"layer": lm.index, "saturated_share": share, "normalized_entropy": nent})
        shares.append(share)
        ents.append(nent)
    if not per:
        return _result(m, "saturation", "skip", "no row with two or more visible keys")
    share, ent = max(shares), min(ents)
    metrics = {"max_saturated_share": share, "min_normalized_entropy": ent, "threshold": SATURATED,
               "layers": per}
    if share > SAT_SHARE_WARN or ent < SAT_ENTROPY_WARN:
        return _result(m, "saturation", "warn",
                       f"{share:.0%} of rows have max weight > {SATURATED} at initialisation, min "
                       f"normalized entropy {ent:.2f} (warn above {SAT_SHARE_WARN:.0%} / below "
                       f"{SAT_ENTROPY_WARN}): softmax near saturation, gradients vanish", **metrics)
    return _result(m, "saturation", "pass",
                   f"max share of saturated rows {share:.0%}, min normalized entropy {ent:.2f}", **metrics)


def _scale_cause(s: float, expected: float, head_dim: int | None, num_heads: int | None) -> str:
    """The likely cause of an effective scale ``s`` ≠ ``expected`` (the causes of ``attncheck
    check``'s :func:`~attncheck.dynamic.checks.scale.classify_scale`), or "" when none fits."""
    if not head_dim:
        return ""
    ok, text = classify_scale(s, head_dim, num_heads, expected)
    return "" if ok or text.startswith("unrecognised") else text


def _expected_scale(m: AuditModel, lm: LayerMap) -> tuple[float | None, str]:
    """Expected scale of one map: the adapter's declared value, else the scale the attention
    module that made the call declares (``scaling`` / ``scale`` / ``softmax_scale``), else
    ``1/√d`` of the observed q·k width (which includes rope dims, e.g. DeepSeek's nope + rope)."""
    if m.expected_scale is not None:
        return m.expected_scale, m.scale_note
    from attncheck.audit.hf import expected_scale_for

    return expected_scale_for(lm.module, lm.head_dim)


def _declared_factor(facts: dict[str, Any] | None, ratio: float) -> tuple[str, float] | None:
    """The module's own factor (:func:`attncheck.audit.hf.module_facts` ``factors``: a query
    scale factor, a temperature) that explains ``ratio`` = effective / declared scale within
    0.1 %, as ``(attribute, value)``; None when none does."""
    for name, v in ((facts or {}).get("factors") or {}).items():
        if v > 0 and ratio > 0 and abs(math.log(ratio / v)) <= 1e-3:
            return name, v
    return None


def check_scale(m: AuditModel, ctx: AuditContext) -> CheckResult:
    maps, not_obs = probe_layers(m, ctx)
    if not maps:
        return _no_maps(m, "scale", not_obs)
    measured = [lm for lm in maps if lm.effective_scale is not None]
    if not measured:
        return _result(m, "scale", "skip", "not observable: no q·kᵀ product found for the softmax inputs")
    per, bad, unscaled, by_design = [], [], [], []
    for lm in measured:
        exp, source = _expected_scale(m, lm)
        if exp is None:
            per.append({"layer": lm.index, "effective_scale": lm.effective_scale, "source": lm.scale_source})
            continue
        ratio = lm.effective_scale / exp
        ok = abs(ratio - 1) <= 1e-3
        row = {"layer": lm.index, "effective_scale": lm.effective_scale, "source": lm.scale_source,
               "expected_scale": exp, "expected_from": source, "ratio": ratio}
        if not ok and m.expected_scale is None and lm.head_dim:
            # the module's declared value may be what it passes to the kernel after folding
            # 1/√d into q (ESM: q·d^-0.5, then scaling=1.0): 1/√d of the q·k width also holds
            alt = 1.0 / math.sqrt(lm.head_dim)
            if abs(lm.effective_scale / alt - 1) <= 1e-3:
                ok, ratio, exp, source = True, lm.effective_scale / alt, alt, "1/√d of the observed q·k width"
                row.update(expected_scale=exp, expected_from=source, ratio=ratio)
        if lm.module:
            row["module"] = lm.module.get("name")
        per.append(row)
        if ok:
            continue
        # a model module that declares no scale and feeds raw q·kᵀ to the softmax is unscaled by
        # its own design (GPT-Neo; T5-style models fold 1/√d into the initialisation)
        if (lm.module is not None and lm.module.get("scale") is None and m.expected_scale is None
                and abs(lm.effective_scale - 1.0) <= 1e-6):
            unscaled.append(f"layer {lm.index} ({lm.module['class']})")
            continue
        factor = _declared_factor(lm.module, ratio)
        if factor is not None and m.expected_scale is None:
            by_design.append(f"layer {lm.index} ({lm.module['class']}.{factor[0]} = {factor[1]:.4g})")
            row["factor"] = {factor[0]: factor[1]}
            continue
        cause = _scale_cause(lm.effective_scale, exp, lm.head_dim or m.head_dim,
                             (lm.module or {}).get("heads") or m.num_heads)
        bad.append(f"layer {lm.index}: {lm.effective_scale:.4g} vs expected {exp:.4g} ({source})"
                   + (f" — likely {cause}" if cause else ""))
    exp0 = next((r.get("expected_scale") for r in per if r.get("expected_scale") is not None), None)
    metrics = {"expected_scale": m.expected_scale if m.expected_scale is not None else exp0,
               "head_dim": m.head_dim, "layers": per}
    if m.scale_note:
        metrics["note"] = m.scale_note
    if bad:
        return _result(m, "scale", "fail", "; ".join(bad), **metrics)
    if by_design:
        return _result(m, "scale", "warn",
                       f"scale by the model's design: {', '.join(by_design[:3])}"
                       f"{' …' if len(by_design) > 3 else ''}: the module multiplies q·kᵀ by this "
                       f"factor on top of its declared scale (effective = declared × factor)",
                       by_design=by_design, **metrics)
    if unscaled:
        return _result(m, "scale", "warn",
                       f"unscaled attention by the model's design: {', '.join(unscaled[:3])}"
                       f"{' …' if len(unscaled) > 3 else ''} declare no scale and pass the raw q·kᵀ "
                       f"to the softmax (scale 1.0, not 1/√d)", unscaled=len(unscaled), **metrics)
    note = f" ({m.scale_note})" if m.scale_note else ""
    if exp0 is None:
        return _result(m, "scale", "skip", "no declared scale or q·k width to compare with", **metrics)
    return _result(m, "scale", "pass",
                   f"effective scale {measured[0].effective_scale:.4g} = expected {exp0:.4g} "
                   f"in {len(measured)} layers{note}", **metrics)


def _head_layout(k: torch.Tensor) -> list[int]:
    """For K ``(..., H, L, d)``: for each head, the index of the first head with identical K."""
    k = k.detach().reshape(-1, *k.shape[-3:])
    H = k.shape[-3]
    firsts = []
    for h in range(H):
        same = next(g for g in range(h + 1) if torch.equal(k[:, g], k[:, h]))
        firsts.append(same)
    return firsts


def check_gqa(m: AuditModel, ctx: AuditContext) -> CheckResult:
    H, Hkv = m.num_heads, m.num_kv_heads
    if not H or not Hkv or Hkv == H:
        return _result(m, "gqa", "skip", "not a GQA/MQA model (num_key_value_heads == num_attention_heads)")
    maps, not_obs = probe_layers(m, ctx)
    with_k = [lm for lm in maps if lm.k is not None]
    if not with_k:
        return _result(m, "gqa", "skip", "not observable on this dispatch path: K is not captured for a "
                       "hand-written softmax (checked on the SDPA path)")
    per, bad, designed = [], [], []
    for lm in with_k:
        hq = int(lm.probs.shape[-3])
        hkv = (lm.module or {}).get("kv_heads") or Hkv
        hk = lm.k.shape[-3]
        if not hkv or hq % hkv:
            per.append({"layer": lm.index, "kv_heads": hk, "ok": None})
            continue  # this module declares no grouping of its heads
        r = hq // hkv
        if lm.enable_gqa or hk != hq:
            ok = hk == hkv
            per.append({"layer": lm.index, "kv_heads": hk, "enable_gqa": lm.enable_gqa, "ok": ok})
            if not ok:
                bad.append(f"layer {lm.index}: {hk} K/V heads, the model declares {hkv}")
            continue
        expected = [h - h % r for h in range(hq)]  # repeat_interleave: heads 0..r-1 share K head 0, …
        layout = _head_layout(lm.k)
        distinct = len(set(layout))
        ok = layout == expected
        per.append({"layer": lm.index, "kv_heads": distinct, "layout": layout, "ok": ok})
        if not ok:
            tile = [h % hkv for h in range(hq)]
            groups = (lm.module or {}).get("kv_groups")
            if layout == tile and groups is not None and groups != r:
                # the module declares a grouping other than H / H_kv consecutive query heads:
                # its K/V heads are laid out its own way (e.g. a mixture of attention heads)
                per[-1]["by_design"] = True
                designed.append(f"layer {lm.index} ({lm.module['class']} declares "
                                f"num_key_value_groups = {groups}, not {r})")
                continue
            why = ("K/V heads tiled (repeat) instead of repeat_interleave" if layout == tile
                   else f"{distinct} distinct K heads, layout {layout}")
            bad.append(f"layer {lm.index}: {why}; expected groups {expected}")
    checked = [p for p in per if p["ok"] is not None]
    metrics = {"num_heads": H, "num_kv_heads": Hkv, "group_size": H // Hkv if H % Hkv == 0 else None,
               "layers": per}
    if bad:
        return _result(m, "gqa", "fail", "; ".join(bad), **metrics)
    if designed:
        return _result(m, "gqa", "warn",
                       "K/V heads tiled (repeat), not shared by consecutive query heads, by the "
                       f"model's design: {'; '.join(designed)}", **metrics)
    if not checked:
        return _result(m, "gqa", "skip", "no attention call with a declared K/V head grouping", **metrics)
    return _result(m, "gqa", "pass",
                   f"{H} query heads share {Hkv} K/V heads in consecutive groups in {len(checked)} layers",
                   **metrics)


def softmax_dtype_result(m: AuditModel, ctx: AuditContext) -> CheckResult | None:
    """``softmax-dtype[variant]``: one ``warn`` per variant whose attention softmax runs in a
    less precise dtype than the model (:func:`softmax_dtype`), naming what that design costs —
    the comparison checks used that dtype's tolerance, and the paths left out because the cast
    turned fully masked rows into NaN (:func:`masked_softmax_nan`); None when the softmax runs in
    the model's dtype."""
    low = softmax_dtype(m, ctx)
    ops_dtype, ops = low_precision_ops(m, ctx)
    if not (_less_precise(low, m.dtype) or ops):
        return None
    hi = str(m.dtype).replace("torch.", "")
    lo_ops = str(ops_dtype).replace("torch.", "")
    shown = ", ".join(ops[:8]) + (f" and {len(ops) - 8} more" if len(ops) > 8 else "")
    if not _less_precise(low, m.dtype):  # the softmax keeps the model's dtype; other operators don't
        metrics: dict[str, Any] = {"compute_dtype": lo_ops, "model_dtype": hi, "ops": ops,
                                   "atol": tolerances(ops_dtype)[0], "rtol": tolerances(ops_dtype)[1]}
        return _result(m, "compute-dtype", "warn",
                       f"by the model's design: operators of the forward return {lo_ops} in this {hi} "
                       f"model ({shown}), so outputs are compared with {lo_ops} tolerances", **metrics)
    lo = str(low).replace("torch.", "")
    tol_dtype = ops_dtype if _less_precise(ops_dtype, low) else low
    metrics = {"softmax_dtype": lo, "model_dtype": hi,
               "atol": tolerances(tol_dtype)[0], "rtol": tolerances(tol_dtype)[1]}
    if ops:
        metrics["ops"] = ops
    msg = (f"by the model's design: the attention softmax runs in {lo} in this {hi} model (its "
           f"weights carry {lo} rounding), so outputs are compared with "
           f"{str(tol_dtype).replace('torch.', '')} tolerances")
    if ops:
        msg += f"; other operators returning {lo_ops}: {shown}"
    nan = ctx.softmax_nan.get(m.label, {})
    if nan:
        metrics["left_out"] = dict(nan)
        msg += (f"; left out as NaN from that cast: {', '.join(nan)} — {next(iter(nan.values()))}")
    return _result(m, "softmax-dtype", "warn", msg, **metrics)


def layer_summaries(m: AuditModel, ctx: AuditContext) -> list[dict[str, Any]]:
    """Per-layer rows for the report's "layers" section (and heatmaps for the HTML)."""
    maps, _ = probe_layers(m, ctx)
    rows = []
    store = ctx.arrays.setdefault(m.label, {})
    store["maps"] = []
    for ordinal, lm in enumerate(maps):
        p = torch.nan_to_num(lm.probs.double(), nan=0.0)
        lq, lk = p.shape[-2:]
        got = classify_pattern(_allowed(lm.probs))
        sums = p.sum(-1)
        live = sums > 0
        rows.append({
            "variant": m.variant, "layer": lm.index, "kind": lm.kind, "shape": list(lm.probs.shape),
            "heads": int(lm.probs.shape[-3]), "pattern": _expected_label(got),
            "expected_pattern": _expected_label(m.expected_pattern((lq, lk), ordinal, lm.module)),
            "max_row_sum_error": row_sum_error(p, ~live),
            "max_weight": float(p.max()), "effective_scale": lm.effective_scale,
            "expected_scale": _expected_scale(m, lm)[0],
            "kv_heads": int(lm.k.shape[-3]) if lm.k is not None else None,
        })
        store["maps"].append((lm.index, lm.kind, p[0].float().cpu().numpy()))
    return rows


PER_VARIANT: dict[str, Callable[[AuditModel, AuditContext], CheckResult]] = {
    "causality": check_causality,
    "padding": check_padding,
    "batch-independence": check_batch,
    "kv-cache": check_kv_cache,
    "normalization": check_normalization,
    "saturation": check_saturation,
    "scale": check_scale,
    "mask-pattern": check_mask_pattern,
    "gqa": check_gqa,
}
CROSS_VARIANT = {"backend-agreement": check_backend_agreement}
ALL_CHECKS = ["lint", *PER_VARIANT, *CROSS_VARIANT]

__all__ = [
    "ALL_CHECKS",
    "NotComparable",
    "NonFiniteOutput",
    "require_finite",
    "causal_evidence",
    "CROSS_VARIANT",
    "PER_VARIANT",
    "AuditContext",
    "Forward",
    "classify_pattern",
    "layer_summaries",
    "softmax_dtype_result",
    "probe_layers",
]
