"""Truth by execution, and lint through the public API, for generated variants.

``verify(variant)`` runs the module (the test executes generated code; the linter never does)
and compares it with ``F.scaled_dot_product_attention`` computed on the module's own projection
weights: float64, scale ``D ** -0.5``, ``is_causal`` for causal modules; two eval-mode forwards
must agree (dropout); a module that takes a key padding mask gets ``attention_mask`` of shape
``(B, L)``, 1 = token and 0 = padding (the last two keys of the second sample), and the reference
masks those keys; one forward and backward under autograd must run (an in-place op on a view
that autograd forbids, e.g. ``q *= scale`` on an ``unbind`` output, makes the module untrainable);
modules with a literal mask fill also run in float16, where an overflowing fill raises or yields
non-finite values.  The verdict is ``"correct"``, ``"buggy"`` or
``"error"`` (the float64 run raised: a generator defect, never a label).
"""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .generator import Variant

B, L = 2, 5


def padding_mask() -> torch.Tensor:
    """``(B, L)`` int64, 1 = token, 0 = padding: the second sample's last two positions are pads."""
    am = torch.ones(B, L, dtype=torch.long)
    am[1, -2:] = 0
    return am


def _reference(v: Variant, m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    if v.seq_first:
        x = x.transpose(0, 1)
    b, n, c = x.shape
    H, Hkv, D = v.n_heads, v.n_kv_heads, v.head_dim
    if len(v.projections) == 1:
        q, k, val = getattr(m, v.projections[0])(x).split(c, dim=-1)
    else:
        q, k, val = (getattr(m, p)(x) for p in v.projections)
    q = q.view(b, n, H, D).transpose(1, 2)
    k = k.view(b, n, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    val = val.view(b, n, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    if v.padding:
        keep = padding_mask().bool()[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, val, attn_mask=keep)
    else:
        y = F.scaled_dot_product_attention(q, k, val, is_causal=v.causal)
    y = getattr(m, v.out_proj)(y.transpose(1, 2).reshape(b, n, H * D))
    return y.transpose(0, 1) if v.seq_first else y


@dataclass
class Verdict:
    truth: str  # "correct" | "buggy" | "error"
    why: str = ""


def verify(v: Variant) -> Verdict:
    # tiny tensors: an intra-op thread pool only adds contention
    torch.set_num_threads(1)
    ns: dict = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(v.source, f"<idiom seed={v.seed}>", "exec"), ns)  # noqa: S102
            torch.manual_seed(v.seed)
            m = ns["Attention"](d_model=v.d_model, n_heads=v.n_heads, n_kv_heads=v.n_kv_heads,
                                dropout=v.dropout, max_len=8).double().eval()
            gen = torch.Generator().manual_seed(v.seed)
            shape = (L, B, v.d_model) if v.seq_first else (B, L, v.d_model)
            x = torch.randn(shape, dtype=torch.float64, generator=gen)
            kw = {"attention_mask": padding_mask()} if v.padding else {}
            with torch.no_grad():
                ref = _reference(v, m, x)
                y1 = m(x, **kw)
                y2 = m(x, **kw)
    except Exception as exc:  # noqa: BLE001 - a generator defect, reported by the caller
        return Verdict("error", f"{type(exc).__name__}: {exc}")
    if y1.shape != ref.shape:
        return Verdict("buggy", f"shape {tuple(y1.shape)} != {tuple(ref.shape)}")
    if not torch.equal(y1, y2):
        return Verdict("buggy", "two eval forwards differ")
    if not torch.allclose(y1, ref, rtol=1e-6, atol=1e-6):
        return Verdict("buggy", f"max |y - ref| = {(y1 - ref).abs().nan_to_num(1e9).max().item():.3g}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m(x.clone().requires_grad_(), **kw).sum().backward()
    except RuntimeError as exc:  # autograd refuses the forward: the module cannot be trained
        return Verdict("buggy", f"forward under autograd: {type(exc).__name__}: {exc}")
    if v.fp16:
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                m16 = copy.deepcopy(m).half()
                y16 = m16(x.half(), **kw).double()
        except Exception as exc:  # noqa: BLE001 - float16 overflow raises in masked_fill
            return Verdict("buggy", f"float16: {type(exc).__name__}: {exc}")
        if not torch.isfinite(y16).all() or not torch.allclose(y16, ref, rtol=5e-2, atol=5e-2):
            return Verdict("buggy", "float16 output differs")
    return Verdict("correct")


def lint_codes(v: Variant) -> list[str]:
    """Codes of the non-info findings ``attncheck.lint_source`` reports on the variant."""
    from attncheck import lint_source

    return sorted({f.code for f in lint_source(v.source, path=f"idiom_{v.seed}.py")
                   if f.severity != "info"})


def region_and_whole(v: Variant) -> tuple[list[dict], list[dict]]:
    """All enabled rules' findings from a region parse (every file size) and a whole-file parse."""
    from attncheck.lint import regions
    from attncheck.lint.engine import Layer, all_rules, lint_text, resolve_selection

    registry = all_rules()
    enabled = resolve_selection(registry, [Layer(select=("ALL",))])
    saved = regions.MIN_LINES
    regions.MIN_LINES = 0
    try:
        part, whole = (lint_text(v.source, f"idiom_{v.seed}.py", enabled, registry, regions=r).findings
                       for r in (True, False))
        return [f.to_dict() for f in part], [f.to_dict() for f in whole]
    finally:
        regions.MIN_LINES = saved


@dataclass
class Outcome:
    variant: Variant
    verdict: Verdict
    codes: list[str]

    @property
    def kept(self) -> bool:
        """The execution confirms the label (buggy variants differ, correct ones match)."""
        want = "correct" if self.variant.fault is None else "buggy"
        return self.verdict.truth == want

    @property
    def ok(self) -> bool:
        if self.variant.fault is None:
            return not self.codes
        return self.variant.fault in self.codes


def run(v: Variant) -> Outcome:
    verdict = verify(v)
    codes = lint_codes(v) if verdict.truth != "error" else []
    return Outcome(v, verdict, codes)


def assert_recall(buggy: list, missed: list, per_fault: bool, floor: float = 0.95) -> None:
    """Assert the share of ``buggy`` outcomes (objects with ``.variant.fault`` and ``.ok``) that
    were caught is at least ``floor`` (``missed`` describes the others, for the message); with
    ``per_fault``, also for every fault seen at least 20 times."""
    assert 1 - len(missed) / len(buggy) >= floor, missed
    if per_fault:
        per: dict[str, list[bool]] = {}
        for o in buggy:
            per.setdefault(o.variant.fault, []).append(o.ok)
        low = {c: f"{sum(v)}/{len(v)}" for c, v in per.items()
               if len(v) >= 20 and sum(v) / len(v) < floor}
        assert low == {}
