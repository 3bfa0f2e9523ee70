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

Detection (:func:`detect_positions`, once per run, when no hint is given), by experiment on
the logits the probe captures (softmax inputs, SDPA's ``scale·q·kᵀ + mask``):

1. an additive term of the logits that depends on ``i − j`` only is *relative* — an SDPA
   call's float ``attn_mask``, or what remains of a hand-written softmax's logits once the best
   multiple of the q·kᵀ product is removed (both fitted within each diagonal ``i − j``, so a
   Toeplitz bias drops out); when that term is linear in ``|i − j|`` with a negative slope per
   head it is *ALiBi* (slopes measured), with a positive slope in every head *ALiBi with its
   sign inverted*;
2. otherwise the tokens are permuted (:func:`position_dependence`): without a position term the
   logits of ``x[p]`` are the logits of ``x`` with rows and columns permuted by ``p``
   (attention treats its keys as a set and each query on its own: Vaswani et al. 2017 §3.2).
   When they are not, one token's content is replaced: a position term leaves every other
   token's row and column of the logits as they were (each token's content still reaches the
   logits only through its own q and k), whereas tokens mixed before attention (a head split
   with a bare ``view``, a layout mix-up) change other rows — that is a bug, not a position term.
   A position term whose logits are the same after dropping the first token (entry ``(i, j)``
   of the shorter sequence equals ``(i + 1, j + 1)``) is *relative* (rotary, Transformer-XL's
   ``u``/``v`` and ``W_R R_{i−j}`` terms, Dai et al. 2019 §3.3), else *absolute*.
"""
from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["POSITION_KINDS", "alibi_bias", "alibi_slopes", "declared_positions",
           "detect_positions", "draw_permutation", "position_dependence", "position_kind",
           "toeplitz_bias"]

POSITION_KINDS = ("none", "absolute", "rotary", "alibi", "relative")
_ALIASES = {"t5": "relative", "xl": "relative", "transformer-xl": "relative",
            "transformer_xl": "relative", "rope": "rotary", "learned": "absolute",
            "sinusoidal": "absolute", "false": "none", "": "none"}
#: relative size of the non-Toeplitz rest below which a bias counts as a function of i − j
TOEPLITZ_RTOL = 1e-4
#: logits differences below this share of the logits' magnitude are rounding (per dtype)
_LOGIT_RTOL = {torch.float16: 1e-2, torch.bfloat16: 5e-2}
_LOGIT_RTOL_DEFAULT = 1e-4


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
    or ALiBi (linear in |i − j| with negative slope per head).  A bias linear in |i − j| with
    a positive slope in every head is ALiBi with its sign inverted (distant keys favoured):
    ``{"kind": "alibi", "inverted": True}``, the slopes as magnitudes, so that the reference
    (ALiBi's ``−m·|i − j|``) tells it apart."""
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
        if float((fit - y).abs().max()) > 1e-4 * max(1.0, float(y.abs().max())) or slope == 0:
            return {"kind": "relative"}
        slopes.append(-slope)
    if all(m > 0 for m in slopes):
        return {"kind": "alibi", "measured_slopes": slopes[:64]}
    if all(m < 0 for m in slopes):
        return {"kind": "alibi", "measured_slopes": [-m for m in slopes[:64]], "inverted": True,
                "name": "sign inverted: the bias grows with |i − j|, distant keys favoured"}
    return {"kind": "relative"}


def _per_head(slopes: list[float], H: int) -> list[float]:
    """Slopes measured over the leading axes of ``(B, H, L_q, L_k)`` logits, one per head: the
    first H when every sample repeats them (the bias does not depend on the sample)."""
    if H < 1 or len(slopes) <= H or len(slopes) % H:
        return slopes
    head = torch.tensor(slopes[:H], dtype=torch.float64)
    rest = torch.tensor(slopes, dtype=torch.float64).view(-1, H)
    if torch.allclose(rest, head.expand_as(rest), rtol=1e-4, atol=0.0):
        return slopes[:H]
    return slopes


