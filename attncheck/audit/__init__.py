"""Audit third-party models: build small random-weight models, lint their source, run checks.

``attncheck.audit(spec, ...)`` is :func:`attncheck.audit.runner.audit`.  Because this package
shares the name ``audit`` with that function (importing any ``attncheck.audit.*`` submodule
rebinds ``attncheck.audit`` to this package), the package itself is callable and forwards to
the function, so ``attncheck.audit("hf:gpt2")`` works either way.
"""
from __future__ import annotations

import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from attncheck.audit.runner import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
