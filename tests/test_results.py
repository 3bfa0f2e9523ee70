"""The Python API's result types: `Report` as a sequence of `CheckResult`s."""
from __future__ import annotations

import pytest

from attncheck.results import CheckResult, Report


def _report() -> Report:
    return Report("t", [CheckResult("shapes", "pass", "ok"),
                        CheckResult("causality", "fail", "leak", {"max_abs_diff": 0.5})])


def test_report_iterates_over_its_results_in_run_order():
    report = _report()
    assert len(report) == 2
    assert [r.check for r in report] == ["shapes", "causality"]
    assert list(report) == report.results
    assert len(Report("empty")) == 0 and list(Report("empty")) == []


def test_report_lookup_by_check_name():
    report = _report()
    assert report["causality"].metrics == {"max_abs_diff": 0.5}
    with pytest.raises(KeyError):
        report["finite"]
    with pytest.raises(TypeError, match="check name"):
        report[0]
