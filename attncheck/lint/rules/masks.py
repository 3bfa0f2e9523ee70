"""Mask rules (ATT2xx): polarity, diagonal, fill values, and where masks are applied.

Every rule reads the shared mask algebra (``ctx.masks``,
:mod:`attncheck.lint.analysis.masks`); none re-derives mask facts itself.
"""
from __future__ import annotations

from dataclasses import replace

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint.analysis.masks import (
    DIAG,
    LOWER,
    UPPER,
    MaskUse,
    describe_pattern,
)
from attncheck.lint.context import dotted_name
from attncheck.lint.finding import Edit, Fix
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T
from attncheck.lint.rules import _edits

_MASK_TOKENS = ("mask", "tril", "triu", "where", "masked_fill", "inf")


def _text(rule: Rule, node: cst.CSTNode, limit: int = 70) -> str:
    s = " ".join(rule.ctx.module.code_for_node(node).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _convention(use: MaskUse) -> str:
    kw = use.keyword or "attn_mask"
    if use.consumer == "sdpa":
        if use.convention == "true_kept":
            return "SDPA's boolean attn_mask is True = attend"
        if kw == "attn_bias":
            return "memory_efficient_attention adds attn_bias to the scores (0 = attend, -inf = blocked)"
        return "SDPA adds a float attn_mask to the scores (0 = attend, -inf = blocked)"
    if use.consumer == "mha":
        if use.convention == "true_blocked":
            return f"nn.MultiheadAttention's boolean {kw} is True = blocked"
        return f"nn.MultiheadAttention adds a float {kw} to the scores (0 = attend, -inf = blocked)"
    if use.consumer == "masked_fill":
        return "masked_fill(mask, value) fills where the mask is True"
    if use.consumer == "where":
        if use.convention == "true_kept":
            return "torch.where(mask, scores, value) keeps the scores where the mask is True"
        return "torch.where(mask, value, scores) fills where the mask is True"
    if use.consumer == "index_assign":
        return "scores[index] = value fills the indexed positions"
    return "an additive mask blocks where it is large negative"


def _mask_words(rule: Rule, use: MaskUse) -> str:
    m = use.mask
    used = _text(rule, use.node)
    origin = _text(rule, m.origin) if m is not None and m.origin is not None else used
    if origin != used and use.consumer != "index_assign":
        # the pattern is the one of the mask as used (~m, m == 0, ...), not of its origin
        origin = f"{used} (from {origin})"
    pat = m.pattern if m is not None else None
    if use.convention == "additive":
        regions = [n for n, r in zip(("below", "on", "above"), pat or ()) if r == "N"]
        where = " and ".join(regions) if regions else "nowhere"
        return f"this {origin} mask is large negative {where} the diagonal"
    words = describe_pattern(pat)
    if use.consumer == "index_assign":
        return f"these {origin} indices select the positions {words.replace('non-zero ', '')}"
    if m is not None and m.dtype == "bool":
        words = words.replace("non-zero", "True")
    return f"this {origin} mask is {words}"


def _origin_line(rule: Rule, use: MaskUse) -> str:
    m = use.mask
    if m is None or m.origin is None:
        return ""
    try:
        pos = rule.get_metadata(PositionProvider, m.origin)
    except KeyError:
        return ""
    use_pos = rule.get_metadata(PositionProvider, use.node)
    if pos.start.line == use_pos.start.line:
        return ""
    return f" (built on line {pos.start.line + rule.ctx.line_offset})"


class _MaskUseRule(Rule):
    """Base: iterate the mask uses once per file, in source order."""

    tokens = _MASK_TOKENS
    pattern = T.SCORES

    def visit_Module(self, node: cst.Module) -> None:
        for use in self.ctx.masks.uses:
            self.check(use)

    def check(self, use: MaskUse) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _is_causal_context(use: MaskUse) -> bool:
    """Fused attention ops always; fills and additive masks only where the masked scores reach
    a softmax (a pointer network's span logits with a triangle mask are not attention)."""
    if use.blocked is None:
        return False
    if use.consumer in ("sdpa", "mha"):
        return True
    return use.reaches_softmax and use.attention


@register
class InvertedCausalMask(_MaskUseRule):
    """ATT201: the mask blocks the past instead of the future under its consumer's convention."""

    code = "ATT201"
    name = "inverted-causal-mask"
    severity = "error"
    summary = "mask polarity contradicts its consumer's convention (blocks the past, keeps the future)"

    def check(self, use: MaskUse) -> None:
        if not _is_causal_context(use):
            return
        b = use.blocked
        if b[LOWER] is not True or b[UPPER] is True:
            return
        sees = "only to itself and the future" if b[DIAG] is False else "only to the future"
        advice = {
            "sdpa": "pass ~mask, torch.tril(...), or is_causal=True",
            "mha": "pass ~mask, torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1), or "
                   "nn.Transformer.generate_square_subsequent_mask(L)",
        }.get(use.consumer)
        if advice is None:
            if use.convention == "true_kept":
                advice = "keep the lower triangle (torch.tril(...)) or swap the torch.where branches"
            elif use.convention == "additive":
                advice = "put the large negative values above the diagonal " \
                         "(torch.triu(..., diagonal=1))"
            else:
                advice = "fill where the mask is False (~mask or mask == 0), or mark the future " \
                         "with torch.triu(..., diagonal=1)"
        self.report(use.node, f"{_convention(use)}; {_mask_words(self, use)}{_origin_line(self, use)}, "
                              f"so every token attends {sees}: {advice}")


@register
class CausalMaskHidesDiagonal(_MaskUseRule):
    """ATT202: the causal mask also blocks the diagonal (each token is hidden from itself)."""

    code = "ATT202"
    name = "causal-mask-hides-diagonal"
    severity = "error"
    summary = "causal mask blocks the diagonal: a token cannot attend to itself (row 0 → NaN)"

    def check(self, use: MaskUse) -> None:
        if not _is_causal_context(use):
            return
        b = use.blocked
        if not (b[UPPER] is True and b[DIAG] is True and b[LOWER] is not True):
            return
        if use.consumer == "index_assign":
            advice = "use torch.triu_indices(L, L, offset=1)"
        elif use.convention == "true_kept":
            advice = "keep the diagonal: torch.tril(..., diagonal=0)" + (
                " or is_causal=True" if use.consumer == "sdpa" else "")
        else:
            advice = "block only the strict upper triangle: torch.triu(..., diagonal=1)"
        self.report(use.node, f"{_convention(use)}; {_mask_words(self, use)}{_origin_line(self, use)}, "
                              f"so every token is hidden from itself and the first row is fully "
                              f"masked (NaN after softmax): {advice}", self._fix(use))

    def _fix(self, use: MaskUse) -> Fix | None:
        """Move the diagonal at the ``triu``/``tril``/``triu_indices`` call that built the mask,
        when that call is in the same function as the use: ``triu(x)`` → ``diagonal=1``,
        ``tril(x, -1)`` → ``diagonal=0``, ``triu_indices(L, L)`` → ``offset=1``."""
        origin = use.mask.origin if use.mask is not None else None
        if not isinstance(origin, cst.Call) or any(a.star for a in origin.args):
            return None
        q = self.ctx.qualname(origin.func) or ""
        f = origin.func
        if q in ("torch.triu", "torch.tril"):
            kind, arg, kw, npos = q[6:], _edits.call_arg(origin, 1, "diagonal"), "diagonal", 1
        elif q == "torch.triu_indices":
            kind, arg, kw, npos = "triu", _edits.call_arg(origin, 2, "offset"), "offset", 2
        elif isinstance(f, cst.Attribute) and f.attr.value in ("triu", "tril", "triu_", "tril_") \
                and not q.startswith("torch."):
            kind, arg, kw, npos = f.attr.value[:4], _edits.call_arg(origin, 0, "diagonal"), "diagonal", 0
        else:
            return None
        d = 0 if arg is None else _int_value(arg.value)
        new = {("triu", 0): "1", ("tril", -1): "0"}.get((kind, d))
        if new is None:
            return None
        if _edits.enclosing(self, origin) is not _edits.enclosing(self, use.node):
            return None
        if arg is not None:
            return _edits.unsafe(f"use {kw}={new}", _edits.replace(self, arg.value, new))
        if sum(a.keyword is None for a in origin.args) < npos:
            return None
        return _edits.unsafe(f"add {kw}={new}", _edits.add_arg(self, origin, f"{kw}={new}"))


def _int_value(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)  # 0xFF, 0o17, 1_000 too
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) \
            and isinstance(node.expression, cst.Integer):
        return -int(node.expression.evaluated_value)
    return None


