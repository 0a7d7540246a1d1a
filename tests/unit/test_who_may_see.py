"""Who may see what (archive/visibility.py): in Hermes' messaging gateway (many users, one home)
a conversation reads only its own lineage's hermes-lcm rows, and the slash command names no
conversation — not in an error, not in the last compaction. The CLI (one user) reads all of
its lcm.db; the operator may open the gateway's too (LCM_HISTORY_SHARED)."""

import json
import sqlite3
import time

import pytest

import tencentdb_offload as plugin
from fakes import lcm_store
from fakes.gateway import FakeGateway
from tencentdb_offload.archive.store import Store
from tencentdb_offload.host.command import make_command

from helpers import alias, as_host, conversation, env_for

READ, SEARCH = "tdai_read_cos", "tdai_offload_search"
ALICE, BOB = "agent:main:telegram:dm:111111", "agent:main:telegram:dm:222222"
ALICE_SECRET, BOB_WORD = "bankpassword-hunter2", "bobsgardenplan"


@pytest.fixture
def lcm_db(tmp_path):
    """hermes-lcm's store of a messaging gateway: Alice's and Bob's old chats, keyed by
    Hermes' session id, plus a row of Bob's earlier (rotated) session id."""
    db = lcm_store.build(tmp_path / "lcm.db", rows=30)
    conn = sqlite3.connect(str(db))
    with conn:
        for sid, text in ((ALICE, "my %s is in the note" % ALICE_SECRET),
                          (BOB, "the %s for spring" % BOB_WORD),
                          ("bob-rotated", "older %s notes" % BOB_WORD)):
            conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                         (sid, "user", text, 1_700_000_000.0))
    conn.close()
    return db


def bob_engine(tmp_path, lcm_db, **overrides):
    env = env_for(tmp_path, lcm_history=str(lcm_db), **overrides)
    rt = plugin.build_runtime(env=env)
    return rt, plugin.open_session(rt, BOB, 64_000, model="m")


def call(eng, name, **args):
    return json.loads(eng.handle_tool_call(name, args))


def alice_key(lcm_db):
    conn = sqlite3.connect(str(lcm_db))
    try:
        return "lcm-%d" % conn.execute("SELECT store_id FROM messages WHERE session_id=?",
                                       (ALICE,)).fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def messaging_gateway(monkeypatch):
    as_host(monkeypatch, messaging_gateway=True)


def test_in_the_messaging_gateway_a_conversation_reads_only_its_own_lcm_rows(
        tmp_path, lcm_db, messaging_gateway):
    rt, eng = bob_engine(tmp_path, lcm_db)
    alias(rt.store, "bob-rotated", BOB)              # Bob's own earlier id: his lineage
    other = call(eng, SEARCH, query=ALICE_SECRET)
    assert other["ok"] and not other["lcm_history"]["results"], other
    assert ALICE_SECRET not in json.dumps(other["lcm_history"])
    read = call(eng, READ, key=alice_key(lcm_db))
    assert not read["ok"] and ALICE_SECRET not in json.dumps(read)
    own = call(eng, SEARCH, query=BOB_WORD)["lcm_history"]
    assert sorted(h["session"] for h in own["results"]) == sorted([BOB, "bob-rotated"])
    assert "own sessions" in own["source"]
    assert call(eng, READ, key=own["results"][0]["key"])["ok"]
    # where nothing proves a row is this conversation's, none is shown
    assert not call(eng, SEARCH, query="parser")["lcm_history"]["results"]


def test_the_operator_may_open_it_to_every_conversation(tmp_path, lcm_db, messaging_gateway):
    _rt, eng = bob_engine(tmp_path, lcm_db, lcm_history_shared="on")
    hits = call(eng, SEARCH, query=ALICE_SECRET)["lcm_history"]["results"]
    assert [h["session"] for h in hits] == [ALICE]
    assert call(eng, READ, key=alice_key(lcm_db))["ok"]


def test_the_cli_reads_all_of_its_own_lcm_history(tmp_path, lcm_db, monkeypatch):
    as_host(monkeypatch)
    _rt, eng = bob_engine(tmp_path, lcm_db)
    assert [h["session"] for h in call(eng, SEARCH, query=ALICE_SECRET)["lcm_history"]["results"]] == [ALICE]
    assert call(eng, SEARCH, query="parser")["lcm_history"]["results"]


def test_the_slash_command_names_no_conversation_in_the_messaging_gateway(tmp_path, messaging_gateway):
    """An error of Alice's conversation (a damaged row the last process left for it) and her
    compaction's Gateway error: Bob's /tencentdb-offload status shows neither her key nor her
    chat id."""
    with FakeGateway() as gw:
        env = env_for(tmp_path, gateway_url=gw.url)
        rt = plugin.build_runtime(env=env)
        rt.store.transaction([Store.op_handover(ALICE, "calibration", "bogus", time.time())])
        gw.set_fault("5xx", paths=("/v2/offload/compact",))
        alice = plugin.open_session(rt, ALICE, 64_000, model="m")
        alice.compress(conversation(40, 5000), current_tokens=60_000)
        bob = plugin.open_session(rt, BOB, 64_000, model="m")
        text = make_command(rt)("status")
        hermes_status = json.dumps(bob.get_status())         # what Hermes' get_status carries
        assert rt.errors and any(ALICE in line for line in rt.errors), list(rt.errors)   # the host's view
    assert "111111" not in text, text
    assert "111111" not in hermes_status, hermes_status
    assert "other conversations" in text and "last compaction: " in text, text
    rt.close()
