"""Models broken on purpose: the audit must catch each bug, with the failing check and its numbers.

A tiny random GPT-2 (transformers) is broken by wrapping its attention function (eager: the
module-level ``eager_attention_forward``; SDPA: transformers' ``AttentionInterface`` mapping).
"""
import math

import pytest
import torch

import attncheck

modeling_gpt2 = pytest.importorskip("transformers.models.gpt2.modeling_gpt2")
AttentionInterface = pytest.importorskip("transformers.modeling_utils").AttentionInterface

L = 12


def _additive(allowed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    m = torch.zeros(allowed.shape, dtype=dtype)
    return m.masked_fill(~allowed, torch.finfo(dtype).min)[None, None]


def _eager_with_mask(allowed_fn):
    orig = modeling_gpt2.eager_attention_forward

    def broken(module, query, key, value, attention_mask, **kw):
        lq, lk = query.shape[-2], key.shape[-2]
        i = torch.arange(lq)[:, None] + (lk - lq)
        j = torch.arange(lk)[None, :]
        allowed = allowed_fn(i, j)
        mask = None if allowed is None else _additive(allowed).to(query.device)
        return orig(module, query, key, value, mask, **kw)

    return broken


MASK_BUGS = {
    "dropped": lambda i, j: None,
    "inverted": lambda i, j: (j > i) | ((i == j) & (i == i.max())),  # keep one key for the last row
    "off-by-one": lambda i, j: j <= i + 1,
}


@pytest.mark.parametrize("bug", sorted(MASK_BUGS))
def test_broken_causal_mask_eager_is_caught(monkeypatch, bug):
    monkeypatch.setattr(modeling_gpt2, "eager_attention_forward", _eager_with_mask(MASK_BUGS[bug]))
    rep = attncheck.audit("hf:gpt2", checks="causality,mask-pattern")
    res = rep["causality[eager]"]
    assert res.status == "fail", res.message
    leak = torch.tensor(res.metrics["leak_map"])
    assert leak.shape == (L, L)
    assert res.metrics["max_future_delta"] > 1e-3
    if bug == "off-by-one":
        # each of the 2 layers lets query i see key i + 1, so the model leaks exactly the pairs
        # (i, i + 1) and (i, i + 2)
        assert torch.equal(leak.bool(), torch.ones(L, L, dtype=torch.bool).triu(1).tril(2))
        assert res.metrics["first_leak"] == [0, 1]
    else:
        assert leak.sum() > L
    mp = rep["mask-pattern[eager]"]
    assert mp.status == "fail"
    assert mp.metrics["layers"][0]["expected"] == "causal"
    assert mp.metrics["layers"][0]["observed"] != "causal"
    if bug == "off-by-one":
        assert mp.metrics["layers"][0]["observed"].startswith("causal shifted +1")
    if bug == "dropped":
        assert mp.metrics["layers"][0]["observed"] == "full"
    # the SDPA variant was left alone and stays clean
    assert rep["causality[sdpa]"].status == "pass"
    assert rep["causality[sdpa]"].metrics["max_future_delta"] == 0.0


def test_is_causal_forced_false_sdpa_is_caught(monkeypatch):
    orig = AttentionInterface._global_mapping["sdpa"]

    def broken(module, query, key, value, attention_mask, **kw):
        kw["is_causal"] = False
        return orig(module, query, key, value, attention_mask, **kw)

    monkeypatch.setitem(AttentionInterface._global_mapping, "sdpa", broken)
    rep = attncheck.audit("hf:gpt2", checks="causality,mask-pattern,backend-agreement")
    res = rep["causality[sdpa]"]
    assert res.status == "fail"
    # the unpadded path relies on is_causal; a padded mask carries the causal part explicitly
    assert res.metrics["paths"]["no-mask"]["leaks"] == L * (L - 1) // 2
    assert res.metrics["paths"]["left-pad"]["leaks"] == 0
    assert rep["causality[eager]"].status == "pass"
    assert rep["mask-pattern[sdpa]"].metrics["layers"][0]["observed"] == "full"
    assert rep["backend-agreement"].status == "fail"


@pytest.mark.parametrize("factor,cause", [(1.0, "missing: logits not scaled"), (1 / 16, "not square-rooted"),
                                          (4.0, "inverted: multiplied by √d_k")])
def test_changed_scale_is_caught(monkeypatch, factor, cause):
    orig = modeling_gpt2.eager_attention_forward

    def broken(module, query, key, value, attention_mask, scaling=None, **kw):
        return orig(module, query, key, value, attention_mask, scaling=factor, **kw)

    monkeypatch.setattr(modeling_gpt2, "eager_attention_forward", broken)
    rep = attncheck.audit("hf:gpt2", checks="scale")
    res = rep["scale[eager]"]
    assert res.status == "fail"
    assert res.metrics["expected_scale"] == pytest.approx(1 / math.sqrt(16))
    for lay in res.metrics["layers"]:
        assert lay["effective_scale"] == pytest.approx(factor, rel=1e-4)
        assert lay["ratio"] == pytest.approx(factor * 4, rel=1e-4)
    assert cause in res.message
    assert rep["scale[sdpa]"].status == "pass"


def test_kv_cache_bug_is_caught(monkeypatch):
    """A cache that corrupts the oldest cached key makes decoding differ from the full forward."""
    from transformers import DynamicCache

    orig = DynamicCache.update

    def update(self, key_states, value_states, layer_idx, *a, **kw):
        k, v = orig(self, key_states, value_states, layer_idx, *a, **kw)
        if k.shape[-2] > 2:
            k = k.clone()
            k[..., 0, :] = 0.0
        return k, v

    monkeypatch.setattr(DynamicCache, "update", update)
    rep = attncheck.audit("hf:gpt2", checks="kv-cache")
    res = rep["kv-cache[eager]"]
    assert res.status == "fail"
    per = res.metrics["prefill_1"]["per_position"]
    assert per[0] < 1e-5 and per[1] < 1e-5  # nothing dropped yet
    assert max(per[3:]) > 1e-3
