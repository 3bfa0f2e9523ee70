"""Bad inputs and misbehaving targets for ``attncheck check`` and ``attncheck audit``: each case
asserts the exit code (or exception), the message, and the state after the run.

- hints: one registry (``attncheck.dynamic.hints.HINTS``); an unknown name or an invalid value is a
  usage error with a "did you mean" in the API, the CLI (exit 2, before the target is imported),
  the pytest plugin's configuration and the ``attncheck`` fixture;
- state: a target that changes torch's thread count, TF32 / float32 matmul precision, cuDNN and
  SDPA switches or print options, or appends to list / set / nested attributes, leaves the caller
  bit-identical;
- audit parity with check: ``--timeout`` (a hanging forward is an error result, the audit goes
  on), ``--device cuda`` without CUDA (exit 2, check's message), NaN outputs reported as
  non-finite output with positions (not a leak, strict JSON), dict / ModelOutput outputs,
  causality inferred like check, ``--causal/--no-causal`` and ``--hint``.
"""
from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.audit.runner import audit
from attncheck.cli import main
from attncheck.dynamic.base import all_checks
from attncheck.dynamic.hints import HINTS, HintError, validate_hint, validate_hints
from attncheck.dynamic.spec import SpecError
from attncheck.dynamic.state import global_state, module_state, module_state_equal
from attncheck.dynamic.targets import Example, Target, TargetError

from _dynamic_helpers import FIX

ROOT = Path(__file__).resolve().parent.parent
SDPA_SPEC = os.path.join(FIX, "dynamic", "sdpa_kernels.py") + ":sdpa"
MISBEHAVING = os.path.join(FIX, "audit", "misbehaving.py")
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

pytest_plugins = ["pytester"]


def spec(name: str) -> str:
    return f"{MISBEHAVING}:{name}"


def kernel(q, k, v, attn_mask=None, is_causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)


# ------------------------------------------------------------------------------- hint registry
def test_unknown_hint_is_a_usage_error_with_did_you_mean_in_the_api():
    with pytest.raises(TargetError, match=r"unknown hint 'causl' \(did you mean 'causal'\?\)"):
        attncheck.target(kernel, causl=True)
    with pytest.raises(TargetError, match=r"did you mean 'num_kv_heads'"):
        attncheck.check(kernel, checks=["shapes"], num_kv_head=2)
    with pytest.raises(SpecError, match=r"unknown hint 'paddding_side' \(did you mean "
                                        r"'padding_side'\?\)"):
        attncheck.check(SDPA_SPEC, checks=["shapes"], paddding_side="left")
    # a spec string: checked before the file is imported
    with pytest.raises(SpecError, match=r"hint window=0: expected an integer > 0"):
        attncheck.check("no/such/file.py:attention", window=0)
    with pytest.raises(TargetError, match=r"unknown hint 'zzz'; known: alignment, batch_first"):
        attncheck.target(kernel, zzz=1)


@pytest.mark.parametrize("hints, message", [
    (dict(num_heads=-3), "hint num_heads=-3: expected an integer > 0"),
    (dict(head_dim=0), "hint head_dim=0: expected an integer > 0"),
    (dict(window=0), "hint window=0: expected an integer > 0"),
    (dict(num_heads=True), "hint num_heads=True: expected an integer > 0"),
    (dict(causal="maybe"), "hint causal='maybe': expected true or false"),
    (dict(padding_side="top"), "hint padding_side='top': expected one of 'left', 'right'"),
    (dict(scale=0.0), "hint scale=0.0: expected a finite number > 0 or 'learned'"),
    (dict(scale="big"), "hint scale='big': expected a number > 0 or 'learned'"),
    (dict(alignment="middle"), "expected one of 'top_left', 'bottom_right'"),
    (dict(mask={"arg": "mask", "convetion": "keep"}),
     "unknown key 'convetion' (did you mean 'convention'?)"),
    (dict(mask_pattern={"kind": "sliding_window", "window": -1}), "key 'window'"),
    (dict(num_heads=4, num_kv_heads=3), "num_kv_heads=3: must divide num_heads=4"),
    (dict(kind="lm"), "token models (kind='lm') are not supported"),
])
def test_invalid_hint_values_are_usage_errors(hints, message):
    with pytest.raises(TargetError) as err:
        attncheck.target(kernel, **hints)
    assert message in str(err.value)


