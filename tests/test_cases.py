"""Every handed bug case has a fixture that states and exhibits its bug.

``fixtures/cases/cases.toml`` lists each case's ``static`` rule codes and ``dynamic`` checks.  For
each case: the fixture exists; its ``# expect:`` codes equal the ``static`` list; once all those
rules are registered, lint with the default rules raises exactly those codes (no other); its
``DYNAMIC`` declaration names an existing target (a class instantiable with no arguments, or a
kernel whose first parameters are q, k, v) and the case's checks; and running the target shows the
bug (a direct numeric probe per case, independent of attncheck's dynamic checks, which are tested
with the same DYNAMIC targets in the dynamic test suite).
"""
from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attncheck.lint.rule import all_rules
from test_fixtures_lint import FIXTURES, lint_fixture, load_module, parse_expectations

CASES_DIR = FIXTURES / "cases"
CASES: dict[str, dict] = tomllib.loads((CASES_DIR / "cases.toml").read_text(encoding="utf-8"))
# the dynamic check catalog (docs/checks.md).
KNOWN_CHECKS = {
    "shapes", "finite", "normalization", "causality", "padding", "batch-independence",
    "permutation-equivariance", "gradient-flow", "saturation", "scale", "reference", "dtype",
    "determinism", "kv-cache", "mask-pattern",
}
_modules: dict[str, object] = {}


def case_path(case: str) -> Path:
    return CASES_DIR / f"{case}.py"


def case_module(case: str):
    if case not in _modules:
        _modules[case] = load_module(case_path(case))
    return _modules[case]


def test_cases_table_is_complete():
    assert len(CASES) == 23
    for case, entry in CASES.items():
        assert set(entry) == {"static", "dynamic"}, case
        assert entry["static"] or entry["dynamic"], case
        assert set(entry["dynamic"]) <= KNOWN_CHECKS, case


