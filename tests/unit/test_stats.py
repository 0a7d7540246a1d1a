"""Every counter has one writer (SessionState.record_*) that updates the conversation and the
process totals together; each is checked through the surface that shows it."""

from __future__ import annotations

import threading

from tencentdb_offload.session.record import Compaction, Level, Route
from tencentdb_offload.context import canvas
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.session.state import SessionRegistry

from helpers import conversation, make_engine

BLOCK = canvas.format_block("001-fix.mmd", "flowchart TD\n  A[fix] --> B[test]")


def _both(rt, eng):
    return eng.get_status()["session_stats"], rt.status()["totals"]


def test_compaction_counters_move_in_the_session_and_the_process(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.compress(conversation(40, 6000), current_tokens=70_000)
    for stats in _both(rt, eng):
        assert stats["compactions"] == 1 and stats["local_compactions"] == 1
        assert stats["gateway_compactions"] == 0 and stats["levels"] == {"local": 1}
        assert stats["tokens_before"] >= 70_000 > stats["tokens_after"] > 0
        assert stats["archived"] > 0 and stats["last_level"] == "local"
        assert stats["last_compaction"]["route"] == "local"


def test_gateway_route_and_error_are_counted(tmp_path):
    rt, eng = make_engine(tmp_path)
    state = eng.current_state()
    state.record_compaction(Compaction(Route.GATEWAY_THEN_LOCAL, Level.MILD, 90_000, 40_000,
                                       45_000, 12, error="body too large"))
    for stats in _both(rt, eng):
        assert stats["gateway_compactions"] == 1 and stats["levels"] == {"mild": 1}
        assert stats["last_error"] == "body too large" and stats["tokens_saved"] == 50_000


def test_canvas_shown_and_removed_through_select_context_and_pre_llm_call(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.current_state().set_canvas(BLOCK)
    conv = [{"role": "system", "content": "s"}] + conversation(2, 50) + [
        {"role": "user", "content": "next turn"}]
    eng.select_context(conv)
    stale = dict(conv[1], content=conv[1]["content"] + "\n\n" + canvas.sealed(BLOCK, rt.seal))
    eng.select_context([conv[0], stale] + conv[2:])
    session, totals = _both(rt, eng)
    assert session["canvas_injections"] == totals["canvas_injections"] == 1
    assert session["canvas_blocks_removed"] == totals["canvas_blocks_removed"] >= 1
    hooks = HookHandlers(rt)
    rt.registry.for_session_id("s2").set_canvas(BLOCK)
    out = hooks.pre_llm_call(session_id="s2", user_message="go on with the fix please",
                             conversation_history=[], is_first_turn=False)
    assert out and "A[fix] --> B[test]" in out["context"]
    assert rt.status()["totals"]["canvas_injections"] == 2


def test_usage_and_cache_buckets(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": 600,
                              "cache_write_tokens": 100})
    eng.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": 200})
    for stats in _both(rt, eng):
        assert stats["prompt_tokens"] == 2000 and stats["cache_read_tokens"] == 800
        assert stats["cache_write_tokens"] == 100 and stats["cache_hit_share"] == 0.4


def test_counters_do_not_lose_updates_across_threads(tmp_path):
    rt, eng = make_engine(tmp_path)
    state = eng.current_state()

    def bump():
        for _ in range(2000):
            state.record_canvas_shown()
    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state.stats.canvas_injections == rt.registry.totals.canvas_injections == 16_000


def test_alias_failures_are_reported_not_swallowed():
    said = []

    def broken(*_a):
        raise OSError("disk I/O error")
    reg = SessionRegistry(alias_lookup=broken, alias_store=broken, on_error=said.append)
    assert reg.conversation_of("child") == "child"
    reg.link("child2", "parent")
    assert "unreadable" in said[0] and "not saved" in said[-1]