def test_valid_hints_are_accepted_and_normalised():
    t = attncheck.target(kernel, causal=True, layout="(B,L,H,d)", padding_side="LEFT",
                         scale="1.0", window=4, pattern="sliding-window", num_heads=4,
                         num_kv_heads=2, max_length=5)
    assert (t.causal, t.layout) == (True, "BLHd")
    assert t.hints["padding_side"] == "left" and t.hints["pattern"] == "sliding_window"
    # max_length caps every drawn length
    ex = t.fit_example(Example(B=1, L_q=9, L_k=12, H=4, d=8))
    assert (ex.L_q, ex.L_k) == (5, 5)


def test_registry_is_introspectable_and_covers_every_hint_the_checks_read():
    checks = set(all_checks())
    for name, h in HINTS.items():
        assert h.name == name and h.doc and h.values and "\n" not in h.doc
        assert set(h.used_by) <= checks | {"target"}, (name, h.used_by)
        assert h.alias_of is None or h.alias_of in HINTS
    # every Target field that a user may set is a hint
    # (what was found by experiment — mask convention, L_q != L_k support, position terms — is
    # kept in *_detection fields, not set by users)
    fields = {f for f in Target.__dataclass_fields__ if not f.endswith("_detection")} - {
        "obj", "hints"}
    assert fields <= set(HINTS)
    # every hint name that a check reads from Target.hints is registered
    read = set()
    for path in (ROOT / "attncheck" / "dynamic").rglob("*.py"):
        src = path.read_text(encoding="utf-8")
        for call in re.findall(r"\bhint\(target,\s*([^)]*)\)", src):
            read |= set(re.findall(r"\"(\w+)\"", call.split("default=")[0]))
        read |= set(re.findall(r"\.hints\.get\(\"(\w+)\"", src))
        read |= set(re.findall(r"\"(\w+)\" in (?:self|target|t)\.hints", src))
    assert read and read <= set(HINTS), read - set(HINTS)


def test_every_fixture_declares_its_hints_in_the_registry_vocabulary():
    """The ``DYNAMIC["hints"]`` of every fixture (read with ``ast``, nothing imported) validate;
    token-model fixtures (``kind="lm"``, audit only) are left out."""
    import ast

    seen = 0
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DYNAMIC"
                                                    for t in node.targets):
                hints = ast.literal_eval(node.value).get("hints", {})
                if hints.get("kind") != "lm":
                    validate_hints(hints)
                    seen += 1
    assert seen >= 40


@given(name=st.sampled_from(sorted(HINTS)), data=st.data())
def test_a_one_letter_typo_of_any_hint_is_rejected_with_a_suggestion(name, data):
    i = data.draw(st.integers(0, len(name) - 1))
    typo = name[:i] + name[i + 1:]
    if typo in HINTS or not typo:
        return
    with pytest.raises(HintError) as err:
        validate_hint(typo, True)
    suggested = re.search(r"did you mean '(\w+)'", str(err.value))
    assert suggested and suggested.group(1) in HINTS


def _marker_target(tmp_path: Path) -> tuple[str, Path]:
    marker = tmp_path / "imported.txt"
    mod = tmp_path / "kernels.py"
    mod.write_text(
        "import pathlib\nimport torch.nn.functional as F\n"
        f"pathlib.Path({str(marker)!r}).write_text('imported')\n"
        "def sdpa(q, k, v, attn_mask=None, is_causal=False):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, "
        "is_causal=is_causal)\n", encoding="utf-8")
    return f"{mod}:sdpa", marker


