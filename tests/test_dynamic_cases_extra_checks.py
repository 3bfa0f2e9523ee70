"""Each case fixture whose dynamic list names one of the opt-in checks (padding, batch-independence,
permutation-equivariance, reference, dtype, kv-cache, mask-pattern) fails at least one of its
listed checks when exercised through ``attncheck.check``; the listing in
fixtures/cases/cases.toml and the fixture's DYNAMIC constant agree."""
import glob
import os

import pytest
import tomllib
from _dynamic_helpers import FIX, load

import attncheck

ISSUE6 = {"padding", "batch-independence", "permutation-equivariance", "reference", "dtype",
          "kv-cache", "mask-pattern"}

with open(os.path.join(FIX, "cases", "cases.toml"), "rb") as fh:
    TABLE = tomllib.load(fh)


def _cases():
    out = []
    for path in sorted(glob.glob(os.path.join(FIX, "cases", "*.py"))):
        name = os.path.basename(path)[:-3]
        dyn = getattr(load(os.path.relpath(path, FIX)), "DYNAMIC", None)
        listed = TABLE.get(name, {}).get("dynamic", [])
        if set(listed) & ISSUE6:
            out.append(pytest.param(name, dyn, listed, id=name))
    return out


CASES = _cases()


def test_all_extra_check_cases_found():
    assert {c.id for c in CASES} >= {
        "b10_is_causal_kv_cache_decode", "b12_fp16_mask_fill_overflow",
        "b14_fully_masked_row_nan", "b19_mask_after_softmax", "b25_batch_first_merge_view",
        "b28_mask_repeat_vs_repeat_interleave", "b30_inverted_padding_mask",
        "b31_gqa_tile_vs_interleave", "b32_rope_convention_mismatch",
        "b35_left_pad_absolute_positions", "b36_sliding_window_off_by_one",
        "b37_bool_mask_added_as_float", "b41_layout_bhld_vs_blhd", "b23_split_heads_view_no_transpose",
        "b01_scale_uses_embed_dim", "b03_double_scale_sdpa", "b05_missing_scale_default_one"}


@pytest.mark.parametrize("name,dyn,listed", CASES)
def test_case_fails_one_of_its_extra_checks(name, dyn, listed):
    from attncheck.dynamic.spec import build

    assert dyn is not None and sorted(dyn["checks"]) == sorted(listed)
    mod = load(f"cases/{name}.py")
    obj = build(getattr(mod, dyn["target"]), dyn["target"])
    mine = [c for c in listed if c in ISSUE6]
    report = attncheck.check(obj, checks=mine, device="cpu", max_examples=4, timeout=60,
                             **dyn.get("hints", {}))
    statuses = {r.check: (r.status, r.message) for r in report.results}
    assert any(s == "fail" for s, _ in statuses.values()), statuses
