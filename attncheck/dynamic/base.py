"""Check registry and the per-check run context.

Each check lives in its own module ``attncheck/dynamic/checks/<name>.py`` (``-`` in the check name
becomes ``_`` in the module name) and defines one function registered with
:func:`register_check`::

    from attncheck.dynamic.base import RunContext, register_check
    from attncheck.dynamic.targets import Target
    from attncheck.results import CheckResult

    @register_check("finite", applies=lambda t: True, description="no NaN/inf ...")
    def check_finite(target: Target, ctx: RunContext) -> CheckResult:
        ex = ctx.example()                          # a small Example valid for the target
        inputs = target.make_inputs(ex, device=ctx.device, dtype=ctx.dtype)
        out = target(inputs)                        # canonical Output(out, weights, raw)
        ...
        return ctx.result("pass", "all outputs finite", metrics={...})

Contract of a check function ``(target, ctx) -> CheckResult``:

- it may raise; the runner turns the exception into an ``"error"`` result with the reason;
- it runs with the target's module already in **eval mode** (``ctx.train`` False; the runner
  switches and restores) and under ``torch.no_grad()`` *not* enabled — checks choose;
- it need not restore anything: the runner snapshots and restores parameters, buffers, grads,
  ``requires_grad`` flags, training mode, RNG states and global torch settings
  (``attncheck.dynamic.state``);
- it should call :meth:`RunContext.check_time` between examples (cooperative time limit); the
  runner also enforces the limit pre-emptively (see ``attncheck.dynamic.runner``);
- ``applies(target)`` returns True, or False / a string (the reason) to make the runner report
  ``"skip"`` without calling the check.

Registered names (default suite, in order): shapes, finite, normalization, causality,
gradient-flow, saturation, scale, determinism.
"""
from __future__ import annotations

import importlib
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from attncheck.results import CheckResult

__all__ = [
    "CheckSpec", "RunContext", "CheckTimeout", "register_check", "all_checks", "get_check",
    "DEFAULT_CHECKS", "CHECK_MODULES", "tolerances", "raised_by_attncheck", "INTERNAL_ERROR",
]

#: Seconds each check may run by default (``--timeout`` / ``timeout=``; 0 or None: no limit).
DEFAULT_TIMEOUT = 60.0

#: The default suite, in run order.  A check whose module is missing is left out.
DEFAULT_CHECKS: tuple[str, ...] = ("shapes", "finite", "normalization", "causality",
                                   "gradient-flow", "saturation", "scale", "determinism")
#: Modules imported by :func:`all_checks` (each registers its check on import).
CHECK_MODULES: tuple[str, ...] = tuple(
    "attncheck.dynamic.checks." + n.replace("-", "_") for n in DEFAULT_CHECKS)
#: Checks of issue 6 (each module registers itself; ``default=`` in its ``register_check``
#: decides whether it joins the default suite).
EXTRA_CHECKS: tuple[str, ...] = ("padding", "batch-independence", "permutation-equivariance",
                                 "reference", "mask-pattern", "kv-cache", "dtype", "state",
                                 "magnitude", "paths")
CHECK_MODULES += tuple("attncheck.dynamic.checks." + n.replace("-", "_") for n in EXTRA_CHECKS)


#: how an exception raised by attncheck's own code (not by the target) is reported
INTERNAL_ERROR = "internal error in attncheck (a bug in attncheck, not in the target: please report it)"

_PKG_DIR = __import__("os").path.dirname(__import__("os").path.dirname(__file__))
_TORCH_DIR = __import__("os").path.dirname(torch.__file__)


def diagnose_target_error(exc: BaseException) -> str:
    """A short cause for an exception the target raised, when its message names a known
    attention mistake, else ``""``.  Today: a constant that does not fit the dtype
    (``masked_fill(mask, -1e9)`` on float16 scores raises "value cannot be converted to type
    c10::Half without overflow"; float16's largest finite value is 65504, IEEE 754 binary16)."""
    msg = str(exc)
    if "without overflow" in msg:
        return ("a mask fill (or another constant) does not fit the dtype: fill with "
                "torch.finfo(scores.dtype).min or -inf")
    return ""


