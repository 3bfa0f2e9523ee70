"""Each case fixture (fixtures/cases/*.py, DYNAMIC = {"target", "checks", "hints"}) whose
dynamic list names a check of the dynamic-checks issue fails at least one of those checks when
exercised through ``attncheck.check``."""
import glob
import os

import pytest

import attncheck

from _dynamic_helpers import FIX, load

ISSUE3 = {"shapes", "finite", "normalization", "causality", "gradient-flow", "saturation", "scale",
          "determinism"}


def _cases():
    out = []
    for path in sorted(glob.glob(os.path.join(FIX, "cases", "*.py"))):
        rel = os.path.relpath(path, FIX)
        mod = load(rel)
        dyn = getattr(mod, "DYNAMIC", None)
        if not dyn or not isinstance(dyn.get("checks"), list):
            continue
        mine = [c for c in dyn["checks"] if c in ISSUE3]
        if mine:
            out.append(pytest.param(mod, dyn, mine, id=os.path.basename(path)[:-3]))
    return out


CASES = _cases()


def test_cases_exist():
    assert len(CASES) >= 8


@pytest.mark.parametrize("mod,dyn,checks", CASES)
def test_case_fails_one_of_its_checks(mod, dyn, checks):
    from attncheck.dynamic.spec import build

    obj = build(getattr(mod, dyn["target"]), dyn["target"])
    report = attncheck.check(obj, checks=checks, device="cpu", max_examples=4, timeout=60,
                             **dyn.get("hints", {}))
    statuses = {r.check: (r.status, r.message) for r in report.results}
    assert any(s == "fail" for s, _ in statuses.values()), statuses
