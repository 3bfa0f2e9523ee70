"""Where hypothesis writes while attncheck drives it (torch-free: the pytest plugin imports it at
load time).

The checks run hypothesis with ``database=None``, but hypothesis still caches the literal
constants of local modules under its storage directory, ``./.hypothesis`` by default; a tool run in
a user's project must not litter it.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def hypothesis_storage_outside_cwd() -> Iterator[None]:
    """Keep hypothesis from writing ``./.hypothesis`` while attncheck drives it.

    The properties run with ``database=None``, but hypothesis still caches the literal constants
    of local modules under its storage directory (``.hypothesis/constants``), which defaults to
    ``./.hypothesis`` in the current working directory.  Unless the caller chose a storage
    directory (``HYPOTHESIS_STORAGE_DIRECTORY``, or
    ``hypothesis.configuration.set_hypothesis_home_dir`` — e.g. the attncheck pytest plugin or a
    test suite), point it at ``<tempdir>/attncheck-hypothesis-<uid>`` for the duration, then
    restore it.  Used by the runner, the CLI and the pytest plugin.
    """
    try:
        import hypothesis.configuration as hconf
    except ImportError:  # pragma: no cover
        yield
        return
    key = "__hypothesis_home_directory"
    prev = hconf.__dict__.get(key)
    default = hconf.__dict__.get(key + "_default")
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or (prev is not None and prev != default) \
            or not hasattr(hconf, "set_hypothesis_home_dir"):
        yield  # the caller chose where hypothesis writes
        return
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    hconf.set_hypothesis_home_dir(Path(tempfile.gettempdir()) / f"attncheck-hypothesis-{uid}")
    try:
        yield
    finally:
        hconf.set_hypothesis_home_dir(prev)
