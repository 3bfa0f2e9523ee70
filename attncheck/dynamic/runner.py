"""Run dynamic checks on a target: ``attncheck.check(target, ...) -> Report``.

Isolation.  Every check runs on its own:

- the target's module is moved to the device / dtype and put in **eval mode** (``train=False``,
  the default; dropout off — say ``train=True`` to run in training mode) inside a snapshot that
  is restored afterwards (:mod:`attncheck.dynamic.state`): parameters, buffers, grads,
  ``requires_grad`` flags, training flags, RNG states, grad mode, default dtype and the
  TorchFunctionMode / TorchDispatchMode stacks are exactly as before, also when the check raises
  or times out;
- the seed is set before each check (:func:`manual_seed`; the RNG states are restored after);
- an exception becomes an ``"error"`` result with the reason (a
  :class:`~attncheck.dynamic.targets.TargetOutputError` — wrong return type — a ``"fail"``);
  the other checks still run.

Time limit (``timeout`` seconds per check, default 60). On the main thread of a POSIX process the
limit is pre-emptive: ``signal.setitimer(ITIMER_REAL)`` raises
:class:`~attncheck.dynamic.base.CheckTimeout` inside the check (a Python-level hang such as a
``time.sleep`` loop is interrupted at once; a single long C++ op finishes first, since Python
signal handlers run between bytecodes); the timer re-fires every second until the check has
stopped, in case the first exception landed where Python ignores it (a gc callback). A previously
armed ``SIGALRM`` timer (e.g. pytest-timeout) is restored afterwards. Elsewhere (non-main thread,
Windows) the check runs in a daemon worker thread and is *abandoned* when it overruns: the result
is ``"error"`` at once, but the abandoned thread keeps running in the background and may still
touch the module after the state was restored. Checks also poll ``ctx.check_time()`` between
examples. A timeout is reported as ``"error"`` with message ``"timed out after N s ..."``.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
import traceback
from typing import Any, Callable, Iterable, Iterator, TypeVar

import torch

from attncheck.dynamic.base import (
    DEFAULT_CHECKS,
    DEFAULT_TIMEOUT,
    INTERNAL_ERROR,
    CheckSpec,
    CheckTimeout,
    RunContext,
    all_checks,
    diagnose_target_error,
    raised_by_attncheck,
)
from attncheck.dynamic.state import Snapshot, preserved
from attncheck.dynamic.targets import Target, TargetOutputError
from attncheck.dynamic.targets import target as make_target
from attncheck.results import CheckResult, Report

__all__ = ["check", "run_checks", "resolve_device", "resolve_dtype", "run_with_time_limit",
           "DEFAULT_TIMEOUT", "SMALL_MODEL_PARAMS", "single_thread_for_small_models",
           "DEFAULT_MAX_EXAMPLES", "available_checks"]

_T = TypeVar("_T")
DEFAULT_MAX_EXAMPLES = 8

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
           "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
           "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"`` (or None) → CUDA when available, else CPU.  ``ValueError`` for CUDA without
    a CUDA device or an unknown device string."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """None → float32; accepts ``torch.float16`` or names (``"fp16"``, ``"bfloat16"``, ...)."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ValueError(f"dtype must be floating point, got {dtype}")
        return dtype
    key = str(dtype).replace("torch.", "").lower()
    if key not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of float32, float64, float16, "
                         "bfloat16")
    return _DTYPES[key]


#: Parameter count below which a CPU run uses one intra-op thread (see
#: :func:`single_thread_for_small_models`).
SMALL_MODEL_PARAMS = 10_000_000


@contextlib.contextmanager
def single_thread_for_small_models(modules: Iterable[torch.nn.Module | None],
                                   device: str | torch.device) -> Iterator[bool]:
    """Run the body with ``torch.set_num_threads(1)`` when ``device`` is the CPU and ``modules``
    (None entries: plain kernels) hold fewer than :data:`SMALL_MODEL_PARAMS` parameters in all;
    the thread count is restored afterwards.  Yields whether it switched.

    The checks feed small inputs (a few dozen tokens), so each op of a small model is
    microseconds of work, and every parallel op ends at a barrier where all intra-op threads
    meet.  On a loaded machine a descheduled thread holds that barrier for a scheduler time
    slice: a forward of the 512-wide, 8-head textbook layer on 2×5 tokens took 252 ms wall
    (57 ms CPU, spinning) on two threads and 1.8 ms on one (2-core machine, load average 16).
    """
    switch = torch.device(device).type == "cpu" and sum(
        p.numel() for m in modules if m is not None for p in m.parameters()) < SMALL_MODEL_PARAMS
    threads = torch.get_num_threads()
    if switch and threads > 1:
        torch.set_num_threads(1)
    try:
        yield switch
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def manual_seed(seed: int, device: torch.device) -> None:
    """``torch.manual_seed(seed)`` for a run on ``device``: the CPU generator, and CUDA's when
    the run uses CUDA or CUDA is initialised.  ``torch.manual_seed`` itself also seeds every
    accelerator backend lazily, and before CUDA is initialised each call queues a deferred seed
    call holding a formatted stack trace (``torch.cuda._lazy_call``): milliseconds per check,
    and a list that grows with every run on a CPU-only machine."""
    if device.type == "cuda":
        torch.manual_seed(seed)
        return
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def available_checks() -> list[str]:
    """Registered check names (default suite first)."""
    return list(all_checks())


