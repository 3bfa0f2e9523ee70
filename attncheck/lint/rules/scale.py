"""ATT101–ATT105: the softmax temperature of q·kᵀ scores.

Convention (Vaswani et al. 2017, "Attention Is All You Need", eq. 1; PyTorch
``F.scaled_dot_product_attention`` default ``scale = 1/√E`` with ``E = q.size(-1)``): scores of
per-head q, k of size ``(…, L, head_dim)`` are multiplied by ``head_dim ** -0.5`` exactly once.

All five rules read the score-provenance analysis (``ctx.provenance.scale_events``): each event is
scores reaching a softmax, or q/k reaching SDPA, with every factor that scaled q, k or the scores.
They fire only where every factor is known; an unknown factor (a learned temperature, an attribute
of unknown value, a factor that differs between branches) silences them.
"""
from __future__ import annotations

import re
from typing import Any

from attncheck.lint.analysis.provenance import _SCALE_NAME, Dim, ScaleEvent, Sym
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T

TOKENS = ("softmax", "scaled_dot_product_attention", "Softmax", "exp")


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    return f" ({v:g})" if not float(v).is_integer() else f" ({int(v)})"


def _is_full_scale(f: Any) -> bool:
    s: Sym = f.sym
    if f.where == "sdpa-default":
        return True
    if s.explicit_one or s.default_one:
        return False
    if not s.opaque and s.coef is not None:
        s = _merge(s)  # (d_model // n_heads) ** -0.5 is a head-dim scale
    if s.opaque:
        return bool(s.name and _SCALE_NAME.search(s.name.rsplit(".", 1)[-1]))
    if len(s.pows) == 1 and s.coef == 1:
        d, e = s.pows[0]
        if e == -0.5:
            return True
        if e == 1 and _SCALE_NAME.search(d.text.rsplit(".", 1)[-1]) and d.role == "?":
            return True
    if s.name and _SCALE_NAME.search(s.name.rsplit(".", 1)[-1]) and not s.pows and s.coef not in (None, 1.0):
        return True
    return False


def _merge(s: Sym) -> Sym:
    """``E^a · H^-a`` → ``d^a`` (``(d_model / num_heads) ** -0.5`` is the head-dim scale)."""
    pows = dict(s.pows)
    es = [d for d in pows if d.role == "E"]
    hs = [d for d in pows if d.role == "H"]
    for e in es:
        for h in hs:
            if e in pows and h in pows and abs(pows[e] + pows[h]) < 1e-9:
                a = pows.pop(e)
                pows.pop(h)
                v = e.value / h.value if e.value and h.value else None
                pows[Dim(f"{e.text} / {h.text}", "d", v)] = a
    return Sym(coef=s.coef, pows=tuple(pows.items()))


def _head_dim_name(ev: ScaleEvent) -> str:
    """The code's own expression for the head dim of q/k (``self.dim_head``, ``d_k``,
    ``self.head_size``), parenthesised when compound; ``head_dim`` when unknown."""
    for t in (ev.q, ev.k):
        d = t.last if t is not None else None
        if d is not None and d.role == "d" and d.text:
            return f"({d.text})" if " " in d.text else d.text
    return "head_dim"


