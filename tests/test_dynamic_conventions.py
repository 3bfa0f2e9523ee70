"""Correct code with uncommon conventions passes; its buggy twin fails (fixtures/dynamic/
conventions.py)."""
import pytest
import torch
from _dynamic_helpers import load

import attncheck
from attncheck.dynamic.probe import Probe, _einsum_key_axis, _einsum_query_axis
from attncheck.dynamic.spec import build
from attncheck.dynamic.targets import target

fx = load("dynamic/conventions.py")


def _run(name, checks, **extra):
    hints = dict(fx.CORRECT.get(name) or fx.BUGGY[name][0])
    hints.update(extra)
    obj = build(getattr(fx, name), name)
    return attncheck.check(obj, checks=checks, device="cpu", max_examples=4, timeout=60,
                           **hints)


@pytest.mark.parametrize("eq,key,query", [("bhid,bhjd->bhij", 3, 2), ("bihd,bjhd->bijh", 2, 1),
                                          ("bjhd,bihd->bhij", 3, 2), ("bhd,bhd->bh", None, None)])
def test_einsum_key_axis(eq, key, query):
    assert _einsum_key_axis(eq) == key
    assert _einsum_query_axis(eq) == query


def test_probe_canonical_heads_last():
    q, k, v = (torch.randn(2, 5, 3, 4) for _ in range(3))
    with Probe() as p:
        fx.einsum_heads_last(q, k, v)
    (r,) = p.records
    assert (r.query_axis, r.key_axis, r.dim) == (1, 2, 2)
    assert tuple(r.canonical(r.probs).shape) == (2, 3, 5, 5)
    assert torch.allclose(r.canonical(r.probs).sum(-1), torch.ones(2, 3, 5))


def test_heads_last_softmax_over_keys_passes_and_wrong_axis_fails():
    ok = _run("einsum_heads_last", ["normalization"]).results[0]
    assert ok.status == "pass", ok.message
    bad = _run("einsum_heads_last_wrong_axis", ["normalization"]).results[0]
    assert bad.status == "fail" and "do not sum to 1" in bad.message


def test_self_attention_only_kernel_detected_once():
    t = target(fx.causal_self_attention_kernel, causal=True)
    det = t.ensure_cross_support()
    assert det["cross"] is False and det["exception"] == "RuntimeError"
    assert t.allows_cross is False
    rep = attncheck.check(t, checks=["shapes", "normalization"], device="cpu", max_examples=4)
    assert [r.status for r in rep.results] == ["pass", "pass"]
    assert all(r.metrics["lengths"].startswith("L_q = L_k only") for r in rep.results)
    assert "self-attention only" in rep.extra["conventions"][0]
    # a kernel that takes L_q != L_k is left alone
    t2 = target(fx.causal_bottom_right_zero_rows, causal=True)
    assert t2.ensure_cross_support()["cross"] is True and t2.allows_cross


def test_self_attention_only_kernel_with_leak_still_fails():
    rep = _run("self_attention_kernel_leaks", ["causality"])
    assert rep.results[0].status == "fail"
    assert "future leak" in rep.results[0].message