def _select(names: Iterable[str] | str | None, specs: dict[str, CheckSpec]) -> list[str]:
    if names is None:
        return [n for n, s in specs.items() if s.default]
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(specs)}")
    return names


class _Alarm:
    """SIGALRM-based pre-emptive time limit (main thread, POSIX)."""

    def __init__(self, seconds: float, ctx: RunContext | None = None) -> None:
        self.seconds = seconds
        self.ctx = ctx

    #: re-fire period: an exception raised inside a gc callback or a ``__del__`` is swallowed by
    #: the interpreter ("Exception ignored in ..."), so the timer keeps firing until the check
    #: has really stopped
    REFIRE = 1.0

    def _handler(self, signum, frame):  # noqa: ANN001
        if frame is not None and frame.f_code.co_name in ("gc_callback", "__del__"):
            # an exception here would be swallowed: try again in 5 ms
            signal.setitimer(signal.ITIMER_REAL, 0.005, self.REFIRE)
            return
        raise CheckTimeout(f"timed out after {self.seconds:g} s")

    def __enter__(self):
        self.t0 = time.monotonic()
        self.old_handler = signal.signal(signal.SIGALRM, self._handler)
        self.old_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds, self.REFIRE)
        return self

    def __exit__(self, *exc) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old_handler)
        left, interval = self.old_timer
        if left > 0:
            left = max(left - (time.monotonic() - self.t0), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _error_result(ctx: RunContext, exc: BaseException, target: Target) -> CheckResult:
    if isinstance(exc, CheckTimeout):
        return ctx.result(
            "error", f"timed out after {ctx.time_limit:g} s: the target hung or is too slow for "
            f"this check (raise the limit with --timeout / timeout=)",
            metrics={"timeout_s": ctx.time_limit}, details=f"reproduce: {ctx.reproduce()}")
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    if raised_by_attncheck(exc):
        return ctx.result("error", f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}",
                          metrics={"exception": type(exc).__name__, "internal_error": True},
                          details=f"{tb}\nreproduce: {ctx.reproduce()}")
    status = "fail" if isinstance(exc, TargetOutputError) else "error"
    cause = diagnose_target_error(exc)
    return ctx.result(status, f"{type(exc).__name__}: {exc}" + (f" ({cause})" if cause else ""),
                      metrics={"exception": type(exc).__name__},
                      details=f"{tb}\nreproduce: {ctx.reproduce()}")


def _call(spec: CheckSpec, target: Target, ctx: RunContext) -> CheckResult:
    res = spec.func(target, ctx)
    if not isinstance(res, CheckResult):
        raise TypeError(f"check {spec.name} returned {type(res).__name__}, not CheckResult")
    return res


