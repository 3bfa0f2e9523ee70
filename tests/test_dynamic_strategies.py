"""Hypothesis strategies and the product's property runner (shrinking, replay, no database)."""
import os

from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.dynamic.base import RunContext
from attncheck.dynamic.strategies import Fail, examples, run_property

from _dynamic_helpers import load

sdpa_k = load("dynamic/sdpa_kernels.py")
nano = load("dynamic/nanogpt_layer.py")

KERNEL = attncheck.target(sdpa_k.sdpa)
LAYER = attncheck.target(nano.make_causal_layer())


@given(examples(KERNEL))
def test_kernel_examples_in_bounds(ex):
    assert 1 <= ex.B <= 3 and 1 <= ex.L_q <= 12 and 1 <= ex.L_k <= 12
    assert 1 <= ex.H <= 4 and ex.d in (1, 2, 4, 8, 16) and 0 <= ex.seed < 2**31


@given(examples(LAYER))
def test_layer_examples_respect_fixed_sizes(ex):
    assert ex.L_q == ex.L_k                 # self-attention
    assert (ex.H, ex.d, ex.E) == (4, 8, 32)  # from n_head / n_embd


def test_cross_lengths_and_length_one_are_drawn():
    seen = []
    run_property(lambda ex: seen.append(ex) and None, KERNEL, RunContext(seed=1),
                 max_examples=40)
    assert any(e.L_q != e.L_k for e in seen) and any(min(e.L_q, e.L_k) == 1 for e in seen)


def test_failure_shrinks_to_smallest_and_replays_with_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def prop(ex):
        if ex.L_k >= 3 and ex.B >= 2:
            raise Fail(f"too big: {ex}")

    out1 = run_property(prop, KERNEL, RunContext(seed=4), max_examples=30)
    out2 = run_property(prop, KERNEL, RunContext(seed=4), max_examples=30)
    f = out1.failure
    assert f is not None and (f.example.B, f.example.L_k, f.example.seed) == (2, 3, 0)
    assert f.example == out2.failure.example            # same seed → same smallest example
    assert not os.path.exists(tmp_path / ".hypothesis")  # database=None: nothing written


def test_target_exception_is_recorded_as_failure():
    def prop(ex):
        raise ValueError("kaput")

    out = run_property(prop, KERNEL, RunContext(seed=0), max_examples=5)
    assert isinstance(out.failure.error, ValueError) and "kaput" in out.failure.message


def test_passing_property_counts_examples():
    out = run_property(lambda ex: {"n": ex.B}, KERNEL, RunContext(seed=0), max_examples=7)
    assert out.ok and out.examples_run == 7 and "n" in out.data


@given(st.integers(0, 1))
def test_check_inside_a_users_given_test(s):
    """attncheck.check called from a user's own @given test: no nested-given health check."""
    r = attncheck.check(sdpa_k.sdpa, checks=["shapes"], seed=s, max_examples=2, device="cpu")
    assert r["shapes"].status == "pass", r["shapes"].message
