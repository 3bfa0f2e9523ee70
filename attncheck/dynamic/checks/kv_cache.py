"""``kv-cache``: incremental decoding reproduces the full causal forward.

Calling conventions (hints):

- **layers** with ``cache={"arg": "past_kv", "flag": "use_cache", "returns": "(output, cache)"}``
  (or ``kv_cache=True``, same defaults): ``m(x, **{arg: past, flag: True}) -> (out, present)``
  on ``(B, L, E)`` inputs (``(L, B, E)`` when ``batch_first=False``); ``present`` is passed back
  unchanged as ``past`` on the next call (a ``(k, v)`` tuple or any cache object).  The first
  call gets ``past=None``.
- **kernels** with ``kv_cache=True`` (or a ``cache`` hint): a decode step is the kernel called
  with the new queries only, ``L_q < L_k``, and the whole cache as keys/values —
  ``f(q[:, :, t0:t1], k[:, :, :t1], v[:, :, :t1])`` with the causal flag set: the queries are the
  *last* ``L_q`` positions (bottom-right alignment, ``torch.nn.attention.bias.causal_lower_right``).

For ``L = 8``, ``B = 2`` the check runs the full causal forward, then a prefill of 3 tokens and
single-token decode steps (and, for kernels, a chunked step of 2 queries), and compares every
position with the full forward within the dtype tolerance (fp32 atol 1e-5, rtol 1e-4).
Targets that take a mask run the sequence twice: without a mask, and with a key padding mask
(sample 0's key 1 padded) passed to the full forward and, sliced to the cached keys with the
bottom-right causal part folded in, to every step — a mask dropped only on decode steps shows.
A failure names the positional term (``positions`` hint or detected) when the target has one.
A mismatch names the first wrong step.  Catches ``is_causal=True`` kept on decode steps where
``L_q ≠ L_k`` (SDPA's top-left alignment lets a 1-token query see only the first cached key),
caches that drop or duplicate tokens, and position offsets ignored on decode.
"""
from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import torch

from attncheck.dynamic.base import RunContext, register_check
from attncheck.dynamic.checks._compare import compare, hint
from attncheck.dynamic.probe import sdpa_reference
from attncheck.dynamic.targets import Inputs, Target
from attncheck.results import CheckResult

__all__ = ["L_CACHE", "PREFILL", "cache_convention", "check_kv_cache", "decoding_difference"]

L_CACHE = 8
PREFILL = 3


def cache_convention(target: Target) -> dict[str, Any] | None:
    """The cache calling convention from the hints (``cache`` dict or ``kv_cache=True``), with
    defaults ``arg="past_kv"``, ``flag="use_cache"``; None when the target takes no cache."""
    c = hint(target, "cache", "kv_cache")
    if not c:
        return None
    conv = {"arg": "past_kv", "flag": "use_cache"}
    if isinstance(c, dict):
        conv.update({k: c[k] for k in ("arg", "flag") if k in c})
    return conv


def decoding_difference(got: torch.Tensor, full: torch.Tensor, cmp: Any, qdim: int, what: str,
                        offset: int = 0) -> tuple[list[float], str | None]:
    """The kv-cache verdict: outputs decoded with a cache ``got`` against the same positions of
    the full forward ``full`` (same shape, batch axis 0, position axis ``qdim``), compared by
    ``cmp`` (a :class:`~attncheck.dynamic.checks._compare.Cmp` of the caller's tolerance
    policy).  Returns the max |Δ| per position (NaN-aware,
    :func:`~attncheck.dynamic.checks.causality.query_delta`) and, when ``cmp`` fails, the
    message naming ``what`` and the first position (``offset`` + index) beyond the tolerance
    at the largest |full|; None otherwise.  Shared by ``attncheck check`` and
    ``attncheck audit``."""
    from attncheck.dynamic.checks.causality import query_delta

    per = torch.stack([query_delta(got[b], full[b], qdim - 1) for b in range(got.shape[0])]).amax(0)
    per_pos = [float(v) for v in per.cpu()]
    if cmp.ok:
        return per_pos, None
    mag = float(torch.nan_to_num(full.detach().abs().double(), nan=0.0, posinf=0.0).max())
    off = [i for i, d in enumerate(per_pos) if d > cmp.atol + cmp.rtol * mag]
    first = offset + off[0] if off else -1
    return per_pos, (f"{what} differs from the full forward (max |Δ|={cmp.max_abs:.3g}, first "
                     f"position {first})")