_CONSUMER_NAMES = {"masked_fill": "masked_fill", "where": "torch.where",
                   "index_assign": "index assignment"}


def _torch_alias(ctx) -> str | None:
    for local, full in ctx.imports.aliases.items():
        if full == "torch":
            return local
    return None


def _is_fp32(rule: Rule, target: cst.CSTNode | None) -> bool:
    if target is None:
        return False
    text = rule.ctx.module.code_for_node(target)
    return ".float()" in text or "float32" in text or ".double()" in text


@register
class MaskValueOverflow(Rule):
    """ATT204: a literal mask value outside float16's range (|v| > 65504)."""

    code = "ATT204"
    name = "mask-value-overflow"
    severity = "error"
    summary = "literal mask fill beyond the fp16 range (-1e9, -1e10, …): use torch.finfo(x.dtype).min"
    tokens = ("e5", "e6", "e7", "e8", "e9", "e1", "e2", "e3", "00000")
    pattern = T.BIG_LITERAL
    # the fill is reported where a mask is applied, which reads a name: a file of literals alone
    # (a generated data module) is not parsed
    requires = T.NAME_READ
    # a fill is a literal in a function body or module code (or float("...")): not in a
    # docstring, a comment, a parameter default or a class-body statement, none of which the
    # mask analysis reads
    pattern_in_code = True

    def visit_Module(self, node: cst.Module) -> None:
        seen: set[int] = set()
        torch_name = _torch_alias(self.ctx)
        for use in self.ctx.masks.uses:
            f = use.fill
            if f is None or not f.overflows_fp16 or f.node is None or id(f.node) in seen:
                continue
            if use.consumer in ("sdpa", "mha", "additive"):
                continue  # reported at the fill site that built the mask
            if _is_fp32(self, use.target) or use.wide or not use.escapes:
                continue  # fp32 by a cast, or a value that never reaches attention

            seen.add(id(f.node))
            target = dotted_name(use.target) if use.target is not None else None
            repl = f"torch.finfo({target}.dtype).min" if target else "torch.finfo(scores.dtype).min"
            fix = None
            if target and torch_name:
                fix = self._fix(f.node, f"{torch_name}.finfo({target}.dtype).min")
            self.report(f.node, f"mask value {_text(self, f.node)} does not fit in float16 "
                                f"(max 65504): {_CONSUMER_NAMES[use.consumer]} raises or overflows to -inf under "
                                f"fp16/autocast; use {repl}", fix)
        for site in self.ctx.masks.fill_sites:
            if id(site.node) in seen or _is_fp32(self, site.base) or site.wide or not site.escapes \
                    or not site.attention:
                continue
            seen.add(id(site.node))
            what = {"additive": "this additive mask", "full": "this mask tensor",
                    "masked_fill": "this mask tensor"}[site.context]
            self.report(site.node, f"mask value {_text(self, site.node)} does not fit in float16 "
                                   f"(max 65504): {what} overflows to -inf under fp16/autocast; "
                                   f"use torch.finfo(scores.dtype).min with the scores' dtype")

    def _fix(self, node: cst.CSTNode, content: str) -> Fix:
        pos = self.get_metadata(PositionProvider, node)
        off = self.ctx.line_offset
        return Fix(f"replace with {content}",
                   (Edit(pos.start.line + off, pos.start.column, pos.end.line + off,
                         pos.end.column, content),), "unsafe")


