"""Check oracle: the dynamic checks must pass every generated correct attention module and fail
a check that names the injected fault on the buggy ones, where the truth of each module is
learned by running it (``tests/idioms/oracle.py``).

The CI run checks one forced-fault module per fault and a few correct modules on fixed seeds,
plus hypothesis-drawn correct modules; ``HYPOTHESIS_PROFILE=thorough`` checks 1,000 seeds and
the recall per fault.  A variant whose execution contradicts its label is dropped, never
asserted.  ``bench/check_oracle.py`` prints recall per fault over any number of seeds.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncheck.dynamic.runner import available_checks
from idioms.check_oracle import CHECKS, FAULT_CHECKS, NOT_DYNAMIC, excluded, run
from idioms.generator import FAULTS, generate
from idioms.oracle import assert_recall, verify

_THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
#: seeds of the recall sample: 1,000 drawn-fault seeds in the thorough profile; in CI one
#: module per fault (forced) and four correct ones
_EXAMPLES = 200 if _THOROUGH else 3


def _ci_sample():
    return [v for v in (generate(11, fault) for fault in FAULTS) if not excluded(v)] + \
        [generate(seed, False) for seed in (1, 2, 4, 5)]


def test_every_fault_is_named_by_a_check_or_excluded_with_a_reason():
    checks = set(available_checks())
    assert set(FAULT_CHECKS) | set(NOT_DYNAMIC) == set(FAULTS)
    assert not set(FAULT_CHECKS) & set(NOT_DYNAMIC)
    assert all(names and set(names) <= checks for names in FAULT_CHECKS.values())
    assert set(CHECKS) <= checks and all(reason for reason in NOT_DYNAMIC.values())


def test_recall_per_fault_and_no_false_failures_on_a_seeded_sample():
    """Every correct module passes every check (warn/skip allowed); a check naming the fault
    fails on at least 95 % of the buggy ones (per fault with at least 20 verified variants in
    the thorough sample)."""
    variants = [generate(seed) for seed in range(1000)] if _THOROUGH else _ci_sample()
    ran = [run(v) for v in variants if not excluded(v)]
    assert [o.verdict.why for o in ran if o.verdict.truth == "error"] == []
    outcomes = [o for o in ran if o.kept]
    false = [(o.variant.describe(), {c: o.messages[c] for c in o.failed})
             for o in outcomes if o.variant.fault is None and not o.ok]
    assert false == []
    buggy = [o for o in outcomes if o.variant.fault is not None]
    missed = [(o.variant.describe(), o.statuses) for o in buggy if not o.ok]
    assert len(buggy) >= (len(ran) // 3 if _THOROUGH else len(FAULT_CHECKS) - 2)
    assert_recall(buggy, missed, per_fault=_THOROUGH)


@settings(max_examples=_EXAMPLES, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_no_check_fails_on_correct_modules(seed):
    v = generate(seed, False)
    if excluded(v):
        return
    o = run(v)
    assert o.verdict.truth != "error", f"generator defect: {o.verdict.why}\n{o.variant.source}"
    if not o.kept:
        return  # execution refutes the label: dropped
    assert o.failed == [], (f"false failure {({c: o.messages[c] for c in o.failed})} "
                            f"({o.variant.describe()}):\n{o.variant.source}")


def test_module_that_autograd_refuses_is_not_a_correct_module():
    """``q *= scale`` on a view returned by ``unbind`` / ``split`` runs under ``no_grad`` but
    raises once autograd records the forward: the execution oracle says buggy, so the checks
    that report the error (finite, gradient-flow) are not counted as false failures."""
    # the first correct-labelled variant that scales q in place after an ``unbind`` split
    v = next(v for v in map(lambda s: generate(s, False), range(3000))
             if v.fault is None and v.axes.get("scale_at") == "q_inplace"
             and (v.axes.get("split_style") == "timm_unbind"
                  or v.axes.get("three_unpack") == "q, k, v = qkv.unbind(0)"))
    verdict = verify(v)
    assert verdict.truth == "buggy" and "autograd" in verdict.why
    o = run(v, checks=("finite",), verdict=verdict)
    assert o.statuses == {"finite": "error"} and "modified inplace" in o.messages["finite"]


@pytest.mark.parametrize("fault", ["ATT101", "ATT105"])
def test_hand_written_softmax_scale_fault_is_named_by_scale_and_reference(fault):
    """A hand-written ``exp / sum`` softmax is followed by the probe: a wrong scale is named."""
    seed = next(s for s in range(200) if generate(s, fault).axes.get("softmax", "").startswith("exp_sum")
                and generate(s, fault).shape != "hf")
    o = run(generate(seed, fault), checks=("scale", "reference"))
    assert o.kept and o.statuses == {"scale": "fail", "reference": "fail"}, o.messages