def test_cli_unknown_hint_exits_2_before_importing_the_target(tmp_path):
    target, marker = _marker_target(tmp_path)
    r = CliRunner().invoke(main, ["check", target, "--hint", "causl=true", "--device", "cpu"])
    assert r.exit_code == 2
    assert "attncheck check: error: unknown hint 'causl' (did you mean 'causal'?)" in r.output
    assert "Traceback" not in r.output and not marker.exists()
    r = CliRunner().invoke(main, ["check", target, "--hint", "num_heads=-3"])
    assert r.exit_code == 2 and "hint num_heads=-3: expected an integer > 0" in r.output
    assert not marker.exists()
    p = subprocess.run([sys.executable, "-m", "attncheck", "check", target, "--hint",
                        "window=0"], capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == "attncheck check: error: hint window=0: expected an integer > 0"
    assert p.stdout == "" and not marker.exists()


def test_plugin_target_with_a_misspelt_hint_is_a_collection_error(pytester, tmp_path):
    target, marker = _marker_target(tmp_path)
    pytester.makepyprojecttoml(f"""
        [tool.attncheck]
        targets = [{{ spec = "{target}", id = "typo", causl = true, checks = ["shapes"] }}]
    """)
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    res = pytester.runpytest("--attncheck", "-q")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([f"attncheck: cannot resolve target '{target}' (*pyproject.toml): "
                              "*: unknown hint 'causl' (did you mean 'causal'?)",
                              "ERROR attncheck::typo"])
    assert "Traceback" not in res.stdout.str() and not marker.exists()


def test_plugin_config_accepts_hints_and_run_options(pytester, tmp_path):
    target, marker = _marker_target(tmp_path)
    pytester.makepyprojecttoml(f"""
        [tool.attncheck]
        targets = [{{ spec = "{target}", causal = true, padding_side = "left", seed = 1, timeout = 30, train = false, max_examples = 2, checks = ["shapes"] }}]
    """)  # noqa: E501 - a TOML inline table is one line
    res = pytester.runpytest("--attncheck", "--collect-only", "-q")
    assert res.ret == pytest.ExitCode.OK
    assert any("::shapes[" in line for line in res.stdout.lines), res.stdout.str()


def test_fixture_rejects_a_misspelt_hint(pytestconfig):
    from attncheck.pytest_plugin import AttncheckFixture

    fx = AttncheckFixture(pytestconfig)
    with pytest.raises(TargetError, match=r"did you mean 'causal'"):
        fx.check(kernel, ["shapes"], device="cpu", causl=True)
    with pytest.raises(TargetError, match=r"hint window=0"):
        fx.assert_ok(kernel, ["shapes"], device="cpu", window=0)


# ------------------------------------------------------------------------------- global state
FORWARD_CALLS: list[int] = []


class _Meddler(torch.nn.Module):
    """Self-attention whose forward changes torch globals and its own containers in place."""

    def __init__(self):
        super().__init__()
        self.embed_dim, self.num_heads = 8, 2
        self.qkv = torch.nn.Linear(8, 24)
        self.seen = []
        self.tags = {"a"}
        self.log = {"calls": [], "shapes": {"x": []}}
        self.recent = collections.deque(maxlen=4)
        self.raw = bytearray(b"ab")
        self.pair = ([1], "fixed")
        self.steps = torch.zeros(1)

    def forward(self, x):
        FORWARD_CALLS.append(1)  # module-level: not the target's state
        torch.set_num_threads(1)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("medium")
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.enable_flash_sdp(False)
        torch.set_printoptions(precision=2, sci_mode=True, linewidth=40)
        self.seen.append(x.shape)
        self.tags.add(len(self.seen))
        self.log["calls"].append(1)
        self.log["shapes"]["x"].append(tuple(x.shape))
        self.recent.append(1)
        self.raw.extend(b"c")
        self.pair[0].append(2)
        self.steps.add_(1)
        B, L, E = x.shape
        q, k, v = (t.view(B, L, 2, 4).transpose(1, 2) for t in self.qkv(x).split(E, -1))
        y = F.scaled_dot_product_attention(q, k, v)
        return y.transpose(1, 2).reshape(B, L, E)


def test_check_leaves_torch_globals_and_module_containers_bit_identical():
    m = _Meddler()
    containers = {k: getattr(m, k) for k in ("seen", "tags", "log", "recent", "raw", "pair")}
    contents = {k: repr(v) for k, v in containers.items()}
    g0 = global_state().as_comparable()
    s0 = module_state(m)
    report = attncheck.check(m, checks=["shapes", "determinism"], device="cpu", max_examples=2)
    assert [r.status for r in report.results] == ["pass", "pass"], report.results
    assert FORWARD_CALLS and m.seen == []  # forward ran (and appended) many times
    assert global_state().as_comparable() == g0
    assert module_state_equal(module_state(m), s0) and m.training  # built in training mode
    for k, v in containers.items():
        assert getattr(m, k) is v and repr(v) == contents[k], k
    assert m.log["shapes"]["x"] == [] and m.pair[0] == [1] and float(m.steps) == 0.0
    assert torch.get_num_threads() == g0["settings"]["num_threads"]
    assert torch.get_float32_matmul_precision() == "highest" or g0["settings"][
        "float32_matmul_precision"] != "highest"
    assert torch.backends.cuda.flash_sdp_enabled() == g0["settings"]["sdp.flash_sdp_enabled"]


def _moves_default_device(q, k, v, attn_mask=None, is_causal=False):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
    torch.set_default_device("cpu")  # pushes a DeviceContext function mode
    return out


def test_check_restores_the_default_device():
    g0 = global_state().as_comparable()
    report = attncheck.check(_moves_default_device, checks=["shapes"], device="cpu",
                             max_examples=2)
    assert [r.status for r in report.results] == ["pass"], report.results
    assert global_state().as_comparable() == g0 and g0["device_context"] is None
    assert torch.zeros(1).device.type == "cpu" and torch._C._len_torch_function_stack() == 0


# ------------------------------------------------------------------------------- audit parity
def _by_check(report):
    return {r.check: r for r in report.results}


def test_audit_timeout_turns_a_hanging_forward_into_an_error_and_goes_on():
    t0 = time.monotonic()
    rep = audit(spec("hangs"), checks="causality,batch-independence", timeout=0.5)
    elapsed = time.monotonic() - t0
    res = _by_check(rep)
    for name in ("causality", "batch-independence"):
        assert res[name].status == "error"
        assert res[name].message.startswith("timed out after 0.5 s: the model hung")
        assert res[name].metrics["timeout_s"] == 0.5
    assert not rep.ok and elapsed < 30


def test_audit_timeout_also_bounds_the_build():
    rep = audit(spec("never_built"), checks="causality", timeout=0.5)
    (r,) = rep.results
    assert (r.check, r.status) == ("build", "error")
    assert r.message == ("timed out after 0.5 s: the model hung or is too slow for building the "
                         "model (raise the limit with --timeout / timeout=)")


def test_audit_cli_timeout_exits_1_with_the_reason():
    r = CliRunner().invoke(main, ["audit", spec("hangs"), "--checks", "causality", "--timeout",
                                  "0.5", "--format", "json"])
    assert r.exit_code == 1, r.output
    (r,) = json.loads(r.output)["results"]
    assert r["check"] == "causality" and r["status"] == "error"
    assert r["message"].startswith("timed out after 0.5 s")
    for bad in ("-1", "nan"):  # validated like check's --timeout
        r = CliRunner().invoke(main, ["audit", spec("hangs"), "--timeout", bad])
        assert r.exit_code == 2 and "Invalid value for '--timeout'" in r.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_audit_cuda_without_cuda_is_a_usage_error_like_check():
    a = CliRunner().invoke(main, ["audit", spec("correct"), "--device", "cuda"])
    c = CliRunner().invoke(main, ["check", SDPA_SPEC, "--device", "cuda"])
    assert a.exit_code == c.exit_code == 2
    msg = "error: device 'cuda' requested but CUDA is not available"
    assert a.output.strip() == f"attncheck audit: {msg}"
    assert c.output.strip() == f"attncheck check: {msg}"
    with pytest.raises(ValueError, match="CUDA is not available"):
        audit(spec("correct"), device="cuda")


def test_audit_nan_output_is_non_finite_not_a_leak_and_json_is_strict():
    rep = audit(spec("nan_output"), checks="causality,batch-independence")
    res = _by_check(rep)
    for name in ("causality", "batch-independence"):
        r = res[name]
        assert r.status == "fail" and r.message.startswith("non-finite output: NaN in ")
        assert "leak" not in r.message and "Δ inf" not in r.message
        assert r.metrics["non_finite"] is True and r.metrics["nan_values"] > 0
        assert r.metrics["non_finite_positions"][:2] == [[0, 0], [0, 1]]
    r = CliRunner().invoke(main, ["audit", spec("nan_output"), "--checks",
                                  "causality,normalization", "--format", "json"])
    assert r.exit_code == 1

    def no_constants(tok):
        raise AssertionError(f"non-standard JSON constant {tok}")

    d = json.loads(r.output, parse_constant=no_constants)
    msgs = {x["check"]: x["message"] for x in d["results"]}
    assert msgs["causality"].startswith("non-finite output")


def test_audit_unwraps_dict_outputs_and_names_outputs_without_a_tensor():
    res = _by_check(audit(spec("dict_output"), checks="causality,batch-independence"))
    assert res["causality"].status == "pass" and res["batch-independence"].status == "pass"
    res = _by_check(audit(spec("no_tensor_output"), checks="causality,batch-independence"))
    for r in res.values():
        assert r.status == "fail"
        assert "returned dict with keys ['aux']: expected a tensor" in r.message
        assert "has no attribute 'detach'" not in r.message


def test_audit_infers_causality_like_check_and_takes_causal_and_hints():
    res = _by_check(audit(spec("leaky_after_sdpa"), checks="causality"))
    r = res["causality"]
    assert r.status == "fail" and r.message.startswith("future leak: output at query")
    assert r.metrics["first_leak"] == [0, 1] and "first (0, 1)" in r.message
    assert "causal detected: SDPA called with is_causal=True" in r.message
    res = _by_check(audit(spec("correct"), checks="causality"))
    assert res["causality"].status == "pass"
    assert res["causality"].metrics["causal"].startswith("True (detected")
    res = _by_check(audit(spec("leaky_after_sdpa"), checks="causality", causal=False))
    assert res["causality"].status == "skip" and "bidirectional" in res["causality"].message
    # a declared scale replaces 1/sqrt(head_dim): the correct layer's 1/sqrt(8) now fails
    rep = audit(spec("correct"), checks="scale", hints={"scale": 1.0})
    assert _by_check(rep)["scale"].status == "fail"
    assert rep.extra["model"].get("hints") == {"scale": 1.0}


class _FullAttention(torch.nn.Module):
    """Bidirectional self-attention on (B, L, 8); ``config`` set by the test."""

    def __init__(self):
        super().__init__()
        self.embed_dim, self.num_heads = 8, 2
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        B, L, E = x.shape
        q, k, v = (t.view(B, L, 2, 4).transpose(1, 2) for t in self.qkv(x).split(E, -1))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, E)


