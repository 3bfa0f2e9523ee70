"""Idiom oracle: lint must find the injected fault in generated attention modules, and nothing
in correct ones, where the truth of each module is learned by running it.

The ``ci`` hypothesis profile draws a fixed sample of ~100 seeds; ``HYPOTHESIS_PROFILE=thorough``
draws 2,000.  A variant whose execution contradicts its label (a "buggy" module that matches the
float64 SDPA reference, or a "correct" one that does not) is dropped, never asserted.
``bench/idiom_oracle.py`` prints recall per rule over any number of seeds.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idioms.generator import FAULTS, generate
from idioms.oracle import run, verify

_THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
_EXAMPLES = 2000 if _THOROUGH else 100


@settings(max_examples=_EXAMPLES)
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_lint_reports_the_injected_fault_and_nothing_on_correct_modules(seed):
    o = run(generate(seed))
    assert o.verdict.truth != "error", f"generator defect: {o.verdict.why}\n{o.variant.source}"
    if not o.kept:
        return  # execution refutes the label: dropped
    v = o.variant
    if v.fault is None:
        assert o.codes == [], f"false finding {o.codes} on a correct module ({v.describe()}):\n{v.source}"
    else:
        assert v.fault in o.codes, (f"{v.fault} not reported (got {o.codes}; {v.describe()}; "
                                    f"execution: {o.verdict.why}):\n{v.source}")


@pytest.mark.parametrize("fault", [None, *FAULTS])
def test_generated_modules_run_and_execution_confirms_most_labels(fault):
    """Every forced fault yields modules that run in float64; execution confirms the label of
    most of them (the generator writes real bugs, not noise the oracle has to drop)."""
    verdicts = [verify(generate(seed, fault if fault else False)) for seed in range(6)]
    assert [v.why for v in verdicts if v.truth == "error"] == []
    want = "correct" if fault is None else "buggy"
    assert sum(v.truth == want for v in verdicts) >= 4, [v.why for v in verdicts]


def test_forced_fault_changes_the_output_of_the_same_idioms():
    """A fault injected into a seed's idioms changes what the module computes; the correct
    module of a seed matches the reference."""
    assert verify(generate(7, False)).truth == "correct"
    assert verify(generate(7, "ATT101")).truth == "buggy"
