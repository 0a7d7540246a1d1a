"""The engine API newer hosts call (0.22): select_context, prune_tool_results_only,
should_compress_info, the status line, clone_for_agent, cache buckets; and register() called
once per agent sharing one runtime."""

from __future__ import annotations

import json
import os
import socket
import sys

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.context import canvas
from tencentdb_offload.context.messages import is_real_user, text_of, validation_errors

from helpers import as_host, conversation, make_engine

BLOCK = canvas.format_block("001-fix.mmd", "flowchart TD\n  A[fix the bug] --> B[run tests]")
TURN_START = {"role": "user", "content": "next: the parser, please"}   # a turn's first request


def count_blocks(messages, seal=None):
    return sum(len(canvas.blocks(text_of(m), seal)) for m in messages if isinstance(m, dict))


def test_select_context_puts_exactly_the_current_canvas_once(tmp_path):
    rt, eng = make_engine(tmp_path)
    conv = [{"role": "system", "content": "sys"}] + conversation(3, 100) + [TURN_START]
    assert eng.select_context(conv, conversation_messages=conv, budget_tokens=64_000) is None
    eng.current_state().set_canvas(BLOCK)
    stale = canvas.sealed(canvas.format_block("000-old.mmd", "flowchart TD\n  X[old]"), rt.seal)
    conv[1] = dict(conv[1], content=conv[1]["content"] + "\n\n" + stale)
    snapshot = json.dumps(conv)
    out = eng.select_context(conv, conversation_messages=conv, budget_tokens=64_000)
    assert json.dumps(conv) == snapshot, "the host's list was changed"
    newest_user = max(i for i, m in enumerate(out) if is_real_user(m))
    assert count_blocks(out, rt.seal) == 1
    assert canvas.sealed(BLOCK, rt.seal) in text_of(out[newest_user])
    assert "000-old" not in json.dumps(out)
    assert validation_errors(out) == []
    again = eng.select_context(out, conversation_messages=conv, budget_tokens=64_000)
    assert count_blocks(again, rt.seal) == 1
    st = eng.get_status()["session_stats"]
    assert st["canvas_injections"] == 1 and st["canvas_blocks_removed"] == 2


def test_select_context_feeds_the_calibration(tmp_path):
    rt, eng = make_engine(tmp_path)
    conv = [{"role": "system", "content": "system prompt " * 200}] + conversation(5, 2000)
    eng.select_context(conv)
    est = eng.current_state().request_estimate
    assert est > 0 and eng.current_state().overhead_estimate > 0
    eng.update_from_response({"prompt_tokens": est + 900})
    assert eng.current_state().calibrator.points == 1


def test_prune_never_rewrites_what_the_host_will_not_persist(tmp_path):
    """0.22 keeps every row as first written: a prune would be undone by the next process or
    agent, two cache breaks for nothing durable. So the cheap step changes nothing."""
    rt, eng = make_engine(tmp_path, trim_chars="1500")
    conv = conversation(8, 6000)
    for tokens in (10_000, 40_000, 60_000):
        same, n = eng.prune_tool_results_only(conv, current_tokens=tokens)
        assert same is conv and n == 0
    assert rt.store is not None and rt.store.events("compaction") == []


def test_near_the_trigger_a_gateway_compaction_is_prepared_and_compress_applies_it(tmp_path):
    from fakes.gateway import FakeGateway
    from helpers import wait_for
    with FakeGateway(api_key="k1") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k1")
        conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
        eng.prune_tool_results_only(conv, current_tokens=int(eng.threshold_tokens * 0.5))
        assert rt.ahead.status()["prepared_started"] == 0, "too early: nothing is prepared"
        eng.prune_tool_results_only(conv, current_tokens=int(eng.threshold_tokens * 0.9))
        assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 30)
        compacts = lambda: [r for r in gw.requests if r.path.endswith("/compact")]
        assert len(compacts()) == 1
        later = conv + [{"role": "user", "content": "and now the next step, please"}]
        out = eng.compress(later, current_tokens=eng.threshold_tokens + 1000)
        assert len(compacts()) == 1, "compress applied the prepared result, asked nothing more"
        assert validation_errors(out) == [] and out[-1] == later[-1]
        last = eng.get_status()["session_stats"]["last_compaction"]
        assert last["route"].startswith("gateway") and rt.ahead.status()["prepared_used"] == 1
        rt.close()


