"""Result types shared by the dynamic checks, the audit and the report writers.

JSON form (``Report.to_dict()``), versioned::

    {"version": 1, "target": str, "device": str, "dtype": str,
     "results": [{"check": str, "status": "pass|fail|warn|skip|error",
                  "message": str, "metrics": {...}}, ...]}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

Status = Literal["pass", "fail", "warn", "skip", "error"]
STATUSES: tuple[str, ...] = ("pass", "fail", "warn", "skip", "error")
REPORT_VERSION = 1


@dataclass
class CheckResult:
    """Outcome of one check on one target.

    ``metrics`` holds JSON-serialisable numbers behind the verdict (e.g. ``max_abs_diff``,
    ``leak_map`` as a list of lists of 0/1, ``seed``, ``shape``).  ``details`` is free text for
    people (reproduction hints, the smallest failing example).
    """

    check: str
    status: Status
    message: str
    metrics: dict[str, Any] = field(default_factory=dict)
    details: str = ""
    device: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "warn", "skip")

    def to_dict(self) -> dict[str, Any]:
        d = {"check": self.check, "status": self.status, "message": self.message,
             "metrics": self.metrics}
        if self.details:
            d["details"] = self.details
        if self.device is not None:
            d["device"] = self.device
        return d


@dataclass
class Report:
    """All check results for one target.

    A report is a sequence of its :class:`CheckResult` s in run order: ``len(report)`` is the
    number of results and ``for result in report`` iterates over them.  ``report["causality"]``
    looks a result up by check name (``KeyError`` when that check did not run).
    """

    target: str
    results: list[CheckResult] = field(default_factory=list)
    device: str = "cpu"
    dtype: str = "float32"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, check: str) -> CheckResult:
        """The result of the check named ``check``; ``KeyError`` when it did not run, and
        ``TypeError`` for a non-string key (iterate the report, or index ``report.results``)."""
        if not isinstance(check, str):
            raise TypeError(f"Report is indexed by check name (str), not "
                            f"{type(check).__name__}; use report.results[{check!r}] for position")
        for r in self.results:
            if r.check == check:
                return r
        raise KeyError(check)

    def to_dict(self) -> dict[str, Any]:
        d = {"version": REPORT_VERSION, "target": self.target, "device": self.device,
             "dtype": self.dtype, "results": [r.to_dict() for r in self.results]}
        d.update(self.extra)
        return d
