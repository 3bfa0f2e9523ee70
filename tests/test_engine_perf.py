"""Region parsing, lazy positions, the result cache, process pool: same findings, faster.

Region parsing is checked against a whole-file parse on every fixture (with the size threshold
lowered so the region path runs on small files too) and on modeling files of the installed
transformers package (read as text, never imported).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint import engine, regions
from attncheck.lint.engine import lint_paths, lint_text, resolve_selection, Layer
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
LINT_FIXTURES = ROOT / "fixtures" / "lint"
#: every fixture: lint fixtures, handed cases, dynamic and audit fixtures
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))
REGISTRY = all_rules()
ALL = resolve_selection(REGISTRY, [Layer(select=("ALL",))])
DEFAULT = resolve_selection(REGISTRY, [Layer()])


def _transformers_files() -> list[Path]:
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return []
    base = Path(list(spec.submodule_search_locations)[0]) / "models"
    names = ["llama/modeling_llama.py", "gpt2/modeling_gpt2.py", "bert/modeling_bert.py",
             "t5/modeling_t5.py", "whisper/modeling_whisper.py", "vit/modeling_vit.py",
             "mixtral/modeling_mixtral.py", "clip/modeling_clip.py", "swin/modeling_swin.py",
             "longt5/modeling_longt5.py", "kosmos2/modeling_kosmos2.py"]
    return [base / n for n in names if (base / n).exists()]


def _both(text: str, enabled=ALL, display="x.py"):
    whole = lint_text(text, display, enabled, REGISTRY, regions=False).findings
    part = lint_text(text, display, enabled, REGISTRY, regions=True).findings
    return whole, part


def _key(findings):
    return [(f.to_dict()) for f in findings]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_regions_match_whole_file_on_fixtures(path, monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = path.read_text(encoding="utf-8")
    # the default selection has fewer tokens (more is blanked)
    for enabled in (DEFAULT, ALL):
        whole, part = _both(text, enabled, str(path))
        assert _key(part) == _key(whole)


TF = _transformers_files()


@pytest.mark.skipif(not TF, reason="transformers is not installed")
@pytest.mark.parametrize("path", TF, ids=lambda p: p.parent.name)
def test_regions_match_whole_file_on_transformers(path):
    text = path.read_text(encoding="utf-8")
    whole, part = _both(text, ALL, str(path))
    assert _key(part) == _key(whole)


@pytest.mark.skipif(not TF, reason="transformers is not installed")
def test_regions_drop_text_on_real_models():
    """The selection must actually leave code out of the parse on large modeling files."""
    rules = [REGISTRY[c] for c in DEFAULT if not getattr(REGISTRY[c], "engine_only", False)]
    kept = total = 0
    for p in TF:
        text = p.read_text(encoding="utf-8")
        sel = regions.select(text, regions.triggers_of(engine.prefilter(text, rules)))
        if sel is not None:
            kept += sel.kept_lines
            total += sel.total_lines
            assert sel.text.count("\n") == p.read_text(encoding="utf-8").count("\n")
    assert total > 0 and kept < 0.75 * total  # 65 % on these attention-heavy files


# ------------------------------------------------------------------------ chunking


def test_units_split_definitions_and_module_code():
    src = ("import torch\n"             # 0 module code
           "X = 1\n"
           "@decorator(\n"             # 2 def f (decorated, argument continued in col 0)
           "1)\n"
           "@other\n"
           "def f(x):\n"
           "    return x\n"
           "class C(Base):\n"          # 7 class C
           '    """doc\n'
           'in column 0\n'              # string content in column 0: still the class
           '    """\n'
           "async def g():\n"          # 11
           "    pass\n"
           "if X:\n"                   # 13 module code
           "    def h(): pass\n")
    idx = regions.index(src)
    assert [(u.start, u.kind, u.name) for u in idx.units] == [
        (0, "mod", None), (1, "mod", None), (2, "func", "f"), (7, "class", None),
        (8, "class", None), (11, "func", "g"), (13, "mod", None)]
    assert idx.units[-1].end == len(src.split("\n"))


_PARTS = {
    "helper": "def helper(q, k):\n    return q @ k.transpose(-2, -1)\n",
    "attn": ("class Attn(nn.Module):\n"
             "    def forward(self, q, k, v):\n"
             "        s = helper(q, k)\n"
             "        s = s.masked_fill(self.mask, -1e9)\n"
             "        return F.softmax(s, dim=-2) @ v\n"),
    "caller": "def caller(q, k):\n    return helper(q, k)\n",
}


