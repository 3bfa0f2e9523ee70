"""``bench/corpus.py``'s triage diff on a tiny fake tree (the real corpus needs the network).

Keys survive edits that move lines; a finding no entry matches is *new* (exit 1); an entry no
finding matches is *vanished*; precision per rule counts true bugs and hazards."""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_SPEC = importlib.util.spec_from_file_location("corpus_bench", ROOT / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_SPEC)
sys.modules["corpus_bench"] = corpus  # dataclasses look their module up
_SPEC.loader.exec_module(corpus)

ATTN = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F


    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            scores = q @ k.transpose(-2, -1)  # no 1/sqrt(d)
            return F.softmax(scores, dim=-1) @ v


    def kernel(q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return w @ v
""")

TRIAGE = """\
[[finding]]
package = "pkg"
path = "pkg/attn.py"
rule = "ATT101"
function = "Attention.forward"
line = "scores = q @ k.transpose(-2, -1)   # a different comment"
label = "true-bug"
reason = "unscaled scores"

[[finding]]
package = "pkg"
path = "pkg/gone.py"
rule = "ATT204"
function = "f"
line = "x.masked_fill(m, -1e9)"
label = "false-positive"
reason = "fp32 only"
"""


def _tree(tmp_path: Path, prefix: str = "") -> Path:
    pkg = tmp_path / "tree" / "pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "attn.py").write_text(prefix + ATTN)
    return tmp_path / "tree"


def test_diff_new_vanished_precision(tmp_path, capsys):
    tree = _tree(tmp_path)
    triage = tmp_path / "triage.toml"
    triage.write_text(TRIAGE)
    out = tmp_path / "summary.json"
    rc = corpus.main(["--tree", f"pkg={tree}", "--triage", str(triage), "--jobs", "1",
                      "--json", str(out)])
    data = json.loads(out.read_text())
    assert rc == 1  # kernel()'s missing scale is not triaged
    assert [(n["function"], n["rule"]) for n in data["new"]] == [("kernel", "ATT101")]
    assert [(v["path"], v["rule"]) for v in data["vanished"]] == [("pkg/gone.py", "ATT204")]
    assert data["per_rule"]["ATT101"] == {"true-bug": 1, "new": 1, "precision": 1.0}
    text = capsys.readouterr().out
    assert "new (untriaged) findings: 1" in text and "pkg/pkg/attn.py:12 ATT101 [kernel]" in text


def test_keys_survive_moved_lines_and_write_new_round_trips(tmp_path):
    # two blank lines and a comment above everything: line numbers move, keys do not
    tree = _tree(tmp_path, prefix="# header\n\n\n")
    triage = tmp_path / "triage.toml"
    triage.write_text(TRIAGE)
    new = tmp_path / "new.toml"
    assert corpus.main(["--tree", f"pkg={tree}", "--triage", str(triage), "--jobs", "1",
                        "--write-new", str(new)]) == 1
    # label the written entry and append it: nothing new remains
    triage.write_text(TRIAGE + new.read_text().replace("label = 'untriaged'", "label = 'hazard'"))
    out = tmp_path / "summary.json"
    assert corpus.main(["--tree", f"pkg={tree}", "--triage", str(triage), "--jobs", "1",
                        "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["new"] == [] and data["precision"] == 1.0 and data["findings"] == 2


def test_false_positive_lowers_precision_and_bad_label_is_an_error(tmp_path, capsys):
    tree = _tree(tmp_path)
    triage = tmp_path / "triage.toml"
    triage.write_text(TRIAGE.replace('label = "true-bug"', 'label = "false-positive"'))
    out = tmp_path / "summary.json"
    corpus.main(["--tree", f"pkg={tree}", "--triage", str(triage), "--jobs", "1", "--json", str(out)])
    assert json.loads(out.read_text())["per_rule"]["ATT101"]["precision"] == 0.0
    triage.write_text(TRIAGE.replace('label = "true-bug"', 'label = "maybe"'))
    assert corpus.main(["--tree", f"pkg={tree}", "--triage", str(triage), "--jobs", "1"]) == 2
    assert "'maybe' is not one of true-bug, hazard, false-positive" in capsys.readouterr().err


@pytest.mark.parametrize("src, norm", [
    ("    x = a  +  b   # comment", "x = a + b"),
    ("s = '#not a comment'  # real", "s = '#not a comment'"),
    ("foo(a,", "foo(a,"),
])
def test_normalise_line(src, norm):
    assert corpus.normalise_line(src) == norm


def test_enclosing_qualname():
    src = "class A:\n    def f(self):\n        x = 1\n\n    y = 2\n\ndef g():\n    def h():\n        pass\n"
    v = corpus._Scopes()
    import ast
    v.visit(ast.parse(src))
    assert [corpus.enclosing(v.spans, n) for n in (3, 5, 9, 1)] == ["A.f", "A", "g.h", "A"]
    assert corpus.enclosing(v.spans, 6) == "<module>"