def _applies(target: Target) -> bool | str:
    if cache_convention(target) is None:
        return "the target takes no KV cache (hint cache={'arg': ..., 'flag': ...} or kv_cache=True)"
    if not target.is_kernel and not target.self_attention:
        return "KV-cache decoding is checked on self-attention layers m(x, past) only"
    return True


def _unknown_cache_args(target: Target, conv: dict[str, Any]) -> str | None:
    """Why a layer cannot be called with the cache convention's keyword arguments (a forward
    that takes neither that name nor ``**kwargs``), naming its parameters; None when it can,
    or when the signature cannot be read."""
    module = target.module
    if target.is_kernel or module is None:
        return None
    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    missing = [conv[k] for k in ("arg", "flag") if conv.get(k) and conv[k] not in params]
    if not missing:
        return None
    return (f"the cache hint passes {conv['arg']}= and {conv['flag']}= (the defaults of "
            f"kv_cache=True unless cache= names them), but forward({', '.join(params)}) takes "
            f"no {' or '.join(missing)}: name the target's own arguments with the hint "
            f"cache={{'arg': ..., 'flag': ...}}")


def _steps(L: int) -> list[tuple[int, int]]:
    steps = [(0, PREFILL)]
    steps += [(t, t + 1) for t in range(PREFILL, L)]
    return steps


@register_check("kv-cache", applies=_applies,
                description="incremental decoding with a KV cache reproduces the full forward")
def check_kv_cache(target: Target, ctx: RunContext) -> CheckResult:
    """Prefill + one-token decode steps vs the full causal forward."""
    conv = cache_convention(target)
    unknown = _unknown_cache_args(target, conv)
    if unknown:
        return ctx.result("error", unknown, {"convention": conv})
    atol, rtol = ctx.tolerances
    L = L_CACHE
    ex = ctx.example(target, B=2, L_q=L, L_k=L)
    ex = replace(ex, B=2, L_q=L, L_k=L)
    metrics: dict[str, Any] = {"L": L, "prefill": PREFILL, "convention": conv,
                               "example": ex.as_dict()}
    steps_diff: list[Any] = []
    bad: list[str] = []
    top_left_like = False
    keep_pad = _padding_keep(target, ex, ctx.device)
    for keep in ([None] + ([keep_pad] if keep_pad is not None else [])):
        tl, sd, bd = _run_steps(target, conv, ex, ctx, keep, atol, rtol)
        if isinstance(bd, str):  # the target returned no cache
            return ctx.result("fail", bd, metrics)
        top_left_like |= tl
        steps_diff += sd
        if bd and not bad:
            bad.append(bd[0] + (" with a key padding mask (sample 0: key 1 padded) — the "
                                "mask is dropped or misaligned on decode steps"
                                if keep is not None else ""))
            if keep is not None:
                metrics["padding_mask"] = True
    metrics["padded_run"] = keep_pad is not None
    metrics["steps"] = steps_diff
    worst = max((s[2] if s[2] != "inf" else float("inf")) for s in steps_diff)
    metrics["max_abs_diff"] = worst if worst != float("inf") else "inf"
    if bad:
        from attncheck.dynamic.positions import describe, position_kind

        pos = position_kind(target)
        if metrics.get("padding_mask"):
            why = ""
        elif target.is_kernel and top_left_like:
            why = (" — the decode step matches SDPA's top-left causal alignment: with L_q < L_k "
                   "the causal mask must be aligned bottom-right (pass an explicit mask or "
                   "is_causal=False for 1-token steps)")
        elif pos is not None and pos["kind"] != "none":
            metrics["position_term"] = pos["kind"]
            why = (f" — the target has a {describe(pos)}: the positions of the new tokens must "
                   "continue from the cache length (a position offset or cache position "
                   "ignored on decode?), and the causal mask must be aligned bottom-right")
        else:
            why = (" — with L_q < L_k the causal mask must be aligned bottom-right (SDPA's "
                   "is_causal is top-left: pass an explicit mask or is_causal=False for 1-token "
                   "steps), and positions must continue from the cache length")
        return ctx.result("fail", bad[0] + why, metrics, example=ex)
    return ctx.result("pass", f"prefill {PREFILL} + {L - PREFILL} decode steps reproduce the "
                              f"full forward (max |Δ|={worst:.3g})", metrics)


