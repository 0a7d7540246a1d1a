"""``archive`` and ``outbox`` without an action: a usage error, exit 2 as for any missing
argument (the docs: "no words: exit 2, as for any missing argument"), with the actions named.
They exited 1, the status of a run-time failure."""

from __future__ import annotations

import pytest

from test_cli import home, one_line_error, run_cli  # noqa: F401 (fixture)


@pytest.mark.parametrize("args, actions", [(["archive"], "list, show ID, search WORDS"),
                                           (["archive", "--json"], "export SESSION"),
                                           (["outbox"], "refused, requeue [--session ID], held, send-held")])
def test_a_missing_action_is_a_usage_error(home, args, actions):
    proc = run_cli(*args, home=home)
    one_line_error(proc, "say what to do", actions, "see --help")
    assert proc.returncode == 2
