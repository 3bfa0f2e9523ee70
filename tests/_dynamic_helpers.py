"""Shared helpers for the dynamic-check tests: load fixture modules by path."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures")


def load(relpath: str):
    """Import fixtures/<relpath> as a module (cached in sys.modules)."""
    path = os.path.join(FIX, relpath)
    name = "_fx_" + relpath.replace("/", "_").replace(".py", "")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