@register
class IneffectiveMaskValue(_MaskUseRule):
    """ATT205: the fill is non-negative, +inf, or tiny, so masked keys keep their weight."""

    code = "ATT205"
    name = "ineffective-mask-value"
    severity = "error"
    summary = "mask fill non-negative, +inf, or of small magnitude (1e-9, -1e-12, …)"

    def check(self, use: MaskUse) -> None:
        f = use.fill
        if use.consumer in ("additive", "sdpa") and use.convention == "additive" \
                and use.mask is not None and use.mask.weak_fill is not None \
                and (use.mask.fill is None or not use.mask.fill.blocking):
            # an additive mask built by filling zeros with a value that blocks nothing
            f = use.mask.weak_fill
            if use.consumer == "additive" and (not use.reaches_softmax or use.target_tag in ("probs", "out")):
                return
        elif use.consumer not in ("masked_fill", "where", "index_assign"):
            return
        elif not use.reaches_softmax or use.target_tag in ("probs", "out"):
            return
        if f is None or f.node is None or not f.ineffective:
            return
        if f.kind in ("pos_inf", "finfo_max"):
            why = "+inf makes the softmax NaN (inf - inf)"
        elif f.value is not None and f.value >= 0:
            why = "a non-negative logit keeps the masked keys' weight"
        else:
            why = "a logit this close to 0 keeps the masked keys' weight"
        target = dotted_name(use.target) if use.target is not None else None
        repl = f"torch.finfo({target}.dtype).min" if target else "torch.finfo(scores.dtype).min"
        what = "masked scores are filled" if use.consumer not in ("additive", "sdpa") else \
            "the additive mask added to the scores is filled"
        self.report(f.node, f"{what} with {_text(self, f.node)} before softmax: "
                            f"{why}; fill with float('-inf') or {repl}")


