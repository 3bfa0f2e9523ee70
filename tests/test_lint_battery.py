"""Bad inputs and interruptions for ``attncheck lint``: nothing lost, nothing hangs, nothing lies.

Each case asserts the exit code, the message, the bytes on disk and that no traceback escapes:
symlink loops, unreadable directories, FIFOs, generated data modules and the size guard, Jupyter
notebooks, atomic and faithful writes (encoding cookie, BOM, CRLF, permissions), ``--add-noqa``
on lines that cannot hold a comment, ``--fix`` on stdin, and a ``kill -9`` of a parallel
``--fix`` run.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from attncheck.cli import main
from attncheck.lint import discovery, engine, notebook
from attncheck.lint.engine import lint_paths
from attncheck.lint.rule import all_rules

pytest_plugins = ["pytester"]

#: q·kᵀ → softmax with no scale (ATT101, no fix) and a -1e9 fill (ATT204, unsafe fix)
ATTN = ("import torch\n\n\n"
        "def attn(q, k, v, mask):\n"
        "    s = q @ k.transpose(-2, -1)\n"
        "    s = s.masked_fill(mask, -1e9)\n"
        "    return torch.softmax(s, dim=-1) @ v\n")
FIXED_FILL = "    s = s.masked_fill(mask, torch.finfo(s.dtype).min)\n"


def run(*args, input=None):
    return CliRunner().invoke(main, ["lint", "--no-cache", "--isolated", *args], input=input)


def cli(*args, input=None, timeout=120, cwd=None):
    return subprocess.run([sys.executable, "-m", "attncheck", "lint", "--no-cache", "--isolated",
                           *args], input=input, capture_output=True, timeout=timeout, cwd=cwd,
                          text=isinstance(input, str) or input is None)


def no_traceback(*texts):
    for t in texts:
        assert "Traceback" not in (t or ""), t


# ---------------------------------------------------------------------------------------------
# discovery

@pytest.fixture
def loops(tmp_path):
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text(ATTN)
    (tree / "l.py").symlink_to(tmp_path / "loop1")
    return tmp_path


def test_symlink_loop_named_is_a_path_error_in_process(loops):
    r = run(str(loops / "loop1"), str(loops / "tree" / "a.py"))
    assert r.exit_code == 2
    assert f"attncheck: error: {loops / 'loop1'}: symlink loop (too many levels of symbolic links)" \
        in r.output
    assert "ATT101" in r.output  # the other path is still linted
    assert run("--exit-zero", str(loops / "loop1")).exit_code == 2  # an error, not a finding
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_symlink_loops_by_subprocess(loops):
    r = cli("--exit-zero", "loop1", "tree", cwd=loops)  # named, and inside a walked tree
    assert r.returncode == 2
    assert r.stderr == ("attncheck: error: loop1: symlink loop (too many levels of symbolic links)\n"
                        "attncheck: error: tree/l.py: symlink loop (too many levels of symbolic "
                        "links)\n")
    assert r.stdout.startswith("tree/a.py:5:9: ATT101")
    assert "Found 2 finding(s) in 1 of 1 file(s).\n" in r.stdout
    no_traceback(r.stdout, r.stderr)


def test_broken_symlink_named(tmp_path):
    (tmp_path / "gone.py").symlink_to(tmp_path / "nowhere.py")
    r = run(str(tmp_path / "gone.py"))
    assert r.exit_code == 2
    assert "gone.py: broken symbolic link" in r.output


def _deny(monkeypatch, denied: Path):
    real = os.scandir

    def scandir(path="."):
        if Path(os.fspath(path)).resolve() == denied.resolve():
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_unreadable_directory_inside_a_tree_is_reported(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("x = 1\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "b.py").write_text(ATTN)
    _deny(monkeypatch, locked)
    r = run(str(tmp_path))
    assert r.exit_code == 2
    assert f"attncheck: error: {locked}: cannot read directory: permission denied" in r.output
    assert "1 path(s) could not be linted" in r.output  # not "All checks passed"
    assert "All checks passed" not in r.output
    assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit)


def test_unreadable_directory_named_directly(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    _deny(monkeypatch, locked)
    r = run("--exit-zero", str(locked))
    assert r.exit_code == 2
    assert r.output.splitlines()[0] == \
        f"attncheck: error: {locked}: cannot read directory: permission denied"
    assert isinstance(r.exception, SystemExit)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root reads every directory whatever its mode")
def test_unreadable_directory_by_mode(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "b.py").write_text(ATTN)
    locked.chmod(0)
    try:
        r = cli(str(tmp_path))
    finally:
        locked.chmod(0o755)
    assert r.returncode == 2 and "cannot read directory: permission denied" in r.stderr
    no_traceback(r.stderr)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_never_blocks(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text(ATTN)
    os.mkfifo(tree / "x.py")
    # a blocking open would hang until the timeout; in the walk the FIFO is skipped, named it
    # is an error
    r = cli("tree", "tree/x.py", cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert r.stderr == "attncheck: error: tree/x.py: a FIFO, not a regular file: not linted\n"
    assert "Found 2 finding(s) in 1 of 1 file(s)." in r.stdout and "x.py" not in r.stdout
    no_traceback(r.stdout, r.stderr)
    with pytest.raises(OSError, match="not a regular file"):  # opened non-blocking, never read
        discovery.read_regular(tree / "x.py")


# ---------------------------------------------------------------------------------------------
# resource guard

def _data_module(n: int) -> str:
    return "DATA = [" + ", ".join(str(123457 * i % 99999991) for i in range(n)) + "]\n"


def test_generated_data_module_is_not_parsed(tmp_path):
    data = tmp_path / "table.py"
    data.write_text("# generated\n" + _data_module(20_000) + "PAIRS = (1e9, -1e10, 0xFFFF, 2j)\n")
    res = lint_paths([data], isolated=True)
    assert res.findings == [] and res.files == [str(data)]
    assert res.parsed == 0  # only compiled; big literals alone are not a reason to parse
    # the same literals applied as a mask fill: parsed, reported
    data.write_text(_data_module(2_000) + "def f(s, m):\n    return s.masked_fill(m, -1e9)\n")
    res = lint_paths([data], isolated=True)
    assert res.parsed == 1 and [f.code for f in res.findings] == ["ATT204"]


def test_syntax_error_in_data_module_still_reported(tmp_path):
    data = tmp_path / "table.py"
    data.write_text(_data_module(1000)[:-2] + "\n")  # the closing bracket is missing
    r = run(str(data))
    assert r.exit_code == 1 and f"{data}:1:8: ATT000 cannot parse" in r.output


def test_size_guard_reports_instead_of_reading(tmp_path, monkeypatch):
    big = tmp_path / "big.py"
    big.write_text(_data_module(40_000))  # about 0.3 MB
    size = big.stat().st_size

    def never(*a, **k):
        raise AssertionError("a file over the limit was read")

    monkeypatch.setattr(engine, "decode_source", never)
    r = run("--max-file-size", "0.1", str(big))
    assert r.exit_code == 1
    assert r.output.splitlines()[0] == (
        f"{big}:1:1: ATT000 file too large to analyse: {size / 1e6:.1f} MB > 0.1 MB limit (not "
        f"read); pass --max-file-size {int(size / 1e6) + 1} to lint it, or exclude it")
    assert run("--max-file-size", "0.1", "--exit-zero", str(big)).exit_code == 0
    assert run("--max-file-size", "0.1", "--ignore", "ATT000", str(big)).exit_code == 0
    r = run("--max-file-size", "0.1", "-", input=big.read_text())  # stdin too
    assert r.exit_code == 1 and "-:1:1: ATT000 file too large to analyse" in r.output
    monkeypatch.undo()
    assert run("--max-file-size", "0", str(big)).exit_code == 0  # 0 = no limit
    assert run(str(big)).exit_code == 0  # the default limit is 50 MB


def test_libcst_parse_guard(tmp_path, monkeypatch):
    p = tmp_path / "m.py"
    p.write_text(ATTN)
    monkeypatch.setattr(engine, "MAX_PARSE_CHARS", 100)
    r = run(str(p))
    assert r.exit_code == 1
    assert r.output.splitlines()[0] == (
        f"{p}:1:1: ATT000 file too large to analyse: 0.0 MB of code to parse > 0.0001 MB (libcst "
        "needs several hundred bytes of memory per byte); exclude it, or split it")


_NUMS = ", ".join(str(i) for i in range(60))
SCREEN_CASES = [
    "DATA = [" + _NUMS + "]\n",
    "DATA = [" + _NUMS + "\n",                                          # never closed
    "X = {" + ", ".join(f"'k{i}': [{i}, ({i},), {{'a': {i}}}]" for i in range(40)) + "}\nf(X)\n",
    "X = f(" + ", ".join(f"a{i}={i}" for i in range(40)) + ", *rest)\n",  # call arguments
    "X = (" + _NUMS + ",)\nY = (" + _NUMS + ")\nZ = sum(x for x in [" + _NUMS + "])\n",
    "X = [" + _NUMS + ", 3 4, 5]\n",                                   # error inside a group
    "X = ['a,b', \"c]\", '#(', " + _NUMS + "]\nY = 1 +\n",             # error after the literal
    "def f():\n    return x[" + _NUMS + "]\n",                         # a subscript
    "X = [[" + "], [".join(", ".join(str(i) for i in range(j, j + 5)) for j in range(40)) + "]]]\n",
    "X = [\n" + ",\n".join(f"    ({i}, '{i}')" for i in range(40)) + "\n    (1 2)]\n",
    "return [" + _NUMS + "]\n",                                         # refused by CPython only
]


@pytest.mark.parametrize("text", SCREEN_CASES)
def test_piecewise_syntax_screen_equals_compile(text, monkeypatch):
    """The screen of a large file (here: pieces of 50 characters) finds exactly the errors
    ``compile()`` finds, at the same line and column."""
    from attncheck.lint import screen

    monkeypatch.setattr(screen, "PIECE", 50)
    monkeypatch.setattr(screen, "PIECEWISE_ABOVE", 0)
    got = engine._syntax_check(text, "x.py")
    monkeypatch.setattr(screen, "PIECEWISE_ABOVE", 10**9)
    want = engine._syntax_check(text, "x.py")
    assert (got is None) == (want is None)
    if want is not None:
        assert (got.line, got.col, got.message) == (want.line, want.col, want.message)


# ---------------------------------------------------------------------------------------------
# notebooks

def _notebook(cells, *, indent=1, language="python", trailing="\n"):
    nb = {"cells": cells,
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": language,
                                      "name": "python3"},
                       "language_info": {"name": language}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=indent, ensure_ascii=False) + trailing


def _code(source, outputs=()):
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": ["é"]},
            "outputs": list(outputs), "source": source}


NB_CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Attention\n", "text"]},
    _code(["%matplotlib inline\n", "import torch\n", "!pip install einops \\\n", "   x\n"],
          [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]),
    _code(["def attn(q, k, v, mask):\n",
           "    if mask is None:\n",
           "        %time pass\n",
           "    s = q @ k.transpose(-2, -1)\n",
           "    s = s.masked_fill(mask, -1e9)\n",
           "    return torch.softmax(s, dim=-1) @ v"]),
    _code("%%bash\nthis is not python (\n"),
    _code(["def attn2(q, k, v):\n",
           "    s = q @ k.transpose(-2, -1)  # noqa: ATT101\n",
           "    return torch.softmax(s, dim=-1) @ v\n"]),
]


def test_notebook_findings_at_cell_line_column(tmp_path):
    p = tmp_path / "attn.ipynb"
    p.write_text(_notebook(NB_CELLS))
    r = run(str(p))
    assert r.exit_code == 1
    assert r.output.splitlines()[:2] == [
        f"{p}:cell 3:4:9: ATT101 q·kᵀ reaches softmax with no scaling: multiply the scores by "
        "q.size(-1) ** -0.5 (or pass them through F.scaled_dot_product_attention)",
        f"{p}:cell 3:5:29: ATT204 mask value -1e9 does not fit in float16 (max 65504): masked_fill "
        "raises or overflows to -inf under fp16/autocast; use torch.finfo(s.dtype).min"]
    assert "Found 2 finding(s) in 1 of 1 file(s)." in r.output  # cell 5's noqa, cell 4 skipped
    data = json.loads(run("--output-format", "json", str(p)).output)
    assert [(d["cell"], d["line"], d["column"], d["code"]) for d in data] == \
        [(3, 4, 9, "ATT101"), (3, 5, 29, "ATT204")]
    assert data[1]["fix"]["edits"][0]["line"] == 5
    full = run("--output-format", "full", str(p)).output
    assert "5 │     s = s.masked_fill(mask, -1e9)" in full
    # walks include notebooks; checkpoints are excluded
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "attn-checkpoint.ipynb").write_text(_notebook(NB_CELLS))
    r = run(str(tmp_path))
    assert r.exit_code == 1 and "Found 2 finding(s) in 1 of 1 file(s)." in r.output


def test_notebook_magics_keep_line_numbers():
    text, changed = notebook.neutralise("%time x = 1\nif a:\n    !ls \\\n  -l\n    a.b?\nb = 2")
    assert text == "pass\nif a:\n    pass\n\n    pass\nb = 2\n" and changed == {0, 2, 3, 4}
    text, changed = notebook.neutralise("# setup\n%%timeit\nx = (\n")
    assert text == "\n\n\n" and changed == {0, 1, 2}
    assert notebook.neutralise("a = b % c\nd = e != f\n") == ("a = b % c\nd = e != f\n", set())


def test_notebook_fix_and_noqa_written_into_the_cell_only(tmp_path):
    p = tmp_path / "attn.ipynb"
    original = _notebook(NB_CELLS, indent=2, trailing="")  # no trailing newline, indent 2
    p.write_text(original)
    r = run("--fix", str(p))  # the fill fix is unsafe: nothing changes
    assert r.exit_code == 1 and p.read_text() == original
    assert "Fixed 0 finding(s)." in r.output and "--fix alone does not apply them" in r.output
    r = run("--fix", "--unsafe-fixes", str(p))
    assert r.exit_code == 1 and "Fixed 1 finding(s)." in r.output
    assert p.read_text() == original.replace('"    s = s.masked_fill(mask, -1e9)\\n"',
                                             json.dumps(FIXED_FILL))
    before = p.read_text()
    r = run("--add-noqa", str(p))
    assert r.exit_code == 0 and r.output == "Added 1 noqa directive(s).\n"
    assert p.read_text() == before.replace(
        '"    s = q @ k.transpose(-2, -1)\\n"', '"    s = q @ k.transpose(-2, -1)  # noqa: ATT101\\n"')
    assert run(str(p)).exit_code == 0


def test_notebook_source_as_one_string_and_magic_kept(tmp_path):
    p = tmp_path / "one.ipynb"
    src = ("%load_ext autoreload\nimport torch\ndef attn(q, k, v):\n    s = q @ k.transpose(-2, -1)\n"
           "    return torch.softmax(s, -1) @ v\n")
    p.write_text(_notebook([_code(src)], indent=4))
    before = p.read_text()
    r = run("--add-noqa", str(p))
    assert r.exit_code == 0 and r.output == "Added 1 noqa directive(s).\n"
    assert p.read_text() == before.replace(json.dumps(src), json.dumps(
        src.replace("(-2, -1)\n", "(-2, -1)  # noqa: ATT101\n")))


def test_malformed_and_foreign_notebooks(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{\n  "cells": [1, 2\n')
    r = run(str(bad))
    assert r.exit_code == 1
    assert r.output.splitlines()[0] == \
        f"{bad}:3:1: ATT000 cannot read notebook: invalid JSON: Expecting ',' delimiter"
    bad.write_text('{"nbformat": 4}')
    assert "ATT000 cannot read notebook: not a Jupyter notebook: no 'cells' list" in run(str(bad)).output
    bad.write_text('{"cells": [{"cell_type": "code", "source": 3}]}')
    assert "cell 1: 'source' is neither a string nor a list of strings" in run(str(bad)).output
    r_nb = tmp_path / "r.ipynb"
    r_nb.write_text(_notebook([_code("x <- 1 +\n")], language="R"))
    assert run(str(r_nb)).exit_code == 0  # not Python: not linted
    no_traceback(r.output)


# ---------------------------------------------------------------------------------------------
# atomic, faithful writes

def test_add_noqa_keeps_latin1_bom_crlf_and_mode(tmp_path):
    lat = tmp_path / "lat.py"
    lat.write_bytes(b"# -*- coding: latin-1 -*-\n" + ATTN.replace("import torch\n",
                    "import torch\nNAME = 'caf\xe9'\n").encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + ATTN.replace("\n", "\r\n").encode())
    lat.chmod(0o640)
    bom.chmod(0o755)
    r = run("--add-noqa", str(lat), str(bom))
    assert r.exit_code == 0 and r.output == "Added 4 noqa directive(s).\n"
    want = ATTN.replace("(-2, -1)\n", "(-2, -1)  # noqa: ATT101\n").replace(
        "-1e9)\n", "-1e9)  # noqa: ATT204\n")
    assert lat.read_bytes() == b"# -*- coding: latin-1 -*-\n" + want.replace(
        "import torch\n", "import torch\nNAME = 'caf\xe9'\n").encode("latin-1")
    assert bom.read_bytes() == b"\xef\xbb\xbf" + want.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(lat.stat().st_mode) == 0o640 and stat.S_IMODE(bom.stat().st_mode) == 0o755
    assert sorted(os.listdir(tmp_path)) == ["bom.py", "lat.py"]  # no temporary file left
    assert run(str(lat), str(bom)).exit_code == 0


def test_fix_keeps_encoding_and_follows_symlinks(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(b"\xef\xbb\xbf" + ATTN.replace("\n", "\r\n").encode())
    link = tmp_path / "link.py"
    link.symlink_to(real)
    r = run("--fix", "--unsafe-fixes", str(link))
    assert r.exit_code == 1 and "Fixed 1 finding(s)." in r.output
    assert link.is_symlink()
    assert real.read_bytes() == b"\xef\xbb\xbf" + ATTN.replace(
        "    s = s.masked_fill(mask, -1e9)\n", FIXED_FILL).replace("\n", "\r\n").encode()


def test_failed_write_leaves_the_file_whole(tmp_path, monkeypatch):
    p = tmp_path / "m.py"
    p.write_text(ATTN)

    def refuse(src, dst):
        raise OSError(28, "No space left on device", dst)

    monkeypatch.setattr(os, "replace", refuse)
    r = run("--fix", "--unsafe-fixes", str(p))
    assert r.exit_code == 2
    assert f"attncheck: error: {p}: cannot write: no space left on device; the file is unchanged" \
        in r.output
    assert "Fixed 0 finding(s)." in r.output
    assert p.read_text() == ATTN and os.listdir(tmp_path) == ["m.py"]


CONTINUED = ("import torch\n\n\n"
             "def attn(q, k, v):\n"
             "    s = q @ \\\n"
             "        k.transpose(-2, -1)\n"
             "    return torch.softmax(s, dim=-1) @ v\n\n\n"
             "def attn2(q, k, v):\n"
             "    s = (q @ k.transpose(-2, -1)).view(shape(\"\"\"\n"
             "    (B, H, L, L)\"\"\"))\n"
             "    return torch.softmax(s, dim=-1) @ v\n")


def test_add_noqa_where_a_line_cannot_hold_a_comment(tmp_path):
    p = tmp_path / "c.py"
    p.write_text(CONTINUED)
    before = [(f.line, f.code) for f in lint_paths([p], isolated=True).findings]
    assert before == [(5, "ATT101"), (11, "ATT101")]  # lines that cannot end in a comment
    r = run("--add-noqa", str(p))
    assert r.exit_code == 0 and r.output == "Added 2 noqa directive(s).\n"
    assert p.read_text() == CONTINUED.replace(
        "k.transpose(-2, -1)\n", "k.transpose(-2, -1)  # noqa: ATT101\n").replace(
        '(B, H, L, L)"""))\n', '(B, H, L, L)"""))  # noqa: ATT101\n')
    r = run(str(p))
    assert r.exit_code == 0 and "All checks passed! (1 file(s) checked)" in r.output


def test_fix_on_stdin_writes_the_fixed_source_to_stdout():
    r = cli("--fix", "--unsafe-fixes", "-", input=ATTN)
    assert r.returncode == 1
    assert r.stdout == ATTN.replace("    s = s.masked_fill(mask, -1e9)\n", FIXED_FILL)
    assert "Fixed 1 finding(s)." in r.stderr and "-:5:9: ATT101" in r.stderr
    no_traceback(r.stderr)
    r = run("--fix", "-", input=ATTN)  # nothing safe to apply: the source passes through
    assert r.exit_code == 1 and r.stdout == ATTN
    assert "Fixed 0 finding(s)." in r.stderr and "-:5:9: ATT101" in r.stderr


def _children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.add(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_kill_9_of_parallel_fix_leaves_no_worker_and_no_change(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    body = "".join(ATTN.replace("def attn(", f"def attn{i}(") for i in range(60))
    for i in range(24):
        (tree / f"m{i:02d}.py").write_text(body)
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    proc = subprocess.Popen([sys.executable, "-m", "attncheck", "lint", "--no-cache", "--isolated",
                             "--fix", "--unsafe-fixes", "-j", "2", str(tree)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
        workers |= _children(proc.pid)
        time.sleep(0.02)
    assert proc.poll() is None and workers, "the run ended before its workers were seen"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    left = [w for w in workers if _alive(w)]
    for w in left:  # do not leave them behind if the assertion fails
        os.kill(w, signal.SIGKILL)
    assert not left
    time.sleep(0.5)
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == before


# ---------------------------------------------------------------------------------------------
# fix safety

def test_shipped_fixes_are_unsafe_and_the_docs_say_what_fix_does():
    """No shipped fix provably keeps numerics (each changes values, semantics, or can raise: see
    each rule page's *Fix safety*), so ``--fix`` alone changes nothing with the built-in rules.
    When a fix becomes safe, README, docs/lint.md and the pre-commit hook must change with it."""
    from attncheck.lint import catalog

    fixable = {c for c in all_rules() if catalog.fix_kind(c) not in (None, "none")}
    assert fixable and {catalog.fix_kind(c) for c in fixable} == {"unsafe"}
    root = Path(__file__).resolve().parents[1]
    readme = root / "README.md"
    assert "every fix attncheck ships is unsafe" in readme.read_text().lower()
    hooks = (root / ".pre-commit-hooks.yaml").read_text()
    assert "with the built-in rules this hook modifies no file" in hooks


def test_engine_writes_only_in_the_parent(tmp_path, monkeypatch):
    """A worker's result carries the new bytes; writing happens after all results are in."""
    p = tmp_path / "m.py"
    p.write_text(ATTN)
    writes = []
    real = engine._write_all

    def spy(result, fix):
        writes.append(dict(result.writes))
        return real(result, fix)

    monkeypatch.setattr(engine, "_write_all", spy)
    res = lint_paths([p], isolated=True, fix=True, unsafe_fixes=True)
    assert res.fixed == 1 and list(writes[0]) == [str(p)]
    assert writes[0][str(p)][1] == ATTN.replace("    s = s.masked_fill(mask, -1e9)\n",
                                                FIXED_FILL).encode()


def test_pytest_plugin_reports_unlintable_paths(pytester):
    """``pytest --attncheck`` with ``lint = ["src"]``: a symlink loop inside fails as an item."""
    pytester.makefile(".toml", pyproject='[tool.attncheck]\nlint = ["src"]\n')
    src = pytester.path / "src"
    src.mkdir()
    (src / "ok.py").write_text("x = 1\n")
    (src / "l.py").symlink_to(src / "l.py")
    result = pytester.runpytest("--attncheck", "-m", "attncheck", "-k", "lint", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*attncheck: cannot lint *l.py: symlink loop*"])
    assert "Traceback" not in result.stdout.str()
