"""Hypothesis profiles: ``default`` is quick for local runs; ``ci`` is thorough (``.ci/run`` selects it
with ``HYPOTHESIS_PROFILE=ci``) and deterministic: derandomized (each test's examples follow from its own code,
never from the clock) and without an example database (nothing a previous run saved is replayed), so a CI run's
result depends on the commit only; ``flake-hunt`` (tests/flake_hunt.py) draws like ``default`` under the seed it
is given, with no database either; ``mutation`` (tests/mutation/mutmut_parts.py) is ``ci`` with 30 examples
instead of 150, so that a surviving mutant, which runs every test that reaches it, costs minutes less. No deadline: numba compiles on first call and the machines are shared.

ringemu's own pytest plugin (installed with ``ringemu[test]``) keeps these: it loads its ``ringemu-dev`` /
``ringemu-ci`` profiles only when a session chose none, and this file re-registers hypothesis's ``default``."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=150, deadline=None, print_blob=True, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("mutation", max_examples=30, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("flake-hunt", max_examples=25, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
