"""Helpers imported from other linted files (``attncheck.lint.project``).

The rule for every family: a layer that imports its helper from ``utils.py`` gets exactly the
findings (code, position relative to the caller) that the same layer gets with the helper
pasted into its own file, whatever the import spelling; a helper outside the linted files is
unknown; the result cache, the number of jobs, the file order and region parsing change nothing.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncheck.lint.engine import lint_paths
from attncheck.lint.project import Project, relative_base

# --------------------------------------------------------------------------- families
# each: the helper's definition (named ``helper``), the caller (``HELPER`` stands for however the
# caller spells the imported helper), the codes the same-file version must give

_MASK_CALLER = '''
def attend(q, k, v):
    L = q.size(-2)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    mask = HELPER(L)
    scores = scores.masked_fill(mask == 0, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v
'''

_ADDITIVE_CALLER = '''
def attend(q, k, v):
    L = q.size(-2)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    scores = scores + HELPER(L)
    w = torch.softmax(scores, dim=-1)
    return w @ v
'''

_SCALE_CALLER = '''
class Attention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) * HELPER(SCALE_ARG)
        w = torch.softmax(scores, dim=-1)
        return (w @ v).transpose(1, 2).reshape(B, L, C)
'''

_SPLIT_CALLER = '''
class Attention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = HELPER(q, self.n_heads), HELPER(k, self.n_heads), HELPER(v, self.n_heads)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(MERGE)
'''

_SPLIT_HELPER = ("def helper(x, n_heads):\n    B, L, C = x.shape\n"
                 "    return x.view(B, L, n_heads, C // n_heads).transpose(1, 2)\n")

FAMILIES = {
    "head_split_merged_without_transpose": (
        _SPLIT_HELPER, _SPLIT_CALLER.replace("MERGE", "y.reshape(B, L, C)"), {"ATT402"}),
    "head_split_correct": (
        _SPLIT_HELPER, _SPLIT_CALLER.replace("MERGE", "y.transpose(1, 2).reshape(B, L, C)"), set()),
    "causal_mask_hides_diagonal": (
        "def helper(L):\n    return torch.tril(torch.ones(L, L), diagonal=-1)\n",
        _MASK_CALLER, {"ATT202"}),
    "causal_mask_correct": (
        "def helper(L):\n    return torch.tril(torch.ones(L, L))\n",
        _MASK_CALLER, set()),
    "causal_mask_inverted": (
        "def helper(L):\n    return torch.triu(torch.ones(L, L), diagonal=1)\n",
        _MASK_CALLER, {"ATT201"}),
    "additive_mask_hides_diagonal": (
        "def helper(L):\n    return torch.triu(torch.full((L, L), float('-inf')), diagonal=0)\n",
        _ADDITIVE_CALLER, {"ATT202"}),
    "additive_mask_correct": (
        "def helper(L):\n    return torch.triu(torch.full((L, L), float('-inf')), diagonal=1)\n",
        _ADDITIVE_CALLER, set()),
    "scale_by_model_width": (
        "def helper(d_model):\n    return 1.0 / d_model\n",
        _SCALE_CALLER.replace("SCALE_ARG", "self.d_model"), {"ATT102"}),
    "scale_correct": (
        "def helper(head_dim):\n    return head_dim ** -0.5\n",
        _SCALE_CALLER.replace("SCALE_ARG", "self.head_dim"), set()),
}

_HEADER = "import torch\nimport torch.nn as nn\n"

#: how the layer imports the helper: (import lines, spelling of the call, layer path, extra
#: files); ``pkg`` is the linted package
STYLES = {
    "from_relative": ("from .utils import helper\n", "helper", "pkg/layer.py", {}),
    "alias": ("from .utils import helper as make_it\n", "make_it", "pkg/layer.py", {}),
    "module_alias": ("from . import utils as U\n", "U.helper", "pkg/layer.py", {}),
    "parent_package": ("from ..utils import helper as h\n", "h", "pkg/sub/layer.py",
                       {"pkg/sub/__init__.py": ""}),
    "absolute_module": ("import pkg.utils as U\n", "U.helper", "pkg/layer.py", {}),
    "absolute_from": ("from pkg.utils import helper\n", "helper", "pkg/layer.py", {}),
    "reexport": ("from pkg import helper\n", "helper", "pkg/layer.py",
                 {"pkg/__init__.py": "from .utils import helper\n"}),
    # the helper as a value: through a module imported without an alias, passed as an argument,
    # wrapped in a partial
    "module_relative": ("from . import utils\n", "utils.helper", "pkg/layer.py", {}),
    "passed_as_argument": ("from .utils import helper\n", "(lambda fn: fn)(helper)",
                           "pkg/layer.py", {}),
    "partial": ("import functools\nfrom .utils import helper\n", "functools.partial(helper)",
                "pkg/layer.py", {}),
    "module_attribute_passed": ("from . import utils\n", "(lambda fn: fn)(utils.helper)",
                                "pkg/layer.py", {}),
    "module_attribute_partial": ("import functools\nfrom . import utils as U\n",
                                 "functools.partial(U.helper)", "pkg/layer.py", {}),
    # a module-level alias of the imported helper
    "module_level_alias": ("from . import utils\nmake_it = utils.helper\n", "make_it",
                           "pkg/layer.py", {}),
    "module_level_alias_of_name": ("from .utils import helper\nmake_it = helper\n", "make_it",
                                   "pkg/layer.py", {}),
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _caller_def_line(text: str) -> int:
    lines = text.splitlines()
    return next(i for i, ln in enumerate(lines, 1) if ln.startswith(("def attend", "class Attention")))


def _relative(findings, path: Path, text: str) -> list[tuple[str, int, int]]:
    """(code, line from the caller's ``def``/``class`` line, column) of the findings in ``path``
    at or below the caller."""
    top = _caller_def_line(text)
    return sorted((f.code, f.line - top, f.col) for f in findings
                  if Path(f.path).resolve() == path.resolve() and f.line >= top)


def _same_file(tmp_path: Path, family: str) -> list[tuple[str, int, int]]:
    helper, caller, _ = FAMILIES[family]
    text = _HEADER + "\n\n" + helper + "\n" + caller.replace("HELPER", "helper")
    path = tmp_path / "same" / "layer.py"
    _write(tmp_path, {"same/layer.py": text})
    return _relative(lint_paths([path], isolated=True).findings, path, text)


def _package(tmp_path: Path, family: str, style: str) -> tuple[Path, str]:
    helper, caller, _ = FAMILIES[family]
    imports, spelling, layer, extra = STYLES[style]
    text = _HEADER + imports + "\n" + caller.replace("HELPER", spelling)
    files = {"pkg/__init__.py": "", "pkg/utils.py": _HEADER + "\n\n" + helper, layer: text}
    files.update(extra)
    _write(tmp_path, files)
    return tmp_path / layer, text


@pytest.fixture(scope="module")
def same_file(tmp_path_factory) -> dict[str, list[tuple[str, int, int]]]:
    """Each family's findings with the helper in the layer's own file (linted once)."""
    return {fam: _same_file(tmp_path_factory.mktemp(fam), fam) for fam in FAMILIES}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_same_file_family_gives_its_codes(same_file, family):
    assert {c for c, _, _ in same_file[family]} == FAMILIES[family][2]


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_imported_helper_gives_what_the_same_file_helper_gives(tmp_path, same_file, family,
                                                                style):
    expected = same_file[family]
    layer, text = _package(tmp_path, family, style)
    got = _relative(lint_paths([tmp_path / "pkg"], isolated=True).findings, layer, text)
    assert got == expected
    assert {c for c, _, _ in got} == FAMILIES[family][2]


@pytest.mark.parametrize("family", ["causal_mask_hides_diagonal", "scale_by_model_width"])
def test_helper_outside_the_linted_files_is_unknown(tmp_path, family):
    layer, _ = _package(tmp_path, family, "from_relative")
    # utils.py exists on disk but is not linted: its helper is not followed
    assert lint_paths([layer, tmp_path / "pkg" / "__init__.py"], isolated=True).findings == []
    assert lint_paths([layer], isolated=True).findings == []


def test_finding_is_reported_at_the_call_site_in_the_linted_file(tmp_path):
    layer, text = _package(tmp_path, "causal_mask_hides_diagonal", "alias")
    found = lint_paths([tmp_path / "pkg"], isolated=True).findings
    assert [(Path(f.path).name, f.code) for f in found] == [("layer.py", "ATT202")]
    call_line = next(i for i, ln in enumerate(text.splitlines(), 1) if "make_it(L)" in ln)
    assert f"built on line {call_line}" in found[0].message
    assert "make_it(L)" in found[0].message


def test_a_local_definition_shadows_the_import(tmp_path):
    layer, text = _package(tmp_path, "causal_mask_hides_diagonal", "from_relative")
    layer.write_text(text + "\n\ndef helper(L):\n    return torch.tril(torch.ones(L, L))\n")
    assert lint_paths([tmp_path / "pkg"], isolated=True).findings == []


# --------------------------------------------------------------------------- module resolution

def test_module_resolution_against_the_linted_files(tmp_path):
    files = ["pkg/__init__.py", "pkg/utils.py", "pkg/sub/__init__.py", "pkg/sub/layer.py",
             "pkg/sub/helpers/__init__.py", "scripts/run.py", "scripts/tools.py"]
    _write(tmp_path, {f: "" for f in files})
    real = {f: os.path.realpath(tmp_path / f) for f in files}
    project = Project(real.values(), [tmp_path])
    layer = real["pkg/sub/layer.py"]
    assert project.module_file(layer, 1, "helpers") == real["pkg/sub/helpers/__init__.py"]
    assert project.module_file(layer, 2, "utils") == real["pkg/utils.py"]
    assert project.module_file(layer, 2, "") == real["pkg/__init__.py"]
    assert project.module_file(layer, 1, "missing") is None
    # absolute: under the top package's parent, whatever the importer's depth
    assert project.module_file(layer, 0, "pkg.utils") == real["pkg/utils.py"]
    assert project.module_file(layer, 0, "pkg") == real["pkg/__init__.py"]
    # a script's sibling import
    assert project.module_file(real["scripts/run.py"], 0, "tools") == real["scripts/tools.py"]
    assert project.module_file(real["scripts/run.py"], 0, "torch.nn") is None
    # only linted files count
    fewer = Project([real["pkg/sub/layer.py"], real["pkg/sub/__init__.py"]], [tmp_path])
    assert fewer.module_file(layer, 2, "utils") is None


_NAMES = ("pkg", "sub", "utils", "helpers", "layer")


@st.composite
def _files_and_imports(draw):
    """A few ``.py`` files under ``/lintroot`` and an import spelt from one of them."""
    parts = draw(st.lists(st.tuples(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3),
                                    st.sampled_from([".py", "/__init__.py"])),
                          min_size=1, max_size=8))
    files = ["/lintroot/" + "/".join(p) + suffix for p, suffix in parts]
    importer = draw(st.sampled_from(files))
    level = draw(st.integers(0, 3))
    module = ".".join(draw(st.lists(st.sampled_from(_NAMES), min_size=0 if level else 1,
                                    max_size=3)))
    return files, importer, level, module


@given(_files_and_imports())
@settings(deadline=None)
def test_may_hold_is_never_false_for_a_module_that_resolves(case):
    """:meth:`Project.may_hold` (the mask analysis skips a function whose imports it answers
    ``False`` for) never says no where :meth:`Project.module_file` finds a linted file; a
    relative ``from . import x`` finds at most the ``__init__.py`` of its directory."""
    files, importer, level, module = case
    project = Project(files, ["/lintroot"])
    found = project.module_file(importer, level, module)
    if module:
        assert found is None or project.may_hold(importer, level, module.split(".")[0])
    elif found is not None:
        assert found == os.path.join(relative_base(importer, level), "__init__.py")
    assert project.may_hold(importer, level, "not_a_linted_name") is False


# --------------------------------------------------------------------------- engine properties

def _project_tree(tmp_path: Path, n: int = 18) -> list[Path]:
    """A package whose layers import a helper each from ``utils.py`` (``n`` files: enough for a
    process pool of two)."""
    helpers = "".join(FAMILIES[f][0].replace("def helper", f"def {f}") + "\n"
                      for f in ("causal_mask_hides_diagonal", "causal_mask_correct",
                                "scale_by_model_width"))
    files = {"pkg/__init__.py": "", "pkg/utils.py": _HEADER + "\n\n" + helpers}
    for i in range(n):
        fam = ("causal_mask_hides_diagonal", "causal_mask_correct", "scale_by_model_width")[i % 3]
        caller = FAMILIES[fam][1]
        files[f"pkg/layer_{i:02d}.py"] = (_HEADER + f"from .utils import {fam}\n\n"
                                          + caller.replace("HELPER", fam))
    _write(tmp_path, files)
    return sorted((tmp_path / "pkg").glob("*.py"))


def _key(result) -> list[tuple]:
    return sorted((Path(f.path).name, f.line, f.col, f.code, f.message) for f in result.findings)


def test_findings_do_not_depend_on_jobs_order_or_cache(tmp_path):
    files = _project_tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    base = _key(lint_paths(files, isolated=True))
    assert {c for _, _, _, c, _ in base} == {"ATT202", "ATT102"}
    assert len(base) == 12  # 6 layers with the hiding mask, 6 scaled by the width
    assert _key(lint_paths(files[::-1], isolated=True, jobs=2)) == base
    assert _key(lint_paths([tmp_path / "tree" / "pkg"], isolated=True, jobs=2,
                           cache_dir=cache)) == base
    assert _key(lint_paths(files[::-1], isolated=True, cache_dir=cache)) == base  # warm
    assert _key(lint_paths(files, isolated=True, regions=False)) == base


def test_cache_entry_is_stale_when_the_helper_changes(tmp_path):
    layer, _ = _package(tmp_path, "causal_mask_correct", "from_relative")
    utils = tmp_path / "pkg" / "utils.py"
    cache = tmp_path / "cache"

    def codes():
        return [f.code for f in lint_paths([tmp_path / "pkg"], isolated=True,
                                           cache_dir=cache).findings]

    assert codes() == []
    assert codes() == []  # warm
    utils.write_text(_HEADER + "\n\n" + FAMILIES["causal_mask_hides_diagonal"][0])
    assert codes() == ["ATT202"]  # layer.py unchanged, its entry stale
    assert codes() == ["ATT202"]
    utils.write_text(_HEADER + "\n\n" + FAMILIES["causal_mask_correct"][0])
    assert codes() == []


def test_cache_entry_is_stale_when_the_helper_leaves_the_linted_files(tmp_path):
    layer, _ = _package(tmp_path, "causal_mask_hides_diagonal", "from_relative")
    cache = tmp_path / "cache"
    linted = [layer, tmp_path / "pkg" / "utils.py", tmp_path / "pkg" / "__init__.py"]
    assert [f.code for f in lint_paths(linted, isolated=True, cache_dir=cache).findings] == \
        ["ATT202"]
    # the same layer content, linted without its helper: unknown, not the cached finding
    assert lint_paths(linted[:1] + linted[2:], isolated=True, cache_dir=cache).findings == []
    assert lint_paths(linted[:1], isolated=True, cache_dir=cache).findings == []  # alone
    # and back: the entries of the layer linted without its helper do not hide the finding
    assert [f.code for f in lint_paths(linted, isolated=True, cache_dir=cache).findings] == \
        ["ATT202"]


def test_moved_layer_misses_the_cache(tmp_path):
    """A relative import depends on where the importer is: a moved layer is analysed again."""
    layer, text = _package(tmp_path, "causal_mask_hides_diagonal", "from_relative")
    other = tmp_path / "other"
    _write(tmp_path, {"other/__init__.py": "", "other/utils.py": _HEADER + "\n\n"
                      + FAMILIES["causal_mask_correct"][0]})
    cache = tmp_path / "cache"
    roots = [tmp_path / "pkg", other]
    assert [f.code for f in lint_paths(roots, isolated=True, cache_dir=cache).findings] == \
        ["ATT202"]
    layer.rename(other / "layer.py")
    assert lint_paths(roots, isolated=True, cache_dir=cache).findings == []


def test_region_parse_keeps_what_imported_helpers_need(tmp_path):
    """A caller long enough for region selection (unrelated code around it) gives the findings
    of a whole-file parse."""
    layer, text = _package(tmp_path, "causal_mask_hides_diagonal", "module_alias")
    filler = "".join(textwrap.dedent(f'''
        def unrelated_{i}(x):
            y = x + {i}
            return y * 2
        ''') for i in range(20))
    layer.write_text(text + filler)
    regions = _key(lint_paths([tmp_path / "pkg"], isolated=True))
    whole = _key(lint_paths([tmp_path / "pkg"], isolated=True, regions=False))
    assert [c for _, _, _, c, _ in regions] == ["ATT202"]
    assert regions == whole


def test_files_importing_each_other_at_module_level(tmp_path, monkeypatch):
    """Module-level masks built by each other's helpers: each file's module level is evaluated
    once per linted file, not again for every import of it (endless, until Python's recursion
    limit)."""
    from attncheck.lint.analysis import masks

    built: list[str] = []
    init = masks._Analyzer.__init__

    def counting_init(self, ctx, *args):
        built.append(Path(ctx.display_path).name)
        init(self, ctx, *args)

    monkeypatch.setattr(masks._Analyzer, "__init__", counting_init)
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": _HEADER + "from .b import lower\n\nBASE = lower(8)\n\n"
                    "def upper(L):\n    return torch.triu(torch.ones(L, L), diagonal=1)\n",
        "pkg/b.py": _HEADER + "from .a import upper\n\nOTHER = upper(8)\n\n"
                    "def lower(L):\n    return torch.tril(torch.ones(L, L), diagonal=-1)\n"
                    + _MASK_CALLER.replace("HELPER", "lower"),
    })
    found = lint_paths([tmp_path / "pkg"], isolated=True, select=["ATT2"]).findings
    assert [(Path(f.path).name, f.code) for f in found] == [("b.py", "ATT202")]
    # b.py linted; a.py for b's ``upper``; b.py again for a's module-level ``lower(8)``, whose
    # module-level ``upper(8)`` is then not followed back into a.py
    assert sorted(built) == ["a.py", "b.py", "b.py"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_imported_helper_bound_to_a_local_name(tmp_path, same_file, family):
    """``fn = helper; fn(...)`` calls the imported helper as ``helper(...)`` does."""
    layer, text = _package(tmp_path, family, "from_relative")
    line = next(ln for ln in text.splitlines() if "helper(" in ln)
    indent = line[:len(line) - len(line.lstrip())]
    bound = text.replace(line, f"{indent}fn = helper\n" + line.replace("helper(", "fn("))
    layer.write_text(bound)
    got = _relative(lint_paths([tmp_path / "pkg"], isolated=True).findings, layer, bound)
    assert sorted(c for c, _, _ in got) == sorted(c for c, _, _ in same_file[family])
    assert {c for c, _, _ in got} == FAMILIES[family][2]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_imported_module_attribute_bound_to_a_local_name(tmp_path, same_file, family):
    """``fn = utils.helper; fn(...)`` calls the helper as ``utils.helper(...)`` does."""
    layer, text = _package(tmp_path, family, "module_relative")
    line = next(ln for ln in text.splitlines() if "utils.helper(" in ln)
    indent = line[:len(line) - len(line.lstrip())]
    bound = text.replace(line, f"{indent}fn = utils.helper\n" + line.replace("utils.helper(", "fn("))
    layer.write_text(bound)
    got = _relative(lint_paths([tmp_path / "pkg"], isolated=True).findings, layer, bound)
    assert sorted(c for c, _, _ in got) == sorted(c for c, _, _ in same_file[family])
    assert {c for c, _, _ in got} == FAMILIES[family][2]


def test_a_module_level_name_bound_twice_is_not_an_alias(tmp_path):
    """``make_it = utils.helper`` then ``make_it = other``: which one a call reaches depends on
    run order, so the name stays unknown and gives no finding."""
    helper, caller, _ = FAMILIES["causal_mask_hides_diagonal"]
    text = (_HEADER + "from . import utils\nmake_it = utils.helper\nmake_it = utils.other\n\n"
            + caller.replace("HELPER", "make_it"))
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": _HEADER + "\n\n" + helper
                      + "\n\ndef other(L):\n    return torch.tril(torch.ones(L, L))\n",
                      "pkg/layer.py": text})
    got = _relative(lint_paths([tmp_path / "pkg"], isolated=True).findings,
                    tmp_path / "pkg/layer.py", text)
    assert got == []


def test_a_function_value_returned_by_an_imported_helper_is_unknown(tmp_path):
    """A helper returning a function (a lambda of its file) gives an unknown value: it is not
    called as if it were code of the linted file."""
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/utils.py": _HEADER + "\n\ndef pick_scale(d_model):\n"
                        "    return lambda s: s * (1.0 / d_model)\n",
        "pkg/layer.py": _HEADER + "from .utils import pick_scale\n\n"
                        + _SCALE_CALLER.replace("HELPER(SCALE_ARG)", "1").replace(
                            "        w = torch.softmax",
                            "        scale_fn = pick_scale(self.d_model)\n"
                            "        scores = scale_fn(scores)\n"
                            "        w = torch.softmax"),
    })
    found = lint_paths([tmp_path / "pkg"], isolated=True)
    assert found.internal_errors == []
    assert found.findings == []


_FILLER = "".join(textwrap.dedent(f'''
    def unrelated_{i}(x):
        y = x + {i}
        return y * 2
    ''') for i in range(15))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_helper_region_of_a_long_file_gives_the_whole_file_findings(tmp_path, family):
    """A helper file long enough for region selection: parsing only the imported ``def``'s
    region gives what parsing the whole helper file gives (``regions=False``)."""
    layer, text = _package(tmp_path, family, "from_relative")
    utils = tmp_path / "pkg" / "utils.py"
    utils.write_text(utils.read_text() + _FILLER)
    regions = _key(lint_paths([tmp_path / "pkg"], isolated=True))
    assert {c for _, _, _, c, _ in regions} == FAMILIES[family][2]
    assert regions == _key(lint_paths([tmp_path / "pkg"], isolated=True, regions=False))


def test_helper_region_keeps_the_methods_it_reads_on_the_callers_instance(tmp_path):
    """``module.inv_width()`` inside an imported helper, ``module`` being the caller's
    ``self``: the helper's file is searched for the method under the caller's class name (as
    with the helper pasted into the caller's file), so the helper's region keeps that method."""
    caller = _SCALE_CALLER.replace("HELPER(SCALE_ARG)", "helper(self)")
    utils = _HEADER + textwrap.dedent('''

        def helper(module):
            return module.inv_width()


        class Attention(nn.Module):
            def __init__(self, d_model):
                super().__init__()
                self.d_model = d_model

            def inv_width(self):
                return 1.0 / self.d_model
        ''') + _FILLER
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": utils,
                      "pkg/layer.py": _HEADER + "from .utils import helper\n\n" + caller})
    regions = _key(lint_paths([tmp_path / "pkg" / "layer.py", tmp_path / "pkg" / "utils.py"],
                              isolated=True))
    whole = _key(lint_paths([tmp_path / "pkg" / "layer.py", tmp_path / "pkg" / "utils.py"],
                            isolated=True, regions=False))
    assert [(name, code) for name, _, _, code, _ in regions] == [("layer.py", "ATT102")]
    assert regions == whole


def test_an_imported_class_is_not_parsed(tmp_path, monkeypatch):
    """A class called from another file is no helper the analyses run: its file is read by
    ``ast`` only, never parsed with libcst; an imported ``def`` has only its region parsed."""
    from attncheck.lint import project

    parsed: list[tuple[str, str | None]] = []
    parse = project._parse

    def recording_parse(proj, path, data, root, idx=None):
        parsed.append((Path(path).name, root))
        return parse(proj, path, data, root, idx)

    monkeypatch.setattr(project, "_parse", recording_parse)
    utils = _HEADER + textwrap.dedent('''

        class Block(nn.Module):
            def __init__(self, d_model):
                super().__init__()
                self.proj = nn.Linear(d_model, d_model)


        def helper(L):
            return torch.tril(torch.ones(L, L), diagonal=-1)
        ''') + _FILLER
    caller = _MASK_CALLER.replace("HELPER", "helper").replace(
        "    L = q.size(-2)\n", "    L = q.size(-2)\n    block = Block(L)\n")
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": utils,
                      "pkg/layer.py": _HEADER + "from .utils import Block, helper\n\n" + caller})
    found = lint_paths([tmp_path / "pkg" / "layer.py", tmp_path / "pkg" / "utils.py"],
                       isolated=True, select=["ATT2"])
    assert [(Path(f.path).name, f.code) for f in found.findings] == [("layer.py", "ATT202")]
    assert parsed == [("utils.py", "helper")]
