"""pytest plugin: ``pytest --attncheck`` and the ``attncheck`` fixture.

Loaded through the ``pytest11`` entry point, the plugin is **inert unless ``--attncheck`` is
given**: it collects nothing, prints nothing and does not import torch (the dynamic machinery is
imported lazily, inside the items and the fixture).  It always registers the ``attncheck``
marker and the ``attncheck`` fixture.

With ``--attncheck`` it reads ``[tool.attncheck]`` from the project's ``pyproject.toml`` (the
one pytest uses as its ini file, else the first one with a ``[tool.attncheck]`` table at or above
the rootdir; ``--attncheck-config PATH`` names it) and appends, after the ordinary tests:

- one **lint item** per Python file under ``lint = [...]`` (paths relative to the pyproject's
  directory, discovered like ``attncheck lint`` does, with its ``exclude``/``select``/``ignore``/
  ``per-file-ignores``), id ``attncheck::lint::<path>``; it fails with the findings printed in
  the CLI's concise format (``path:line:col: CODE message``);
- one **check item** per (target, check, device) for ``targets = [...]``, id
  ``attncheck::<spec>::<check>[<device>]``.  A target is a spec string — ``"pkg.mod:factory"`` or
  ``"path/to/file.py:Name"`` (relative to the pyproject's directory) — or an inline table
  ``{ spec = "src/attn.py:MyAttention", causal = true, checks = ["causality"], devices =
  ["cpu"] }`` whose other keys are hints passed to :func:`attncheck.check` (docs/checks.md).
  Check status → pytest outcome: pass → passed; warn → passed with an ``AttncheckWarning``;
  skip → skipped with the check's reason; fail / error → failed with the check's message, its
  numbers, the leak map and the smallest failing example.

Ids depend only on the configuration (never on the code under test, never on timing), items come
in configuration order, and the failure text is a plain string, so the items collect identically
on every pytest-xdist worker and ``-k``, ``-m attncheck``, ``-x``, ``--lf`` and ``--junitxml``
work as for ordinary tests.

Hypothesis: the checks draw ``max_examples`` from the *active* hypothesis profile (e.g. the one
loaded in ``conftest.py`` or given with ``--hypothesis-profile``); no example database is written
into the project unless that profile configures one.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from attncheck._version import __version__

__all__ = ["AttncheckFixture", "AttncheckWarning", "PytestSettings", "format_report_failure"]

MARKER = "attncheck"
#: keys of a target's inline table that the plugin consumes itself (the rest are hints)
_TARGET_KEYS = ("spec", "checks", "devices", "id")


class AttncheckWarning(UserWarning):
    """A dynamic check passed with a warning (status ``warn``)."""


class AttncheckConfigError(Exception):
    """Invalid ``[tool.attncheck]`` entries for the pytest plugin."""


# ---------------------------------------------------------------------------------------------
# options, configuration
# ---------------------------------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attncheck", "attncheck (attention linter and checks)")
    group.addoption(
        "--attncheck", action="store_true", default=False,
        help="collect attncheck items: lint the [tool.attncheck] 'lint' paths and run the "
             "dynamic checks on its 'targets'")
    group.addoption(
        "--attncheck-device", default=None, metavar="DEVICE[,DEVICE]",
        help="device(s) for the dynamic checks: auto (default: cuda when available, else cpu), "
             "cpu, cuda, cuda:1, or a comma-separated list")
    group.addoption(
        "--attncheck-checks", default=None, metavar="CHECK[,CHECK]",
        help="run only these dynamic checks on every target (overrides the targets' lists)")
    group.addoption(
        "--attncheck-config", default=None, metavar="PATH",
        help="pyproject.toml (or attncheck TOML file) holding the [tool.attncheck] settings")


class PytestSettings:
    """What the plugin needs from the configuration; plain data only.

    ``root``: directory that relative paths are resolved against; ``lint``: paths (as written);
    ``targets``: list of ``(spec, hints, checks or None, devices or None, id or None)``;
    ``lint_config``: the :class:`attncheck.config.Config` used for linting (``None`` when
    there is no config file).
    """

    def __init__(self, root: Path, lint: list[str], targets: list[tuple], lint_config: Any,
                 source: str | None) -> None:
        self.root = root
        self.lint = lint
        self.targets = targets
        self.lint_config = lint_config
        self.source = source


def _read_raw_table(path: Path) -> dict | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    if path.name == "pyproject.toml":
        return data.get("tool", {}).get("attncheck")
    return data


def _find_config_file(config: pytest.Config) -> Path | None:
    explicit = config.getoption("attncheck_config")
    if explicit:
        p = Path(explicit)
        if not p.is_absolute():
            p = Path(config.invocation_params.dir) / p
        if not p.is_file():
            raise pytest.UsageError(f"attncheck: config file not found: {explicit}")
        return p.resolve()
    candidates: list[Path] = []
    if config.inipath is not None and config.inipath.name == "pyproject.toml":
        candidates.append(config.inipath)
    root = Path(config.rootpath)
    candidates += [d / "pyproject.toml" for d in (root, *root.parents)]
    for cand in candidates:
        if cand.is_file():
            try:
                table = _read_raw_table(cand)
            except Exception as exc:  # invalid TOML
                raise pytest.UsageError(f"attncheck: {cand}: {exc}") from exc
            if table is not None:
                return cand.resolve()
    return None


def _normalize_targets(raw: Any, where: str) -> list[tuple]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AttncheckConfigError(f"{where} targets: expected a list, got {type(raw).__name__}")
    out = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str):
            out.append((entry, {}, None, None, None))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("spec"), str):
            raise AttncheckConfigError(
                f"{where} targets[{i}]: expected a spec string (\"pkg.mod:factory\", "
                f"\"path/to/file.py:Name\") or an inline table with a 'spec' string, got "
                f"{entry!r}")
        hints = {k: v for k, v in entry.items() if k not in _TARGET_KEYS + ("device",)}
        # hints are validated when the target is resolved at collection, before it is imported:
        # a misspelt or invalid hint is that target's one collection error (with a did-you-mean)
        checks = entry.get("checks")
        devices = entry.get("devices")
        if devices is None and isinstance(entry.get("device"), str):
            devices = [entry["device"]]
        for key, val in (("checks", checks), ("devices", devices)):
            if val is not None and (not isinstance(val, list)
                                    or not all(isinstance(x, str) for x in val)):
                raise AttncheckConfigError(f"{where} targets[{i}].{key}: expected a list of "
                                           f"strings, got {val!r}")
        out.append((entry["spec"], hints, checks, devices, entry.get("id")))
    return out


def load_settings(config: pytest.Config) -> PytestSettings:
    """Read ``[tool.attncheck]`` for the plugin; raise :class:`pytest.UsageError` when invalid."""
    path = _find_config_file(config)
    if path is None:
        return PytestSettings(Path(config.rootpath), [], [], None, None)
    try:
        table = _read_raw_table(path) or {}
    except Exception as exc:
        raise pytest.UsageError(f"attncheck: {path}: {exc}") from exc
    where = f"{path}: [tool.attncheck]" if path.name == "pyproject.toml" else f"{path}:"
    lint_cfg = None
    try:
        from attncheck import config as cfgmod

        lint_cfg = cfgmod.load_config(path)
    except ImportError:  # pragma: no cover - config module always ships
        pass
    except Exception as exc:  # ConfigError
        raise pytest.UsageError(f"attncheck: {exc}") from exc
    lint = table.get("lint", [])
    if not isinstance(lint, list) or not all(isinstance(x, str) for x in lint):
        raise pytest.UsageError(f"attncheck: {where} lint: expected a list of strings")
    try:
        targets = _normalize_targets(table.get("targets"), where)
    except AttncheckConfigError as exc:
        raise pytest.UsageError(f"attncheck: {exc}") from exc
    return PytestSettings(path.parent, list(lint), targets, lint_cfg, str(path))


_SETTINGS_KEY = pytest.StashKey[PytestSettings]()
_SYSPATH_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: attncheck items (lint files and dynamic attention checks), collected with "
        "--attncheck; select them with -m attncheck")
    if not config.getoption("attncheck", default=False):
        return
    settings = load_settings(config)
    config.stash[_SETTINGS_KEY] = settings
    # Make "pkg.mod:factory" specs importable from the project directory (like pytest's
    # ``pythonpath`` ini option does), for the session only.
    root = str(settings.root)
    if root not in sys.path:
        sys.path.insert(0, root)
        config.stash[_SYSPATH_KEY] = root


def pytest_unconfigure(config: pytest.Config) -> None:
    root = config.stash.get(_SYSPATH_KEY, None)
    if root is not None and root in sys.path:
        sys.path.remove(root)


def _resolve_devices(config: pytest.Config, explicit: Sequence[str] | None) -> list[str]:
    opt = config.getoption("attncheck_device", default=None)
    if opt:
        devices = [d.strip() for d in opt.split(",") if d.strip()]
    elif explicit:
        devices = list(explicit)
    else:
        devices = ["auto"]
    out = []
    for d in devices:
        if d == "auto":
            d = _auto_device()
        if d not in out:
            out.append(d)
    return out


def _auto_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover
        return "cpu"


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if config.stash.get(_SETTINGS_KEY, None) is None:
        return None
    settings = config.stash[_SETTINGS_KEY]
    try:
        import torch

        torch_v = torch.__version__
    except Exception:  # pragma: no cover
        torch_v = "not installed"
    devices = ", ".join(_resolve_devices(config, None))
    prof, max_ex = _hypothesis_profile()
    where = os.path.relpath(settings.source, config.rootpath) if settings.source else "no config"
    return [f"attncheck: {__version__}, device: {devices}, torch {torch_v}, hypothesis profile "
            f"{prof!r} (max_examples={max_ex}), config: {where}"]


def _hypothesis_profile() -> tuple[str, int | None]:
    try:
        from hypothesis import settings as hsettings

        name = getattr(hsettings, "get_current_profile_name", lambda: hsettings._current_profile)()
        return str(name), int(hsettings.default.max_examples)
    except Exception:  # pragma: no cover - hypothesis is a dependency
        return "none", None


# ---------------------------------------------------------------------------------------------
# collection
# ---------------------------------------------------------------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    rep = yield
    if isinstance(collector, pytest.Session) and rep.passed:
        settings = collector.config.stash.get(_SETTINGS_KEY, None)
        if settings is not None and (settings.lint or settings.targets):
            rep.result.append(AttncheckCollector.from_parent(
                collector, name="attncheck", nodeid="attncheck", path=settings.root))
    return rep


def _default_checks() -> list[str]:
    """Names of the checks run when a target does not list its own: the registered checks of
    the default suite, in suite order (:func:`attncheck.dynamic.base.all_checks`)."""
    from attncheck.dynamic.base import all_checks

    return [name for name, spec in all_checks().items() if spec.default]


class AttncheckCollector(pytest.Collector):
    """The ``attncheck`` node: lint items, then check items, in configuration order."""

    def collect(self) -> Iterator[pytest.Item]:
        settings: PytestSettings = self.config.stash[_SETTINGS_KEY]
        seen: set[str] = set()
        for item in self._lint_items(settings):
            if item.nodeid not in seen:
                seen.add(item.nodeid)
                yield item
        if settings.targets:
            default_checks: list[str] | None = None
            only = self.config.getoption("attncheck_checks", default=None)
            for spec, hints, checks, devices, tid in settings.targets:
                if only:
                    checks = [c.strip() for c in only.split(",") if c.strip()]
                elif checks is None:
                    if default_checks is None:
                        default_checks = _default_checks()
                    checks = default_checks
                label = tid or spec
                nodeid = f"attncheck::{label}"
                if nodeid in seen:
                    continue
                seen.add(nodeid)
                yield TargetCollector.from_parent(
                    self, name=label, nodeid=nodeid, path=_spec_file(spec, settings),
                    spec=spec, label=label, checks=list(checks),
                    devices=_resolve_devices(self.config, devices), hints=dict(hints),
                    settings=settings)

    def _lint_items(self, settings: PytestSettings) -> Iterator[pytest.Item]:
        from attncheck.lint import discovery

        cfg = settings.lint_config
        exclude = list(getattr(cfg, "exclude", []) or [])
        for entry in settings.lint:
            p = Path(entry)
            if not p.is_absolute():
                p = settings.root / p
            errors: list[str] = []
            try:
                sources = discovery.discover(str(p), exclude, settings.root, errors)
            except discovery.PathNotFound:
                yield LintItem.from_parent(self, name=f"lint::{entry}",
                                           nodeid=f"attncheck::lint::{entry}", path=p,
                                           display=entry, missing=True)
                continue
            except discovery.PathError as exc:  # a symlink loop, an unreadable directory, a FIFO
                errors, sources = [str(exc)], []
            for i, err in enumerate(errors):  # reported, never silently skipped
                yield LintItem.from_parent(self, name=f"lint::{entry}::error{i}",
                                           nodeid=f"attncheck::lint::{entry}::error{i}", path=p,
                                           display=entry, missing=True, reason=err)
            for src in sources:
                rel = _relpath(Path(src.display), settings.root)
                yield LintItem.from_parent(self, name=f"lint::{rel}",
                                           nodeid=f"attncheck::lint::{rel}", path=src.path,
                                           display=rel, missing=False)


#: target-table keys that are options of the run, not hints of the target
_RUN_OPTIONS = ("dtype", "seed", "max_examples", "timeout", "train")


class TargetCollector(pytest.Collector):
    """One configured target: its spec is resolved once here (import, build, hints), so a spec
    that cannot be resolved is one collection error naming the spec and the reason, not a
    failing item per check.  Yields one :class:`CheckItem` per (check, device)."""

    def __init__(self, *, spec: str, label: str, checks: list[str], devices: list[str],
                 hints: dict, settings: PytestSettings, **kw: Any) -> None:
        super().__init__(**kw)
        self.spec, self.label, self.checks, self.devices = spec, label, checks, devices
        self.hints, self.settings = hints, settings

    def collect(self) -> Iterator[pytest.Item]:
        from attncheck.dynamic.spec import SpecError, resolve
        from attncheck.dynamic.targets import TargetError

        hints = {k: v for k, v in self.hints.items() if k not in _RUN_OPTIONS}
        try:  # hints are checked first: a misspelt one imports nothing
            resolve(resolve_spec(self.spec, self.settings.root), **hints)
        except (SpecError, TargetError) as exc:
            where = f" ({self.settings.source})" if self.settings.source else ""
            raise self.CollectError(
                f"attncheck: cannot resolve target {self.spec!r}{where}: {exc}") from None
        for check in self.checks:
            for device in self.devices:
                yield CheckItem.from_parent(
                    self, name=f"{check}[{device}]",
                    nodeid=f"attncheck::{self.label}::{check}[{device}]", path=self.path,
                    spec=self.spec, label=self.label, check=check, device=device,
                    hints=dict(self.hints), root=str(self.settings.root))


def _spec_file(spec: str, settings: PytestSettings) -> Path:
    """The file a check item reports as its location: the target's file for a path spec, else
    the configuration file."""
    resolved = resolve_spec(spec, settings.root)
    path, sep, _ = resolved.rpartition(":")
    if sep and path.endswith(".py") and Path(path).is_file():
        return Path(path)
    return Path(settings.source) if settings.source else settings.root


def _relpath(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


# ---------------------------------------------------------------------------------------------
# items
# ---------------------------------------------------------------------------------------------

class AttncheckFailure(Exception):
    """Raised by an item's ``runtest``; the text is the failure report."""