def test_audit_causality_from_config_and_skip_without_evidence():
    from types import SimpleNamespace

    m = _FullAttention()
    r = audit(m, checks="causality")["causality"]
    assert r.status == "skip" and r.message.startswith("not declared causal (observed pattern: "
                                                       "full)")
    m.config = SimpleNamespace(is_decoder=True)
    before = module_state(m)
    r = audit(m, checks="causality")["causality"]
    assert r.status == "fail" and "(causal detected: config.is_decoder = True)" in r.message
    assert module_state_equal(module_state(m), before) and m.config.is_decoder is True


def test_audit_cli_causal_and_hint_options():
    r = CliRunner().invoke(main, ["audit", spec("leaky_after_sdpa"), "--no-causal", "--checks",
                                  "causality"])
    assert r.exit_code == 0 and "skip" in r.output
    r = CliRunner().invoke(main, ["audit", spec("correct"), "--hint", "causl=true"])
    assert r.exit_code == 2
    assert r.output.strip() == ("attncheck audit: error: unknown hint 'causl' (did you mean "
                                "'causal'?)")
    r = CliRunner().invoke(main, ["audit", spec("correct"), "--hint", "layout=BLHd"])
    assert r.exit_code == 2 and "hint 'layout' is not used by attncheck audit" in r.output
    r = CliRunner().invoke(main, ["audit", spec("correct"), "--hint", "window=0"])
    assert r.exit_code == 2 and "hint window=0: expected an integer > 0" in r.output