def classify(ev: ScaleEvent) -> tuple[str, Any, str] | None:
    """Return ``(code, node, message)`` for a scale finding, or ``None``.

    Raises nothing; an event with unknown factors yields ``None``.
    """
    if ev.uncertain:
        return None
    q, k = ev.q, ev.k
    factors = [f for f in ev.factors]
    explicit = any(f.sym.explicit_one for f in factors)
    default_one = [f for f in factors if f.sym.default_one]
    real = [f for f in factors if not (f.sym.is_literal() and f.sym.coef == 1.0)]
    # on l2-normalised q/k an opaque factor is a learned temperature, not a 1/√d scale
    # (cosine attention; nGPT / nViT scale each of q and k by a learned s_qk)
    cosine = q is not None and k is not None and (q.normalized or k.normalized)
    full = [f for f in real if _is_full_scale(f) and not (
        cosine and (f.sym.opaque or all(d.role == "?" for d, _ in f.sym.pows)))]
    report_node = ev.scores.node if ev.scores is not None and ev.scores.node is not None else ev.node
    hd_name = _head_dim_name(ev)
    if len(full) >= 2:
        where = ", ".join(_where(f) for f in full)
        node = ev.node if ev.kind == "sdpa" else full[-1].node or ev.node
        if any(f.where == "sdpa-default" for f in full):
            where = ", ".join(_where(f) for f in full if f.where != "sdpa-default")
            msg = (f"scores scaled twice: q/k are already scaled ({where}) and SDPA applies its default "
                   f"1/√{hd_name} again: pass scale=1.0 or drop the pre-scaling")
        else:
            msg = f"scores scaled twice ({where}): apply {hd_name} ** -0.5 exactly once"
        return "ATT104", node, msg
    if any(f.sym.opaque for f in real):
        return None
    if not real:
        if explicit or ev.partial:
            return None
        if default_one:
            name = default_one[0].sym.default_one
            return ("ATT101", report_node,
                    f"scores are scaled only by parameter {name!r}, whose value is always its default 1.0 "
                    f"(no caller in this file passes it): default it to {hd_name} ** -0.5 "
                    f"(e.g. {name}=None → q.size(-1) ** -0.5)")
        if ev.kind == "sdpa":
            return None
        if ev.scores is not None and ev.scores.biased:
            return None  # T5: learned relative position_bias, 1/√d folded into the q init
        if q is None or k is None or q.normalized or k.normalized:
            return None
        if not (q.origin == "proj" and k.origin == "proj" or _bare_kernel(ev)):
            return None
        if q.last is not None and q.last.value == 1:
            return None  # head_dim 1: 1/√1 is no scale at all
        hd = q.last
        hint = f"{hd_name}{_fmt(hd.value)}" if hd is not None and hd.role == "d" else (
            f"{q.pname}.size(-1)" if q.origin == "param" and q.pname else hd_name)
        return ("ATT101", report_node,
                f"q·kᵀ reaches softmax with no scaling: multiply the scores by {hint} ** -0.5 "
                f"(or pass them through F.scaled_dot_product_attention)")
    total = ONE_SYM
    for f in real:
        total = total.mul(f.sym)
    total = _merge(total)
    if total.coef is None:
        return None
    node = real[-1].node or ev.node
    qlast = q.last if q is not None else None
    klast = k.last if k is not None else None
    perhead = bool((q is not None and q.perhead) or (k is not None and k.perhead)
                   or (qlast is not None and qlast.role == "d"))
    if not total.pows:
        return None
    if len(total.pows) != 1 or total.coef != 1:
        return None
    d, e = total.pows[0]
    role = d.role
    # the contraction width of q·kᵀ read off q or k itself (q.size(-1), k.shape[-1] inline):
    # whatever the layout, 1/√ of it is the dot-product scale (Vaswani et al. 2017, §3.2.1)
    read_off = {f"{t.pname}.shape[-1]" for t in (q, k)
                if t is not None and t.origin == "param" and t.pname}
    own = d == qlast or d == klast or d.text in read_off
    if own or d.text in ("q.size(-1)",):
        role = "d"
    shown = f"{d.text}{_fmt(d.value)}"
    hd_txt = (f"{qlast.text}{_fmt(qlast.value)}" if qlast is not None and qlast.role == "d" and qlast != d
              else hd_name)
    if role == "d":
        if e == -0.5:
            return None
        if e == -1:
            return ("ATT103", node, f"scores divided by {shown} instead of its square root: "
                                    f"use {d.text} ** -0.5 (1/√{d.text})")
        if e > 0:
            return ("ATT105", node, f"scores multiplied by {_pow_txt(d, e)} (inverted scale): "
                                    f"use {d.text} ** -0.5, i.e. divide by √{d.text}")
        return None
    if role in ("E", "H"):
        what = "the model width" if role == "E" else "the head count"
        if e > 0:
            return ("ATT105", node, f"scores multiplied by {_pow_txt(d, e)} (inverted scale): "
                                    f"divide by √{hd_name} instead")
        if role == "E" and not perhead:
            if e == -0.5:
                return None
            if e == -1:
                return ("ATT103", node, f"scores divided by {shown} instead of its square root: "
                                        f"use {d.text} ** -0.5")
            return None
        hd_name = hd_txt.split(' (')[0]
        if " " in hd_name:
            hd_name = f"({hd_name})"
        return ("ATT102", node, f"scores scaled by {_pow_txt(d, e)}, {what}{_fmt(d.value)}; per-head q/k have "
                                f"{hd_txt}: use {hd_name} ** -0.5")
    return None


