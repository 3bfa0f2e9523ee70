"""Helpers for the tests of the opt-in checks: run one check on a case fixture or an object."""
from _dynamic_helpers import load

import attncheck
from attncheck.dynamic.spec import build


def case(name):
    """(object, hints) of fixtures/cases/<name>.py's DYNAMIC target."""
    mod = load(f"cases/{name}.py")
    dyn = mod.DYNAMIC
    return build(getattr(mod, dyn["target"]), dyn["target"]), dict(dyn.get("hints", {}))


def run(obj, check, dtype=None, **hints):
    """The CheckResult of ``check`` on ``obj`` (CPU, 4 hypothesis examples)."""
    rep = attncheck.check(obj, checks=[check], device="cpu", dtype=dtype, max_examples=4,
                          timeout=60, **hints)
    (res,) = rep.results
    return res


def run_case(name, check, **extra):
    obj, hints = case(name)
    hints.update(extra)
    return run(obj, check, **hints)
