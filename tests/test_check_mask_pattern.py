"""``mask-pattern``: declared vs observed pattern (full / causal / sliding window w)."""
import torch
import torch.nn.functional as F
from _dynamic_helpers import load
from _check_helpers import run, run_case
from hypothesis import given
from hypothesis import strategies as st

from attncheck.dynamic.checks.mask_pattern import classify
from attncheck.dynamic.checks.reference import window_blocked


def window_kernel(w):
    def sliding(q, k, v):
        L = q.size(-2)
        keep = torch.ones(L, L, dtype=torch.bool).tril() & ~window_blocked(L, L, w)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    return sliding


@given(st.integers(2, 20), st.integers(1, 25))
def test_classify_band(L, w):
    vis = torch.ones(L, L, dtype=torch.bool).tril() & ~window_blocked(L, L, w)
    pat, got = classify(vis)
    if w >= L:
        assert pat == "causal" and got is None
    else:
        assert pat == "sliding_window" and got == w


def test_classify_full_and_other():
    assert classify(torch.ones(5, 5, dtype=torch.bool)) == ("full", None)
    odd = torch.eye(5, dtype=torch.bool)
    odd[0, 4] = True
    assert classify(odd) == ("other", None)


def test_sliding_window_off_by_one_b36_reports_w():
    r = run_case("b36_sliding_window_off_by_one", "mask-pattern")
    assert r.status == "fail" and "off by one" in r.message
    assert r.metrics["declared_window"] == 4 and r.metrics["observed_window"] == 5
    assert r.metrics["source"] == "V = identity"


def test_correct_window_passes():
    r = run(window_kernel(4), "mask-pattern", kind="kernel", causal=True,
            mask_pattern={"kind": "sliding_window", "window": 4})
    assert r.status == "pass", r.message
    assert r.metrics["observed_window"] == 4
    assert r.metrics["keys_per_row"][:5] == [1, 2, 3, 4, 4]


def test_layers_from_probe():
    ng = load("dynamic/nanogpt_layer.py")
    r = run(ng.make_causal_layer(), "mask-pattern", causal=True)
    assert r.status == "pass" and r.metrics["observed"] == "causal"
    assert r.metrics["source"] == "probe"
    r = run(ng.make_causal_layer(), "mask-pattern", causal=True, pattern="full")
    assert r.status == "fail" and r.metrics["observed"] == "causal"


def test_undeclared_reports_observed():
    r = run(torch.nn.MultiheadAttention(16, 2, batch_first=True), "mask-pattern")
    assert r.status == "skip" and r.metrics["observed"] == "full"