@register
class MaskAfterSoftmax(_MaskUseRule):
    """ATT206: a blocking mask applied to attention probabilities instead of the scores."""

    code = "ATT206"
    name = "mask-after-softmax"
    severity = "error"
    summary = "mask applied to the probabilities after softmax (rows no longer sum to 1)"

    def check(self, use: MaskUse) -> None:
        if use.target_tag != "probs" or not use.reaches_matmul:
            return  # e.g. token confidences masked before top-k are not attention weights
        zeroing = use.consumer == "multiply" or (
            use.consumer in ("masked_fill", "where", "index_assign") and use.fill is not None
            and use.fill.region == "Z")
        if zeroing:
            b = use.blocked
            key_padding = use.mask is not None and use.mask.key_only
            if (b is None or True not in b) and not key_padding:
                return  # zeroing rows of padded queries (an unknown mask) is not key masking
            # zeroing probabilities is harmless after the same scores were masked before the
            # softmax (it only turns fully masked rows' NaN into 0); alone it leaves the blocked
            # keys' share of every row out, so rows sum to less than 1
            if any(u.function == use.function and u is not use and u.target_tag != "probs"
                   and (u.reaches_softmax or u.target_tag == "scores") for u in self.ctx.masks.uses):
                return
            self.report(use.call, f"{_text(self, use.target, 40)} holds softmax probabilities and "
                                  f"masked keys are zeroed afterwards without renormalising: rows "
                                  f"no longer sum to 1 and the blocked keys still shaped the "
                                  f"softmax; mask the scores before the softmax")
            return
        if use.consumer in ("masked_fill", "where", "index_assign"):
            if use.fill is None or not use.fill.blocking:
                return
            what = f"filled with {_text(self, use.fill.node)}" if use.fill.node is not None \
                else "filled with a large negative value"
        elif use.consumer == "additive":
            if use.mask is None or "N" not in (use.mask.pattern or ()) and use.mask.fill is None:
                return
            what = "given an additive mask"
        else:
            return
        target = _text(self, use.target, 40) if use.target is not None else "the weights"
        self.report(use.call, f"{target} holds softmax probabilities and is {what} afterwards: "
                              f"masked rows are no longer distributions (and -inf · v is NaN); "
                              f"mask the scores before the softmax")


