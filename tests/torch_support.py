"""torch is an optional dependency (``ringemu[torch]``): its tests skip without it, except under CI.

Under ``CI=true`` (set by ``.ci/run``) a missing torch is an error, so that the real-engine cross-checks can
never pass by being skipped.
"""
from __future__ import annotations

import importlib
import os

import pytest

__all__ = ["require_torch"]


def require_torch():
    """Import and return torch; skip the calling module if it is missing, fail instead under ``CI=true``."""
    if os.environ.get("CI", "").lower() == "true":
        try:
            return importlib.import_module("torch")
        except ModuleNotFoundError as exc:
            pytest.fail(f"CI=true but torch is not installed ({exc}); install ringemu[torch]", pytrace=False)
    return pytest.importorskip("torch", reason="torch is optional; install ringemu[torch] to run these tests")
