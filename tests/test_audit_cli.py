"""`attncheck audit` CLI, JSON schema, HTML report, factories, bad input."""
import json
import os
import textwrap

import pytest
import torch
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.audit.checks import _allowed, classify_pattern
from attncheck.audit.cli import demo_specs
from attncheck.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORRECT = os.path.join(ROOT, "fixtures", "audit", "demo_correct.py") + ":make_layer"
BUGGY = os.path.join(ROOT, "fixtures", "audit", "demo_buggy.py") + ":make_layer"


@pytest.fixture(scope="module")
def demo_reports():
    return [attncheck.audit(CORRECT), attncheck.audit(BUGGY)]


def test_demo_pair_shows_every_kind_of_result(demo_reports):
    good, bad = demo_reports
    assert good.ok and {r.status for r in good.results} == {"pass", "skip"}
    st_ = {r.check: r.status for r in bad.results}
    assert set(st_.values()) == {"pass", "fail", "warn", "skip", "error"}
    assert st_["causality"] == "fail" and st_["scale"] == "fail" and st_["mask-pattern"] == "fail"
    assert st_["padding"] == "error" and "NotImplementedError" in bad["padding"].message
    assert st_["saturation"] == "warn"
    assert st_["lint"] == "fail"
    assert [f["code"] for f in bad.extra["lint"]["findings"]] == ["ATT105"]
    # the off-by-one mask: query i sees key i + 1 — exactly the first super-diagonal leaks
    leak = torch.tensor(bad["causality"].metrics["leak_map"], dtype=torch.bool)
    L = leak.shape[0]
    assert torch.equal(leak, torch.ones(L, L, dtype=torch.bool).triu(1).tril(1))
    assert bad["scale"].metrics["layers"][0]["effective_scale"] == pytest.approx(4.0)
    assert "inverted" in bad["scale"].message
    assert bad["mask-pattern"].metrics["layers"][0]["observed"].startswith("causal shifted +1")
    assert good["causality"].metrics["max_future_delta"] == 0.0


def test_cli_bare_audit_runs_demo(monkeypatch):
    r = CliRunner().invoke(main, ["audit", "--checks", "causality,scale"])
    assert r.exit_code == 1, r.output
    assert "demo_correct.py:make_layer" in r.output and "demo_buggy.py:make_layer" in r.output
    assert "future leak: output at query" in r.output and "first (0, 1)" in r.output
    assert len(demo_specs()) == 2