@register
class BoolMaskAdded(_MaskUseRule):
    """ATT207: a boolean or 0/1 mask added to the logits as if it were additive."""

    code = "ATT207"
    name = "bool-mask-added"
    severity = "error"
    summary = "boolean / 0-1 mask added to the logits (nothing is masked)"

    def check(self, use: MaskUse) -> None:
        m = use.mask
        if m is None or use.consumer not in ("additive", "sdpa", "mha"):
            return
        if use.consumer == "additive" and not (use.reaches_softmax or use.target_tag == "scores"):
            return
        pat = m.pattern or ()
        if m.dtype == "bool" and use.consumer == "additive":
            kind = "a boolean mask"
        elif m.dtype in ("float", "int") and "P" in pat and "N" not in pat and m.fill is None \
                and m.weak_fill is None and use.convention == "additive":
            kind = "a 0/1 mask"
        else:
            return
        origin = _text(self, m.origin) if m.origin is not None else _text(self, use.node)
        if use.consumer == "additive":
            where = f"{kind} ({origin}) is added to the scores: True/1 adds +1 to a logit " \
                    f"and masks nothing"
            advice = "use scores.masked_fill(~keep, torch.finfo(scores.dtype).min) or add " \
                     "torch.zeros_like(scores).masked_fill(~keep, float('-inf'))"
        else:
            where = f"{kind} ({origin}) of dtype float is added to the scores by " \
                    f"{'SDPA' if use.consumer == 'sdpa' else 'nn.MultiheadAttention'}: " \
                    f"nothing is masked"
            advice = "convert it with .bool() (True = attend for SDPA, True = blocked for " \
                     "nn.MultiheadAttention) or build an additive mask with -inf"
        self.report(use.node, f"{where}; {advice}")


@register
class PaddingMaskInverted(_MaskUseRule):
    """ATT208: a keep-mask (1 = real token) used where blocked positions are expected."""

    code = "ATT208"
    name = "padding-mask-inverted"
    severity = "warning"
    summary = "keep-mask (attention_mask, valid, != pad) used where blocked positions are expected"

    def check(self, use: MaskUse) -> None:
        m = use.mask
        if m is None or m.pattern is not None and any(r is not None for r in m.pattern):
            return
        if use.consumer in ("masked_fill", "where", "index_assign"):
            if use.fill is None or not use.fill.blocking:
                return
            if not (use.reaches_softmax or use.target_tag == "scores"):
                return  # e.g. detection logits filtered before top-k, not attention
        elif use.consumer == "additive":
            if not (use.reaches_softmax or use.target_tag == "scores"):
                return
        elif use.consumer not in ("mha", "sdpa"):
            return
        conv = use.convention
        if conv is None and m.dtype is None:  # a padding mask by name: boolean by convention
            conv = {"sdpa": "true_kept", "mha": "true_blocked"}.get(use.consumer)
        if conv == "true_blocked" and m.polarity == "keep":
            bad, want = "marks the real tokens (True/1 = keep)", "~mask (or mask == 0)"
        elif conv == "true_kept" and m.polarity == "block":
            bad, want = "marks the padding (True = pad)", "~mask"
        elif conv == "additive" and m.polarity == "keep" and m.fill is not None and m.fill.blocking:
            # ``m * -1e4`` of a 1 = keep mask is large negative at the real tokens
            bad, want = "is large negative where the mask is 1 (the real tokens)", \
                "(1 - mask) * torch.finfo(scores.dtype).min"
        else:
            return
        self.report(use.node, f"{_convention(replace(use, convention=conv))}; "
                              f"{_text(self, use.node)} {bad}, so the real "
                              f"tokens are masked and attention goes to the padding: pass {want}")


