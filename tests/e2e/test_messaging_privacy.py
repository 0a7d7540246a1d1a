"""End-to-end: two users of ONE real ``hermes gateway run`` (API server) switched from hermes-lcm
on one HERMES_HOME. Neither can search, read or see in status anything of the other's: the
archive, the lcm history, errors, conversation keys (issue 51).

The home holds hermes-lcm's ``lcm.db`` with both users' old chats (keyed by Hermes' session ids,
which the users go on with) and a third user's. Each user reads tagged files (archived under
their conversation) and compacts while the fake Gateway fails ``/compact`` (an error recorded
for their conversation). Then each asks, through the model, for the other's lcm secret, the
other's lcm row by key, the other's file tag and the other's tool call id: every tool answer
and every request of that user is checked for anything of the other. The slash command, run
by Hermes' own dispatcher in a process marked as the messaging gateway on the same home, names
neither user. Positive controls: each finds their own old lcm message; the host's
``python3 <plugin dir> status`` (the operator) names both.

Runs on Hermes 0.22 (the messaging gateway this plugin supports with the API server; 0.17's
is not a supported host). Run: ``TDO_HERMES_VERSION=0.22.2 <hermes venv>/bin/python -m pytest -s
tests/e2e/test_messaging_privacy.py``.
"""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes import lcm_store  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402
from tests.fakes.gateway import FakeGateway  # noqa: E402

HERMES_VERSION = harness.hermes_version() or ""
USERS = {"alice": "switch-alice-7731", "bob": "switch-bob-4410"}
SECRET = {"alice": "alicebankpin-orchid", "bob": "bobvaultcode-juniper"}
TAG = {"alice": "aliceprivfile", "bob": "bobprivfile"}

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip("run tests/e2e with the Hermes venv's python", allow_module_level=True)


def _lcm_db(home: Path) -> Dict[str, str]:
    """hermes-lcm's store left in the home: both users' old chats and a stranger's; the key of
    each user's secret row."""
    db = lcm_store.build(home / "lcm.db", rows=60)
    conn = sqlite3.connect(str(db))
    keys = {}
    with conn:
        for user, sid in USERS.items():
            cur = conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                               (sid, "user", "remember: my code is %s" % SECRET[user], 1_700_000_000.0))
            keys[user] = "lcm-%d" % cur.lastrowid
    conn.close()
    return keys


SLASH = textwrap.dedent("""
    from hermes_cli.plugins import get_plugin_command_handler
    handler = get_plugin_command_handler("tencentdb-offload")
    print(handler("status"))
""")


def _slash_status(home: Path) -> str:
    """``/tencentdb-offload status`` through Hermes' own plugin-command dispatch, in a process
    marked as the messaging gateway on this home (the API server has no slash commands)."""
    env = harness._child_env(home, {"_HERMES_GATEWAY": "1"})
    out = subprocess.run([sys.executable, "-c", SLASH], env=env, cwd=str(home.parent),
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _tool_answers(exchanges: List) -> List[str]:
    return [harness.request_text({"messages": [m]}) for ex in exchanges for m in ex.messages
            if m.get("role") == "tool"]


@pytest.mark.skipif(not HERMES_VERSION.startswith("0.22"),
                    reason="the messaging gateway with the API server and a switched lcm.db is a 0.22 host here")
def test_two_users_switched_from_lcm_see_nothing_of_each_other(tmp_path):
    problem = harness.api_server_problem() or harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    gwp = None
    with FakeLLM() as llm, FakeGateway(api_key="gw-key") as gw:
        port = harness.free_port()
        env = {"TENCENTDB_OFFLOAD_GATEWAY_URL": gw.url, "TENCENTDB_OFFLOAD_API_KEY": "gw-key",
               "TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "20000", **harness.api_server_env(port)}
        home = harness.make_home(tmp_path, llm.url, env=env)
        lcm_keys = _lcm_db(home)
        gw.set_fault("5xx", paths=("/v2/offload/compact",))     # an error for each conversation
        files = {u: harness.make_text_files(tmp_path / "f" / u, 6, tag=TAG[u]) for u in USERS}
        seen: Dict[str, List] = {u: [] for u in USERS}
        answers: Dict[str, List[str]] = {u: [] for u in USERS}

        def turn(user: str, prompt: str) -> str:
            before = len(llm.exchanges)
            reply = gwp.chat(USERS[user], prompt)
            assert reply.status == 200, (user, prompt, reply.text[:500])
            new = [ex for ex in llm.exchanges[before:] if not ex.auxiliary]
            seen[user] += new
            answers[user] += _tool_answers(new[-1:])
            return reply.text

        try:
            gwp = harness.GatewayProcess(home, port)
            gwp.start()
            for user in USERS:
                turn(user, "DO read " + " ".join(p for p, _ in files[user][:4]))
                turn(user, "DO read " + " ".join(p for p, _ in files[user][4:]))
            calls = {u: [cid for ex in seen[u] for m in ex.messages if m.get("role") == "tool"
                         for cid in [m.get("tool_call_id")] if cid] for u in USERS}
            for user, other in (("alice", "bob"), ("bob", "alice")):
                turn(user, "DO search " + SECRET[other])
                turn(user, "DO recall " + lcm_keys[other])
                turn(user, "DO search " + TAG[other])
                turn(user, "DO recall " + calls[other][0])
                own = turn(user, "DO search " + SECRET[user])
                assert SECRET[user] in own, own                 # its own old history is there
        finally:
            if gwp is not None:
                gwp.sigterm()
    operator = harness.plugin_cli(home, "status")
    slash = _slash_status(home)
    print("\n/tencentdb-offload status in the messaging gateway:\n" + slash)

    for user, other in (("alice", "bob"), ("bob", "alice")):
        # what only the other's data holds (a user's own prompts name the other's secret and tag)
        theirs = ["my code is " + SECRET[other], USERS[other]] + [n for _, n in files[other]]
        leaked = [t for t in theirs for ex in seen[user] if t in harness.request_text(ex.body)]
        assert not leaked, "%s's requests carry %s's %s" % (user, other, sorted(set(leaked)))
        assert len(answers[user]) >= 5 and not any(t in a for t in theirs for a in answers[user])
    assert USERS["alice"] in operator.stdout and USERS["bob"] in operator.stdout, operator.stdout
    for user in USERS:
        for text in (USERS[user], SECRET[user], TAG[user], "hermes-" + USERS[user]):
            assert text not in slash, (text, slash)
    assert "conversations are not named here" in slash and "other conversations" in slash, slash