def raised_by_attncheck(exc: BaseException) -> bool:
    """True when ``exc`` was raised by attncheck's own code rather than by the code under test.

    The traceback is read from the innermost frame outwards; the first frame that belongs to
    attncheck (this package) or to anything else (the target, its libraries) decides.  Frames of
    torch itself are neutral (both sides call torch), and so is the probe's
    ``__torch_function__``, which only forwards the target's own torch calls.  A
    :class:`~attncheck.dynamic.targets.TargetOutputError` is never attncheck's: attncheck raises
    it on the target's behalf, when the target returned something that is not an attention
    output, and neither is a :class:`~attncheck.dynamic.targets.TargetCallError` (the target's
    signature does not take the arguments of its calling convention).
    """
    import os

    from attncheck.dynamic.targets import TargetCallError, TargetOutputError

    if isinstance(exc, (TargetOutputError, TargetCallError)):
        return False

    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for fr in reversed(frames):
        path = os.path.abspath(fr.f_code.co_filename)
        if path.startswith(_TORCH_DIR + os.sep):
            continue
        if path.startswith(_PKG_DIR + os.sep):
            if fr.f_code.co_name == "__torch_function__" and path.endswith("probe.py"):
                continue
            return True
        return False
    return False


class CheckTimeout(BaseException):
    """Raised inside a check when its time limit is over.

    A ``BaseException`` (like ``KeyboardInterrupt``) so that ``except Exception`` in user code or
    in hypothesis' failure handling does not swallow it.
    """


@dataclass(frozen=True)
class CheckSpec:
    """A registered check."""

    name: str
    func: Callable[..., CheckResult]
    applies: Callable[[Any], bool | str] | None = None
    default: bool = True
    description: str = ""

    def applicable(self, target: Any) -> tuple[bool, str]:
        """(True, "") or (False, reason)."""
        if self.applies is None:
            return True, ""
        r = self.applies(target)
        if isinstance(r, str):
            return (False, r) if r else (True, "")
        return (bool(r), "" if r else f"{self.name} does not apply to this {target.kind}")


_REGISTRY: dict[str, CheckSpec] = {}


def register_check(name: str, *, applies: Callable[[Any], bool | str] | None = None,
                   default: bool = True, description: str = "") -> Callable:
    """Decorator: register ``func(target, ctx) -> CheckResult`` under ``name``.

    ``applies(target)`` → True, or False / a reason string to skip.  ``default`` False keeps the
    check out of the default suite (it still runs when named).  Re-registering a name replaces it.
    """

    def deco(func: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
        doc = description or (func.__doc__ or "").strip().splitlines()[0:1]
        desc = doc if isinstance(doc, str) else (doc[0] if doc else "")
        _REGISTRY[name] = CheckSpec(name, func, applies, default, desc)
        return func

    return deco


def all_checks() -> dict[str, CheckSpec]:
    """Import the check modules and return the registry (name → spec), default suite first."""
    for mod in CHECK_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    order = {n: i for i, n in enumerate(DEFAULT_CHECKS)}
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))


