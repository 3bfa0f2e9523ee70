"""README.md stays true: its rule table is the registry, and CI runs the test command it shows."""
import re
from pathlib import Path

from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _rule_table() -> list[tuple[str, str, str, str]]:
    block = README.split("<!-- rule-table")[1].split("<!-- /rule-table -->")[0]
    rows = []
    for line in block.splitlines():
        m = re.match(r"\|\s*(ATT\d{3})\s*\|\s*([\w-]+)\s*\|\s*(\w+)\s*\|\s*(on|off)\s*\|", line)
        if m:
            rows.append(m.groups())
    return rows


def test_rule_table_matches_registry():
    expected = [(code, r.name, r.severity, "on" if r.default_enabled else "off")
                for code, r in all_rules().items()]
    assert _rule_table() == expected


def test_ci_runs_the_readme_test_command():
    m = re.search(r"^(python -m pytest [^\n#]*?)\s+# the test suite", README, re.M)
    assert m, "README quick start must show the test command"
    command = m.group(1).strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci
    assert "torch==2.13.0" in ci
