"""The pytest plugin of ``ringemu[test]`` (entry point ``pytest11: ringemu``): warm kernels, sane deadlines, fixtures.

What it does in a pytest session, so that a user's property tests pass on a first run with an empty numba cache:

* **warms the kernels** once, after collection and before the first test (:func:`ringemu.testing.warm_kernels`:
  every op in every dtype on a tiny world), when a collected test module uses ringemu or one of the fixtures below
  (``--ringemu-warmup=always|never|auto`` or the ini value ``ringemu_warmup``, default ``auto``: set ``always``
  when your tests reach ringemu only through your own package). A hypothesis example never pays for compiling;
* **registers hypothesis profiles** ``ringemu-dev`` (hypothesis's defaults, deadline 2 s: above any warm
  collective on the worlds ringemu's strategies draw, even on a loaded machine) and ``ringemu-ci`` (hypothesis's own
  ``ci`` profile — derandomized, no example database — with 200 examples, deadline 10 s, failing examples printed as
  a reproducible blob), both without hypothesis's *explain* phase (whose report would point into ringemu's
  oracle rather than your code). If the session chose no profile of its own (no ``--hypothesis-profile``; the profile in
  effect is hypothesis's ``default``, or the ``ci`` it loads itself when ``CI`` is set, not re-registered by a
  conftest), it loads ``ringemu-ci`` under CI and ``ringemu-dev`` otherwise;
* **fixtures**: ``ring_world`` — ``ring_world(n_ranks, mode="fused", timeout=60, algorithm=...)`` returns an
  :class:`~ringemu.worlds.EmulatedWorld` with its own fresh ``CommLedger`` (``world.ledger``), whose
  ``run(fn, *args)`` calls ``fn(comm, *args)`` on every rank at once, as the ZeRO stages run (session-scoped: safe
  inside ``@given``); ``comm_ledger`` — a fresh :class:`~ringemu.ledger.CommLedger` per test (pass it as
  ``ring_world(n, ledger=comm_ledger)``; outside ``@given``, since hypothesis reuses function-scoped fixtures
  across examples); ``assert_traffic`` — :func:`ringemu.testing.assert_traffic`; ``torch_spawn`` —
  :func:`ringemu.torch.spawn` (PyTorch code on thread-ranks under the ``"ringemu"`` backend; skips the test
  when torch is not installed, fails instead under ``CI=true``);
* **header**: one line with ringemu's version, the numba cache location and the profile in effect.

Disable it with ``-p no:ringemu``.
"""
from __future__ import annotations

import os
from datetime import timedelta

import pytest

__all__ = ["PROFILES", "register_profiles", "ring_world", "comm_ledger", "assert_traffic", "torch_spawn"]

PROFILES = ("ringemu-dev", "ringemu-ci")
FIXTURES = ("ring_world", "comm_ledger", "assert_traffic", "torch_spawn")
WARMUP_MODES = ("auto", "always", "never")
_TRUE = ("1", "true", "yes", "on")


def register_profiles() -> None:
    """Register ``ringemu-dev`` and ``ringemu-ci`` with hypothesis (module doc)."""
    from hypothesis import HealthCheck, Phase, settings

    # no explain phase: its "lines that only ran in failing examples" would point into ringemu's oracle, not
    # into the code under test (ringemu's assertion helpers also hide their own frames from pytest's traceback)
    phases = tuple(p for p in Phase if p is not Phase.explain)
    settings.register_profile("ringemu-dev", deadline=timedelta(seconds=2), phases=phases)
    settings.register_profile("ringemu-ci", parent=_HYPOTHESIS_PROFILES.get("ci"), max_examples=200,
                              deadline=timedelta(seconds=10), print_blob=True, phases=phases,
                              suppress_health_check=[HealthCheck.too_slow])


def _stock_profiles() -> dict:
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    stock = {}
    for name in ("default", "ci"):  # hypothesis's own; it loads "ci" itself when the CI variable is set
        try:
            stock[name] = settings.get_profile(name)
        except InvalidArgument:
            pass
    return stock


_HYPOTHESIS_PROFILES = _stock_profiles()  # read when the plugin loads: before any conftest can re-register them


