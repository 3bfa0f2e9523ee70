"""Position terms of attention: declared with the ``positions`` hint, or found by experiment.

Kinds (value of ``Target.hints["positions"]``, a string or a dict ``{"kind": .., ...}``):

============  ==========================================================================
``none``      no position information inside the target (permutation-equivariant when
              not causal)
``absolute``  absolute position embeddings added to the inputs (learned or sinusoidal;
              Vaswani et al. 2017 §3.5): not permutation-equivariant, not shift-invariant
``rotary``    rotary embeddings on q and k (Su et al. 2021); the ``rope`` hint
              (``{"offset_arg": NAME}``) additionally lets ``reference`` test relativity
``alibi``     ALiBi (Press et al. 2022): logits ``+ b_h(i, j) = −m_h · |i' − j|`` with head
              slopes ``m_h = 2^(−8h/H)`` (or ``{"kind": "alibi", "slopes": [..]}``) and
              ``i' = i`` (top-left) or ``i + L_k − L_q`` (bottom-right alignment)
``relative``  a learned additive bias of the relative position ``i − j`` (T5's bucketed
              bias, Raffel et al. 2020 §2.1; Transformer-XL's ``(q + v)·W_r R_{i−j}`` and
              ``u`` content bias, Dai et al. 2019 §3.3); ``t5`` and ``xl`` are accepted
              as names of this kind
============  ==========================================================================

Detection (:func:`detect_positions`, once per run, when no hint is given): one forward under
the probe; an additive term of the logits that depends on ``i − j`` only is *relative* — an SDPA
call's float ``attn_mask``, or what remains of a hand-written softmax's logits once the best
multiple of the q·kᵀ product is removed (both fitted within each diagonal ``i − j``, so a
Toeplitz bias drops out); when that term is linear in ``|i − j|`` with a negative slope per
head it is *ALiBi* (slopes measured).
"""
from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["POSITION_KINDS", "alibi_bias", "alibi_slopes", "declared_positions",
           "detect_positions", "position_kind", "toeplitz_bias"]

POSITION_KINDS = ("none", "absolute", "rotary", "alibi", "relative")
_ALIASES = {"t5": "relative", "xl": "relative", "transformer-xl": "relative",
            "transformer_xl": "relative", "rope": "rotary", "learned": "absolute",
            "sinusoidal": "absolute", "false": "none", "": "none"}
#: relative size of the non-Toeplitz rest below which a bias counts as a function of i − j
TOEPLITZ_RTOL = 1e-4