def _padding_keep(target: Target, ex: Any, device: Any) -> torch.Tensor | None:
    """A key padding keep-mask ``(B, 1, 1, L)`` hiding key 1 of sample 0, or None when the
    target takes no mask."""
    if not target.accepts_mask or target.mask_shape == "QK":
        return None
    keep = torch.ones(ex.B, 1, 1, ex.L_k, dtype=torch.bool, device=device)
    keep[0, ..., 1] = False
    return keep


def _step_mask(target: Target, keep: torch.Tensor, ex: Any, t0: int, t1: int,
               dtype: torch.dtype) -> Any:
    """Native mask for queries t0..t1-1 over keys 0..t1-1 (causal, bottom-right)."""
    from attncheck.dynamic.targets import causal_blocked

    k = keep[..., :t1]
    sub = replace(ex, L_q=t1 - t0, L_k=t1)
    if not target.key_only_mask:
        k = k.expand(ex.B, 1, t1 - t0, t1) & ~causal_blocked(t1 - t0, t1, "bottom_right",
                                                              k.device)
    return target._mask_value(target.native_mask(k, sub), dtype)


def _run_steps(target: Target, conv: dict[str, Any], ex: Any, ctx: RunContext,
               keep: torch.Tensor | None, atol: float, rtol: float):
    """Full causal forward vs prefill + decode steps (optionally with a key padding mask).
    Returns (top_left_like, steps_diff, bad) — ``bad`` a list of messages, or a str when the
    target returned no cache."""
    full_in = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype, causal=True, keep=keep)
    steps_diff: list[Any] = []
    bad: list[str] = []
    top_left_like = False
    L = ex.L_q
    with torch.no_grad():
        full = target(full_in).out
        if target.is_kernel:
            kt = replace(target, alignment="bottom_right")
            for t0, t1 in _steps(L) + [(L - 2, L)]:
                ctx.check_time()
                q = full_in.q[:, :, t0:t1]
                k, v = full_in.k[:, :, :t1], full_in.v[:, :, :t1]
                one = Inputs(replace(ex, L_q=t1 - t0, L_k=t1), q, k, v, causal=True,
                             keep=None if keep is None else keep[..., :t1])
                out = kt(one).out
                cmp = compare(out, full[:, :, t0:t1], atol, rtol)
                steps_diff.append([t0, t1, cmp.max_abs if cmp.max_abs != float("inf") else "inf"])
                if not cmp.ok and not bad:
                    if keep is None:
                        _, _, tl = sdpa_reference(q, k, v, None, True, None, False)
                        top_left_like = bool(compare(out, tl, atol * 10, rtol * 10).ok)
                    bad.append(decoding_difference(
                        out, full[:, :, t0:t1], cmp, 2,
                        f"decode step queries {t0}..{t1 - 1} over {t1} cached keys "
                        f"(L_q={t1 - t0} < L_k={t1})", t0)[1])
        else:
            m = target.obj
            past = None
            for t0, t1 in _steps(L):
                ctx.check_time()
                x = target._to_native(full_in.q[:, t0:t1])
                kwargs = {conv["arg"]: past, **({conv["flag"]: True} if conv["flag"] else {})}
                if keep is not None:
                    kwargs[target.mask_arg] = _step_mask(target, keep, ex, t0, t1, ctx.dtype)
                raw = m(x, **kwargs)
                if not isinstance(raw, (tuple, list)) or len(raw) < 2:
                    return False, steps_diff, (f"with {conv['flag']}=True the target returned "
                                               f"{type(raw).__name__}, expected (output, cache)")
                out, past = raw[0], raw[1]
                out = target._from_native(out)
                cmp = compare(out, full[:, t0:t1], atol, rtol)
                steps_diff.append([t0, t1, cmp.max_abs if cmp.max_abs != float("inf") else "inf"])
                if not cmp.ok and not bad:
                    what = "prefill" if t0 == 0 else f"decode step at position {t0}"
                    bad.append(decoding_difference(
                        out, full[:, t0:t1], cmp, 1,
                        f"{what} (L_q={t1 - t0}, {t1} keys with the cache)", t0)[1])
    return top_left_like, steps_diff, bad