def _current_profile_name() -> str:
    from hypothesis import settings

    getter = getattr(settings, "get_current_profile_name", None)  # hypothesis >= 6.124; earlier: the attribute
    return getter() if getter is not None else str(getattr(settings, "_current_profile", "default"))


def pytest_addoption(parser) -> None:
    group = parser.getgroup("ringemu")
    group.addoption("--ringemu-warmup", choices=WARMUP_MODES, default=None,
                    help="compile ringemu's kernels before the first test: auto (when a test module imports "
                         "ringemu or uses its fixtures), always or never (default: the ringemu_warmup ini value, "
                         "else auto)")
    parser.addini("ringemu_warmup", "auto, always or never: when ringemu compiles its kernels (default auto)",
                  default="auto")


def pytest_configure(config) -> None:
    from hypothesis import settings

    register_profiles()
    chosen_on_command_line = config.getoption("hypothesis_profile", None) is not None
    current = _current_profile_name()
    untouched = current in _HYPOTHESIS_PROFILES and settings.get_profile(current) is _HYPOTHESIS_PROFILES[current]
    if not chosen_on_command_line and untouched:
        ci = current == "ci" or os.environ.get("CI", "").lower() in _TRUE
        settings.load_profile("ringemu-ci" if ci else "ringemu-dev")


def pytest_report_header(config) -> list[str]:
    from . import __version__
    from .testing.warmup import numba_cache_location

    return [f"ringemu {__version__}, numba cache: {numba_cache_location()}, "
            f"hypothesis profile: {_current_profile_name()}"]


def _uses_ringemu(item) -> bool:
    if set(getattr(item, "fixturenames", ())) & set(FIXTURES):
        return True
    module = getattr(item, "module", None)
    for value in vars(module).values() if module is not None else ():
        name = getattr(value, "__module__", None) or getattr(value, "__name__", "")
        if isinstance(name, str) and name.split(".")[0] == "ringemu":
            return True
    return False


def pytest_collection_finish(session) -> None:
    mode = session.config.getoption("ringemu_warmup") or session.config.getini("ringemu_warmup")
    if mode not in WARMUP_MODES:
        raise pytest.UsageError(f"ringemu_warmup must be one of {', '.join(WARMUP_MODES)}; got {mode!r}")
    if mode == "never" or not session.items or (mode == "auto" and not any(map(_uses_ringemu, session.items))):
        return
    from .testing.warmup import warm_kernels

    done = warm_kernels()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and done.jit_enabled:
        reporter.write_line(f"ringemu: kernels warmed ({done.calls} collective calls, {done.seconds:.1f} s)")


@pytest.fixture(scope="session")
def ring_world():
    """``ring_world(n_ranks, *, ledger=None, mode="fused", timeout=60.0, **options)``: an emulated world of N
    ranks (``options`` go to :class:`~ringemu.worlds.EmulatedWorld`, e.g. ``algorithm="tree"``)."""
    from .worlds import EmulatedWorld
    from .ledger import CommLedger

    def make(n_ranks: int, *, ledger: CommLedger | None = None, mode: str = "fused", timeout: float = 60.0,
             **options):
        return EmulatedWorld(n_ranks, ledger=CommLedger() if ledger is None else ledger, mode=mode,
                             timeout=timeout, **options)

    return make


@pytest.fixture
def comm_ledger():
    """A fresh CommLedger for this test."""
    from .ledger import CommLedger

    return CommLedger()


@pytest.fixture(scope="session")
def assert_traffic():
    """:func:`ringemu.testing.assert_traffic`: a ledger against expected bytes or collective calls."""
    from .testing.traffic import assert_traffic as check

    return check


@pytest.fixture(scope="session")
def torch_spawn():
    """:func:`ringemu.torch.spawn`: ``torch_spawn(fn, world_size, algorithm="ring", ledger=None)`` runs ``fn(rank)``
    on thread-ranks under the ``"ringemu"`` torch.distributed backend and returns results and ledger."""
    try:
        from .torch import spawn
    except ModuleNotFoundError as exc:
        if os.environ.get("CI", "").lower() in _TRUE:
            pytest.fail(f"CI is set but torch_spawn needs PyTorch ({exc}); install ringemu[torch]", pytrace=False)
        pytest.skip(f"torch_spawn needs PyTorch ({exc}); install ringemu[torch]")
    return spawn
