"""Hypothesis strategies for attention problem sizes, and a property runner for the product.

:func:`examples` draws :class:`~attncheck.dynamic.targets.Example` values — ``B``, ``L_q``,
``L_k`` (including 1, and ``L_q != L_k`` where the target allows it), heads ``H``, head dim ``d``
and the torch ``seed`` — *from hypothesis*, so a failing example shrinks (towards B=1, L=1,
seed=0) and replays.

:func:`run_property` runs a property over drawn examples with hypothesis but **without an example
database** (``database=None``: the product must not litter the user's directory) and returns
the smallest failing example, the failure message and the number of examples tried.  The search
is seeded from ``RunContext.seed`` (``hypothesis.seed``), so the same ``--seed`` replays the same
search and finds the same smallest example.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from attncheck._hypothesis_home import hypothesis_storage_outside_cwd  # noqa: F401 (re-export)
from attncheck.dynamic.base import CheckTimeout, RunContext
from attncheck.dynamic.targets import Example, Target

__all__ = ["examples", "run_property", "PropertyFailure", "PropertyOutcome", "Fail",
           "hypothesis_storage_outside_cwd"]

MAX_B, MAX_L, MAX_H, MAX_D = 3, 12, 4, 16


@st.composite
def examples(draw, target: Target, *, max_b: int = MAX_B, max_l: int = MAX_L,
             max_h: int = MAX_H, max_d: int = MAX_D, min_l: int = 1,
             cross: bool | None = None) -> Example:
    """Strategy: an :class:`Example` valid for ``target``.

    ``B`` in [1, max_b]; ``L_q`` in [min_l, max_l]; ``L_k`` equal to ``L_q`` or, when
    ``target.allows_cross`` (and ``cross`` is not False), drawn on its own in [1, max_l];
    ``H`` in [1, max_h] unless the target fixes it; ``d`` in {1, 2, 4, 8, 16} (≤ max_d) unless
    fixed; ``seed`` in [0, 2**31).
    """
    B = draw(st.integers(1, max_b))
    L_q = draw(st.integers(min_l, max_l))
    allow = target.allows_cross if cross is None else (cross and target.allows_cross)
    L_k = L_q
    if allow and draw(st.booleans()):
        L_k = draw(st.integers(max(1, min_l), max_l))
    H = target.num_heads or draw(st.integers(1, max_h))
    d = target.fixed_head_dim
    if d is None:
        d = draw(st.sampled_from([x for x in (1, 2, 4, 8, 16) if x <= max_d]))
    seed = draw(st.integers(0, 2**31 - 1))
    return target.fit_example(Example(B=B, L_q=L_q, L_k=L_k, H=H, d=d, seed=seed))


class Fail(AssertionError):
    """Raise (or return a string from the property) to mark an example as failing."""


@dataclass
class PropertyFailure:
    """The smallest failing example found, the reason, and the extra data the property gave."""

    example: Example
    message: str
    data: dict[str, Any]
    error: BaseException | None = None   # set when the target raised (not a Fail)


@dataclass
class PropertyOutcome:
    failure: PropertyFailure | None
    examples_run: int
    data: dict[str, Any]        # data from the last passing example (metrics)

    @property
    def ok(self) -> bool:
        return self.failure is None


def run_property(prop: Callable[[Example], Any], target: Target, ctx: RunContext, *,
                 strategy: Any = None, max_examples: int | None = None,
                 **strategy_kwargs: Any) -> PropertyOutcome:
    """Run ``prop(example)`` over examples drawn by hypothesis.

    ``prop`` returns None / a dict of metrics when the example passes, and raises :class:`Fail`
    (or returns a ``str``: the failure message) when it fails; a ``(message, metrics)`` tuple
    also marks a failure.  Any other exception from the target counts as a failure too
    (recorded in ``PropertyFailure.error``).  :class:`CheckTimeout` stops the search and
    propagates.

    Settings: ``database=None``, ``deadline=None``, ``derandomize=False`` with
    ``hypothesis.seed(ctx.seed)``, health checks suppressed, shrinking on.  The smallest failing
    example is the last failing one hypothesis replays.
    """
    strat = strategy if strategy is not None else examples(target, **strategy_kwargs)
    n = max_examples or ctx.max_examples
    state: dict[str, Any] = {"fail": None, "count": 0, "data": {}}

    def body(ex: Example) -> None:
        ctx.check_time()
        state["count"] += 1
        try:
            r = prop(ex)
        except Fail as exc:
            data = getattr(exc, "data", {}) or {}
            state["fail"] = PropertyFailure(ex, str(exc), data)
            raise
        except (CheckTimeout, KeyboardInterrupt):
            raise
        except Exception as exc:  # the target raised: a failure with the reason
            state["fail"] = PropertyFailure(ex, f"{type(exc).__name__}: {exc}", {}, exc)
            raise
        if isinstance(r, str):
            state["fail"] = PropertyFailure(ex, r, {})
            raise Fail(r)
        if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], str):
            state["fail"] = PropertyFailure(ex, r[0], dict(r[1] or {}))
            raise Fail(r[0])
        if isinstance(r, dict):
            state["data"] = r

    with _outside_hypothesis(), hypothesis_storage_outside_cwd():
        return _run(body, strat, n, ctx, state)


def _outside_hypothesis():
    """Run as if no outer hypothesis test were active: ``attncheck.check`` may be called from a
    user's own ``@given`` test, where a nested ``@given`` would fail hypothesis' nested-given
    health check (decided on the *outer* settings) and share its build context."""
    try:
        from hypothesis.control import _current_build_context
    except ImportError:  # pragma: no cover - other hypothesis versions
        return contextlib.nullcontext()
    return _current_build_context.with_value(None)


def _run(body, strat, n, ctx, state) -> PropertyOutcome:
    test = given(strat)(body)
    test = settings(database=None, deadline=None, max_examples=n, derandomize=False,
                    print_blob=False, report_multiple_bugs=False,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
                    suppress_health_check=list(HealthCheck))(test)
    test = hyp_seed(int(ctx.seed))(test)
    # No example database, so no database key: without this hypothesis still hashes the
    # property's source (``inspect.getsource`` + tokenize, several ms per property) to name one.
    test._hypothesis_internal_database_key = None
    try:
        test()
    except (CheckTimeout, KeyboardInterrupt):
        raise
    except HypothesisException as exc:
        if state["fail"] is None:
            raise RuntimeError(f"hypothesis could not run the property: {exc}") from exc
    except BaseException:
        if state["fail"] is None:
            raise
    return PropertyOutcome(state["fail"], state["count"], state["data"])
