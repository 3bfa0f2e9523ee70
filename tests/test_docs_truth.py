"""README.md and docs/*.md say what the code does (fast checks; the commands themselves run in
``tests/test_docs_commands.py``, ``pytest -m slow``).

- every hint of the registry (``attncheck.dynamic.targets.HINTS``) is documented in the hint
  tables of docs/checks.md, and every documented hint exists;
- the README's configuration example selects what its comments say;
- the pre-commit snippets name one repository, pin no invented tag, and use the shipped hooks'
  ids and entries;
- no install command names a PyPI package attncheck that does not exist;
- the heatmap caption names the colour the colour map draws at 0;
- the shell blocks marked to run are well-formed and name files that exist.
"""
from __future__ import annotations

import colorsys
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from docs_blocks import DOCS, ROOT, all_marked_blocks

from attncheck.config import parse_table
from attncheck.lint.engine import Layer, resolve_selection
from attncheck.lint.rule import all_rules

README = (ROOT / "README.md").read_text(encoding="utf-8")
CHECKS_MD = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# hints

def _registry_hint_names() -> set[str]:
    """Hint names of the registry, whether it is a tuple of names, a mapping name → spec, or a
    sequence of objects with a ``name``."""
    from attncheck.dynamic.targets import HINTS

    if isinstance(HINTS, Mapping):
        return set(HINTS)
    return {h if isinstance(h, str) else h.name for h in HINTS}


