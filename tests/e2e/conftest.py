"""e2e suite hooks: the host exit crashes recorded in this run (``exit_crash.py``) get a
section of their own at the end of the run, so a green run that lived with one says so."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # for ``tests.e2e``; appended so plugin modules never shadow
    sys.path.append(str(REPO_ROOT))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from tests.e2e.exit_crash import RECORDED, describe, suite_log

    if not RECORDED:
        return
    tr = terminalreporter
    tr.section("host exit crashes (Hermes died by a signal after the turn's output was complete)",
               yellow=True)
    for entry in RECORDED:
        tr.line(describe(entry))
        for line in entry["faulthandler"].splitlines()[:6]:
            tr.line("    " + line)
    tr.line("%d recorded; every record (with the full traceback): %s" % (len(RECORDED), suite_log()))


@pytest.fixture(scope="session")
def story_sessions(tmp_path_factory):
    """test_story's sessions and test_story_paused's, run once and at once: (runs by name,
    wall seconds) from ``test_story.sessions``."""
    from test_story import sessions

    return sessions(tmp_path_factory.mktemp("story"))
