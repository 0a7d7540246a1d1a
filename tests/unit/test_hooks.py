import threading

from tencentdb_offload.hooks import HookHandlers, is_internal_prompt, recent_messages
from tencentdb_offload.memory_gateway.timestamps import gateway_timestamp
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.context.sealed import SealedWork

from helpers import count_archived, make_engine


def test_timestamp_format():
    import datetime
    t = datetime.datetime(2026, 11, 30, 0, 40, 5, 331884, tzinfo=datetime.timezone.utc)
    assert gateway_timestamp(t) == "2026-11-30T00:40:05.331Z"


def test_internal_prompts_are_heartbeat_polls_only():
    assert is_internal_prompt("HEARTBEAT check")
    assert is_internal_prompt("Read HEARTBEAT.md if it exists (workspace context). Follow it "
                              "strictly. Do not infer or repeat old tasks from prior chats. If "
                              "nothing needs attention, reply HEARTBEAT_OK.")
    # words are no sign: Hermes sends none of these itself, a person may
    for text in ("fix the parser", "Fix the heartbeat timeout in the scheduler",
                 "run HEARTBEAT now", "Pre-compaction memory flush", "[Inter-session message] hi",
                 "HEARTBEAT\nand then refactor the scheduler"):
        assert not is_internal_prompt(text), text


def test_recent_messages_rules():
    hist = [{"role": "user", "content": "please refactor the api module"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "tool output"},
            {"role": "assistant", "content": "ok"},                       # too short
            {"role": "assistant", "content": "I refactored the module " + "x" * 500},
            {"role": "user", "content": "HEARTBEAT ping please"},
            {"role": "user", "content": "now write the docs"}]
    out = recent_messages(hist, "now write the docs", SealedWork(Seal.ephemeral()))
    assert [m["role"] for m in out] == ["user", "assistant"]
    assert len(out[1]["content"]) == 400


def test_recent_messages_skip_anthropic_tool_traffic_and_our_sealed_text():
    seal = Seal.ephemeral()
    hist = [{"role": "user", "content": [{"type": "text", "text": "migrate the billing tables"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "reading the schema first"},
                                              {"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "CREATE TABLE invoices (...)"}]},
            {"role": "assistant", "content": seal.seal_text("notice", "the conversation was compacted")},
            {"role": "assistant", "content": [{"type": "text", "text": "the schema has two tables"}]},
            {"role": "user", "content": "now the indexes"}]
    out = recent_messages(hist, "now the indexes", SealedWork(seal))
    assert out == [{"role": "user", "content": "migrate the billing tables"},
                   {"role": "assistant", "content": "the schema has two tables"}]


def test_parallel_tool_calls_lose_nothing(tmp_path):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    barrier = threading.Barrier(16)

    def call(i):
        barrier.wait()
        hooks.post_tool_call(tool_name="read_file", args={"p": i}, result="r%d" % i,
                             session_id="s1", tool_call_id="c%d" % i, telemetry_schema_version="x")

    ts = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    rt.flush_writes()
    assert count_archived(rt.store, "s1") == 16


def test_hooks_never_raise(tmp_path):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    assert hooks.post_tool_call(tool_name=None, args=object(), result=object(), session_id=None) is None
    assert hooks.pre_llm_call(session_id="s", user_message={"weird": 1}, conversation_history="nope") is None
    assert hooks.llm_request(request="not a dict") is None


def test_local_mode_sends_nothing_and_skips_engine_tools(tmp_path):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    hooks.pre_llm_call(session_id="s1", user_message="do work", conversation_history=[])
    hooks.post_tool_call(tool_name="tdai_read_cos", args={}, result="copy", session_id="s1", tool_call_id="e1")
    hooks.post_tool_call(tool_name="read_file", args={"path": "HEARTBEAT.md"}, result="hb", session_id="s1", tool_call_id="h1")
    hooks.post_tool_call(tool_name="read_file", args={}, result="real", session_id="s1", tool_call_id="r1")
    rt.flush_writes()
    assert rt.store.outbox.backlog() == 0 and rt.worker is None
    assert count_archived(rt.store, "s1") == 2           # the heartbeat's result is kept too