def test_should_compress_info_gives_a_reason_only_for_a_real_block(tmp_path):
    """0.22 calls it after every tool round and prints any reason as "over the threshold
    but compression is blocked": below the trigger there must be none."""
    rt, eng = make_engine(tmp_path)
    assert eng.should_compress_info(10_000) == (False, None)
    eng.last_prompt_tokens = -1
    assert eng.should_compress_info() == (False, None)
    assert eng.should_compress_info(50_000) == (True, None)
    _rt, off = make_engine(tmp_path / "off", enabled="false")
    ok, why = off.should_compress_info(50_000)
    assert not ok and "disabled" in why
    assert not eng.has_content_to_compress([{"role": "user", "content": "hi"}])
    assert eng.has_content_to_compress(conversation(6, 100))


def test_status_line_names_the_plugin_path_and_tokens(tmp_path):
    """0.22 asks for the line when a compaction starts: it names the plugin, the path, the
    size and target, how to recall, and how the previous compaction ended."""
    rt, eng = make_engine(tmp_path)
    first = eng.get_automatic_compaction_status_message(
        phase="compress", default_message="Compacting context…", approx_tokens=70_000)
    from tencentdb_offload.common.humanize import kilo
    target = kilo(rt.settings.target_tokens(eng.context_length))
    assert first == ("tencentdb-offload: compacting ~70K tokens (Hermes' estimate) locally to the "
                     "%s-token target; what leaves stays readable (recall: tdai_read_cos, "
                     "tdai_offload_search)" % target)
    eng.compress(conversation(40, 6000), current_tokens=70_000)
    line = eng.get_automatic_compaction_status_message(phase="compress", default_message="x")
    assert line.startswith("tencentdb-offload: compacting the context locally")
    assert ". Last: compacted locally: 70,000 → " in line and "items archived" in line
    assert eng.get_status()["session_stats"]["last_compaction"]["route"] == "local"


def test_clone_for_agent_shares_the_runtime_not_the_budget(tmp_path):
    rt, eng = make_engine(tmp_path)
    twin = eng.clone_for_agent()
    assert twin.runtime is rt and twin is not eng
    twin.update_model(model="small", context_length=32_000)
    assert eng.context_length == 64_000 and twin.threshold_tokens == 24_000


