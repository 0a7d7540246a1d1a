"""Engine + hooks + worker against the fake Gateway over real sockets."""

import json
import math
import re
import threading
import time

import pytest

from fakes.gateway import FakeGateway
from tencentdb_offload.context import canvas
from tencentdb_offload.context import messages
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.context.tokens import messages_tokens

from helpers import conversation, make_engine, wait_for

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def gw():
    with FakeGateway(api_key="k1") as g:
        yield g


def setup(tmp_path, gw, **kw):
    kw.setdefault("api_key", "k1")
    rt, eng = make_engine(tmp_path, gateway_url=gw.url, instance_id="svc", **kw)
    return rt, eng, HookHandlers(rt)


def drive_turn(hooks, sid, turn, n_calls=2, size=3000):
    hooks.pre_llm_call(session_id=sid, user_message="turn %d: refactor module %d" % (turn, turn),
                       conversation_history=[], is_first_turn=turn == 0)
    for k in range(n_calls):
        hooks.post_tool_call(tool_name="read_file", args={"path": "/m%d_%d.py" % (turn, k)},
                             result=("line %d.%d\n" % (turn, k)) * (size // 10), session_id=sid,
                             tool_call_id="call_%d_%d" % (turn, k), duration_ms=12)




def test_every_pair_delivered_once_in_order_with_prompt_first(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    gid = eng.current_state().gateway_id
    assert gid == "hermes-s1"
    for t in range(3):
        drive_turn(hooks, "s1", t)
    hooks.post_tool_call(tool_name="read_file", args={"path": "HEARTBEAT.md"}, result="ok",
                         session_id="s1", tool_call_id="hb1")
    hooks.pre_llm_call(session_id="s1", user_message="HEARTBEAT check", conversation_history=[])
    hooks.post_tool_call(tool_name="read_file", args={"path": "/x"}, result="dup", session_id="s1",
                         tool_call_id="call_0_0")           # a repeat of a seen id
    assert rt.flush("s1", 5)
    pairs = gw.ingested_pairs(gid)
    assert [p["tool_call_id"] for p in pairs] == ["call_%d_%d" % (t, k) for t in range(3) for k in range(2)]
    assert all(TS.match(p["timestamp"]) for p in pairs)
    assert gw.prompts(gid) == ["turn %d: refactor module %d" % (t, t) for t in range(3)]
    bodies = [r.body for r in gw.requests if r.path.startswith("/v2/offload/ingest")]
    assert not bodies[0]["tool_pairs"] and bodies[0]["prompt"].startswith("turn 0")  # L1.5 first
    assert len(gw.entries(gid)) == 6


def test_compaction_through_gateway_is_honest_and_valid(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    sid = "s1"
    for t in range(29):
        drive_turn(hooks, sid, t)
    # the backlog a compaction meets is the newest turn's: it waits for it (bounded at
    # FLUSH_BEFORE_COMPACT_S, so a backlog of 58 pairs on a loaded machine may not all fit)
    assert rt.flush(sid, 30)
    drive_turn(hooks, sid, 29)
    conv = conversation(30, 3000, calls=2)
    # the host's count about the list's own, whatever the target: with a fixed 60,000 a lower
    # COMPACT_RATIO left ~0 room and which over-budget landing won (the Gateway's or ours)
    # decided the route, not honesty
    count = messages_tokens(conv) + 2_000
    eng.update_from_response({"prompt_tokens": count})
    out = eng.compress(conv, current_tokens=count)
    assert messages.validation_errors(out) == []
    calls = gw.compact_calls("hermes-s1")
    assert len(calls) == 1
    body, data = calls[0]
    target = int(64_000 * rt.settings.compact_ratio)
    assert body["context_window"] == math.ceil(target / 0.75)
    assert 0 < body["ratio"] <= 2 and isinstance(body["total_tokens"], int)
    assert len(body["message_tokens"]) == len(body["messages"])
    assert all("api_content" not in m for m in body["messages"])
    st = eng.get_status()["session_stats"]
    assert st["gateway_compactions"] == 1 and st["last_level"] in ("mild", "aggressive", "emergency")
    assert eng.current_state().calibrator.to_real(messages_tokens(out)) <= target
    assert eng.compression_count == 1
    # the pairs reached the Gateway before the compaction (ingest-before-compact)
    first_compact = next(i for i, r in enumerate(gw.requests) if "compact" in r.path)
    last_ingest = max(i for i, r in enumerate(gw.requests) if "ingest" in r.path)
    assert last_ingest < first_compact


def test_repairs_dangling_calls_and_canvas_before_system(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    for t in range(20):
        drive_turn(hooks, "s1", t, size=6000)
    rt.flush("s1", 5)
    gw.set_canvas("hermes-s1", '%%{ "taskGoal": "refactor" }%%\nflowchart TD\n  001-N1["read"]')
    conv = [{"role": "system", "content": "be careful"}] + conversation(20, 6000, calls=2)
    eng.update_from_response({"prompt_tokens": 60_000})
    first = eng.compress(conv, current_tokens=60_000)
    assert messages.validation_errors(first) == []
    assert first[0]["role"] == "system"
    assert sum(messages.text_of(m).count("<current_task_context>") for m in first) == 1
    # a second compaction replays the deletions: the fake leaves dangling tool_calls
    later = first + conversation(3, 6000, calls=2)
    eng.update_from_response({"prompt_tokens": 60_000})
    second = eng.compress(later, current_tokens=60_000)
    assert messages.validation_errors(second) == []
    assert sum(messages.text_of(m).count("<current_task_context>") for m in second) == 1
    reply = gw.compact_calls("hermes-s1")[-1][1]["messages"]
    assert messages.validation_errors(reply) or reply[0]["role"] != "system" or any(
        k.startswith("_") for m in reply for k in m)      # the fake really returned something to repair


@pytest.mark.parametrize("fault", ["refuse", "5xx", "garbage", "wrong_shape", "reset"])
def test_gateway_failure_falls_back_locally(tmp_path, gw, fault):
    rt, eng, hooks = setup(tmp_path, gw)
    conv = conversation(60, 4000, calls=2)
    gw.set_fault(fault, paths=None if fault == "refuse" else ("/v2/offload/compact",))
    eng.update_from_response({"prompt_tokens": 60_000})
    out = eng.compress(conv, current_tokens=60_000)
    assert messages.validation_errors(out) == [] and eng.compression_count == 1
    assert eng.current_state().calibrator.to_real(messages_tokens(out)) <= 32_000
    assert any(messages.NOTICE_MARK in messages.text_of(m) for m in out)
    assert eng.get_status()["session_stats"]["local_compactions"] == 1
    assert rt.errors


def test_refused_then_fast_then_delivered_after_recovery(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    gw.set_fault("refuse")
    drive_turn(hooks, "s1", 0)
    rt.flush_writes()
    assert wait_for(lambda: not rt.client.available)
    rt.client.breaker.retry_at = time.monotonic() + 3600    # no probe while the test looks
    gw.clear_fault()            # reachable again: only the open breaker keeps calls off it
    sent = len(gw.requests)
    conv = conversation(30, 4000, calls=2)
    out = eng.compress(conv, current_tokens=60_000)
    drive_turn(hooks, "s1", 1)
    rt.flush_writes()
    assert len(gw.requests) == sent             # breaker open: no network at all
    assert messages.validation_errors(out) == [] and eng.compression_count == 1    # compacted locally
    assert rt.store.outbox.backlog("s1") == 6          # 2 prompts + 4 pairs wait
    rt.client.breaker.retry_at = 0              # don't wait for the backoff in a test
    rt.worker.wake()
    assert wait_for(lambda: rt.store.outbox.backlog("s1") == 0, 10)
    assert [p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")] == [
        "call_0_0", "call_0_1", "call_1_0", "call_1_1"]


def test_wrong_key_reported_as_configuration(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw, api_key="bad")
    drive_turn(hooks, "s1", 0)
    rt.flush_writes()
    assert wait_for(lambda: bool(rt.client.config_error))
    assert rt.client.available                  # not an outage
    assert rt.store.outbox.backlog("s1") == 3          # kept for when the key is fixed
    status = eng.get_status()["runtime"]["gateway"]
    assert "401" in status["config_error"] and "bad" not in json.dumps(status)


def test_canvas_injected_once_and_guarded(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    drive_turn(hooks, "s1", 0)
    assert rt.flush("s1", 5)
    assert wait_for(lambda: bool(eng.current_state().canvas_hash))
    first = hooks.pre_llm_call(session_id="s1", user_message="continue please", conversation_history=[])
    assert first and canvas.blocks(first["context"], rt.seal) == [first["context"]]
    assert hooks.pre_llm_call(session_id="s1", user_message="and more", conversation_history=[]) is None
    block = first["context"]
    stale = canvas.sealed(canvas.format_block("000-old.mmd", "flowchart TD\n  X[old]"), rt.seal)
    request = {"messages": [{"role": "system", "content": "s"},
                            {"role": "user", "content": "old\n\n" + stale},
                            {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": "new\n\n" + block}], "tools": []}
    out = hooks.llm_request(request=request, session_id="s1")
    msgs = out["request"]["messages"]
    assert sum(messages.text_of(m).count(canvas.OPEN) for m in msgs) == 1
    assert msgs[-1]["content"].endswith(block) and msgs[1]["content"] == "old"
    single = {"messages": [{"role": "user", "content": "new\n\n" + block}]}
    assert hooks.llm_request(request=single, session_id="s1") is None   # nothing to change


def test_hooks_return_while_the_gateway_holds_their_turn(tmp_path, gw):
    """Hooks never wait for the Gateway: every request is held at the Gateway until the test
    lets it go, and the client would wait for it (its timeouts are longer than the hold); a
    whole turn's hooks return all the same, and the turn reaches the Gateway after."""
    rt, eng, hooks = setup(tmp_path, gw, timeout_ms="120000", ingest_timeout_ms="120000")
    gw.set_fault("hang", hang_seconds=120)
    done = threading.Event()
    threading.Thread(target=lambda: (drive_turn(hooks, "s1", 0), done.set()), daemon=True).start()
    # a hook that waited for the Gateway would still be in the 120 s hold
    assert done.wait(60), "a hook waited for the Gateway"
    rt.flush_writes()
    assert wait_for(lambda: any(r.path.startswith("/v2/offload/ingest") for r in gw.requests), 60)
    gw.clear_fault()                            # lets the held requests go (unanswered)
    rt.client.breaker.retry_at = 0
    rt.worker.wake()
    assert wait_for(lambda: rt.store.outbox.backlog("s1") == 0, 60)
    assert [p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")] == ["call_0_0", "call_0_1"]


def test_hanging_gateway_costs_one_timeout_then_turns_stay_fast(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw, timeout_ms="400", ingest_timeout_ms="200")
    gw.set_fault("hang", hang_seconds=30)
    conv = conversation(60, 4000, calls=2)
    first = time.perf_counter()
    out = eng.compress(conv, current_tokens=60_000)
    first = time.perf_counter() - first
    assert messages.validation_errors(out) == [] and not rt.client.available
    # Bounded by the timeouts (0.4 s), not by the 30 s hang: the bound is about 7x the
    # timeout so a loaded machine never fails it, and still far below the hang.
    assert first < 3.0
    compacts = lambda: [r for r in gw.requests if r.path.rstrip("/").endswith("/compact")]  # noqa: E731
    sent = len(compacts())          # the Gateway records a request on arrival, before it hangs
    for turn in range(3):
        drive_turn(hooks, "s1", turn)
        again = eng.compress(conv + conversation(turn + 1, 4000), current_tokens=60_000)
        assert eng.current_state().calibrator.to_real(messages_tokens(again)) <= 32_000
    assert len(compacts()) == sent  # breaker open: no compaction went to the network
    gw.clear_fault()
    rt.client.breaker.retry_at = 0
    rt.flush_writes()
    rt.worker.wake()
    assert wait_for(lambda: rt.store.outbox.backlog("s1") == 0, 10)
    assert len(gw.ingested_pairs("hermes-s1")) == 6


def test_every_third_call_failing_loses_and_duplicates_nothing(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw)
    gw.set_fault("5xx", every=3, paths=("/v2/offload/ingest", "/v2/offload/compact"))
    conv = []
    for turn in range(12):
        drive_turn(hooks, "s1", turn)
        conv += conversation(1, 4000, calls=2)
        if turn % 3 == 2:
            out = eng.compress(conv + conversation(20, 4000), current_tokens=60_000)
            assert messages.validation_errors(out) == []
            assert eng.current_state().calibrator.to_real(messages_tokens(out)) <= 32_000
            rt.client.breaker.retry_at = 0       # 5xx opens the breaker; don't wait in a test
            rt.client.breaker.record_success()
    rt.flush_writes()

    def drained():
        rt.client.breaker.record_success()
        rt.worker.kick("s1")
        return rt.store.outbox.backlog("s1") == 0
    assert wait_for(drained, 15)
    ids = [p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")]
    assert sorted(ids) == sorted("call_%d_%d" % (t, k) for t in range(12) for k in range(2))
    assert len(ids) == len(set(ids))              # none delivered twice


def test_unchanged_messages_keep_api_content(tmp_path, gw):
    rt, eng, hooks = setup(tmp_path, gw, compact_ratio="0.5")     # room for the kept turn
    conv = conversation(25, 4000, calls=2)
    block = canvas.sealed(canvas.format_block("000-old.mmd", "old canvas"), rt.seal)
    at = len(conv) - 5          # before the last turn's user message
    conv[at:at] = [{"role": "user", "content": "keep me",
                    "api_content": "keep me\n\nplugin context\n\n" + block},
                   {"role": "assistant", "content": "kept"}]
    assert messages.validation_errors(conv) == []
    out = eng.compress(conv, current_tokens=60_000)
    assert gw.compact_calls("hermes-s1")
    kept = [m for m in out if m.get("content") == "keep me"]
    assert kept and kept[0]["api_content"] == "keep me\n\nplugin context"   # stale canvas gone


def test_outbox_survives_a_process_restart(tmp_path, gw):
    """Pairs queued while the Gateway was down are delivered by the next process."""
    import tencentdb_offload as plugin
    from helpers import env_for
    env = env_for(tmp_path, gateway_url=gw.url, api_key="k1")
    gw.set_fault("refuse")
    first = plugin.build_runtime(env=env)
    hooks = HookHandlers(first)
    drive_turn(hooks, "s1", 0)
    first.flush_writes()
    assert first.store.outbox.backlog("s1") == 3
    first.close()                                  # the process ends with the Gateway down
    gw.clear_fault()
    second = plugin.build_runtime(env=env)         # a new process, same store
    second.worker.wake()
    try:
        assert wait_for(lambda: second.store.outbox.backlog("s1") == 0, 10)
        assert [p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")] == ["call_0_0", "call_0_1"]
        assert gw.prompts("hermes-s1") == ["turn 0: refactor module 0"]
    finally:
        second.close()