def _table_rows(text: str, header: str) -> list[set[str]]:
    """Per row of the markdown table whose header row starts with ``header``, the hint names in
    its first column: the leading identifier of every `code` span (`scale=<float>` → scale)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    rows: list[set[str]] = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        first = ln.split("|")[1]
        rows.append({m.group(0) for span in re.findall(r"`([^`]+)`", first)
                     if (m := re.match(r"[a-z_]+", span))})
    return rows


TARGET_ROWS = _table_rows(CHECKS_MD, "| hint | meaning |")
CHECK_ROWS = _table_rows(CHECKS_MD, "| hint | used by | meaning |")
TARGET_HINTS = set().union(*TARGET_ROWS)
CHECK_HINTS = set().union(*CHECK_ROWS)


def test_hint_tables_are_parsed():
    assert {"causal", "layout", "mask_convention", "cross", "alignment"} <= TARGET_HINTS
    assert {"scale", "num_kv_heads", "pattern", "window", "cache"} <= CHECK_HINTS


def test_every_registered_hint_is_documented():
    undocumented = _registry_hint_names() - TARGET_HINTS - CHECK_HINTS
    assert not undocumented, f"hints missing from docs/checks.md: {sorted(undocumented)}"


def test_each_hint_is_documented_once():
    from collections import Counter

    counts = Counter(name for row in TARGET_ROWS + CHECK_ROWS for name in row)
    assert not [n for n, c in counts.items() if c > 1], counts.most_common(3)


def test_every_documented_hint_exists():
    registry = _registry_hint_names()
    assert TARGET_HINTS <= registry, sorted(TARGET_HINTS - registry)
    # a hint read by one check is in the registry, or (while the registry lists only the target
    # hints) read by name in a check's source
    sources = "\n".join(p.read_text(encoding="utf-8")
                        for p in (ROOT / "attncheck" / "dynamic" / "checks").glob("*.py"))
    unknown = {h for h in CHECK_HINTS - registry
               if f'"{h}"' not in sources and f"'{h}'" not in sources}
    assert not unknown, f"documented hints nothing reads: {sorted(unknown)}"


def test_readme_hint_list_names_real_hints():
    section = README.split("Hints override detection:")[1].split("Options:")[0]
    named = {m.group(1) for m in re.finditer(r"`([a-z_]+)(?:=[^`]*)?`", section)}
    assert "cross" in named
    assert named <= TARGET_HINTS | CHECK_HINTS, sorted(named - TARGET_HINTS - CHECK_HINTS)


# --------------------------------------------------------------------------------------------
# configuration example

def _config_example(text: str) -> tuple[dict, dict[str, str]]:
    block = text.split("<!-- config-example")[1].split("```toml\n")[1].split("```")[0]
    import tomllib

    table = tomllib.loads(block)["tool"]["attncheck"]
    comments = {}
    for line in block.splitlines():
        m = re.match(r"^([\w-]+)\s*=.*?#\s*(.*)$", line)
        if m:
            comments[m.group(1)] = m.group(2)
    return table, comments


def _selected(select=None, extend_select=(), ignore=()) -> frozenset[str]:
    registry = all_rules()
    return resolve_selection(registry, [Layer(None if select is None else tuple(select),
                                              tuple(extend_select), tuple(ignore))])


@pytest.mark.parametrize("doc", ["README.md", "docs/lint.md"])
def test_config_example_is_valid_and_selects_what_its_comments_say(doc):
    table, comments = _config_example((ROOT / doc).read_text(encoding="utf-8"))
    cfg = parse_table(table, "README.md", ROOT)   # valid: no unknown key, valid selectors
    default = _selected()
    info = {c for c, r in all_rules().items() if r.severity == "info"}
    assert info and not info & default

    # select = [...]  # = the default-on rules; "ATT" or "ALL": every rule, info rules ATT6xx too
    assert "= the default-on rules" in comments["select"]
    assert _selected(cfg.select) == default
    for broad in re.findall(r'"(ATT|ALL)"', comments["select"]):
        assert _selected([broad]) == frozenset(all_rules()), broad
    assert "info rules" in comments["select"]

    # extend-select adds one info rule, ignore removes one rule
    assert "add one info rule" in comments["extend-select"]
    (added,) = cfg.extend_select
    assert added in info
    assert "remove a rule" in comments["ignore"]
    (removed,) = cfg.ignore
    assert removed in default
    full = _selected(cfg.select, cfg.extend_select, cfg.ignore)
    assert full == (default | {added}) - {removed}


# --------------------------------------------------------------------------------------------
# pre-commit

def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


def test_pre_commit_snippets_use_the_shipped_hooks():
    yaml = pytest.importorskip("yaml")   # PyYAML: installed with transformers (dev extra)
    shipped = {h["id"]: h for h in yaml.safe_load(
        (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    remote_urls: set[str] = set()
    n_local = n_remote = 0
    for path in (ROOT / "README.md", ROOT / "docs" / "integrations.md"):
        for block in _yaml_blocks(path.read_text(encoding="utf-8")):
            data = yaml.safe_load(block)
            if not isinstance(data, dict) or "repos" not in data:
                continue
            for repo in data["repos"]:
                for hook in repo["hooks"]:
                    assert hook["id"] in shipped, (path.name, hook["id"])
                if repo["repo"] == "local":
                    n_local += 1
                    for hook in repo["hooks"]:
                        # the local hook runs what the shipped one runs
                        for key in ("entry", "types", "types_or"):
                            assert hook.get(key) == shipped[hook["id"]].get(key), (path.name, key)
                else:
                    n_remote += 1
                    remote_urls.add(repo["repo"])
                    # no release tags exist: a version-like rev would be a promise nobody kept
                    assert not re.match(r"^v?\d+(\.\d+)*$", str(repo["rev"])), repo["rev"]
                    assert "commit SHA" in str(repo["rev"])
    assert n_local >= 2 and n_remote >= 1
    assert len(remote_urls) == 1, remote_urls   # one repository, named the same everywhere
    for text in (README, (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")):
        urls = set(re.findall(r"https://github\.com/[\w.-]+/attncheck\b", text))
        assert urls <= remote_urls, urls


# --------------------------------------------------------------------------------------------
# install commands

def test_no_install_command_names_an_unpublished_package():
    """attncheck is not on PyPI: ``pip install attncheck`` / ``'attncheck[hf]'`` would fail."""
    bad = []
    for path in DOCS:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"pip install\b[^#\n]*?(?<![\w@/.-])['\"]?attncheck(?!\s*@)(\[|['\"\s]|$)", line):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, bad


def test_readme_installs_a_cpu_torch_before_attncheck():
    blocks = [b for b in all_marked_blocks() if b.source.startswith("README.md")]
    install = [c.line for b in blocks for c in b.commands if c.line.startswith("pip ")]
    assert install[0].startswith("pip install torch==2.13.0 --index-url "
                                 "https://download.pytorch.org/whl/cpu")
    assert "pip install ." in install
    assert any(c.startswith("pip wheel . ") for c in install)
    assert any(c.startswith("pip install dist/attncheck-") for c in install)


# --------------------------------------------------------------------------------------------
# HTML report caption

def test_heatmap_caption_names_the_colour_drawn_at_zero():
    pytest.importorskip("matplotlib")
    import matplotlib

    html_src = (ROOT / "attncheck" / "report" / "html.py").read_text(encoding="utf-8")
    cmap = re.search(r'ax\.imshow\(probs\[h\], cmap="(\w+)"', html_src).group(1)
    assert cmap == "viridis"
    r, g, b, _ = matplotlib.colormaps[cmap](0.0)
    hue, _, value = colorsys.rgb_to_hsv(r, g, b)
    assert 0.72 < hue < 0.86 and value < 0.4     # dark purple (#440154), not black
    r1, g1, b1, _ = matplotlib.colormaps[cmap](1.0)
    assert r1 > 0.9 and g1 > 0.85 and b1 < 0.2   # yellow
    assert "dark purple = exactly 0, yellow = 1" in html_src
    audit_md = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    assert "are dark\npurple, weight 1 is yellow" in audit_md
    assert "black" not in html_src and "masked entries are black" not in audit_md


# --------------------------------------------------------------------------------------------
# the marked shell blocks

def test_marked_blocks_are_well_formed_and_name_existing_files():
    blocks = all_marked_blocks()
    assert {b.source.split(":")[0] for b in blocks} >= {"README.md", "docs/audit.md"}
    commands = [c for b in blocks for c in b.commands]
    assert len(commands) >= 20
    for c in commands:
        p = subprocess.run(["bash", "-n", "-c", c.line], capture_output=True, text=True)
        assert p.returncode == 0, (c.source, c.line, p.stderr)
        for path in re.findall(r"\b((?:fixtures|tests|bench|docs)/[\w./-]+?\.(?:py|md))\b",
                               c.line):
            assert (ROOT / path).is_file(), (c.source, path)
        assert c.line.split()[0] in ("pip", "attncheck", "python"), (c.source, c.line)
    # documented exit statuses are the CLI's: 0 ok, 1 findings / failed checks
    assert {c.expected_status for c in commands} <= {0, 1}
