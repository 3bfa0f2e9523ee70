"""A failed check's message and metrics describe the same (reported, shrunk) example, and the
numbers in messages are written to 3 significant digits."""
from __future__ import annotations

import math
import re

import attncheck
from attncheck.dynamic.checks._common import fmt_diff


def softmax_over_queries(q, k, v):
    """(B, H, L, d) kernel normalising the scores over the query axis instead of the keys."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return s.softmax(dim=2) @ v


def unscaled_causal(q, k, v, is_causal=False):
    """(B, H, L, d) causal kernel without the 1/√d_k scale (Vaswani et al. 2017, eq. 1)."""
    s = q @ k.transpose(-2, -1)
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(s.new_ones(L, S, dtype=bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


def _number(pattern: str, message: str) -> float:
    found = re.search(pattern, message)
    assert found, message
    return float(found.group(1))


def test_normalization_message_and_metric_are_the_same_example():
    r = attncheck.check(softmax_over_queries, checks=["normalization"], device="cpu", seed=0,
                        max_examples=16)["normalization"]
    assert r.status == "fail"
    in_message = _number(r"\|sum-1\| max ([0-9.e+-]+) ", r.message)
    assert in_message == float(fmt_diff(r.metrics["max_row_sum_error"]))
    row_sum = re.search(r"a row sums to ([0-9.e+-]+) ", r.message).group(1)
    assert row_sum == fmt_diff(float(row_sum))  # written to 3 significant digits
    assert math.isclose(abs(float(row_sum) - 1), in_message, rel_tol=1e-2, abs_tol=1e-2)


def test_reference_message_and_metric_are_the_same_example():
    r = attncheck.check(unscaled_causal, checks=["reference"], causal=True, device="cpu", seed=0,
                        max_examples=16)["reference"]
    assert r.status == "fail"
    assert _number(r"max \|Δ\|=([0-9.e+-]+);", r.message) == float(
        fmt_diff(r.metrics["max_abs_diff"]))


def test_fmt_diff_is_three_significant_digits():
    assert fmt_diff(0.09504464860361705) == "0.095"
    assert fmt_diff(2.1875) == "2.19"
    assert fmt_diff(3.1622e-07) == "3.16e-07"
    assert fmt_diff("inf") == "inf"