def test_cache_buckets_show_as_hit_share(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": 600, "cache_write_tokens": 100})
    eng.update_from_response({"prompt_tokens": 1000, "input_tokens": 1000})
    st = eng.get_status()["session_stats"]
    assert st["cache_read_tokens"] == 600 and st["cache_hit_share"] == 0.3


class FakeContext:
    def __init__(self):
        self.engines, self.hooks, self.commands, self.middleware = [], [], [], []

    def register_context_engine(self, engine):
        self.engines.append(engine)

    def register_hook(self, name, fn):
        self.hooks.append(name)

    def register_command(self, name, handler, description="", args_hint=""):
        self.commands.append(name)

    def register_middleware(self, kind, fn):
        self.middleware.append(kind)


class _EngineCollector(FakeContext):
    """Named like 0.22's engine loader context, whose hook registration is a no-op."""


def test_register_per_agent_shares_one_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TENCENTDB_OFFLOAD_GATEWAY_URL", "off")
    monkeypatch.delitem(sys.modules, "_tencentdb_offload_process", raising=False)
    collector, real, again = _EngineCollector(), FakeContext(), _EngineCollector()
    plugin.register(collector)          # 0.22: the engine loader may come first
    plugin.register(real)               # the general plugin loader: hooks go here
    plugin.register(again)              # one more agent
    engines = collector.engines + real.engines + again.engines
    assert len(engines) == 3 and len({id(e.runtime) for e in engines}) == 1
    assert collector.hooks == [] and sorted(real.hooks) == ["post_tool_call", "pre_llm_call"]
    assert again.hooks == [] and len(collector.commands + real.commands + again.commands) == 1
    runtime = engines[0].runtime
    assert not runtime.closed and runtime.writer is not None
    engines[2].on_session_start("s-a")
    engines[2].compress(conversation(40, 6000), current_tokens=70_000)
    assert engines[0].runtime.registry.totals.compactions == 1
    runtime.close()
    assert os.environ["HERMES_HOME"].endswith("home")


def test_register_makes_no_network_call(tmp_path, monkeypatch):
    """Hermes 0.22 refuses a plugin whose import + register() overrun plugins.load_timeout_seconds
    (10 s): a Gateway that hangs must cost the load nothing. The configured Gateway is a socket
    that listens and never answers; register() connects to it zero times."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TENCENTDB_OFFLOAD_GATEWAY_URL", "http://127.0.0.1:%d" % listener.getsockname()[1])
    monkeypatch.delitem(sys.modules, "_tencentdb_offload_process", raising=False)
    real = FakeContext()
    try:
        plugin.register(_EngineCollector())
        plugin.register(real)
        with pytest.raises(BlockingIOError):
            listener.accept()           # nothing connected while the plugin loaded
        assert real.engines and real.engines[0].runtime.client is not None, "the Gateway is configured"
    finally:
        listener.close()
        if real.engines:
            real.engines[0].runtime.close()


def test_usage_that_cannot_be_recorded_never_fails_the_provider_call(tmp_path):
    """Hermes calls update_from_response inside its API retry loop: a raise there is
    retried as a failed provider call and ends the turn."""
    rt, eng = make_engine(tmp_path)
    eng.current_state().calibrator = None              # any internal fault
    eng.update_from_response({"prompt_tokens": 1234, "completion_tokens": 5})
    eng.current_state().request_estimate = 900
    eng.update_from_response({"prompt_tokens": 1300})
    assert any("usage not recorded" in e for e in rt.errors)


def test_hermes_model_thresholds_are_honoured_by_the_hosts_matching_rule(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.model_thresholds = {"gpt": 0.6, "gpt-5": 0.9, "openai:gpt-5": 0.8, "tiny": 0.3}
    eng.update_model(model="gpt-5-mini", context_length=100_000, provider="openai")
    assert eng.threshold_tokens == 80_000                  # scoped key of the same substring
    eng.update_model(model="gpt-5-mini", context_length=100_000, provider="other")
    assert eng.threshold_tokens == 90_000                  # the longest bare match
    eng.update_model(model="tiny-model", context_length=100_000)
    assert eng.threshold_tokens == 75_000, "below the landing ratio: ours is kept"
    twin = eng.clone_for_agent()
    twin.update_model(model="gpt-4o", context_length=100_000)
    assert twin.threshold_tokens == 60_000


def test_a_compaction_the_user_asks_for_makes_the_context_smaller(tmp_path):
    """/compress (force) under the target: the user asked for a smaller context, so it gets
    about half; automatic compaction at the same size changes nothing."""
    rt, eng = make_engine(tmp_path)
    conv = conversation(40, 1000)
    assert eng.compress(conv, current_tokens=15_000) is conv
    out = eng.compress(conv, current_tokens=15_000, force=True)
    assert out is not conv and validation_errors(out) == []
    rec = eng.get_status()["session_stats"]["last_compaction"]
    assert rec["target"] <= rec["tokens_before"] // 2 + 1
    assert rec["tokens_after"] <= rec["tokens_before"] * 2 // 3, "clearly smaller"


def test_the_line_names_a_gateway_nobody_configured(tmp_path):
    from fakes.gateway import FakeGateway
    with FakeGateway(api_key="local") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url)
        line = eng.get_automatic_compaction_status_message(phase="compress", default_message="x",
                                                           approx_tokens=50_000)
        assert "through the Gateway" in line and "not configured" not in line
        rt.close()
    import dataclasses
    rt2, eng2 = make_engine(tmp_path / "b")
    rt2.settings = dataclasses.replace(rt2.settings, gateway_configured=False,
                                       gateway_url="http://127.0.0.1:8420")
    rt2.client = type("Up", (), {"available": True})()
    line = eng2.get_automatic_compaction_status_message(phase="compress", default_message="x")
    assert "at the default URL http://127.0.0.1:8420 (not configured)" in line


def test_the_canvas_stays_where_it_was_shown_until_a_compaction(tmp_path):
    """0.22 rebuilds every request: a canvas that followed the newest user message, or changed
    with every redraw, would rewrite an earlier message each turn (a prompt-cache break)."""
    rt, eng = make_engine(tmp_path)
    conv = [{"role": "system", "content": "sys"}] + conversation(3, 100) + [TURN_START]
    eng.current_state().set_canvas(BLOCK)
    first = eng.select_context(conv)
    eng.current_state().set_canvas(canvas.format_block("002-next.mmd", "flowchart TD\n  C[next]"))
    later = conv + [{"role": "user", "content": "and now the docs please"}]
    second = eng.select_context(later)
    assert second[:len(first)] == first, "the request so far is sent byte for byte again"
    assert count_blocks(second, rt.seal) == 1 and "002-next" not in json.dumps(second)
    eng.current_state().canvas_repin = True                  # what a compaction sets
    third = eng.select_context(later)
    assert count_blocks(third, rt.seal) == 1 and "002-next" in text_of(third[-1])


def test_a_canvas_drawn_mid_turn_waits_for_the_next_turn(tmp_path):
    """The Gateway draws the canvas after the turn's tool calls: the turn's user message was
    already sent without it, and adding it there would re-bill everything after it."""
    rt, eng = make_engine(tmp_path)
    turn = [{"role": "system", "content": "sys"}, dict(TURN_START)]
    assert eng.select_context(turn) is None
    eng.current_state().set_canvas(BLOCK)
    step = turn + conversation(1, 100)[1:]            # the model's call and its result
    assert eng.select_context(step) is None, "mid-turn: sent as it is, no rewrite"
    nxt = step + [{"role": "user", "content": "and the tests"}]
    shown = eng.select_context(nxt)
    assert shown[:len(step)] == step and count_blocks(shown, rt.seal) == 1
    assert canvas.sealed(BLOCK, rt.seal) in text_of(shown[-1])


def test_the_next_process_sends_the_canvas_where_the_last_one_pinned_it(tmp_path):
    """A restarted messaging gateway or the next ``--resume`` process rebuilds the request from
    the stored history: it must carry the canvas on the same message, as shown, or the whole
    request after it is re-billed."""
    conv = [{"role": "system", "content": "sys"}] + conversation(3, 100) + [dict(TURN_START)]
    rt, eng = make_engine(tmp_path)
    eng.current_state().set_canvas(BLOCK)
    first = eng.select_context(conv)
    assert count_blocks(first, rt.seal) == 1
    rt.close()
    later = conv + conversation(1, 100)[1:] + [{"role": "user", "content": "and the docs"}]
    rt2, eng2 = make_engine(tmp_path)               # same store, nothing in memory
    assert eng2.current_state().canvas_text == "", "the new process has no canvas from the Gateway yet"
    again = eng2.select_context(later)
    assert again[:len(first)] == first, "the request so far is sent byte for byte again"
    assert count_blocks(again, rt2.seal) == 1
    rt2.close()
    rt3, eng3 = make_engine(tmp_path, canvas="false")
    assert eng3.select_context(later) is None, "the canvas turned off: no pinned canvas either"
    rt3.close()


def test_the_next_process_starts_with_this_conversations_calibration(tmp_path):
    """One process per ``--resume`` turn, one agent per messaging request: the first estimate
    of each must already be calibrated by what the previous one learned."""
    conv = [{"role": "system", "content": "system prompt " * 200}] + conversation(5, 2000)
    rt, eng = make_engine(tmp_path)
    eng.select_context(conv)
    eng.update_from_response({"prompt_tokens": eng.current_state().request_estimate * 2})
    learned = eng.current_state().calibrator.snapshot()
    assert learned["points"] == 1 and learned["slope"] == 2.0
    rt.close()
    rt2, eng2 = make_engine(tmp_path)
    assert eng2.current_state().calibrator.snapshot() == learned
    rt2.close()
    rt3, eng3 = make_engine(tmp_path, session="other")
    assert eng3.current_state().calibrator.points == 0, "another conversation learns its own"
    rt3.close()


def test_a_damaged_handover_is_ignored_not_trusted(tmp_path):
    """The store is a file anyone can edit: rows that are not what we wrote start cold."""
    import sqlite3
    rt, eng = make_engine(tmp_path)
    eng.current_state()
    path = rt.store.path
    rt.close()
    db = sqlite3.connect(str(path))
    rows = [("s1", "calibration", '[[1, "x"], [true, 3], [-5, 10], "zz"]'),
            ("s1", "pin", json.dumps(["abc", "x" * 200_000])),
            ("s2", "calibration", "{not json"), ("s2", "pin", '["only one"]')]
    db.executemany("INSERT OR REPLACE INTO handover(conversation,name,value,at) VALUES (?,?,?,0)", rows)
    db.commit()
    db.close()
    rt2, eng2 = make_engine(tmp_path)
    for key in ("s1", "s2"):
        st = rt2.registry.get(key)
        assert st.calibrator.points == 0 and st.pinned_canvas == ""
    conv = [{"role": "system", "content": "sys"}] + conversation(2, 50) + [dict(TURN_START)]
    assert eng2.select_context(conv) is None
    rt2.close()


def test_a_fresh_process_compacting_first_counts_what_the_host_adds(tmp_path):
    """0.17 compacts at a turn's start, in a new process, before this process sent anything:
    the calibration came over from the last process, the size of the system prompt and tool
    schemas did not. The host's count of the request still says it; without it the
    compaction believed it had landed at the target while the request was 14K tokens over."""
    from tencentdb_offload.context.tokens import messages_tokens
    extra = 14_000                      # what the host sends beside the list (tools, prompt)
    rt, eng = make_engine(tmp_path, gateway_url="off")
    for turns in (3, 6, 9):             # what the request hook measures, then the provider's count
        eng.current_state().request_estimate = messages_tokens(conversation(turns, 2000)) + extra
        eng.update_from_response({"prompt_tokens": messages_tokens(conversation(turns, 2000)) + extra})
    assert eng.current_state().calibrator.points == 3
    rt.close()
    rt2, eng2 = make_engine(tmp_path, gateway_url="off")
    big = conversation(40, 4000)
    out = eng2.compress(big, current_tokens=messages_tokens(big) + extra)
    target = rt2.settings.target_tokens(64_000)
    assert messages_tokens(out) + extra <= target, (messages_tokens(out), extra, target)
    rt2.close()


def test_on_a_small_window_022_never_triggers_before_the_builtin(tmp_path, monkeypatch):
    """0.22 (the host that checks before every request): on a window Hermes' 64K floor binds,
    never before the built-in's trigger (0.90 of the window there: the ceiling), in its messaging gateway 0.85 of an 85K-128K window; a threshold
    the user or a model table set is used as set."""
    from tencentdb_offload.settings.config import load_settings
    from tencentdb_offload.settings.thresholds import small_window_trigger
    assert [small_window_trigger(w, int(w * 0.75)) for w in (32_000, 64_000, 80_000, 100_000, 200_000)] \
        == [24_000, 54_400, 64_000, 75_000, 150_000]
    rt, eng = make_engine(tmp_path)
    eng.update_model(model="m", context_length=64_000)
    assert eng.threshold_tokens == 48_000, "0.17/0.19 (and outside Hermes): the setting as it is"
    as_host(monkeypatch, selects_context=True, small_window_floor=True)
    eng.update_model(model="m", context_length=64_000)
    # never before the built-in; mid-turn up to the ceiling, since its turn-start check
    # compacts before a step that would pass it (compaction.ceiling)
    assert eng.threshold_tokens == 57_600
    assert abs(eng.summary_target_ratio - rt.settings.target_tokens(64_000) / 57_600) < 1e-9, \
        "idle compaction lands at the target"
    eng.update_model(model="m", context_length=100_000)
    assert eng.threshold_tokens == 75_000, "a window the floor does not bind"
    as_host(monkeypatch, selects_context=True, small_window_floor=True, messaging_gateway=True)
    eng.update_model(model="m", context_length=64_000)
    assert eng.threshold_tokens == 57_600, "the floor in the messaging gateway too, at 64K"
    eng.update_model(model="m", context_length=100_000)
    assert eng.threshold_tokens == 85_000, "and triggers later on an 85K-128K window"
    assert eng.compaction_target() == 35_000, "where it lands lower"
    eng.update_model(model="m", context_length=200_000)
    assert eng.threshold_tokens == 150_000, "above it, the setting"
    assert eng.compaction_target() == rt.settings.target_tokens(200_000)
    as_host(monkeypatch, selects_context=True, small_window_floor=True)
    eng.model_thresholds = {"m": 0.7}
    eng.update_model(model="m", context_length=64_000)
    assert eng.threshold_tokens == 44_800, "a model table's threshold as set"
    eng.model_thresholds = {}
    rt.settings = load_settings({"TENCENTDB_OFFLOAD_THRESHOLD": "0.75"})[0]
    eng.update_model(model="m", context_length=64_000)
    assert rt.settings.threshold_explicit and eng.threshold_tokens == 48_000, "the user's as set"


def test_the_messaging_gateway_lands_lower_unless_the_ratio_is_set():
    """0.22's messaging gateway on an 85K-128K window: with COMPACT_RATIO unset, its lower
    landing; a ratio the user set, or one corrected below a low threshold, as it is; elsewhere
    the settings' target."""
    from tencentdb_offload.settings.config import load_settings
    from tencentdb_offload.settings.thresholds import MESSAGING_LANDING_RATIO, landing_tokens, landing_text
    unset = load_settings({})[0]
    assert landing_tokens(unset, 100_000, True) == int(100_000 * MESSAGING_LANDING_RATIO) \
        < unset.target_tokens(100_000)
    assert "messaging gateway" in landing_text(unset)
    for window, messaging in ((100_000, False), (64_000, True), (200_000, True)):
        assert landing_tokens(unset, window, messaging) == unset.target_tokens(window), (window, messaging)
    for env in ({"TENCENTDB_OFFLOAD_COMPACT_RATIO": "0.5"}, {"TENCENTDB_OFFLOAD_THRESHOLD": "0.3"},
                {"TENCENTDB_OFFLOAD_THRESHOLD": "0.3", "TENCENTDB_OFFLOAD_COMPACT_RATIO": "0.2"},
                {"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "80000"}):
        settings = load_settings(env)[0]
        assert landing_tokens(settings, 100_000, True) == settings.target_tokens(100_000), env
        assert "messaging gateway" not in landing_text(settings), env


def test_a_cap_that_does_not_bind_leaves_the_hosts_rules_and_one_that_does_is_a_ceiling():
    """MAX_CONTEXT_TOKENS is a ceiling: 5M on a 64K window changes nothing (0.22's floor stays);
    under 0.22's later triggers it still caps them."""
    from tencentdb_offload.settings.config import load_settings
    from tencentdb_offload.settings.thresholds import applying_trigger
    plain = load_settings({})[0]
    for window, floor, messaging in ((64_000, True, False), (100_000, False, True), (200_000, True, False)):
        huge = load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "5000000"})[0]
        assert applying_trigger(huge, window, host_floor=floor, messaging=messaging).tokens == \
            applying_trigger(plain, window, host_floor=floor, messaging=messaging).tokens, window
    for cap, window, floor, messaging in ((80_000, 100_000, False, True), (50_000, 64_000, True, False)):
        capped = load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": str(cap)})[0]
        trigger = applying_trigger(capped, window, host_floor=floor, messaging=messaging)
        assert trigger.tokens == cap and "MAX_CONTEXT_TOKENS" in trigger.why, (cap, window)
    from tencentdb_offload.settings.thresholds import landing_tokens
    huge = load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "5000000"})[0]
    assert landing_tokens(huge, 100_000, True) == landing_tokens(plain, 100_000, True)
    capped = load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "80000"})[0]
    assert landing_tokens(capped, 100_000, True) == capped.target_tokens(100_000)


class _Manager:
    """Stands for Hermes' plugin manager, which a plugin reload rebuilds."""


def test_a_rebuilt_plugin_manager_gets_the_hooks_even_at_the_old_ones_address(tmp_path, monkeypatch):
    """Hooks are registered once per plugin manager. A manager built after the first one was
    freed often takes its address; keyed by ``id()``, it got no hooks (nothing archived).
    Here every object has the same address, as the rebuilt manager had the freed one's."""
    import builtins
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TENCENTDB_OFFLOAD_GATEWAY_URL", "off")
    monkeypatch.delitem(sys.modules, "_tencentdb_offload_process", raising=False)
    first, rebuilt = FakeContext(), FakeContext()
    first._manager, rebuilt._manager = _Manager(), _Manager()
    with monkeypatch.context() as same_address:
        same_address.setattr(builtins, "id", lambda _obj: 0x7F00DEAD)
        plugin.register(first)
        plugin.register(first)                  # the same manager, one more agent: once
        plugin.register(rebuilt)
    assert sorted(first.hooks) == ["post_tool_call", "pre_llm_call"]
    assert sorted(rebuilt.hooks) == ["post_tool_call", "pre_llm_call"], "a rebuilt manager"
    plugin.shared_runtime().close()
