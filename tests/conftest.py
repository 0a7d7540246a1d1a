"""Load the repository root (the plugin directory) as the package ``tencentdb_offload``,
the way Hermes loads a user plugin, so tests import it by a stable name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from plugin_loader import load_plugin  # noqa: E402  (tests/ is on sys.path from here)


load_plugin()


def pytest_runtest_setup(item):
    # a test holding the default Gateway port must run alone (see helpers.DEFAULT_PORT)
    if item.get_closest_marker("default_port") and os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.fail("a default_port test ran in a parallel worker; tests/run.py runs them "
                    "alone, before the parallel run (-m default_port)")


@pytest.fixture(autouse=True)
def host_described_per_test(monkeypatch):
    """The host is described once per process (hermes/host.py); each test starts undescribed,
    so one test's environment or ``helpers.as_host`` never reaches the next."""
    from tencentdb_offload.hermes import host
    monkeypatch.setattr(host, "_current", None)


@pytest.fixture
def busy_switching():
    """Thread switches as often as the interpreter allows: an unlocked read-modify-write
    interleaves within a test's few seconds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)