def _norm(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if value is False:
        return {"kind": "none"}
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise ValueError(f"positions={value!r}: expected one of {', '.join(POSITION_KINDS)} "
                         "or a dict {'kind': ..}")
    kind = value["kind"].strip().lower()
    kind = _ALIASES.get(kind, kind)
    if kind not in POSITION_KINDS:
        raise ValueError(f"positions={value['kind']!r}: expected one of "
                         f"{', '.join(POSITION_KINDS)} (t5 and xl mean relative)")
    out = dict(value, kind=kind)
    if value["kind"].strip().lower() != kind:
        out.setdefault("name", value["kind"])
    return out


def declared_positions(target: Any) -> dict[str, Any] | None:
    """The ``positions`` hint normalised to ``{"kind": ..}`` (the ``rope`` hint means rotary),
    or None.  Raises ``ValueError`` for an unknown kind."""
    h = target.hints
    if h.get("positions") is not None:
        return _norm(h["positions"])
    if h.get("rope"):
        return {"kind": "rotary", "source": "rope hint"}
    return None


def position_kind(target: Any) -> dict[str, Any] | None:
    """Declared or detected position term ``{"kind", "source", ...}``; None when unknown."""
    d = declared_positions(target)
    if d is not None:
        return dict(d, source=d.get("source", "hint"))
    det = getattr(target, "position_detection", None)
    if det and det.get("kind") not in (None, "none"):
        return det
    return None


def describe(pos: dict[str, Any] | None) -> str:
    """``"ALiBi position bias (hint)"``-style phrase for messages."""
    if not pos:
        return ""
    names = {"alibi": "ALiBi position bias", "relative": "relative position bias",
             "rotary": "rotary position embedding", "absolute": "absolute position embedding",
             "none": "no position term"}
    what = names[pos["kind"]]
    if pos.get("name"):
        what += f" ({pos['name']})"
    src = pos.get("source", "hint")
    return f"{what} ({'declared' if src == 'hint' else src})"


def alibi_slopes(n_heads: int) -> list[float]:
    """ALiBi head slopes (Press et al. 2022, §3 and the reference implementation): the
    geometric sequence ``2^(−8/n)``, ``2^(−16/n)``, ... for ``n = H`` a power of two; otherwise
    those of the closest smaller power of two followed by every other slope of twice that."""
    def pow2(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if n_heads <= 0:
        return []
    if math.log2(n_heads).is_integer():
        return pow2(n_heads)
    c = 2 ** math.floor(math.log2(n_heads))
    return pow2(c) + pow2(2 * c)[0::2][: n_heads - c]


def alibi_bias(n_heads: int, L_q: int, L_k: int, alignment: str = "top_left",
               slopes: list[float] | None = None, device: Any = None,
               dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Additive ALiBi bias ``(H, L_q, L_k)``: ``−m_h · |i' − j|`` with ``i' = i`` (top-left)
    or ``i + L_k − L_q`` (bottom-right)."""
    m = torch.tensor(slopes if slopes is not None else alibi_slopes(n_heads), dtype=dtype,
                     device=device)
    if m.numel() != n_heads:
        raise ValueError(f"{m.numel()} ALiBi slopes for {n_heads} heads")
    off = (L_k - L_q) if alignment == "bottom_right" else 0
    i = torch.arange(L_q, device=device, dtype=dtype).view(-1, 1) + off
    j = torch.arange(L_k, device=device, dtype=dtype).view(1, -1)
    return -m.view(-1, 1, 1) * (i - j).abs()


def _diag_means(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per diagonal ``i − j`` mean of ``x (..., L_q, L_k)`` over ``valid`` entries, broadcast
    back to ``x``'s shape (NaN where a diagonal has no valid entry)."""
    L_q, L_k = x.shape[-2:]
    d = (torch.arange(L_q).view(-1, 1) - torch.arange(L_k).view(1, -1) + (L_k - 1)).to(x.device)
    n = L_q + L_k - 1
    flat = x.reshape(-1, L_q * L_k)
    vflat = valid.reshape(-1, L_q * L_k).to(x.dtype)
    idx = d.reshape(1, -1).expand_as(flat)
    s = torch.zeros(flat.shape[0], n, dtype=x.dtype, device=x.device).scatter_add_(
        1, idx, torch.where(vflat > 0, flat, torch.zeros_like(flat)))
    c = torch.zeros_like(s).scatter_add_(1, idx, vflat)
    mean = s / c
    return mean.gather(1, idx).reshape(x.shape)


def toeplitz_bias(logits: torch.Tensor, qk: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, float] | None:
    """Split ``logits (..., L_q, L_k)`` into ``s · qk + T`` with ``T`` constant along every
    diagonal ``i − j`` (per leading index).  Returns ``(T, rest)`` — ``rest`` the relative size
    of what neither part explains — or None when there is nothing to fit (masked entries, i.e.
    non-finite or ≤ ``MASK_THRESHOLD`` = −5e3, are left out; fewer than 2 keys)."""
    from attncheck.dynamic.probe import MASK_THRESHOLD

    lg = logits.detach().to(torch.float64)
    if lg.dim() < 2 or lg.shape[-1] < 2 or lg.shape[-2] < 2:
        return None
    valid = torch.isfinite(lg) & (lg > MASK_THRESHOLD)
    lg0 = torch.where(valid, lg, torch.zeros_like(lg))
    lg_c = torch.where(valid, lg0 - _diag_means(lg0, valid), torch.zeros_like(lg))
    s = 0.0
    if qk is not None and qk.shape == lg.shape:
        m = qk.detach().to(torch.float64)
        m_c = torch.where(valid, m - _diag_means(m, valid), torch.zeros_like(m))
        den = float((m_c * m_c).sum())
        s = float((lg_c * m_c).sum()) / den if den > 0 else 0.0
        rest = lg_c - s * m_c
        T = _diag_means(torch.where(valid, lg0 - s * m, torch.zeros_like(lg)), valid)
    else:
        rest = lg_c
        T = _diag_means(lg0, valid)
    scale = float(lg0.abs().max()) or 1.0
    return T, float(rest.abs().max()) / scale


def _classify(T: torch.Tensor, valid: torch.Tensor) -> dict[str, Any] | None:
    """``T (..., H?, L_q, L_k)`` Toeplitz bias → None (constant: no position term), relative,
    or ALiBi (linear in |i − j| with negative slope per head)."""
    T = torch.nan_to_num(T, nan=0.0)
    span = float((T.masked_fill(~valid, 0).amax() - T.masked_fill(~valid, 0).amin()))
    if span <= 1e-6 * max(1.0, float(T.abs().max())):
        return None
    L_q, L_k = T.shape[-2:]
    dist = (torch.arange(L_q).view(-1, 1) - torch.arange(L_k).view(1, -1)).abs().to(T)
    lead = T.reshape(-1, L_q, L_k)
    vl = valid.expand(T.shape).reshape(-1, L_q, L_k)
    slopes = []
    for t, v in zip(lead, vl):
        x, y = dist[v], t[v]
        if x.numel() < 3 or float(x.var()) == 0:
            return {"kind": "relative"}
        xc = x - x.mean()
        slope = float((xc * (y - y.mean())).sum() / (xc * xc).sum())
        fit = y.mean() + slope * xc
        if float((fit - y).abs().max()) > 1e-4 * max(1.0, float(y.abs().max())) or slope >= 0:
            return {"kind": "relative"}
        slopes.append(-slope)
    return {"kind": "alibi", "measured_slopes": slopes[:64]}


def detect_positions(target: Any, device: Any = "cpu",
                     dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Look for an additive relative-position term in one probed forward (L_q = L_k = 8, no
    mask).  Returns ``{"kind": "none" | "relative" | "alibi", "source": "detected",
    "message": ..}``; "none" also when nothing could be observed."""
    from dataclasses import replace

    from attncheck.dynamic.probe import MASK_THRESHOLD, Probe

    ex = target.fit_example(replace(target.default_example(0), L_q=8, L_k=8))
    inputs = target.make_inputs(ex, device=device, dtype=dtype, causal=target.causal is True)
    with torch.no_grad(), Probe() as probe:
        target(inputs)
    for r in probe.records:
        T = None
        if r.kind == "sdpa" and isinstance(r.attn_mask, torch.Tensor) \
                and r.attn_mask.is_floating_point() and r.attn_mask.dim() >= 2:
            am = r.attn_mask.detach().to(torch.float64)
            got = toeplitz_bias(am)
            if got is not None and got[1] <= TOEPLITZ_RTOL:
                T = got[0]
                valid = torch.isfinite(am) & (am > MASK_THRESHOLD)
        elif r.kind == "softmax" and r.effective_scale is None and r.logits is not None:
            qk = r.extra.get("qk_product")
            lg = r.canonical(r.logits)
            qk = r.canonical(qk) if isinstance(qk, torch.Tensor) else None
            got = toeplitz_bias(lg, qk)
            if got is not None and got[1] <= TOEPLITZ_RTOL and qk is not None:
                T = got[0]
                lgd = lg.detach().double()
                valid = torch.isfinite(lgd) & (lgd > MASK_THRESHOLD)
        if T is None:
            continue
        cls = _classify(T, valid)
        if cls is None:
            continue
        name = "ALiBi-style (linear in |i − j|)" if cls["kind"] == "alibi" else \
            "relative (a function of i − j)"
        where = f"{r.kind} #{r.index}"
        return dict(cls, source="detected", record=where,
                    message=f"additive {name} position bias found in the logits of {where}")
    return {"kind": "none", "source": "detected",
            "message": "no additive relative-position bias seen in the logits"}