def test_no_stray_case_fixtures():
    files = {p.stem for p in CASES_DIR.glob("b*.py")}
    assert files == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_expectations_equal_static_list(case: str):
    path = case_path(case)
    assert path.is_file(), f"missing fixture {path.name}"
    codes = {code for _, code in parse_expectations(path.read_text(encoding="utf-8"))}
    assert codes == set(CASES[case]["static"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_lint_raises_exactly_static_codes(case: str):
    static = set(CASES[case]["static"])
    registered = set(all_rules())
    if not static <= registered:
        pytest.skip(f"rules not registered yet: {sorted(static - registered)}")
    findings = lint_fixture(case_path(case))
    assert {f.code for f in findings} == static, [f"{f.line}:{f.code} {f.message}" for f in findings]


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_dynamic_declaration(case: str):
    module = case_module(case)
    spec = module.DYNAMIC
    assert set(spec["checks"]) == set(CASES[case]["dynamic"])
    assert spec["hints"]["kind"] in {"kernel", "layer", "lm"}
    target = getattr(module, spec["target"])
    if spec["hints"]["kind"] == "kernel":
        assert inspect.isfunction(target)
        assert len(inspect.signature(target).parameters) >= 3
    else:
        assert isinstance(target(), nn.Module)  # instantiable with no arguments


# --- each case's bug, shown numerically on the fixture (values, not just "runs") -------------------

def _qkv(B=2, H=4, L=6, d=8):
    return [torch.randn(B, H, L, d) for _ in range(3)]


def _keep(B=2, L=6, pad=2):
    """SDPA-style bool key mask (B, 1, 1, L): sample 1 has its last ``pad`` keys padded."""
    keep = torch.ones(B, L, dtype=torch.bool)
    keep[1, L - pad:] = False
    return keep[:, None, None, :]


def _b01(m):
    head, x = m.Head(), torch.randn(2, 10, 32)
    ref = F.scaled_dot_product_attention(head.query(x), head.key(x), head.value(x), is_causal=True)
    return (head(x) - ref).abs().max() > 1e-2


def _b03(m):
    fused, eager = m.ScaledQueryAttention(), m.ScaledQueryAttention(fused=False)
    eager.load_state_dict(fused.state_dict())
    x = torch.randn(2, 9, 64) * 3
    return (fused(x) - eager(x)).abs().max() > 1e-2


def _b05(m):
    q, k, v = _qkv(d=32)
    return (m.fallback_attention(q, k, v) - F.scaled_dot_product_attention(q, k, v)).abs().max() > 1e-2


def _b08(m):
    q, k, v = _qkv()
    k2 = k.clone()
    k2[..., -1, :] += 5.0  # the future of position 0
    return (m.causal_attention(q, k2, v)[..., 0, :] - m.causal_attention(q, k, v)[..., 0, :]).abs().max() > 1e-3


def _b09(m):
    return bool(torch.isnan(m.causal_attention(*_qkv())[..., 0, :]).all())


def _b10(m):
    layer, x = m.CachedSelfAttention(), torch.randn(1, 7, 32)
    _, cache = layer(x[:, :-1], use_cache=True)
    return (layer(x[:, -1:], past_kv=cache) - layer(x)[:, -1:]).abs().max() > 1e-3


def _b12(m):
    try:
        out = m.causal_attention(*(t.half() for t in _qkv()))
    except RuntimeError as exc:
        return "overflow" in str(exc)
    return not bool(torch.isfinite(out).all())


def _b14(m):
    keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep[1] = False  # sample 1 is all padding
    return bool(torch.isnan(m.padded_attention(*_qkv(), attn_mask=keep)).any())


def _b16(m):
    q, k, v = _qkv()
    v2 = v.clone()
    v2[..., -1, :] += 5.0
    return (m.causal_attention(q, k, v2)[..., 0, :] - m.causal_attention(q, k, v)[..., 0, :]).abs().max() > 1e-3


def _b19(m):
    q, k, v = _qkv()
    return not bool(torch.isfinite(m.masked_attention(q, k, v, attn_mask=_keep())).all())


def _b20(m):
    _, weights = m.DotAttention()(torch.randn(1, 1, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8))
    return not torch.allclose(weights.sum(-1), torch.ones(1, 1))


def _b23(m):
    layer, x, p = m.MultiHeadSelfAttention(), torch.randn(2, 6, 16), torch.randperm(6)
    return (layer(x[:, p]) - layer(x)[:, p]).abs().max() > 1e-3


def _b25(m):
    layer, ref = m.BatchFirstMHA(), nn.MultiheadAttention(16, 4, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(layer.in_proj_weight)
        ref.in_proj_bias.copy_(layer.in_proj_bias)
        ref.out_proj.load_state_dict(layer.out_proj.state_dict())
    x = torch.randn(2, 5, 16)
    return (layer(x, x, x)[0] - ref(x, x, x, need_weights=False)[0]).abs().max() > 1e-3


def _b26(m):
    layer, x = m.FusedCausalSelfAttention().eval(), torch.randn(2, 8, 32)
    with torch.no_grad():
        return not torch.equal(layer(x), layer(x))


def _b28(m):
    layer, x = m.PaddedSelfAttention().eval(), torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    with torch.no_grad():
        return (layer(x, pad)[0] - layer(x[:1], pad[:1])[0]).abs().max() > 1e-4


def _b30(m):
    q, k, v = _qkv()
    mask = _keep()[:, 0, 0, :].long()  # 1 = real token
    v2 = v.clone()
    v2[1, :, -2:] += 10.0  # change only sample 1's padding
    moved = m.padded_attention(q, k, v2, attention_mask=mask)[1] - m.padded_attention(q, k, v, attention_mask=mask)[1]
    return moved.abs().max() > 1e-3


def _b31(m):
    q, k, v = torch.randn(1, 8, 6, 16), torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return (m.grouped_query_attention(q, k, v) - ref).abs().max() > 1e-3


def _b32(m):
    q, k, v = _qkv(d=16)
    return (m.rotary_attention(q, k, v) - m.rotary_attention(q, k, v, position_offset=7)).abs().max() > 1e-3


def _b35(m):
    lm = m.TinyAbsPosLM().eval()
    with torch.no_grad():
        alone = lm(torch.tensor([[3, 4, 5]]))[0, -1]
        padded = lm(torch.tensor([[0, 0, 3, 4, 5]]), torch.tensor([[0, 0, 1, 1, 1]]))[0, -1]
    return (alone - padded).abs().max() > 1e-3


def _b36(m):
    q, k, _ = _qkv(B=1, H=1, L=12)
    probs = m.sliding_window_attention(q, k, torch.eye(12)[None, None])  # V = I: output = weights
    return int((probs[0, 0, -1] > 0).sum()) == 5  # window 4 must mean 4 visible keys


def _b37(m):
    q, k, v = _qkv()
    v2 = v.clone()
    v2[1, :, -2:] += 10.0
    moved = m.eager_attention(q, k, v2, attn_mask=_keep())[1] - m.eager_attention(q, k, v, attn_mask=_keep())[1]
    return moved.abs().max() > 1e-3


def _b39(m):
    q, k, v = _qkv()
    return bool(torch.isnan(m.attention(q * 30, k * 30, v)).any())


def _b41(m):
    layer, x, p = m.FlashSelfAttention(), torch.randn(2, 6, 32), torch.randperm(6)
    return (layer(x[:, p]) - layer(x)[:, p]).abs().max() > 1e-3


PROBES = {name[1:]: fn for name, fn in globals().items() if name.startswith("_b") and callable(fn)}


def test_every_case_has_a_probe():
    assert {c.split("_")[0] for c in CASES} == set(PROBES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_fixture_exhibits_bug(case: str):
    torch.manual_seed(0)
    assert bool(PROBES[case.split("_")[0]](case_module(case))), f"{case}: the bug does not show"