@register
class MaskHeadBatchOrder(_MaskUseRule):
    """ATT209: a per-sample mask tiled over heads with .repeat for a (B·H, L, S) consumer."""

    code = "ATT209"
    name = "mask-head-batch-order"
    severity = "error"
    summary = "per-sample mask expanded to (B·H, …) with .repeat where repeat_interleave is needed"

    def check(self, use: MaskUse) -> None:
        if use.consumer != "mha" or use.keyword != "attn_mask" or use.mask is None:
            return
        if not use.mask.repeated:
            return
        self.report(use.node, "nn.MultiheadAttention reads a 3-D attn_mask as "
                              "[batch * num_heads + head]; .repeat(num_heads, 1, 1) tiles the "
                              "samples as [M0, M1, M0, M1], mixing masks across the batch: use "
                              ".repeat_interleave(num_heads, dim=0)")


@register
class SummedMinMasks(Rule):
    """ATT210: two additive masks filled with torch.finfo(dtype).min are summed."""

    code = "ATT210"
    name = "summed-min-masks"
    severity = "warning"
    summary = "two additive masks at finfo.min summed (overflows to -inf)"
    tokens = ("finfo",)

    def visit_Module(self, node: cst.Module) -> None:
        seen = set()
        for n in self.ctx.masks.summed_min:
            if id(n) in seen:
                continue
            seen.add(id(n))
            self.report(n, "both masks hold torch.finfo(dtype).min at blocked positions: where "
                           "both block, the sum overflows to -inf (NaN for fully masked rows); "
                           "combine them with torch.minimum(a, b) or combine the boolean masks "
                           "before filling once")


_CACHE_WORDS = ("cache", "past", "layer_past", "kv_state", "prefix_k", "memory_k")


@register
class MisalignedIsCausal(Rule):
    """ATT203: SDPA ``is_causal=True`` in code where L_q can differ from L_k (KV cache)."""

    code = "ATT203"
    name = "misaligned-is-causal"
    severity = "warning"
    summary = "SDPA is_causal=True where L_q can differ from L_k (KV cache): SDPA aligns top-left"
    tokens = ("is_causal",)
    pattern = T.IS_CAUSAL_TRUE

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._fn: list[cst.FunctionDef] = []
        self._cachey: list[bool] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._fn.append(node)
        params = node.params
        names = [p.name.value for p in (*params.posonly_params, *params.params,
                                         *params.kwonly_params)]
        self._cachey.append(any(w in n.lower() for n in names for w in _CACHE_WORDS))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._fn.pop()
        self._cachey.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if not self._cachey or not self._cachey[-1]:
            return
        q = self.ctx.qualname(node.func) or ""
        if not q.endswith("scaled_dot_product_attention"):
            return
        for a in node.args:
            if a.keyword is not None and a.keyword.value == "is_causal" and \
                    isinstance(a.value, cst.Name) and a.value.value == "True":
                self.report(a.value, "SDPA's is_causal=True builds a top-left aligned "
                                     "torch.tril(L_q, L_k) mask; with a KV cache (L_q < L_k) "
                                     "a decoding query sees only the first cached keys: pass "
                                     "is_causal=(q.shape[-2] == k.shape[-2]) with no mask for "
                                     "single-token steps, or a lower-right mask "
                                     "(torch.nn.attention.bias.causal_lower_right)")