def run_with_time_limit(fn: Callable[[], _T], seconds: float | None,
                        name: str = "attncheck") -> _T:
    """``fn()`` under a time limit of ``seconds`` (None or <= 0: unlimited), as described in the
    module docstring: pre-emptive ``SIGALRM`` on the main thread of a POSIX process, else a
    daemon worker thread (``name``) abandoned when it overruns.  Raises
    :class:`~attncheck.dynamic.base.CheckTimeout` (a ``BaseException``) when the time is up;
    whatever ``fn`` raises propagates.  Used by the checks and by ``attncheck audit``."""
    if seconds is None or seconds <= 0:
        return fn()
    if _can_alarm():
        with _Alarm(seconds):
            return fn()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["res"] = fn()
        except BaseException as exc:  # noqa: BLE001
            box["exc"] = exc

    th = threading.Thread(target=work, name=name, daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        raise CheckTimeout(f"timed out after {seconds:g} s (worker thread abandoned)")
    if "exc" in box:
        raise box["exc"]
    return box["res"]


def _run_guarded(spec: CheckSpec, target: Target, ctx: RunContext) -> CheckResult:
    return run_with_time_limit(lambda: _call(spec, target, ctx), ctx.time_limit,
                               f"attncheck-{spec.name}")


def run_one(spec: CheckSpec, target: Target, ctx: RunContext,
            base: Snapshot | None = None) -> CheckResult:
    """Run one check isolated (state restored, exceptions → result, time limit).

    ``base``: a snapshot of the current state to restore afterwards instead of taking one
    (:func:`attncheck.dynamic.state.preserved`)."""
    module = target.module
    if target.needs_cross_detection():
        _detect(target, ctx, "cross-support",
                lambda t, c: t.ensure_cross_support(c.device, c.dtype),
                lambda t, exc: setattr(t, "cross_detection",
                                       {"cross": True, "message": f"raised {exc}"}), base)
    if target.needs_mask_detection():
        _detect_masks(target, ctx, base)
    if target.needs_position_detection():
        from attncheck.dynamic.positions import detect_positions

        _detect(target, ctx, "positions",
                lambda t, c: setattr(t, "position_detection",
                                     detect_positions(t, c.device, c.dtype)),
                lambda t, exc: setattr(t, "position_detection",
                                       {"kind": None, "message": f"raised {exc}"}), base)
    ok, why = spec.applicable(target)
    if not ok:
        return ctx.result("skip", why)
    with preserved(module, base):
        try:
            if module is not None:
                _prepare(module, ctx)
            manual_seed(ctx.seed, ctx.device)
            ctx.start()
            res = _run_guarded(spec, target, ctx)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a result
            res = _error_result(ctx, exc, target)
    cd = target.cross_detection
    if cd is not None and cd.get("cross") is False and res.status != "skip":
        res.metrics.setdefault("lengths", "L_q = L_k only (self-attention kernel)")
    if res.device is None:
        res.device = str(ctx.device)
    if not res.check:
        res.check = spec.name
    return res


def _detect(target: Target, ctx: RunContext, what: str, fn: Any, on_error: Any,
            base: Snapshot | None = None) -> None:
    """Run ``fn(target, ctx)`` once, isolated like a check (state restored, time limit);
    ``on_error(target, exc)`` when it raises or hangs."""
    from attncheck.dynamic.base import CheckSpec

    def work(t: Target, c: RunContext) -> CheckResult:
        fn(t, c)
        return CheckResult(c.check, "pass", "")

    module = target.module
    with preserved(module, base):
        try:
            if module is not None:
                _prepare(module, ctx)
            manual_seed(ctx.seed, ctx.device)
            ctx.start()
            _run_guarded(CheckSpec(what, work), target, ctx)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            on_error(target, exc)


def _detect_masks(target: Target, ctx: RunContext, base: Snapshot | None = None) -> None:
    """Settle the target's mask convention once (``Target.ensure_mask_convention``), isolated
    like a check (state restored, time limit); a target that raises or hangs here gets
    ``mask_detection`` source "failed" (masks are then not passed)."""

    def failed(t: Target, exc: BaseException) -> None:
        t.mask_detection = {"convention": None, "source": "failed", "tried": [],
                            "message": f"detecting the mask convention raised "
                                       f"{type(exc).__name__}: {exc}"}

    _detect(target, ctx, "mask-convention",
            lambda t, c: t.ensure_mask_convention(c.device, c.dtype), failed, base)


def _prepare(module: torch.nn.Module, ctx: RunContext) -> None:
    needs_dtype = any(p.is_floating_point() and p.dtype != ctx.dtype
                      for p in list(module.parameters()) + list(module.buffers()))
    needs_dev = any(p.device != ctx.device for p in list(module.parameters())
                    + list(module.buffers()))
    with torch.no_grad():
        if needs_dev:
            module.to(ctx.device)
        if needs_dtype:
            module.to(ctx.dtype)
    module.train(ctx.train)


#: Checks that compare outputs with each other: when the output itself is NaN/inf for finite
#: inputs, an "all equal" comparison proves nothing, so a "pass" becomes "skip (not observable)".
_NEEDS_FINITE_OUTPUT = frozenset({"determinism", "batch-independence", "permutation-equivariance",
                                  "causality", "mask-pattern", "padding", "kv-cache"})


def _unless_output_finite(res: CheckResult, target: Target, ctx: RunContext,
                          health: dict[str, Any], base: Snapshot | None = None) -> CheckResult:
    """Downgrade a comparison check's "pass" to "skip" when one eval forward of the target on
    finite N(0, 1) inputs (its default example, computed once per run) is not finite."""
    if "finite" not in health:
        health["finite"] = True
        module = target.module
        with preserved(module, base):
            try:
                if module is not None:
                    _prepare(module, ctx)
                inputs = target.make_inputs(target.default_example(ctx.seed), device=ctx.device,
                                            dtype=ctx.dtype)
                with torch.no_grad():
                    out = target(inputs).out
                health["finite"] = bool(torch.isfinite(out).all())
            except Exception:  # noqa: BLE001 - a raising target is the checks' business
                pass
    if health["finite"]:
        return res
    return CheckResult(res.check, "skip",
                       "not observable: the target's output is NaN/inf for finite inputs, so "
                       "comparing outputs proves nothing (see the finite check)",
                       dict(res.metrics, output_finite=False), res.details, res.device)


def run_checks(target: Target, checks: Iterable[str] | str | None = None, *,
               device: str | torch.device | None = "auto", dtype: Any = None,
               seed: int | None = None, max_examples: int | None = None,
               timeout: float | None = DEFAULT_TIMEOUT, train: bool = False,
               on_result: Any = None) -> Report:
    """Run ``checks`` (None = default suite) on an already-built :class:`Target`.

    ``on_result(CheckResult)`` is called after each check (progress display).
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    specs = all_checks()
    names = _select(checks, specs)
    seed = 0 if seed is None else int(seed)
    n = DEFAULT_MAX_EXAMPLES if max_examples is None else int(max_examples)
    results: list[CheckResult] = []
    _health: dict[str, Any] = {}
    from attncheck.dynamic.strategies import hypothesis_storage_outside_cwd

    # one snapshot for the whole run: every check, detection and health forward restores it
    # (the state before each of them is the state it leaves)
    with single_thread_for_small_models([target.module], dev), \
            preserved(target.module) as base, hypothesis_storage_outside_cwd():
        for name in names:
            ctx = RunContext(device=dev, dtype=dt, seed=seed, max_examples=n,
                             time_limit=timeout, check=name, spec=target.spec,
                             target_desc=target.describe(), train=train,
                             cli_options=target.cli_args())
            res = run_one(specs[name], target, ctx, base)
            if res.status == "pass" and name in _NEEDS_FINITE_OUTPUT:
                res = _unless_output_finite(res, target, ctx, _health, base)
            results.append(res)
            if on_result is not None:
                on_result(res)
    extra = {"kind": target.kind, "mode": "train" if train else "eval", "seed": seed,
             "max_examples": n}
    notes = target.convention_notes()
    if notes:
        extra["conventions"] = notes
    if target.mask_detection is not None and target.mask_arg:
        extra["mask_convention"] = {k: target.mask_detection.get(k)
                                    for k in ("convention", "source", "message")}
    return Report(target=target.name, results=results, device=str(dev),
                  dtype=str(dt).replace("torch.", ""), extra=extra)


def check(target: Any, checks: Iterable[str] | str | None = None, device: str | Any = "auto",
          dtype: Any = None, seed: int | None = None, max_examples: int | None = None, *,
          timeout: float | None = DEFAULT_TIMEOUT, train: bool = False,
          **hints: Any) -> Report:
    """Run dynamic checks on ``target`` and return a :class:`~attncheck.results.Report`.

    Args:
        target: an ``nn.Module``, a kernel ``f(q, k, v, ...)``, a ``Target`` from
            ``attncheck.target(...)``, or a spec string ``"PATH.py:NAME"`` /
            ``"package.module:NAME"``.
        checks: names (list or comma-separated string); None = the default suite
            (``attncheck.dynamic.base.DEFAULT_CHECKS``).
        device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ...
        dtype: input / parameter dtype (default float32).
        seed: base seed (default 0): seeds torch before each check and the hypothesis search.
        max_examples: hypothesis examples per property (default 8).
        timeout: seconds per check (None = unlimited); see the module docstring.
        train: run the module in training mode (default: eval mode, dropout off).
        **hints: calling-convention hints (``attncheck.dynamic.targets.HINTS``).

    Raises:
        ValueError: unknown check name, device or dtype;
        attncheck.dynamic.targets.TargetError: unusable target or invalid hint;
        attncheck.dynamic.spec.SpecError: a spec string that cannot be resolved.

    Failures of the target itself never raise: they are results.
    """
    if isinstance(target, str):
        from attncheck.dynamic.spec import resolve

        t = resolve(target, **hints)
    else:
        t = make_target(target, **hints)
    return run_checks(t, checks, device=device, dtype=dtype, seed=seed,
                      max_examples=max_examples, timeout=timeout, train=train)


# keep the import graph obvious for readers
_ = DEFAULT_CHECKS
