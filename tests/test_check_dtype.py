"""``dtype``: fp16 / bf16 runs stay finite; mask fills do not overflow."""
import math

import pytest
import torch
from _check_helpers import run, run_case


def causal_finfo(q, k, v):
    L = q.size(-2)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), torch.finfo(s.dtype).min)
    return s.softmax(dim=-1) @ v


def overflowing_logits(q, k, v):
    """Multiplies the logits by 1e5 before softmax: inf - inf = NaN in float16."""
    return torch.softmax(q @ k.transpose(-2, -1) * 1e5, dim=-1) @ v


def test_fp16_mask_fill_b12_fails_with_overflow():
    r = run_case("b12_fp16_mask_fill_overflow", "dtype")
    assert r.status == "fail" and "overflow" in r.message
    assert r.metrics["dtypes"]["float16"]["status"] == "overflow"
    assert r.metrics["dtypes"]["bfloat16"]["status"] == "ok"  # -1e9 fits bfloat16's range


def test_finfo_min_fill_passes_both_dtypes():
    r = run(causal_finfo, "dtype", kind="kernel", causal=True)
    assert r.status == "pass", r.message
    for n, bound in (("float16", 5e-2), ("bfloat16", 1e-1)):
        assert r.metrics["dtypes"][n]["finite"] is True
        assert 0 < r.metrics["dtypes"][n]["rel_err_vs_fp32"] < bound


def test_module_dtype_is_restored_and_mha_passes():
    m = torch.nn.MultiheadAttention(16, 2, batch_first=True)
    r = run(m, "dtype")
    assert r.status == "pass", r.message
    assert all(p.dtype == torch.float32 for p in m.parameters())


def test_nonfinite_low_precision_output_fails():
    r = run(overflowing_logits, "dtype", kind="kernel", causal=False)
    assert r.status == "fail"
    assert r.metrics["dtypes"]["float16"]["n_nonfinite"] > 0


def test_not_in_default_suite():
    from attncheck.dynamic.base import all_checks

    specs = all_checks()
    assert specs["dtype"].default is False
    assert all(specs[n].default for n in ("padding", "batch-independence", "reference",
                                          "permutation-equivariance", "mask-pattern", "kv-cache"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_low_precision_runs():
    import attncheck

    rep = attncheck.check(causal_finfo, checks=["dtype", "reference"], device="cuda",
                          kind="kernel", causal=True, max_examples=4)
    by = {r.check: r for r in rep.results}
    assert by["dtype"].status == "pass" and by["dtype"].metrics["device"] == "cuda"
    assert by["reference"].status == "pass"
    rep = attncheck.check(causal_finfo, checks=["reference"], device="cuda", dtype="float16",
                          kind="kernel", causal=True, max_examples=4)
    assert rep.results[0].status == "pass" and rep.results[0].metrics["error_ratio"] <= 1.0