def _module(n_filler: int, order=("helper", "attn", "caller")) -> str:
    filler = [f"class Filler{i}(nn.Module):\n    def forward(self, x):\n        return x + {i}\n"
              for i in range(n_filler)]
    body = [_PARTS[p] for p in order]
    body[1:1] = filler
    return ("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
            + "\n".join(body))


def test_selection_keeps_helpers_and_callers_and_blanks_the_rest():
    text = _module(regions.MIN_LINES // 4 + 1)
    text += "\ndef outer(q, k):\n    return caller(q, k)\n"
    why: dict = {}
    sel = regions.select(text, {"softmax", "masked_fill"}, why=why)
    assert sel is not None
    # helper is called by the seed Attn.forward; caller is another call site of helper (the mask
    # analysis joins the arguments of every call) and outer calls caller (whose body runs with
    # outer's arguments when the analysis evaluates caller's return value): all kept
    assert sel.kept_defs == ["helper", "Attn", "caller", "outer"]
    assert sel.kept_methods == [None, ["forward"], None, None]
    caller_line = text.split("\n").index("def caller(q, k):") + 1
    assert why[caller_line] == ("func", "caller", f"from line {text.split(chr(10)).index('def helper(q, k):') + 1} (helper)")
    assert "class Filler3" not in sel.text
    # a helper that can report keeps its callers (they pass the arguments it is analysed with)
    up = regions.select(text, {"transpose"})
    assert up is not None and up.kept_defs == ["helper", "Attn", "caller", "outer"]
    lines, kept = text.split("\n"), sel.text.split("\n")
    assert len(lines) == len(kept)
    # dropped lines are blank, or a string statement over them from three lines on
    assert all(a == b or b.strip() in ("", '"""') for a, b in zip(lines, kept))
    assert "class Filler3" not in sel.text and "def helper" in sel.text


@given(n=st.integers(0, 40), order=st.permutations(sorted(_PARTS)),
       select=st.sampled_from([ALL, DEFAULT]))
def test_regions_equal_whole_file_property(n, order, select):
    text = _module(n, tuple(order))
    regions_min = regions.MIN_LINES
    regions.MIN_LINES = 0
    try:
        whole, part = _both(text, select)
    finally:
        regions.MIN_LINES = regions_min
    assert _key(part) == _key(whole)
    assert any(f.code == "ATT301" for f in whole) == ("ATT301" in select)


def test_unparseable_selection_falls_back_to_whole_file(monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    # a 'def' line inside a string: the selection would cut the string; the engine must notice
    text = ('import torch\nDOC = """\ndef fake(): x"""\n'
            "def f(q, k, v):\n    s = q @ k.transpose(-2, -1)\n    return torch.softmax(s, dim=-1) @ v\n")
    sel = regions.select(text, {"softmax"})
    assert sel is not None and sel.kept_defs == ["f"]  # the cut string no longer parses
    whole, part = _both(text)
    assert _key(part) == _key(whole)
    assert "ATT101" in [f.code for f in whole]


def test_positions_are_lazy(monkeypatch):
    """Files without findings never compute libcst positions."""
    calls = []
    orig = engine._LazyPositions._positions

    def spy(self):
        calls.append(1)
        return orig(self)

    monkeypatch.setattr(engine._LazyPositions, "_positions", spy)
    ok = ("import torch\ndef f(q, k, v):\n    s = q @ k.transpose(-2, -1) * 0.125\n"
          "    return torch.softmax(s, dim=-1) @ v\n")
    assert lint_text(ok, "ok.py", DEFAULT, REGISTRY).findings == []
    assert calls == []
    bad = ok.replace(" * 0.125", "")
    assert [f.code for f in lint_text(bad, "bad.py", DEFAULT, REGISTRY).findings] == ["ATT101"]
    assert calls


def test_screened_parse_builds_the_validated_tree():
    """Parsing without libcst's per-node validation builds the tree a validating parse builds
    (``deep_equals``: same node types, fields and whitespace), and validation is back in force
    afterwards, also after a parse error."""
    import libcst as cst

    inits = {cls: cls.__init__ for cls, _, _ in engine._node_inits()}
    assert cst.Name in inits and cst.Call in inits and cst.SimpleWhitespace in inits
    texts = [path.read_text(encoding="utf-8") for path in FIXTURES[:60]]
    texts += [_EVERY_SYNTAX, Path(engine.__file__).read_text(encoding="utf-8")]
    for text in texts:
        module = engine._parse_screened(text)
        assert module.deep_equals(cst.parse_module(text)), text[:200]
        assert module.code == text
    with pytest.raises(cst.ParserSyntaxError):
        engine._parse_screened("def f(:\n")
    assert {cls: cls.__init__ for cls in inits} == inits
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")
    with pytest.raises(TypeError):
        cst.Name()  # a required field, as the dataclass's own __init__ requires it


#: one of each statement and expression form libcst builds (node fields with defaults, default
#: factories and required values all occur)
_EVERY_SYNTAX = '''\
from __future__ import annotations
import os.path as osp, sys
from . import a
from ..b import (c as d, e)
x: int = 1; y = x if x else -x
z = [i ** 2 for i in range(3) if i % 2] + list({k: v for k, v in {}.items()}) + [*{1, 2}]
s = f"{x!r:>{y}} {z[1:2:3]}" "plain" r'raw' + u"u", b"b" rb'raw bytes'
w = (lambda a, /, b=1, *c, d, e=2, **f: a)(1, d=0)
del w
assert x, "message"
global_value = ...
t = 1j + 0x10 + 1_000 + 1e-3 + (walrus := 5)
async def g(p: list[int], *args: str, q=3, **kw) -> dict[str, int]:
    global t
    async with open(p) as f, open(q) as h:
        async for i in f:
            await h
    values = [j async for j in p]
    return {**kw}
@decorator(arg)
class C(Base, metaclass=Meta):
    """docstring"""
    attr: int
    def method(self, x):
        def inner():
            nonlocal x
            x += 1
            x -= 1; x *= 2; x @= m; x /= 2; x //= 2; x %= 2; x **= 2; x >>= 1; x <<= 1
            x &= 1; x |= 1; x ^= 1
        try:
            raise ValueError("v") from None
        except* (TypeError, ValueError) as e:
            pass
        finally:
            yield from inner()
        with (open(a) as b, open(c)):
            while not x and x or x is not None:
                if x < 1 <= 2 != 3 > 4 >= 5 == 6 in [] not in []:
                    break
                elif ~x & x | x ^ x << 1 >> 1:
                    continue
                else:
                    pass
        for i, (j, *k) in enumerate(x):
            print(i, *j, sep="", **k)
        match x:
            case [1, *rest] | (2, 3):
                pass
            case {"k": v, **others} if v:
                pass
            case Point(x=0, y=1) as pt:
                pass
            case None | True | -1 | "s":
                pass
            case _:
                pass
        return x[..., None, 1:] @ x.mT
'''


# ------------------------------------------------------------------------ cache


def _tree(tmp_path: Path, n: int = 3) -> Path:
    d = tmp_path / "src"
    d.mkdir()
    for i in range(n):
        (d / f"m{i}.py").write_text(
            "import torch\n"
            f"def f{i}(q, k, v):\n"
            f"    s = q @ k.transpose(-2, -1)  # {i}\n"
            "    return torch.softmax(s, dim=-1) @ v\n")
    (d / "clean.py").write_text("x = 1\n")
    return d


def _entries(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*.json") if not p.name.startswith("rules-")]


def _dump(res):
    return [f.to_dict() for f in res.findings], res.files, res.parsed, res.sources


def test_cache_hit_gives_identical_result_without_linting(tmp_path, monkeypatch):
    d, cache = _tree(tmp_path), tmp_path / "cache"
    cold = lint_paths([d], isolated=True, cache_dir=cache)
    assert (cache / "CACHEDIR.TAG").exists() and len(_entries(cache)) == 4

    def boom(*a, **k):
        raise AssertionError("a cache hit must not lint")

    monkeypatch.setattr(engine, "lint_bytes", boom)
    warm = lint_paths([d], isolated=True, cache_dir=cache)
    assert _dump(warm) == _dump(cold)
    assert [f.code for f in warm.findings] == ["ATT101"] * 3


def test_warm_run_reads_only_the_cache(tmp_path):
    """A run whose files are all cache hits parses nothing: in a fresh interpreter it imports
    neither libcst nor the rule modules, never reaches the ``ast`` index or the syntax screen,
    and reports what the cold run did."""
    d, cache = _tree(tmp_path), tmp_path / "cache"
    cold = lint_paths([d], isolated=True, cache_dir=cache, jobs=1)
    script = (
        "import json, sys\n"
        "from attncheck.lint import engine, regions\n"
        "from attncheck.lint.engine import lint_paths\n"
        "def parse(*a, **k):\n"
        "    raise AssertionError('a cache hit parsed')\n"
        "regions.index = engine._syntax_check = parse\n"
        f"res = lint_paths([{str(d)!r}], isolated=True, cache_dir={str(cache)!r}, jobs=1)\n"
        "loaded = sorted(m for m in ('libcst', 'attncheck.lint.rule', 'attncheck.lint.context')"
        " if m in sys.modules)\n"
        "print(json.dumps([[f.to_dict() for f in res.findings], loaded]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    findings, loaded = json.loads(out.stdout)
    assert findings == [f.to_dict() for f in cold.findings] and len(findings) == 3
    assert loaded == []


def test_cache_key_follows_content_and_selection(tmp_path):
    d, cache = _tree(tmp_path, 1), tmp_path / "cache"
    first = lint_paths([d], isolated=True, cache_dir=cache)
    assert [f.code for f in first.findings] == ["ATT101"]
    # the selection is part of the key
    none = lint_paths([d], isolated=True, cache_dir=cache, ignore=["ATT101"])
    assert none.findings == []
    # so is the content (same size, same mtime resolution does not matter)
    (d / "m0.py").write_text("import torch\ndef f0(q, k, v):\n"
                             "    s = q @ k.transpose(-2, -1) / 8  # 0\n"
                             "    return torch.softmax(s, dim=-1) @ v\n")
    assert lint_paths([d], isolated=True, cache_dir=cache).findings == []
    # a renamed file hits and reports its new path
    (d / "m0.py").write_text("import torch\ndef f0(q, k, v):\n"
                             "    s = q @ k.transpose(-2, -1)  # 0\n"
                             "    return torch.softmax(s, dim=-1) @ v\n")
    (d / "m0.py").rename(d / "renamed.py")
    res = lint_paths([d], isolated=True, cache_dir=cache)
    assert [Path(f.path).name for f in res.findings] == ["renamed.py"]


def test_corrupt_cache_entry_is_a_miss(tmp_path):
    d, cache = _tree(tmp_path, 1), tmp_path / "cache"
    cold = lint_paths([d], isolated=True, cache_dir=cache)
    for p in cache.rglob("*.json"):
        p.write_text("{not json")
    again = lint_paths([d], isolated=True, cache_dir=cache)
    assert _dump(again) == _dump(cold)


def test_cache_not_used_for_fixes(tmp_path):
    d, cache = _tree(tmp_path, 1), tmp_path / "cache"
    res = lint_paths([d], isolated=True, cache_dir=cache, diff=True)
    assert res.diffs or res.findings
    assert _entries(cache) == [] if cache.exists() else True


def test_concurrent_processes_share_a_cache(tmp_path):
    """Two processes lint the same files into the same cache at once: both outputs, and a
    warm run afterwards, are identical; no temporary file is left behind."""
    d, cache = _tree(tmp_path, 12), tmp_path / "cache"
    cmd = [sys.executable, "-m", "attncheck", "lint", str(d), "--isolated", "--output-format",
           "json", "--cache-dir", str(cache), "-j", "1"]
    env = dict(os.environ)
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs
    a, b = (json.loads(o[0]) for o in outs)
    assert a == b and len(a) == 12
    warm = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    assert json.loads(warm.stdout) == a
    assert not list(cache.rglob("*.part"))
    assert len(_entries(cache)) == 13


# ------------------------------------------------------------------------ processes


def test_jobs_do_not_change_the_result(tmp_path):
    d = _tree(tmp_path, 2 * engine.MIN_FILES_PER_JOB + 1)
    one = lint_paths([d], isolated=True, jobs=1)
    two = lint_paths([d], isolated=True, jobs=2)
    assert _dump(two) == _dump(one)
    assert [f.path for f in one.findings] == sorted(f.path for f in one.findings)