class LintItem(pytest.Item):
    """Lint one file; fails with the findings in ``attncheck lint``'s concise format."""

    def __init__(self, *, display: str, missing: bool, reason: str | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.display = display
        self.missing = missing
        self.reason = reason
        self.add_marker(MARKER)

    def runtest(self) -> None:
        if self.missing and self.reason:
            raise AttncheckFailure(f"attncheck: cannot lint {self.reason} (from [tool.attncheck] "
                                   "lint)")
        if self.missing:
            raise AttncheckFailure(f"attncheck: lint path not found: {self.display} "
                                   f"(from [tool.attncheck] lint)")
        settings: PytestSettings = self.config.stash[_SETTINGS_KEY]
        findings = _lint_file(self.path, _display_path(self.path), settings.lint_config)
        if findings:
            raise AttncheckFailure(_format_findings(findings))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None):
        if isinstance(excinfo.value, AttncheckFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"attncheck lint {self.display}"


def _display_path(path: Path) -> str:
    """The path as ``attncheck lint`` run from the current directory prints it (relative when
    the file is below it)."""
    try:
        rel = Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return str(path)
    return rel.as_posix()


def _lint_file(path: Path, display: str, cfg: Any) -> list:
    """Findings for one file with the project's lint settings (select / ignore /
    per-file-ignores, suppression comments), exactly as ``attncheck lint <display>`` run from the
    current directory reports them.  A file that cannot be read fails with the engine's error."""
    from attncheck.lint.engine import lint_paths

    result = lint_paths([display], config=cfg)
    if result.errors:
        raise AttncheckFailure("\n".join(result.errors))
    return list(result.findings)


def _format_findings(findings: Sequence[Any]) -> str:
    """The CLI's concise format (``path:line:col: CODE message``, 1-based column)."""
    from attncheck.lint.formatters import format_concise

    return format_concise(list(findings)).rstrip("\n")


class CheckItem(pytest.Item):
    """Run one dynamic check of one target on one device."""

    def __init__(self, *, spec: str, label: str, check: str, device: str, hints: dict,
                 root: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.spec = spec
        self.label = label
        self.check_name = check
        self.device = device
        self.hints = hints
        self.root = root
        self.add_marker(MARKER)

    def _resolved_spec(self) -> str:
        return resolve_spec(self.spec, Path(self.root))

    def runtest(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                pytest.skip(f"device {self.device} not available (torch.cuda.is_available() is "
                            f"False)")
        try:
            report = run_check(self._resolved_spec(), [self.check_name], self.device,
                               self.hints, label=self.label)
        except Exception as exc:  # bad spec, unknown check or hint: the target never ran
            raise AttncheckFailure(
                f"attncheck: cannot run check {self.check_name!r} on {self.label} "
                f"[{self.device}]: {type(exc).__name__}: {exc}") from exc
        results = [r for r in report.results if r.check == self.check_name] or report.results
        self.user_properties.append(("attncheck_report", _json(report)))
        bad = [r for r in results if r.status in ("fail", "error")]
        if bad:
            raise AttncheckFailure(format_report_failure(report, bad, label=self.label))
        for r in results:
            if r.status == "warn":
                warnings.warn(AttncheckWarning(f"{self.label} {r.check}: {r.message}"),
                              stacklevel=1)
        if results and all(r.status == "skip" for r in results):
            reason = f"{self.check_name}: {results[0].message}"
            try:  # report the item's location, not this file's, as @pytest.mark.skip does
                raise pytest.skip.Exception(reason, _use_item_location=True)
            except TypeError:  # pragma: no cover - older pytest
                pytest.skip(reason)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None):
        if isinstance(excinfo.value, AttncheckFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"attncheck {self.label} {self.check_name}[{self.device}]"


def _json(report: Any) -> str:
    import json

    try:
        return json.dumps(report.to_dict(), default=str, allow_nan=True)
    except Exception:  # pragma: no cover
        return "{}"


def resolve_spec(spec: str, root: Path) -> str:
    """Make a ``path/to/file.py:Name`` spec absolute (relative paths are relative to ``root``,
    the pyproject's directory); ``pkg.mod:NAME`` specs are returned unchanged."""
    path, sep, name = spec.rpartition(":")
    if not sep:
        return spec
    if path.endswith(".py") or "/" in path or os.sep in path:
        p = Path(path)
        if not p.is_absolute():
            p = root / p
        return f"{p}:{name}"
    return spec


def run_check(target: Any, checks: Sequence[str] | None, device: str, hints: dict,
              label: str | None = None, max_examples: int | None = None, seed: int | None = None,
              dtype: Any = None) -> Any:
    """Call :func:`attncheck.dynamic.runner.check` with the active hypothesis profile's
    ``max_examples`` (unless given)."""
    from attncheck.dynamic.runner import check

    hints = dict(hints)
    dtype = hints.pop("dtype", dtype)
    seed = hints.pop("seed", seed)
    max_examples = hints.pop("max_examples", max_examples)
    if max_examples is None:
        _prof, max_examples = _hypothesis_profile()
    with hypothesis_storage_outside_project():
        return check(target, checks=list(checks) if checks else None, device=device,
                     dtype=dtype, seed=seed, max_examples=max_examples, **hints)


from attncheck._hypothesis_home import hypothesis_storage_outside_cwd as hypothesis_storage_outside_project  # noqa: E402


# ---------------------------------------------------------------------------------------------
# failure text
# ---------------------------------------------------------------------------------------------

def _fmt_num(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.4g}"
    return str(v)


def _is_matrix(v: Any) -> bool:
    return (isinstance(v, (list, tuple)) and len(v) > 0
            and all(isinstance(r, (list, tuple)) for r in v)
            and all(isinstance(x, (int, float, bool)) for r in v for x in r))


def _render_map(m: Sequence[Sequence[Any]], limit: int = 32) -> list[str]:
    """A 0/1 (or numeric) query × key map as text: ``X`` where non-zero, ``.`` where zero."""
    rows = len(m)
    cols = max((len(r) for r in m), default=0)
    lines = ["      key → " + "".join(str(j % 10) for j in range(min(cols, limit)))
             + (" …" if cols > limit else "")]
    for i, r in enumerate(m[:limit]):
        cells = "".join("X" if (x != 0 or math.isnan(x)) else "." for x in r[:limit])
        lines.append(f"  q {i:>4} " + cells + (" …" if len(r) > limit else ""))
    if rows > limit:
        lines.append(f"  … {rows - limit} more rows")
    return lines


def format_report_failure(report: Any, results: Sequence[Any] | None = None,
                          label: str | None = None) -> str:
    """Plain-text failure report for failed / errored check results of ``report``.

    Shows, per result: the check, its status and message, the numbers behind it (metrics), a
    leak map or other query × key maps as a grid, the smallest failing example and how to
    reproduce it (``details``).
    """
    if results is None:
        results = [r for r in report.results if r.status in ("fail", "error")]
    total = len(report.results)
    head = (f"attncheck: {len(results)} of {total} check(s) failed for {label or report.target} "
            f"(device {report.device}, dtype {report.dtype})")
    lines = [head]
    for r in results:
        lines.append("")
        lines.append(f"{r.check}: {r.status.upper()} — {r.message}")
        metrics = dict(r.metrics or {})
        maps = {k: v for k, v in metrics.items() if _is_matrix(v)}
        scalars = {k: v for k, v in metrics.items() if k not in maps}
        for k, v in scalars.items():
            if isinstance(v, (int, float, bool, str)) or v is None:
                lines.append(f"    {k} = {_fmt_num(v)}")
            else:
                text = repr(v)
                if len(text) > 200:
                    text = text[:197] + "..."
                lines.append(f"    {k} = {text}")
        for k, v in maps.items():
            label = k.replace("_", " ")
            lines.append(f"    {label} (query ↓ × key →; X = dependence/violation):")
            lines.extend("    " + s for s in _render_map(v))
        if r.details:
            lines.append("    " + r.details.strip().replace("\n", "\n    "))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# fixture
# ---------------------------------------------------------------------------------------------

class AttncheckFixture:
    """The ``attncheck`` fixture: run attncheck inside your own tests.

    - ``check(target, checks=None, **hints) -> Report``: run the dynamic checks (same arguments as
      :func:`attncheck.check`; ``device`` defaults to ``--attncheck-device`` or ``"auto"``,
      ``max_examples`` to the active hypothesis profile's).
    - ``assert_ok(target, checks=None, **hints) -> Report``: the same, raising
      :class:`AssertionError` whose message lists every failed check with its numbers, leak map
      and smallest failing example.  Warnings and skips do not fail.
    - ``lint(path, select=None, ignore=None) -> list[Finding]``: lint a file or directory with
      the nearest ``[tool.attncheck]`` settings (as ``attncheck lint PATH``); a missing path
      raises :class:`FileNotFoundError`.
    - ``assert_lint_clean(path)``: raise :class:`AssertionError` listing the findings.

    Example::

        def test_my_attention(attncheck):
            attncheck.assert_ok(MyAttention(d_model=64, num_heads=4), causal=True)
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def _device(self, device: str | None) -> str:
        if device is not None:
            return device
        opt = self._config.getoption("attncheck_device", default=None)
        if opt:
            return opt.split(",")[0].strip()
        return "auto"

    def check(self, target: Any, checks: Sequence[str] | str | None = None, *,
              device: str | None = None, dtype: Any = None, seed: int | None = None,
              max_examples: int | None = None, **hints: Any) -> Any:
        if isinstance(checks, str):
            checks = [c.strip() for c in checks.split(",") if c.strip()]
        if isinstance(target, str):
            target = resolve_spec(target, Path(self._config.rootpath))
        return run_check(target, checks, self._device(device), hints, max_examples=max_examples,
                         seed=seed, dtype=dtype)

    def assert_ok(self, target: Any, checks: Sequence[str] | str | None = None, **kw: Any) -> Any:
        __tracebackhide__ = True
        report = self.check(target, checks, **kw)
        bad = [r for r in report.results if r.status in ("fail", "error")]
        if bad:
            raise AssertionError(format_report_failure(report, bad))
        return report

    def lint(self, path: str | os.PathLike, select: Sequence[str] | None = None,
             ignore: Sequence[str] | None = None) -> list:
        from attncheck.lint.engine import lint_paths

        result = lint_paths([str(path)], select=select, ignore=ignore)
        if result.errors:
            raise FileNotFoundError("; ".join(result.errors))
        return list(result.findings)

    def assert_lint_clean(self, path: str | os.PathLike, select: Sequence[str] | None = None):
        __tracebackhide__ = True
        findings = self.lint(path, select=select)
        if findings:
            raise AssertionError(_format_findings(findings))


@pytest.fixture
def attncheck(request: pytest.FixtureRequest) -> AttncheckFixture:
    """Run attncheck's dynamic checks and linter inside a test; see :class:`AttncheckFixture`."""
    return AttncheckFixture(request.config)
