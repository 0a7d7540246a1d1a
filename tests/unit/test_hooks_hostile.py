"""What a model or tool produces never stops archiving; only a heartbeat poll's shape (never a
word, never a tool's name) keeps a turn from the Gateway; the memory provider's recall traffic
is not the user's work; our canvas and notices never go back to the Gateway as the user's
recent messages. Real store, fake Gateway over real sockets."""

from __future__ import annotations

import json

import pytest

from fakes.gateway import FakeGateway
from tencentdb_offload.context import canvas
from tencentdb_offload.hooks import HookHandlers

from helpers import count_archived, make_engine

GID = "hermes-s1"


@pytest.fixture
def gw():
    with FakeGateway(api_key="k1") as g:
        yield g


def setup(tmp_path, gw):
    rt, eng = make_engine(tmp_path, gateway_url=gw.url, instance_id="svc", api_key="k1")
    return rt, eng, HookHandlers(rt)


def deep(levels: int):
    """What json.loads makes of 970 nested arrays (it accepts them), built without recursion."""
    value = [1]
    for _ in range(levels - 1):
        value = [value]
    return {"path": "/a.py", "nested": value}


def archived(rt, sid="s1"):
    rt.flush_writes()
    return count_archived(rt.store, sid)


def test_heartbeat_words_are_work_and_tool_names_never_matter(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    hooks.pre_llm_call(session_id="s1", user_message="Fix the heartbeat timeout in the scheduler",
                       conversation_history=[])
    hooks.post_tool_call(tool_name="monitor_heartbeat_status", args={"service": "scheduler"},
                         result="heartbeat: 3 missed", session_id="s1", tool_call_id="m1")
    assert rt.flush("s1", 5)
    assert gw.prompts(GID) == ["Fix the heartbeat timeout in the scheduler"]
    assert [p["tool_call_id"] for p in gw.ingested_pairs(GID)] == ["m1"]
    assert archived(rt) == 1


def test_a_heartbeat_poll_is_archived_but_not_sent(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    hooks.pre_llm_call(session_id="s1", user_message="HEARTBEAT check", conversation_history=[])
    hooks.post_tool_call(tool_name="read_file", args={"path": "HEARTBEAT.md"}, result="- nothing",
                         session_id="s1", tool_call_id="h1")
    hooks.post_tool_call(tool_name="terminal", args={"cmd": "uptime"}, result="up 3 days",
                         session_id="s1", tool_call_id="h2")          # a step of the poll turn
    hooks.pre_llm_call(session_id="s1", user_message="now refactor the parser",
                       conversation_history=[])
    hooks.post_tool_call(tool_name="read_file", args={"path": "/src/parser.py"}, result="code",
                         session_id="s1", tool_call_id="w1")
    assert rt.flush("s1", 5)
    assert gw.prompts(GID) == ["now refactor the parser"]
    assert [p["tool_call_id"] for p in gw.ingested_pairs(GID)] == ["w1"]
    assert archived(rt) == 3


def test_memory_provider_tools_are_archived_not_ingested(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    hooks.pre_llm_call(session_id="s1", user_message="plan my trip", conversation_history=[])
    for i, name in enumerate(("memory_tencentdb_memory_search",
                              "memory_tencentdb_conversation_search",
                              "memory_tencentdb_read_scene", "web_search")):
        hooks.post_tool_call(tool_name=name, args={"query": "trip"}, result="No memories found",
                             session_id="s1", tool_call_id="c%d" % i)
    assert rt.flush("s1", 5)
    assert [p["tool_name"] for p in gw.ingested_pairs(GID)] == ["web_search"]
    assert archived(rt) == 4 and rt.counters["recall_pairs_skipped"] == 3


def test_deeply_nested_arguments_are_archived_and_delivered(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    hooks.post_tool_call(tool_name="write_file", args=deep(970), result={"ok": deep(970)},
                         session_id="s1", tool_call_id="d1")
    assert not rt.errors, rt.errors
    assert rt.flush("s1", 5)
    assert archived(rt) == 1 and rt.store.read_page("s1", "d1") is not None
    [pair] = gw.ingested_pairs(GID)
    assert pair["tool_call_id"] == "d1" and pair["params"]["path"] == "/a.py"


def test_lone_surrogates_in_name_and_call_id_are_archived(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    hooks.post_tool_call(tool_name="read\udcff_file", args={"p": "\ud800"}, result="r\udc80",
                         session_id="s1", tool_call_id="call\ud800")
    hooks.post_tool_call(tool_name="read_file", args={}, result="fine", session_id="s1",
                         tool_call_id="c2")
    assert not rt.errors, rt.errors
    assert archived(rt) == 2
    assert rt.flush("s1", 5)
    assert len(gw.ingested_pairs(GID)) == 2


def test_recent_messages_carry_no_canvas_and_no_notice(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    block = canvas.sealed(canvas.format_block("001-a.mmd", "flowchart TD\n  A[fix] --> B[test]"),
                          rt.seal)
    notice = rt.seal.seal_text("notice", "[tencentdb-offload] 12 earlier messages were archived")
    history = [{"role": "user", "content": "please fix the flaky login test\n\n" + block},
               {"role": "assistant", "content": "I fixed the login test by waiting for the form"},
               {"role": "user", "content": notice},
               {"role": "user", "content": "[tencentdb-offload] typed by the user, kept"},
               {"role": "user", "content": "now the signup test\n\n" + block}]
    hooks.pre_llm_call(session_id="s1", user_message="now the signup test\n\n" + block,
                       conversation_history=history)
    assert rt.flush("s1", 5)
    [body] = [r.body for r in gw.requests if r.path.startswith("/v2/offload/ingest")]
    sent = json.dumps(body, ensure_ascii=False)
    assert canvas.OPEN not in sent and "12 earlier messages" not in sent
    assert body["prompt"] == "now the signup test"
    assert [m["content"] for m in body["recent_messages"]] == [
        "please fix the flaky login test", "I fixed the login test by waiting for the form",
        "[tencentdb-offload] typed by the user, kept"]


def test_errors_reach_the_log_without_terminal_controls(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)

    class Hostile:
        def __str__(self):
            raise ValueError("\x1b[2J\x1b[Hhermes> fake prompt")

    hooks.post_tool_call(tool_name=Hostile(), args={}, result="x", session_id="s1",
                         tool_call_id="e1")
    assert rt.errors and "\x1b" not in rt.errors[-1] and "fake prompt" in rt.errors[-1]
