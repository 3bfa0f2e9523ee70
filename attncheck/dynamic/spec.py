"""Resolve a CLI target spec into a :class:`~attncheck.dynamic.targets.Target`.

Spec forms:

- ``PATH.py:NAME`` — the file is imported as a fresh module (its directory is put first on
  ``sys.path`` while it imports, so sibling imports work);
- ``package.module:NAME`` — imported with :func:`importlib.import_module`.

``NAME`` (dots allowed: ``Outer.attr``) may be

- an ``nn.Module`` subclass → instantiated with no arguments;
- a kernel function whose first parameters are ``q, k, v`` or ``query, key, value``;
- a zero-argument factory returning a module, a kernel or a ``Target``;
- an ``nn.Module`` instance or a ``Target`` object.

Every problem raises :class:`SpecError` (the CLI prints it and exits 2) with a clear message:
bad syntax, file not found, import failure (with the exception), missing name, a class that
cannot be built without arguments, a factory that needs arguments or raises, or an object that is
none of the above.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Any

__all__ = ["SpecError", "load_object", "resolve", "parse_spec"]


class SpecError(Exception):
    """A target spec cannot be resolved (usage error: exit code 2)."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``spec`` into (module part, NAME).  Raises :class:`SpecError` on bad syntax."""
    if not isinstance(spec, str) or ":" not in spec:
        raise SpecError(f"bad target spec {spec!r}: expected PATH.py:NAME or package.module:NAME")
    mod, _, name = spec.rpartition(":")
    # Windows drive letters: C:\x\y.py:NAME → rpartition keeps the drive in mod
    if not mod or not name or not all(p.isidentifier() for p in name.split(".")):
        raise SpecError(f"bad target spec {spec!r}: expected PATH.py:NAME or "
                        "package.module:NAME, NAME a Python identifier")
    return mod, name


def _import_file(path: str) -> Any:
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise SpecError(f"target file not found: {path}")
    modname = "_attncheck_target_" + os.path.splitext(os.path.basename(full))[0].replace(
        "-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(modname, full)
    if spec is None or spec.loader is None:
        raise SpecError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    d = os.path.dirname(full)
    sys.path.insert(0, d)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(modname, None)
        raise SpecError(f"importing {path} called sys.exit({exc.code})") from None
    except BaseException as exc:  # noqa: BLE001 - any import failure is a usage error
        sys.modules.pop(modname, None)
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise SpecError(f"importing {path} failed: {tb}") from exc
    finally:
        try:
            sys.path.remove(d)
        except ValueError:
            pass
    return module


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise SpecError(f"cannot import module {name!r}: {exc}") from exc
    except SystemExit as exc:
        raise SpecError(f"importing {name} called sys.exit({exc.code})") from None
    except BaseException as exc:  # noqa: BLE001
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise SpecError(f"importing {name} failed: {tb}") from exc


def load_object(spec: str) -> Any:
    """Import the module of ``spec`` and return the object named by NAME (not yet built)."""
    mod, name = parse_spec(spec)
    if mod.endswith(".py") or os.sep in mod or "/" in mod:
        module = _import_file(mod)
    else:
        module = _import_module(mod)
    obj: Any = module
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            avail = sorted(n for n in dir(module) if not n.startswith("_"))[:20]
            raise SpecError(f"{mod} has no attribute {name!r} (available: "
                            f"{', '.join(avail)})") from None
    return obj


def _required_params(fn: Any) -> list[str] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [p.name for p in sig.parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def build(obj: Any, spec: str = "<object>", kind: str | None = None) -> Any:
    """Turn a loaded object into a module, kernel or ``Target`` (see module docstring).
    ``kind="kernel"`` (the hint) takes any plain callable as a kernel, whatever its parameter
    names."""
    from torch import nn

    from attncheck.dynamic.targets import Target, is_kernel_function

    if isinstance(obj, (nn.Module, Target)):
        return obj
    if inspect.isclass(obj):
        if not issubclass(obj, nn.Module):
            raise SpecError(f"{spec}: {obj.__name__} is a class but not an nn.Module subclass")
        req = _required_params(obj.__init__)
        if req is not None and len(req) > 1:  # first is self
            raise SpecError(f"{spec}: {obj.__name__}() needs arguments {req[1:]}; point the "
                            "spec at a zero-argument factory that builds it")
        try:
            return obj()
        except Exception as exc:  # noqa: BLE001
            raise SpecError(f"{spec}: {obj.__name__}() raised {type(exc).__name__}: {exc}") \
                from exc
    if callable(obj):
        if is_kernel_function(obj) or (kind == "kernel" and not inspect.isclass(obj)):
            return obj
        req = _required_params(obj)
        if req:
            raise SpecError(f"{spec}: {getattr(obj, '__name__', obj)!r} is neither a kernel "
                            f"(first parameters q, k, v or query, key, value) nor a zero-argument"
                            f" factory (it needs {req}); if it is a kernel f(q, k, v) with "
                            "other parameter names, give --hint kind=kernel")
        try:
            made = obj()
        except Exception as exc:  # noqa: BLE001
            raise SpecError(f"{spec}: factory {getattr(obj, '__name__', obj)}() raised "
                            f"{type(exc).__name__}: {exc}") from exc
        if isinstance(made, (nn.Module, Target)) or is_kernel_function(made):
            return made
        raise SpecError(f"{spec}: factory returned {type(made).__name__}; expected an "
                        "nn.Module, a kernel f(q, k, v, ...) or an attncheck.target(...)")
    raise SpecError(f"{spec}: {type(obj).__name__} object is not a module, kernel or factory")


def resolve(spec: str, **hints: Any):
    """Spec → :class:`~attncheck.dynamic.targets.Target` (``hints`` override detection).

    Raises :class:`SpecError` for every problem, including invalid hints (checked first: a
    misspelt hint imports nothing).
    """
    from attncheck.dynamic.hints import HintError, validate_hints
    from attncheck.dynamic.targets import TargetError, target

    try:  # before the target is imported: a misspelt hint must not run the user's code
        validate_hints({k: v for k, v in hints.items() if v is not None})
    except HintError as exc:
        raise SpecError(f"{spec}: {exc}") from None
    made = build(load_object(spec), spec, kind=hints.get("kind"))
    try:
        return target(made, spec=spec, **hints)
    except TargetError as exc:
        raise SpecError(f"{spec}: {exc}") from exc
