"""``attncheck.audit(spec)``: lint the model's own source, build it, run the model-level checks.

The result is an :class:`AuditReport` (a :class:`~attncheck.results.Report`): ``results`` holds
one :class:`~attncheck.results.CheckResult` per check and dispatch variant (``"causality[eager]"``,
``"causality[sdpa]"``, ``"backend-agreement"``, ``"lint"``); ``extra`` adds the sections
``"kind": "audit"``, ``"model"`` (what was built), ``"variants"``, ``"layers"`` (per attention map)
and ``"lint"`` (files and findings).  Attention maps and leak maps for the HTML report live in
:attr:`AuditReport.arrays` and are not serialised.

Every check is isolated: a model that fails to build gives an ``error`` result named ``build``
with the reason; a check that raises gives an ``error`` result with the reason; the other checks
still run.  The model's parameters, buffers and RNG state are restored afterwards
(:func:`attncheck.dynamic.state.preserved`).
"""
from __future__ import annotations

import ast
import inspect
import os
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from attncheck.results import CheckResult, Report

DEFAULT_TIMEOUT = 60.0  # seconds per check, as attncheck check
AUDIT_CHECKS = ("lint", "causality", "padding", "batch-independence", "kv-cache", "backend-agreement",
                "normalization", "saturation", "scale", "mask-pattern", "gqa")


@dataclass
class AuditReport(Report):
    """A :class:`Report` with the arrays behind the HTML heatmaps (not in ``to_dict()``).

    ``arrays[variant_label]`` = ``{"maps": [(layer, kind, probs (H, L_q, L_k) float32)],
    "leak": {path: Δ (L, L) float32, query × key}}``.
    """

    arrays: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def _select(checks: Iterable[str] | str | None) -> list[str]:
    if checks is None:
        return list(AUDIT_CHECKS)
    if isinstance(checks, str):
        checks = [c.strip() for c in checks.split(",") if c.strip()]
    checks = list(checks)
    unknown = [c for c in checks if c not in AUDIT_CHECKS]
    if unknown:
        raise ValueError(f"unknown audit check(s): {', '.join(unknown)}; known: {', '.join(AUDIT_CHECKS)}")
    return checks


def source_files(objects: Iterable[Any]) -> list[str]:
    """Source files (``inspect.getsourcefile``) of the given classes / functions / modules,
    excluding PyTorch's own files (``torch/``) unless only those exist, deduplicated, sorted."""
    files: set[str] = set()
    for obj in objects:
        try:
            f = inspect.getsourcefile(obj)
        except (TypeError, OSError):
            continue
        if f and os.path.isfile(f):
            files.add(os.path.abspath(f))
    torch_dir = None
    try:
        import torch

        torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    except Exception:  # pragma: no cover
        pass
    own = sorted(f for f in files if not (torch_dir and f.startswith(torch_dir)))
    return own or sorted(files)