def get_check(name: str) -> CheckSpec:
    """The spec of ``name``; ``KeyError`` with the known names when unknown."""
    checks = all_checks()
    if name not in checks:
        raise KeyError(f"unknown check {name!r}; known: {', '.join(checks)}")
    return checks[name]


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing attention outputs in ``dtype``: fp32 1e-5/1e-4, fp64 1e-10,
    fp16 5e-3, bf16 1e-2 (transformers' eager-vs-SDPA test)."""
    if dtype == torch.float64:
        return 1e-10, 1e-10
    if dtype == torch.float16:
        return 5e-3, 5e-3
    if dtype == torch.bfloat16:
        return 1e-2, 1e-2
    return 1e-5, 1e-4


@dataclass
class RunContext:
    """Settings and helpers for one check on one target.

    Attributes:
        device: where tensors are made (``torch.device``).
        dtype: floating dtype of inputs (parameters are cast by the runner when given).
        seed: base seed; examples drawn by hypothesis carry their own ``seed``.
        max_examples: hypothesis examples per property.
        time_limit: seconds for this check (None = unlimited); ``deadline`` is the monotonic
            time when it ends.
        generator: a CPU ``torch.Generator`` seeded with ``seed`` (reproducible on any device).
        check: name of the running check.
        target_desc: the target's display name; ``spec``: its CLI spec (for reproduction lines).
        train: False — checks run the module in eval mode (the runner sets it).
        extra: free-form options (e.g. ``{"large_logit": 150.0}``).
    """

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtype: torch.dtype = torch.float32
    seed: int = 0
    max_examples: int = 10
    time_limit: float | None = DEFAULT_TIMEOUT
    check: str = ""
    spec: str | None = None
    target_desc: str = ""
    train: bool = False
    cli_options: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    generator: torch.Generator = field(init=False)
    deadline: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)
        self.generator = torch.Generator(device="cpu").manual_seed(int(self.seed))
        self.start()

    def start(self) -> None:
        """(Re)start the clock for this check."""
        self.deadline = None if self.time_limit is None else time.monotonic() + self.time_limit

    # ------------------------------------------------------------------ time
    def time_left(self) -> float:
        """Seconds left (``inf`` when unlimited)."""
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def check_time(self) -> None:
        """Raise :class:`CheckTimeout` when the time limit is over."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise CheckTimeout(f"{self.check or 'check'} exceeded its time limit of "
                               f"{self.time_limit:g} s")

    # ------------------------------------------------------------------ tensors
    @property
    def tolerances(self) -> tuple[float, float]:
        """(atol, rtol) for ``self.dtype`` (see :func:`tolerances`)."""
        return tolerances(self.dtype)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        """N(0, scale²) tensor of ``shape`` from ``self.generator`` on ``device``/``dtype``."""
        t = torch.randn(*shape, generator=self.generator, dtype=torch.float64) * scale
        return t.to(self.device, self.dtype)

    def example(self, target: Any, **overrides: int):
        """A small :class:`~attncheck.dynamic.targets.Example` valid for ``target`` with this
        context's seed (``overrides`` replace fields, e.g. ``L_q=1``)."""
        from dataclasses import replace

        ex = target.default_example(seed=self.seed)
        if overrides:
            ex = replace(ex, **overrides)
        return target.fit_example(ex)

    # ------------------------------------------------------------------ results
    def reproduce(self, seed: int | None = None, **extra: Any) -> str:
        """A command line that re-runs this check with the run ``seed`` (default: this
        context's; the same seed replays the same hypothesis search, so the same smallest
        example), or, without a CLI spec, the equivalent ``attncheck.check(...)`` call."""
        seed = self.seed if seed is None else seed
        if self.spec:
            parts = ["attncheck", "check", shlex.quote(self.spec), "--checks", self.check,
                     "--seed", str(seed)]
            if self.device.type != "cpu":
                parts += ["--device", self.device.type]
            if self.dtype != torch.float32:
                parts += ["--dtype", str(self.dtype).replace("torch.", "")]
            if self.max_examples != 8:  # runner.DEFAULT_MAX_EXAMPLES: the search depends on it
                parts += ["--max-examples", str(self.max_examples)]
            if self.time_limit != DEFAULT_TIMEOUT:  # a timeout replays only under its limit
                parts += ["--timeout", f"{self.time_limit or 0:g}"]
            if self.train:
                parts.append("--train")
            if self.cli_options:
                parts.append(self.cli_options)
            return " ".join(parts)
        return (f"attncheck.check(target, checks=[{self.check!r}], seed={seed}, "
                f"device={self.device.type!r})")

    def result(self, status: str, message: str, metrics: dict[str, Any] | None = None,
               details: str = "", example: Any = None) -> CheckResult:
        """Build a :class:`CheckResult` for the running check.  With ``example`` (an
        ``Example``), its sizes go into ``metrics["example"]`` and a reproduction line into
        ``details``."""
        m = dict(metrics or {})
        if example is not None:
            m.setdefault("example", example.as_dict())
            rep = (f"smallest failing example: {example} (inputs: "
                   f"target.make_inputs(Example({example})))\n"
                   f"reproduce: {self.reproduce()}")
            details = f"{details}\n{rep}".strip() if status in ("fail", "error") else details
        return CheckResult(self.check, status, message, m, details, str(self.device))