def draw_permutation(n: int, seed: int) -> torch.Tensor:
    """A permutation of ``range(n)`` from ``seed`` that moves every position when ``n ≥ 2``
    (a random permutation composed with a cyclic shift when it has fixed points)."""
    g = torch.Generator(device="cpu").manual_seed(int(seed))
    p = torch.randperm(n, generator=g)
    if n >= 2 and bool((p == torch.arange(n)).any()):
        p = torch.roll(p, 1)
        if bool((p == torch.arange(n)).any()):
            p = torch.roll(torch.arange(n), 1)
    return p


def _probed_logits(target: Any, inputs: Any) -> list[torch.Tensor]:
    """Canonical logits ``(..., L_q, L_k)`` (float64) of every attention the probe sees in one
    forward of ``inputs``, in call order."""
    from attncheck.dynamic.probe import Probe

    with torch.no_grad(), Probe(mha_logits=True) as probe:
        target(inputs)
    return _logits_of(probe)


def _logits_of(probe: Any) -> list[torch.Tensor]:
    return [r.canonical(r.logits).detach().to(torch.float64) for r in probe.records
            if r.logits is not None]


def _valid(lg: torch.Tensor) -> torch.Tensor:
    from attncheck.dynamic.probe import MASK_THRESHOLD

    return torch.isfinite(lg) & (lg > MASK_THRESHOLD)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a − b| where both are unmasked, 0 elsewhere."""
    both = _valid(a) & _valid(b)
    return torch.where(both, (a - b).abs(), torch.zeros_like(a))


def position_dependence(target: Any, inputs: Any, dtype: torch.dtype = torch.float32,
                        base: list[torch.Tensor] | None = None) -> dict[str, Any] | None:
    """The permutation experiment of the module docstring (step 2) on ``inputs`` (``L_q = L_k
    ≥ 3``, no mask): None when the logits follow any permutation of the tokens (no position
    term) or cannot be observed or compared; else ``{"kind": "relative" | "absolute" | "none",
    "message": .., "record": ..}`` — ``"none"`` when the logits change because tokens are mixed
    before attention (a bug the checks must see, not a position term).  ``base``: the logits
    of ``inputs`` when already captured (:func:`_probed_logits`)."""
    from attncheck.dynamic.checks._compare import seq_dim

    ex = inputs.example
    L = ex.L_q
    if L < 3 or ex.L_k != L:
        return None
    sd = seq_dim(target)
    if base is None:
        base = _probed_logits(target, inputs)
    if not base:
        return None
    rtol = _LOGIT_RTOL.get(dtype, _LOGIT_RTOL_DEFAULT)

    def tol(lg: torch.Tensor) -> float:
        v = _valid(lg)
        return rtol * max(1.0, float(lg[v].abs().max()) if bool(v.any()) else 1.0)

    def moved(f) -> Any:
        """``inputs`` with ``f`` applied to q, k and v along the sequence axis."""
        if target.self_attention:
            x = f(inputs.q)
            return inputs.with_tensors(q=x, k=x, v=x)
        k = f(inputs.k)
        return inputs.with_tensors(q=f(inputs.q), k=k, v=k if inputs.v is inputs.k else f(inputs.v))

    p = draw_permutation(L, ex.seed + 5).to(inputs.q.device)
    perm = _probed_logits(target, moved(lambda t: t.index_select(sd, p)))
    if len(perm) != len(base):
        return None
    first = None
    for i, (lg, lp) in enumerate(zip(base, perm)):
        if lp.shape != lg.shape:
            return None
        expected = lg.index_select(-2, p.to(lg.device)).index_select(-1, p.to(lg.device))
        if float(_max_diff(lp, expected).max()) > tol(lg):
            first = i
            break
    if first is None:
        return None
    where = f"attention #{first}"
    # one token's content replaced: a position term changes only that token's row and column
    j0 = L // 2
    g = torch.Generator(device="cpu").manual_seed(int(ex.seed) + 13)

    def replace_token(t: torch.Tensor) -> torch.Tensor:
        t = t.detach().clone()
        idx = [slice(None)] * t.dim()
        idx[sd] = j0
        t[tuple(idx)] = torch.randn(t[tuple(idx)].shape, generator=g,
                                    dtype=torch.float64).to(t)
        return t

    local = _probed_logits(target, moved(replace_token))
    if len(local) != len(base) or local[first].shape != base[first].shape:
        return None
    changed = _max_diff(local[first], base[first]) > tol(base[first])
    others = torch.ones(L, L, dtype=torch.bool, device=changed.device)
    others[j0, :] = False
    others[:, j0] = False
    if bool((changed & others).any()):
        return {"kind": "none", "record": where,
                "message": f"the logits of {where} do not follow a permutation of the tokens, "
                           f"and one token's content changes other tokens' logits: tokens are "
                           f"mixed before attention (not a position term)"}
    # relative or absolute: the logits of the sequence without its first token
    from dataclasses import replace

    shorter = replace(moved(lambda t: t.narrow(sd, 1, L - 1)),
                      example=replace(ex, L_q=L - 1, L_k=L - 1))
    try:
        cut = _probed_logits(target, shorter)
    except Exception:  # noqa: BLE001 - a target with a fixed length: kind unknown
        cut = []
    rel = (len(cut) == len(base) and cut[first].shape[-2:] == (L - 1, L - 1) and
           float(_max_diff(cut[first], base[first][..., 1:, 1:]).max()) <= tol(base[first]))
    kind = "relative" if rel else "absolute"
    how = ("the same after dropping the first token: relative positions (i − j), e.g. rotary "
           "or Transformer-XL" if rel else "not shift-invariant: absolute positions")
    return {"kind": kind, "record": where, "name": "from a permutation of the tokens",
            "message": f"the logits of {where} depend on token positions (a permutation of "
                       f"the tokens does not permute them; each token's content reaches only "
                       f"its own row and column), {how}"}


def detect_positions(target: Any, device: Any = "cpu",
                     dtype: torch.dtype = torch.float32,
                     n_heads: int | None = None) -> dict[str, Any]:
    """Look for a position term in probed forwards (L_q = L_k = 8, no mask; ``n_heads`` heads
    when given and the target does not fix its own): an additive relative-position term in
    the logits, else :func:`position_dependence`.  Returns
    ``{"kind": "none" | "relative" | "alibi" | "absolute", "source": "detected",
    "message": ..}`` (ALiBi adds ``measured_slopes``, one per head); "none" also when nothing
    could be observed."""
    from dataclasses import replace

    from attncheck.dynamic.probe import MASK_THRESHOLD, Probe

    ex = replace(target.default_example(0), L_q=8, L_k=8)
    if n_heads:
        ex = replace(ex, H=int(n_heads))
    ex = target.fit_example(ex)
    inputs = target.make_inputs(ex, device=device, dtype=dtype, causal=target.causal is True)
    with torch.no_grad(), Probe(mha_logits=True) as probe:
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
        if cls["kind"] == "alibi":
            cls["measured_slopes"] = _per_head(cls["measured_slopes"], ex.H)
        name = "relative (a function of i − j)" if cls["kind"] != "alibi" else \
            "ALiBi-style (linear in |i − j|, growing with distance: sign inverted)" \
            if cls.get("inverted") else "ALiBi-style (linear in |i − j|)"
        where = f"{r.kind} #{r.index}"
        return dict(cls, source="detected", record=where,
                    message=f"additive {name} position bias found in the logits of {where}")
    base = _logits_of(probe)
    found = position_dependence(target, inputs, dtype, base) if base else None
    if found is not None:
        return dict(found, source="detected")
    return {"kind": "none", "source": "detected",
            "message": "no position term seen in the logits (no additive relative-position "
                       "bias, and they follow a permutation of the tokens)" if base else
                       "no logits observable (no softmax or SDPA call seen): no position term "
                       "detected"}