def _bound_names(stmt: ast.stmt) -> set[str]:
    """Names a module-level statement binds (def / class name, assignment targets, imports)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _used_names(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def reached_lines(path: str, seeds: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Line ranges of ``path`` (1-based, inclusive) reached from the ``seeds`` ranges (the source
    of the audited classes / functions): the seeds themselves plus every module-level statement
    that binds a name the reached code reads, transitively (helper functions, mask builders,
    constants, imports).  Read statically (``ast``), never executed.  An unparsable file gives
    ``[(1, last line)]``: the whole file."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [(1, max(1, text.count("\n") + 1))]
    top = list(tree.body)

    def inside(stmt: ast.stmt, ranges: list[tuple[int, int]]) -> bool:
        end = stmt.end_lineno or stmt.lineno
        return any(a <= stmt.lineno and end <= b for a, b in ranges)

    seed_nodes = [n for st in top for n in ast.walk(st)
                  if isinstance(n, ast.stmt) and inside(n, seeds)]
    ranges = list(seeds)
    wanted = _used_names(seed_nodes)
    reached: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, st in enumerate(top):
            if i in reached or inside(st, seeds) or not (_bound_names(st) & wanted):
                continue
            reached.add(i)
            ranges.append((st.lineno, st.end_lineno or st.lineno))
            wanted |= _used_names([st])
            changed = True
    return sorted(ranges)


def source_scopes(objects: Iterable[Any]) -> dict[str, list[tuple[int, int]] | None]:
    """Per source file of :func:`source_files`, the line ranges the audited objects reach
    (:func:`reached_lines`), or None for the whole file (a module object, or a source the line
    range of which cannot be found)."""
    objects = list(objects)
    files = source_files(objects)
    seeds: dict[str, list[tuple[int, int]] | None] = {f: [] for f in files}
    for obj in objects:
        try:
            f = os.path.abspath(inspect.getsourcefile(obj) or "")
        except (TypeError, OSError):
            continue
        if f not in seeds or seeds[f] is None:
            continue
        if inspect.ismodule(obj):
            seeds[f] = None
            continue
        try:
            lines, start = inspect.getsourcelines(obj)
        except (TypeError, OSError):
            seeds[f] = None
            continue
        seeds[f].append((max(start, 1), max(start, 1) + len(lines) - 1))
    return {f: (None if r is None or not r else reached_lines(f, r)) for f, r in seeds.items()}


_LINT_CACHE: dict[tuple[str, int, int], tuple[list[Any], list[str]]] = {}


def _lint_file(path: str) -> tuple[list[Any], list[str]]:
    """Findings and errors for one file, cached in-process by (path, mtime, size)."""
    from attncheck.lint import engine

    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _LINT_CACHE:
        res = engine.lint_paths([path], isolated=True)
        _LINT_CACHE[key] = (list(res.findings), list(res.errors))
    return _LINT_CACHE[key]


def run_lint(files: list[str], scopes: dict[str, list[tuple[int, int]] | None] | None = None,
             ) -> tuple[CheckResult, dict[str, Any]]:
    """Lint ``files`` with the default rules (no project config: ``isolated``); return the
    ``lint`` result and the JSON section.  With ``scopes`` (:func:`source_scopes`), only
    findings inside a file's ranges count (a sibling class in the same file is not the audited
    model); the others are counted as ``outside_scope``.  Results are cached per file within the
    process."""
    t = time.perf_counter()
    findings, errors = [], []
    outside = 0
    for f in files:
        fs, es = _lint_file(f)
        ranges = (scopes or {}).get(f)
        if ranges is not None:
            kept = [x for x in fs if any(a <= x.line <= b for a, b in ranges)]
            outside += len(fs) - len(kept)
            fs = kept
        findings += fs
        errors += es
    dt = time.perf_counter() - t
    items = [{"path": f.path, "line": f.line, "col": f.col, "code": f.code, "name": f.name,
              "severity": f.severity, "message": f.message} for f in findings]
    by_sev: dict[str, int] = {}
    for f in findings:
        by_sev[f.severity] = by_sev.get(f.severity, 0) + 1
    section = {"files": files, "findings": items, "counts": by_sev, "errors": errors,
               "outside_scope": outside, "seconds": round(dt, 4)}
    metrics = {"files": len(files), "findings": len(items), "by_severity": by_sev}
    if outside:
        metrics["outside_scope"] = outside
    if not files:
        return CheckResult("lint", "skip", "no Python source found for the model's classes", metrics), section
    codes = sorted({f.code for f in findings})
    if by_sev.get("error"):
        status = "fail"
    elif findings:
        status = "warn"
    else:
        status = "pass"
    msg = (f"{len(items)} finding(s) in {len(files)} file(s): {', '.join(codes)}" if items
           else f"no findings in {len(files)} source file(s)")
    return CheckResult("lint", status, msg, metrics), section


def _error(check: str, exc: BaseException, variant: str | None = None,
           timeout: float | None = None) -> CheckResult:
    """The result of a check (or the build) that raised: ``error`` with the reason; a time limit
    that ran out and a model output holding no tensor say so; NaN/inf outputs are a ``fail``
    naming the positions (:class:`~attncheck.audit.checks.NonFiniteOutput`)."""
    from attncheck.audit.checks import NonFiniteOutput
    from attncheck.dynamic.base import CheckTimeout
    from attncheck.dynamic.targets import TargetOutputError

    name = f"{check}[{variant}]" if variant else check
    metrics: dict[str, Any] = {"variant": variant} if variant else {}
    if isinstance(exc, CheckTimeout):
        what = "building the model" if check == "build" else "this check"
        return CheckResult(name, "error", f"timed out after {timeout:g} s: the model hung or is too "
                           f"slow for {what} (raise the limit with --timeout / timeout=)",
                           dict(metrics, timeout_s=timeout))
    if isinstance(exc, NonFiniteOutput):
        return CheckResult(name, "fail", exc.message(check), dict(metrics, **exc.metrics()))
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    status = "fail" if isinstance(exc, TargetOutputError) else "error"
    return CheckResult(name, status, f"{type(exc).__name__}: {exc}{where}", metrics,
                       details="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:])


def _guarded(fn: Callable[[], Any], timeout: float | None) -> Any:
    """``fn()`` under the time limit of ``attncheck check`` (SIGALRM on the main thread, else an
    abandoned worker thread): :func:`attncheck.dynamic.runner.run_with_time_limit`."""
    from attncheck.dynamic.runner import run_with_time_limit

    return run_with_time_limit(fn, timeout, "attncheck-audit")


def _designed(res: CheckResult, name: str, m: Any, ctx: Any, timeout: float | None) -> CheckResult:
    """``res`` as ``warn`` with the reason when the failure is the model's declared design
    (:func:`attncheck.audit.expect.by_design`), else ``res`` unchanged."""
    from attncheck.audit.expect import by_design
    from attncheck.dynamic.base import CheckTimeout

    try:
        why = _guarded(lambda: by_design(name, m, ctx), timeout)
    except (Exception, CheckTimeout):  # noqa: BLE001 - no fact read: the failure stands
        return res
    if not why:
        return res
    return CheckResult(res.check, "warn", f"by the model's design: {why} ({res.message})",
                       dict(res.metrics, by_design=why), res.details, res.device)


def _run_checks(models, selected, ctx, report: AuditReport, step, timeout: float | None = None) -> None:
    from attncheck.audit import checks as C
    from attncheck.audit.hf import Unsupported
    from attncheck.dynamic.base import CheckTimeout

    for m in models:
        for name, fn in C.PER_VARIANT.items():
            if name not in selected:
                continue
            step(f"{name}[{m.variant}]" if m.variant else name)
            t = time.perf_counter()
            try:
                res = _guarded(lambda fn=fn, m=m: fn(m, ctx), timeout)
            except (C.NotComparable, Unsupported) as exc:  # the model's outputs do not fit the check
                res = CheckResult(f"{name}[{m.variant}]" if m.variant else name, "skip",
                                  f"not applicable: {exc}", {"variant": m.variant} if m.variant else {})
            except (Exception, CheckTimeout) as exc:  # noqa: BLE001 - isolate every check
                res = _error(name, exc, m.variant, timeout)
            if res.status == "fail" and not res.metrics.get("non_finite"):
                res = _designed(res, name, m, ctx, timeout)
            report.results.append(res)
            report.timings[res.check] = time.perf_counter() - t
        if (m.label in ctx.probe_cache or ("low_precision_ops", m.label) in ctx.probe_cache
                or ctx.softmax_nan.get(m.label)):
            # the checks that ran saw the forward: name a softmax / operator dtype below the model's
            try:
                note = _guarded(lambda m=m: C.softmax_dtype_result(m, ctx), timeout)
            except (Exception, CheckTimeout):  # noqa: BLE001 - informative only
                note = None
            if note is not None:
                report.results.append(note)
        try:
            report.extra["layers"] += _guarded(lambda m=m: C.layer_summaries(m, ctx), timeout)
        except (Exception, CheckTimeout):  # noqa: BLE001 - the per-layer table is informative only
            pass
    for name, fn in C.CROSS_VARIANT.items():
        if name not in selected:
            continue
        step(name)
        t = time.perf_counter()
        try:
            res = _guarded(lambda fn=fn: fn(models, ctx), timeout)
        except (C.NotComparable, Unsupported) as exc:
            res = CheckResult(name, "skip", f"not applicable: {exc}")
        except (Exception, CheckTimeout) as exc:  # noqa: BLE001
            res = _error(name, exc, timeout=timeout)
        report.results.append(res)
        report.timings[name] = time.perf_counter() - t


#: hints (:data:`attncheck.dynamic.hints.HINTS`) that ``attncheck audit`` applies to the models
#: it builds; they override what the family / module declares
AUDIT_HINTS = ("causal", "num_heads", "num_kv_heads", "num_key_value_heads", "head_dim", "scale",
               "softmax_scale", "window", "pattern", "mask_pattern")


def audit_hints(hints: dict[str, Any] | None, causal: bool | None = None) -> dict[str, Any]:
    """Validate ``hints`` (and ``causal``) for the audit: known to the registry (else a
    "did you mean"), valid values, and one of :data:`AUDIT_HINTS`.  Raises ``ValueError``
    (:class:`~attncheck.dynamic.hints.HintError`)."""
    from attncheck.dynamic.hints import HintError, validate_hints

    h = validate_hints(dict(hints or {}))
    unused = [k for k in h if k not in AUDIT_HINTS]
    if unused:
        raise HintError(f"hint {unused[0]!r} is not used by attncheck audit (it applies to "
                        f"attncheck check targets); audit hints: {', '.join(AUDIT_HINTS)}")
    if causal is not None:
        h["causal"] = causal
    return {k: v for k, v in h.items() if v is not None}


def _declared_window(h: dict[str, Any]) -> tuple[str | None, int | None]:
    mp = h.get("mask_pattern")
    kind, w = (mp.get("kind", mp.get("pattern")), mp.get("window")) if isinstance(mp, dict) else (mp, None)
    kind = kind or h.get("pattern")
    w = w if w is not None else h.get("window")
    if kind in ("sliding-window", "local", "sliding"):
        kind = "sliding_window"
    if kind is None and w is not None:
        kind = "sliding_window"
    return kind, w


def apply_hints(m: Any, h: dict[str, Any]) -> None:
    """Override an :class:`~attncheck.audit.model.AuditModel`'s declared facts with audit hints
    (see :data:`AUDIT_HINTS`); ``m.info["hints"]`` records them."""
    if not h:
        return
    m.info = dict(m.info, hints=dict(h))
    kind, w = _declared_window(h)
    if kind is not None:
        m.expected_pattern_fn = None  # the declared pattern replaces the family's per-layer one
        if kind == "full":
            m.causal, m.sliding_window = False, None
        elif kind == "causal":
            m.causal, m.sliding_window = True, None
        else:
            m.causal, m.sliding_window = True, w
    if "causal" in h:
        m.causal = h["causal"]
    if "num_heads" in h:
        m.num_heads = h["num_heads"]
    kv = h.get("num_kv_heads", h.get("num_key_value_heads"))
    if kv is not None:
        m.num_kv_heads = kv
    if "head_dim" in h:
        m.head_dim = h["head_dim"]
        m.expected_scale = h["head_dim"] ** -0.5
    scale = h.get("scale", h.get("softmax_scale"))
    if isinstance(scale, str) and scale != "learned":
        scale = float(scale)
    if scale == "learned":
        m.expected_scale, m.scale_note = None, "learned temperature (hint scale=learned)"
    elif scale is not None:
        m.expected_scale, m.scale_note = float(scale), f"given (hint scale={scale:g})"


def audit(spec: str, checks: Iterable[str] | str | None = None, device: str = "cpu", seed: int = 0,
          progress: Callable[[str], None] | None = None,
          config: dict[str, Any] | None = None, *, timeout: float | None = DEFAULT_TIMEOUT,
          causal: bool | None = None, hints: dict[str, Any] | None = None,
          dtype: str = "float32") -> AuditReport:
    """Audit one model.

    Args:
        spec: ``hf:gpt2``, ``xt:decoder``, ``torch:MultiheadAttention``, ``timm:<name>``,
            ``package.module:factory`` or ``path/to/file.py:factory`` (see
            :mod:`attncheck.audit.families`), or an already built ``nn.Module``.
        checks: subset of :data:`AUDIT_CHECKS` (names or a comma-separated string); default all.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when available).
        seed: seeds the random weights' inputs and perturbations (the weights are built with
            ``torch.manual_seed(0)``).
        progress: called with a short label before each step (the CLI's progress bar).
        config: transformers config overrides for ``hf:`` specs (e.g. ``{"sliding_window": 8}``).
        timeout: seconds per check and for building the model (None or 0 = unlimited), with the
            mechanism of ``attncheck check`` (:func:`attncheck.dynamic.runner.run_with_time_limit`):
            a model that hangs gives an ``error`` result "timed out after N s" and the audit goes
            on.
        causal: declare the checked self-attention causal (True) or bidirectional (False),
            overriding the family / module; None = as declared, else inferred like ``check``
            (``config.is_causal`` / ``is_decoder``, SDPA ``is_causal=True`` or a triangular mask
            seen by the probe, a causal dependency pattern).
        hints: :data:`AUDIT_HINTS` from the hint registry (``num_kv_heads``, ``scale``,
            ``window``, ...), overriding the declared facts.
        dtype: ``float32`` (default), ``float64``, ``float16`` or ``bfloat16``: the whole ``hf:``
            model runs in it; tolerances follow the dtype's noise (see :mod:`attncheck.audit.checks`).

    Returns:
        :class:`AuditReport`; ``report.ok`` is False when any check failed or errored.

    Raises:
        attncheck.audit.families.UnknownSpec: unknown family or model (the CLI exits 2).
        ValueError: unknown check name; ``config`` or ``dtype`` with a non-``hf:`` spec; an
            unknown or unavailable device (``"cuda"`` without CUDA, the message of ``attncheck
            check``); an unknown, invalid or audit-unrelated hint.
    """
    import torch

    from attncheck.dynamic.runner import resolve_device

    selected = _select(checks)
    if config and not (isinstance(spec, str) and spec.startswith("hf:")):
        raise ValueError("config overrides apply to hf: specs only")
    if dtype != "float32" and not (isinstance(spec, str) and spec.startswith("hf:")):
        raise ValueError("--dtype applies to hf: specs only")
    device = str(resolve_device(device))
    overrides = audit_hints(hints, causal)
    timeout = timeout if timeout and timeout > 0 else None
    label = spec if isinstance(spec, str) else type(spec).__name__
    report = AuditReport(target=label, device=device, dtype=dtype)
    report.extra = {"kind": "audit", "model": {}, "variants": [], "layers": [], "lint": None}
    step = progress or (lambda s: None)

    if isinstance(spec, torch.nn.Module):
        from attncheck.dynamic.state import preserved

        with preserved(spec):  # eval() below and the checks leave the user's module as it was
            return _audit(spec, selected, device, seed, step, report, label, None, timeout, overrides,
                          dtype)
    return _audit(spec, selected, device, seed, step, report, label, config, timeout, overrides, dtype)


def _audit(spec, selected, device, seed, step, report: AuditReport, label: str, config,
           timeout: float | None = None, overrides: dict[str, Any] | None = None,
           dtype: str = "float32") -> AuditReport:
    import torch

    from attncheck.audit import checks as C
    from attncheck.audit import families as F
    from attncheck.audit.hf import Unsupported
    from attncheck.dynamic.base import CheckTimeout

    t0 = time.perf_counter()
    step("build")
    try:
        if isinstance(spec, torch.nn.Module):
            models = [F.adapt_module(label, spec.eval())]
        else:
            F.preload(spec)  # imports are not the model's build time
            models = _guarded(lambda: F.build(spec, device=device, config=config, dtype=dtype), timeout)
    except F.UnknownSpec:
        raise
    except Unsupported as exc:  # a model type the audit cannot build tiny: not a finding
        report.results.append(CheckResult("build", "skip", f"unsupported: {exc}"))
        report.extra["unsupported"] = str(exc)
        return report
    except F.FamilyUnavailable as exc:
        msg = str(exc)
        report.results.append(CheckResult("build", "skip", msg if msg.startswith("skipped") else f"skipped: {msg}"))
        report.extra["unavailable"] = msg  # the family's package is missing: nothing was audited
        return report
    except (Exception, CheckTimeout) as exc:  # noqa: BLE001 - a model that fails to build is an error result
        report.results.append(_error("build", exc, timeout=timeout))
        return report
    for m in models:
        apply_hints(m, overrides or {})
    report.timings["build"] = time.perf_counter() - t0
    info = {k: v for k, v in models[0].info.items() if k != "attn_implementation"}  # per variant
    report.extra["model"] = dict(info, kind=models[0].kind, causal=models[0].causal, spec=label)
    report.extra["variants"] = [m.variant for m in models]

    if "lint" in selected:
        step("lint")
        t = time.perf_counter()
        try:
            objs = [o for m in models for o in m.source_objects]
            scopes = source_scopes(objs)
            res, section = run_lint(list(scopes), scopes)
            report.results.append(res)
            report.extra["lint"] = section
        except Exception as exc:  # noqa: BLE001
            report.results.append(_error("lint", exc))
        report.timings["lint"] = time.perf_counter() - t

    from attncheck.dynamic.runner import single_thread_for_small_models
    from attncheck.dynamic.state import preserved

    ctx = C.AuditContext(seed=seed, device=device, dtype=models[0].dtype)
    # tiny models: threads only add overhead (measured 15 ms vs 500 ms per tiny GPT-2 forward
    # on a loaded 2-core machine)
    with preserved(models[0].module), \
            single_thread_for_small_models([m.module for m in models], device):
        torch.manual_seed(seed)
        _run_checks(models, selected, ctx, report, step, timeout)
    report.arrays = ctx.arrays
    report.timings["total"] = time.perf_counter() - t0
    return report


def reports_to_dict(reports: list[AuditReport]) -> dict[str, Any]:
    """JSON document for one or several audits (see ``scratch/readme/audit.md``).

    One audit: the report itself.  Several: ``{"version": 1, "kind": "audit-set", "reports":
    [...], "results": [... each with "target"]}``.
    """
    from attncheck.results import REPORT_VERSION

    if len(reports) == 1:
        return reports[0].to_dict()
    flat = []
    for r in reports:
        for res in r.results:
            flat.append({"target": r.target, **res.to_dict()})
    return {"version": REPORT_VERSION, "kind": "audit-set", "reports": [r.to_dict() for r in reports],
            "results": flat}
