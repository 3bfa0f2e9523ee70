"""Reproduction lines carry every hint; ``attncheck check`` leaves no ``.hypothesis/`` behind."""
import json
import os
import shlex
import subprocess
import sys
import textwrap

from click.testing import CliRunner

import attncheck
from attncheck.cli import main
from attncheck.dynamic.targets import hint_options

from _dynamic_helpers import FIX, ROOT

SPEC = os.path.relpath(os.path.join(FIX, "dynamic", "sdpa_kernels.py"), ROOT) + ":manual_attention"


def _reproduce_line(details: str) -> list[str]:
    (line,) = [ln for ln in details.splitlines() if ln.startswith("reproduce: ")]
    return shlex.split(line[len("reproduce: "):])


def test_hint_options_round_trip_through_the_cli_parser():
    from attncheck.dynamic.cli import _parse_hint

    hints = {"causal": True, "scale": 1.0, "num_heads": 4, "mask": {"arg": "m", "convention":
             "blocked", "shape": "(B, L_k)"}, "mask_pattern": {"kind": "sliding_window",
             "window": 4}, "cross": False, "name": "shown only", "spec": "x.py:f"}
    opts = shlex.split(" ".join(hint_options(hints)))
    assert opts[0] == "--causal" and "--hint" in opts
    parsed = _parse_hint(tuple(v for k, v in zip(opts, opts[1:]) if k == "--hint"))
    assert parsed == {"scale": 1.0, "num_heads": 4, "mask_arg": "m", "mask_convention": "blocked",
                      "mask_shape": "(B, L_k)", "mask_pattern": {"kind": "sliding_window",
                                                                 "window": 4}, "cross": False}


def test_printed_command_reproduces_the_failure(monkeypatch):
    """The kernel is correct for 1/√d; with the declared ``scale=1.0`` the scale check fails —
    the printed command must carry that hint (and the others) to fail again."""
    monkeypatch.chdir(ROOT)
    rep = attncheck.check(SPEC, checks=["scale"], device="cpu", max_examples=3, scale=1.0,
                          causal=False, mask_pattern={"kind": "full"})
    res = rep["scale"]
    assert res.status == "fail", res.message
    argv = _reproduce_line(res.details)
    assert argv[:3] == ["attncheck", "check", SPEC]
    assert "--no-causal" in argv and "scale=1.0" in argv and 'mask_pattern={"kind":"full"}' in argv
    assert argv[argv.index("--max-examples") + 1] == "3"
    r = CliRunner().invoke(main, argv[1:] + ["--format", "json", "--device", "cpu"])
    assert r.exit_code == 1, r.output
    (out,) = json.loads(r.output)["results"]
    assert (out["check"], out["status"], out["message"]) == ("scale", "fail", res.message)
    # without the hints the same command passes: the hints are what reproduces the failure
    bare = [a for i, a in enumerate(argv[1:]) if a != "--hint" and (i == 0 or argv[i] != "--hint")]
    r = CliRunner().invoke(main, bare + ["--device", "cpu"])
    assert r.exit_code == 0, r.output


_SCRIPT = textwrap.dedent("""
    import sys
    import attncheck
    from attncheck.cli import main
    sys.path.insert(0, ".")
    import local_kernel
    rep = attncheck.check(local_kernel.sdpa, checks=["shapes"], device="cpu", max_examples=20)
    print("api", rep["shapes"].status, flush=True)
    # the CLI imports the file again as a new module: hypothesis collects its constants anew
    main(["check", "local_kernel.py:sdpa", "--checks", "shapes", "--device", "cpu",
          "--max-examples", "20"])
""")


def test_no_hypothesis_directory_in_cwd(tmp_path):
    """API then CLI in a fresh interpreter whose cwd holds the target module: hypothesis caches
    the constants of *local* modules under ``./.hypothesis/constants`` even with
    ``database=None`` (20 examples make it do so, for each of the two imports, unless
    redirected)."""
    with open(os.path.join(FIX, "dynamic", "sdpa_kernels.py")) as f:
        (tmp_path / "local_kernel.py").write_text(f.read())
    (tmp_path / "drive.py").write_text(_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPOTHESIS")}
    p = subprocess.run([sys.executable, "drive.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "api pass" in p.stdout and "OK: 1 pass" in p.stdout
    assert not (tmp_path / ".hypothesis").exists()