def test_cli_json_schema_single_and_multi():
    r = CliRunner().invoke(main, ["audit", CORRECT, "--format", "json", "--checks", "lint,causality,normalization"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["version"] == 1 and d["kind"] == "audit" and d["target"] == CORRECT
    assert [x["check"] for x in d["results"]] == ["lint", "causality", "normalization"]
    for x in d["results"]:
        assert set(x) >= {"check", "status", "message", "metrics"}
    assert d["lint"]["files"] and d["lint"]["findings"] == []
    assert d["layers"][0]["pattern"] == "causal" and d["layers"][0]["shape"] == [2, 4, 12, 12]
    assert d["model"]["class"] == "CausalSelfAttention"
    r = CliRunner().invoke(main, ["audit", CORRECT, BUGGY, "--format", "json", "--checks", "causality"])
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["kind"] == "audit-set" and len(d["reports"]) == 2
    assert [(x["target"], x["status"]) for x in d["results"]] == [(CORRECT, "pass"), (BUGGY, "fail")]


@pytest.mark.parametrize("spec", ["hf:not_a_model_type", "nosuchfamily_xyz:thing", "xt:nope",
                                  "torch:Linear", "/no/such/file.py:f", "justaword"])
def test_unknown_spec_lists_known_and_exits_2(spec):
    r = CliRunner().invoke(main, ["audit", spec])
    assert r.exit_code == 2, r.output
    assert "known:" in r.output
    assert "hf:gpt2" in r.output or "xt:decoder" in r.output or "torch:MultiheadAttention" in r.output


def test_unknown_check_exits_2():
    r = CliRunner().invoke(main, ["audit", CORRECT, "--checks", "bogus"])
    assert r.exit_code == 2 and "bogus" in r.output


def test_factory_that_fails_to_build_is_an_error(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("def make():\n    raise RuntimeError('no weights here')\n")
    rep = attncheck.audit(f"{p}:make")
    assert [(r.check, r.status) for r in rep.results] == [("build", "error")]
    assert "RuntimeError: no weights here" in rep.results[0].message


@pytest.mark.parametrize("source,name,needle", [
    ("def attend(q, k, v, mask=None):\n    return q\n", "attend", "it takes arguments (q, k, v)"),
    ("import torch\nclass Attn(torch.nn.Module):\n    def __init__(self, d_model):\n"
     "        super().__init__()\n", "Attn", "its constructor needs arguments (d_model)"),
])
def test_spec_that_cannot_be_called_without_arguments_is_a_usage_error(tmp_path, source, name,
                                                                        needle):
    p = tmp_path / "user_attention.py"
    p.write_text(source)
    r = CliRunner().invoke(main, ["audit", f"{p}:{name}"])
    assert r.exit_code == 2, r.output
    assert needle in r.output and f"attncheck check {p}:{name}" in r.output


def test_module_that_returns_nan_fails_others_go_on(tmp_path):
    p = tmp_path / "nanlayer.py"
    p.write_text(textwrap.dedent("""
        import torch
        class NaNAttn(torch.nn.Module):
            causal = True
            embed_dim = 16
            def forward(self, x):
                s = x @ x.transpose(-2, -1) / 4.0
                s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("nan"))
                return torch.softmax(s, dim=-1) @ x
        def make():
            return NaNAttn()
    """))
    rep = attncheck.audit(f"{p}:make", checks="causality,normalization,batch-independence")
    assert rep["normalization"].status == "fail" and rep["normalization"].metrics["nan_rows"] > 0
    assert rep["causality"].status == "fail"  # NaN is never "unchanged"
    assert rep["batch-independence"].status in ("fail", "pass")  # ran despite the NaN


def test_html_report_self_contained(tmp_path, demo_reports):
    pytest.importorskip("matplotlib")
    from attncheck.report.html import write_html

    out = tmp_path / "r.html"
    write_html(demo_reports, str(out))
    text = out.read_text()
    assert text.startswith("<!doctype html>")
    assert text.count("data:image/png;base64,") == 4  # heatmaps + leak maps for each model
    assert "http://" not in text and "https://" not in text and "<script" not in text
    assert "Summary" in text and "ATT105" in text and "causal shifted +1" in text


def test_cli_html_option(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "a.html"
    r = CliRunner().invoke(main, ["audit", CORRECT, "--checks", "causality,mask-pattern", "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert out.exists() and "data:image/png;base64," in out.read_text()


def test_cli_html_into_a_missing_directory_is_refused_before_the_audit(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import attncheck.audit.runner as runner

    def no_audit(*a, **k):
        raise AssertionError("the audit ran although its HTML report cannot be written")

    monkeypatch.setattr(runner, "audit", no_audit)
    missing = tmp_path / "missing" / "a.html"
    r = CliRunner().invoke(main, ["audit", CORRECT, "--checks", "causality", "--html", str(missing)])
    assert r.exit_code == 2, r.output
    assert str(tmp_path / "missing") in r.output and "Traceback" not in r.output


@given(L=st.integers(2, 10), extra=st.integers(0, 3), w=st.integers(1, 12))
def test_classify_pattern(L, extra, w):
    lk = L + extra
    i = torch.arange(L)[:, None] + extra
    j = torch.arange(lk)[None, :]
    assert classify_pattern(torch.ones(L, lk, dtype=torch.bool)) == ("full", None)
    assert classify_pattern(j <= i) == ("causal", None) if extra < lk - 1 or L > 1 else True
    sliding = (j <= i) & (i - j < w)
    got = classify_pattern(sliding)
    if torch.equal(sliding, j <= i):
        assert got[0] in ("causal", "full")
    else:
        assert got == ("sliding", w)
    assert classify_pattern(j < i)[0] in ("strict-causal", "other")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@given(L=st.integers(2, 8), w=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_additive_minus_100_mask_reads_as_masked_in_every_dtype(dtype, L, w, seed):
    # Swin's shifted-window mask adds -100: float32 keeps e^-100 as a subnormal weight,
    # float16 rounds it to 0; both must classify as the same window
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    window = (j <= i) & (i - j < w)
    # scores within ±1 of each other: e^(-100 - 2) is still above float32's smallest subnormal
    logits = torch.rand(2, L, L, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    probs = torch.softmax(logits.to(dtype) + torch.where(window, 0.0, -100.0).to(dtype), -1)
    if dtype in (torch.float32, torch.float64):
        assert bool((probs[:, ~window] > 0).all())  # the masked weights are not exactly 0
    assert torch.equal(_allowed(probs), window)
    expected = ("causal", None) if w >= L else ("sliding", w)
    assert classify_pattern(_allowed(probs)) == expected


def test_html_without_matplotlib_is_a_usage_error_before_running(monkeypatch, tmp_path):
    """--html without matplotlib: exit 2 with the install hint, and no audit is run."""
    import builtins

    from click.testing import CliRunner

    import attncheck.audit.runner as runner
    from attncheck.cli import main

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    ran = []
    monkeypatch.setattr(runner, "audit", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    res = CliRunner().invoke(main, ["audit", "torch:MultiheadAttention", "--html",
                                    str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert "attncheck[report]" in res.output
    assert ran == [] and not (tmp_path / "r.html").exists()


def test_audit_of_a_family_whose_package_is_missing_is_an_error(monkeypatch, tmp_path):
    """``attncheck audit xt:decoder`` without x-transformers audits nothing: exit 2 with the
    install hint, never "OK: 1 skip" (a CI job would pass while checking nothing)."""
    import subprocess
    import sys

    from attncheck.cli import main

    monkeypatch.setitem(sys.modules, "x_transformers", None)  # import raises ImportError
    r = CliRunner().invoke(main, ["audit", "xt:decoder", "--device", "cpu"])
    assert r.exit_code == 2, r.output
    assert "attncheck audit: error: xt:decoder: x-transformers unavailable" in r.output
    assert "pip install 'attncheck[xt]'" in r.output

    fake = tmp_path / "x_transformers.py"
    fake.write_text("raise ImportError('x-transformers is not installed')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env.get('PYTHONPATH', '')}"
    p = subprocess.run([sys.executable, "-m", "attncheck", "audit", "xt:decoder", "--device",
                        "cpu"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "x-transformers unavailable (ImportError: x-transformers is not installed)" in p.stderr


def test_unknown_model_name_suggests_the_closest_known_names():
    from attncheck.cli import main

    r = CliRunner().invoke(main, ["audit", "xt:decodr", "--device", "cpu"])
    assert r.exit_code == 2
    assert "unknown x-transformers model: 'decodr' (did you mean xt:decoder or xt:encoder?)" in r.output


def test_unknown_spec_suggests_only_names_that_are_close():
    """The shared ``hf:`` prefix does not make unrelated names look close: nothing is
    suggested for a name that resembles no known one."""
    from attncheck.audit.families import UnknownSpec

    exc = UnknownSpec("unknown", ["hf:gpt2", "hf:llama", "hf:olmoe", "hf:afmoe", "hf:EvollaModel",
                                  "hf:mllama"])
    assert exc.close_matches("hf:notamodel") == []
    assert exc.close_matches("hf:lama") == ["hf:llama", "hf:mllama"]
    assert exc.close_matches("hf:evollamodell") == ["hf:EvollaModel"]
    assert exc.close_matches("xt:gpt-2") == ["hf:gpt2"]


def test_audit_of_timm_without_timm_is_one_error_line(monkeypatch):
    """Without timm, ``attncheck audit timm:NAME`` prints no "OK: 1 skip" report that its own
    exit status contradicts: one error line with the reason and the install command, exit 2."""
    import sys

    from attncheck.cli import main

    monkeypatch.setitem(sys.modules, "timm", None)  # import raises ImportError
    r = CliRunner().invoke(main, ["audit", "timm:vit_tiny_patch16_224", "--device", "cpu",
                                  "--format", "concise"])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert r.stderr.splitlines() == [
        "attncheck audit: error: timm:vit_tiny_patch16_224: timm unavailable (ModuleNotFoundError: "
        "import of timm halted; None in sys.modules); pip install timm"]
