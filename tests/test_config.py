"""[tool.attncheck] lookup, validation, exclude, per-file-ignores, CLI override."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from engine_helpers import test_rules  # noqa: F401  (fixture)

from attncheck.cli import main
from attncheck.config import ConfigError, find_config, load_config
from attncheck.lint.engine import lint_paths

SRC = "y = x.softmax(1)\n"  # ATT991 (test rule, default on) and ATT993 (info, off)


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_nearest_pyproject_with_table(tmp_path):
    _tree(tmp_path, {
        "pyproject.toml": '[tool.attncheck]\nselect = ["ATT1"]\n',
        "a/pyproject.toml": '[project]\nname = "no-table"\n',   # skipped: no [tool.attncheck]
        "a/b/pyproject.toml": '[tool.attncheck]\nignore = ["ATT2"]\n',
        "a/m.py": SRC, "a/b/n.py": SRC,
    })
    assert find_config(tmp_path / "a" / "m.py").select == ["ATT1"]
    assert find_config(tmp_path / "a" / "m.py").root == tmp_path.resolve()
    cfg = find_config(tmp_path / "a" / "b" / "n.py")
    assert cfg.select is None and cfg.ignore == ["ATT2"]


@pytest.mark.parametrize("toml, message", [
    ('[tool.attncheck]\nselct = ["ATT1"]\n', "unknown key 'selct'"),
    ('[tool.attncheck]\nper_file_ignores = {}\n', "did you mean 'per-file-ignores'"),
    ('[tool.attncheck]\nselect = "ATT1"\n', "select: expected a list of strings, got str"),
    ('[tool.attncheck]\nignore = [1]\n', "ignore: expected a list of strings"),
    ('[tool.attncheck]\nselect = ["E501"]\n', "invalid rule selector 'E501'"),
    ('[tool.attncheck]\nper-file-ignores = ["a"]\n', "per-file-ignores: expected a table"),
    ('[tool.attncheck]\nper-file-ignores = { "t/*" = "ATT1" }\n', "expected a list of strings"),
    ('[tool.attncheck\n', "invalid TOML"),
])
def test_invalid_config(tmp_path, toml, message):
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "m.py").write_text(SRC)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")) as ei:
        lint_paths([tmp_path / "m.py"])
    assert str(tmp_path / "pyproject.toml") in str(ei.value)
    r = CliRunner().invoke(main, ["lint", str(tmp_path / "m.py")])
    assert r.exit_code == 2 and message in r.output


def test_select_from_config_and_cli_override(test_rules, tmp_path):
    _tree(tmp_path, {"pyproject.toml": '[tool.attncheck]\nextend-select = ["ATT993"]\n',
                     "m.py": SRC})
    assert [f.code for f in lint_paths([tmp_path]).findings] == ["ATT991", "ATT993"]
    assert [f.code for f in lint_paths([tmp_path], ignore=["ATT991"]).findings] == ["ATT993"]
    assert [f.code for f in lint_paths([tmp_path], select=["ATT991"]).findings] == ["ATT991"]
    assert [f.code for f in lint_paths([tmp_path], isolated=True).findings] == ["ATT991"]


def test_exclude_relative_to_config_dir(test_rules, tmp_path):
    _tree(tmp_path, {
        "pyproject.toml": '[tool.attncheck]\nexclude = ["legacy", "src/gen_*.py", "*/skip/*"]\n',
        "src/ok.py": SRC, "src/gen_x.py": SRC, "legacy/old.py": SRC, "src/legacy/o.py": SRC,
        "src/skip/s.py": SRC,
    })
    res = lint_paths([tmp_path])
    assert [Path(p).relative_to(tmp_path).as_posix() for p in res.files] == ["src/ok.py"]


def test_per_file_ignores(test_rules, tmp_path):
    _tree(tmp_path, {
        "pyproject.toml": '[tool.attncheck]\nextend-select = ["ATT993"]\n'
                          '[tool.attncheck.per-file-ignores]\n"tests/*" = ["ATT99"]\n'
                          '"conftest.py" = ["ATT993"]\n',
        "tests/t.py": SRC, "pkg/conftest.py": SRC, "pkg/m.py": SRC,
    })
    got = sorted((Path(f.path).relative_to(tmp_path).as_posix(), f.code)
                 for f in lint_paths([tmp_path]).findings)
    assert got == [("pkg/conftest.py", "ATT991"), ("pkg/m.py", "ATT991"), ("pkg/m.py", "ATT993")]


def test_explicit_config_file(test_rules, tmp_path):
    _tree(tmp_path, {"attncheck.toml": 'ignore = ["ATT991"]\n', "m.py": SRC,
                     "pyproject.toml": '[tool.attncheck]\nselect = ["ATT993"]\n'})
    assert lint_paths([tmp_path / "m.py"], config=tmp_path / "attncheck.toml").findings == []
    cfg = load_config(tmp_path / "pyproject.toml")
    assert cfg.select == ["ATT993"]
    r = CliRunner().invoke(main, ["lint", "--config", str(tmp_path / "nope.toml"),
                                  str(tmp_path / "m.py")])
    assert r.exit_code == 2 and "config file not found" in r.output


def test_pytest_keys_accepted(tmp_path):
    _tree(tmp_path, {"pyproject.toml": '[tool.attncheck]\nlint = ["src"]\n'
                                       'targets = ["pkg.mod:factory"]\n'})
    assert find_config(tmp_path).extra == {"lint": ["src"], "targets": ["pkg.mod:factory"]}


@pytest.mark.parametrize("key, suggestion", [
    ("selct", "select"), ("ignor", "ignore"), ("per_file_ignores", "per-file-ignores"),
    ("exclud", "exclude"),
])
def test_misspelt_config_key_suggests_the_closest_known_key(tmp_path, key, suggestion):
    from attncheck.config import ConfigError, load_config

    (tmp_path / "pyproject.toml").write_text(f'[tool.attncheck]\n{key} = []\n')
    with pytest.raises(ConfigError, match=rf"unknown key '{key}'.*did you mean '{suggestion}'\?"):
        load_config(tmp_path / "pyproject.toml")
