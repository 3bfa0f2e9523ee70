"""Shared test configuration: hypothesis profiles.

``ci`` (default): few examples, no deadline — keeps the suite to minutes on 2 cores.
``thorough``: many examples, for on-demand runs: ``HYPOTHESIS_PROFILE=thorough pytest``.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=12, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough", max_examples=300, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# CLI runs in tests must not write a result cache into the checkout (attncheck.lint.cache).
if not os.environ.get("ATTNCHECK_CACHE_DIR"):
    import tempfile

    os.environ["ATTNCHECK_CACHE_DIR"] = tempfile.mkdtemp(prefix="attncheck-test-cache-")