ONE_SYM = Sym()

_Q_PARAM = re.compile(r"^(q|xq|qs|query|queries|q_\w+|query_\w+|\w+_q|\w+_query)$", re.IGNORECASE)
_K_PARAM = re.compile(r"^(k|xk|ks|key|keys|k_\w+|key_\w+|\w+_k|\w+_key)$", re.IGNORECASE)


def _bare_kernel(ev: ScaleEvent) -> bool:
    """``softmax(q @ kᵀ) @ v`` on function parameters named like q and k (``q``/``query``/
    ``query_states``, ``k``/``key``/``key_states``): the attention kernel itself, so a caller's
    pre-scaling is not to be assumed."""
    q, k = ev.q, ev.k
    if not ev.to_v or q is None or k is None or q.origin != "param" or k.origin != "param":
        return False
    return bool(q.pname and k.pname and _Q_PARAM.match(q.pname) and _K_PARAM.match(k.pname))


def _pow_txt(d: Dim, e: float) -> str:
    return {-0.5: f"1/√{d.text}", -1.0: f"1/{d.text}", 0.5: f"√{d.text}", 1.0: d.text}.get(e, f"{d.text}^{e:g}")


def _where(f: Any) -> str:
    s = f.sym
    label = s.name if s.opaque or (s.name and not s.pows) else s.text()
    if f.where == "sdpa-default":
        return "SDPA default"
    return f"{label} on {f.where}"


class _ScaleRule(Rule):
    tokens = TOKENS
    pattern = T.SOFTMAX + T.FUSED + T.EXP  # exp/sum: a softmax written out
    severity = "error"

    def visit_Module(self, node: Any) -> None:
        seen = set()
        for ev in self.ctx.provenance.scale_events:
            r = classify(ev)
            if r is None or r[0] != self.code:
                continue
            _, n, msg = r
            if id(n) in seen:
                continue
            seen.add(id(n))
            self.report(n, msg)


@register
class MissingScale(_ScaleRule):
    code = "ATT101"
    name = "missing-scale"
    summary = "q·kᵀ reaches softmax with no scaling on any path"


@register
class ScaleNotHeadDim(_ScaleRule):
    code = "ATT102"
    name = "scale-not-head-dim"
    summary = "scale from the model width or head count where q/k are per-head"


@register
class UnrootedScale(_ScaleRule):
    code = "ATT103"
    name = "unrooted-scale"
    severity = "warning"
    summary = "scores divided by d_k instead of √d_k"


@register
class DoubleScale(_ScaleRule):
    code = "ATT104"
    name = "double-scale"
    summary = "scores scaled twice (e.g. q pre-scaled, then SDPA's default scale)"


@register
class InvertedScale(_ScaleRule):
    code = "ATT105"
    name = "inverted-scale"
    summary = "scores multiplied by √d_k (or divided by d_k ** -0.5)"
