"""Idle compaction (issue 31): after a pause longer than the provider's cache TTL, a turn start
compacts from a lower threshold and lands deeper, since the next request is written in full
anyway; a warm cache is never rewritten for it. Time comes from a fake clock on the runtime."""
import copy

import pytest

from tencentdb_offload.compaction import idle
from tencentdb_offload.session import cache_clock
from tencentdb_offload.session.record import Compaction
from tencentdb_offload.context.tokens import messages_tokens

from helpers import Clock, as_host, conversation, make_engine

TTL = 300


def engine(tmp_path, clock, ttl=TTL, session="s1"):
    rt, eng = make_engine(tmp_path, session=session, CACHE_TTL_S=str(ttl))
    clock.drive(rt)
    return rt, eng


def between_triggers(eng):
    """A conversation past the idle trigger and the ordinary target, under the ordinary trigger
    (by our estimate): a compaction of it has work to do at either depth."""
    floor = max(idle.idle_trigger(eng.threshold_tokens, eng.compaction_target()), eng.compaction_target())
    for turns in range(10, 400, 5):
        conv = conversation(turns, 1000)
        if eng.estimate_real(conv) >= floor + 2_000:
            assert eng.estimate_real(conv) < eng.threshold_tokens
            return conv
    raise AssertionError("no size between the triggers")


def answered(eng, conv, **cache):
    eng.update_from_response(dict({"prompt_tokens": eng.estimate_real(conv)}, **cache))


def landed(eng, out):
    return eng.current_state().calibrator.to_real(eng.current_state().overhead_estimate + messages_tokens(out))


def test_a_pause_longer_than_the_ttl_compacts_at_the_turn_start_and_lands_deep(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    assert not eng.should_compress_preflight(conv)          # warm: under the trigger, no rewrite
    clock.pause(TTL + 1)
    assert eng.should_compress_preflight(conv)
    out = eng.compress(conv, current_tokens=eng.estimate_real(conv))
    # the same conversation compacted at its trigger by a warm engine lands at the ordinary target
    warm_rt, warm = engine(tmp_path / "warm", Clock())
    warm_out = warm.compress(conv, current_tokens=warm.estimate_real(conv))
    ordinary = rt.settings.target_tokens(eng.context_length)
    assert landed(warm, warm_out) <= ordinary
    assert landed(eng, out) <= 0.75 * landed(warm, warm_out)
    rec = eng.current_state().last_compaction
    assert rec.reason == "idle" and "pause" in rec.describe()
    status = eng.get_status()
    assert status["runtime"]["prompt_cache"]["idle_compactions"] == 1
    assert status["session_stats"]["idle_compactions"] == 1


def test_a_shorter_pause_does_not(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    clock.pause(TTL - 1)
    assert not eng.should_compress_preflight(conv)
    eng.compress(conv, current_tokens=eng.estimate_real(conv))       # the window requires it
    assert eng.current_state().last_compaction.reason == "threshold"
    assert eng.current_state().last_compaction.target == rt.settings.target_tokens(eng.context_length)


def test_ttl_zero_never_compacts_idle(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock, ttl=0)
    conv = between_triggers(eng)
    answered(eng, conv)
    for pause in (TTL + 1, 86_400, 30 * 86_400):
        clock.pause(pause)
        assert not eng.should_compress_preflight(conv)


def test_the_host_asks_should_compress_at_turn_start_on_older_hosts(tmp_path, monkeypatch):
    as_host(monkeypatch)       # 0.17 / 0.19
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    rough = idle.idle_trigger(eng.threshold_tokens, eng.compaction_target()) + 1
    eng.update_from_response({"prompt_tokens": rough})
    assert not eng.should_compress(rough)
    clock.pause(TTL + 1)
    assert eng.should_compress(rough)
    assert not eng.should_compress(idle.idle_trigger(eng.threshold_tokens, eng.compaction_target()) - 1)


def test_a_warm_cache_report_after_a_long_pause_suppresses_it(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    prompt = eng.estimate_real(conv)
    answered(eng, conv)
    clock.pause(TTL + 100)
    # the provider read 90 % from its cache after this pause: its TTL is longer than the setting
    eng.update_from_response({"prompt_tokens": prompt, "cache_read_tokens": int(prompt * 0.9),
                              "cache_write_tokens": 100})
    clock.pause(TTL + 50)
    assert not eng.should_compress_preflight(conv)
    clock.pause(200)                                          # longer than any pause seen warm
    assert eng.should_compress_preflight(conv)


def test_a_cold_cache_report_or_none_leaves_the_setting_in_charge(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    prompt = eng.estimate_real(conv)
    answered(eng, conv)
    clock.pause(TTL + 100)
    eng.update_from_response({"prompt_tokens": prompt, "cache_read_tokens": 0,
                              "cache_write_tokens": prompt})
    clock.pause(TTL + 1)
    assert eng.should_compress_preflight(conv)
    clock.pause(-TTL - 1)
    answered(eng, conv, cache_read_tokens=0, cache_write_tokens=0)  # the host reports nothing
    clock.pause(TTL + 1)
    assert eng.should_compress_preflight(conv)


def test_one_idle_compaction_per_pause_whatever_the_clock_does(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    clock.jump(-86_400)                        # backwards: not a pause
    assert not eng.should_compress_preflight(conv)
    clock.jump(86_400 * 2)                     # far forwards, the process saw no pause
    assert not eng.should_compress_preflight(conv)
    clock.pause(TTL + 1)
    assert eng.should_compress_preflight(conv)
    tokens = eng.estimate_real(conv)
    eng.compress(conv, current_tokens=tokens)
    compactions = eng.compression_count
    for _ in range(5):                          # no response yet: the pause is used up
        clock.jump(86_400)
        clock.pause(TTL + 1)
        assert not eng.should_compress_preflight(conv)
        eng.compress(conv, current_tokens=tokens)
    idle_count = eng.current_state().stats.idle_compactions
    assert idle_count == 1 and eng.compression_count - compactions <= 5


def test_a_new_process_sees_the_pause_and_a_jumped_clock_costs_one_compaction(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    rt.flush()
    rt.close()
    clock.pause(TTL + 1)                        # the per-turn CLI: the next turn, a new process
    rt2, eng2 = engine(tmp_path, clock)
    assert eng2.should_compress_preflight(conv)
    rt2.close()
    clock.jump(-2 * TTL)                        # a clock set back before the last response
    rt3, eng3 = engine(tmp_path, clock)
    assert not eng3.should_compress_preflight(conv)
    clock.jump(365 * 86_400)                    # a year forwards: one compaction, then none
    eng3.compress(conv, current_tokens=eng3.estimate_real(conv))
    assert eng3.current_state().stats.idle_compactions == 1
    rt3.flush()
    rt3.close()
    rt4, eng4 = engine(tmp_path, clock)
    eng4.compress(conv, current_tokens=eng4.estimate_real(conv))
    assert eng4.current_state().stats.idle_compactions == 0
    rt4.close()


def test_cache_writes_of_compactions_are_counted(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv, cache_read_tokens=10, cache_write_tokens=500)
    clock.pause(TTL + 1)
    out = eng.compress(conv, current_tokens=eng.estimate_real(conv))
    eng.update_from_response({"prompt_tokens": landed(eng, out), "cache_read_tokens": 0,
                              "cache_write_tokens": 7_000})
    eng.update_from_response({"prompt_tokens": landed(eng, out) + 10, "cache_read_tokens": 7_000,
                              "cache_write_tokens": 10})
    stats = eng.get_status()["runtime"]["prompt_cache"]
    assert stats["compaction_cache_write_tokens"] == 7_000
    assert stats["ttl_s"] == TTL and 0 < stats["cached_share"] < 1


def test_copies_for_other_agents_share_the_conversation_clock(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    clock.pause(TTL + 1)
    twin = copy.deepcopy(eng)                   # the messaging gateway: a new agent per request
    assert twin.should_compress_preflight(conv)


def test_the_record_keeps_its_reason_and_reads_old_rows():
    rec = Compaction.from_json({"route": "local", "tokens_before": 10, "reason": "idle"})
    assert rec.idle and Compaction.from_json(rec.to_json()).reason == "idle"
    assert Compaction.from_json({"route": "local"}).reason == "threshold"
    assert Compaction.from_json({"reason": "<script>"}).reason == "threshold"


@pytest.mark.parametrize("raw", [None, [], "x", {"at": "nan"}, {"at": float("inf"), "spent": -5},
                                 {"at": True, "warm_after": 1e300}])
def test_an_edited_handover_row_is_checked(raw):
    clock = cache_clock.CacheClock()
    clock.seed(raw)
    assert clock.last_wall >= 0 and clock.warm_after <= cache_clock.LEARNED_CAP_S
    assert clock.pause(1e9, 1.0) is None or clock.pause(1e9, 1.0) >= 0


def test_the_slash_command_and_the_cli_status_show_idle_compactions(tmp_path):
    from tencentdb_offload.ops.status import status_data, status_report
    from tencentdb_offload.status.render import render
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv, cache_read_tokens=10, cache_write_tokens=500)
    clock.pause(TTL + 1)
    eng.compress(conv, current_tokens=eng.estimate_real(conv))
    text = render(rt.status_record())
    assert "1 idle compaction after a pause over 300 s (cache TTL)" in text
    assert "prompt cache: 0% of prompt tokens read from it" in text
    rt.flush()
    report = status_report(rt.store.directory, rt.settings)
    assert status_data(report)["compactions"]["idle"] == 1
    assert "1 idle, after a pause over the cache TTL" in render(report)
    assert "prompt cache cold" in render(report)


def test_a_deep_landing_keeps_the_story_the_ordinary_one_keeps(tmp_path):
    """Idle compaction drops more results, not more of the story: its digest names every
    earlier user request the ordinary compaction's digest names."""
    from tencentdb_offload.context import messages
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    clock.pause(TTL + 1)
    deep = " ".join(messages.text_of(m) for m in eng.compress(conv, current_tokens=eng.estimate_real(conv)))
    assert eng.current_state().last_compaction.reason == "idle"
    _rt, warm = engine(tmp_path / "warm", Clock())
    ordinary = " ".join(messages.text_of(m) for m in warm.compress(conv, current_tokens=warm.estimate_real(conv)))
    asked = [m["content"] for m in conv if m["role"] == "user"]
    kept = [a for a in asked if a in ordinary]
    assert len(kept) >= len(asked) // 2, "the ordinary digest names most requests"
    assert [a for a in kept if a not in deep] == []


def _loaded_as_hermes_loads_it(tmp_path, monkeypatch, cache_ttl, **env):
    """The runtime register() builds (config.yaml read from HERMES_HOME), on a fake clock."""
    from tencentdb_offload.host import wiring
    home = tmp_path / "home"
    home.mkdir(parents=True)
    (home / "config.yaml").write_text("prompt_caching:\n  cache_ttl: %s\n" % cache_ttl)
    for name in [k for k in __import__("os").environ if k.startswith("TENCENTDB_OFFLOAD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("TENCENTDB_OFFLOAD_GATEWAY_URL", "off")
    for k, v in env.items():
        monkeypatch.setenv("TENCENTDB_OFFLOAD_" + k, v)
    rt = wiring._runtime_or_safe_default(str(home))
    eng = wiring.open_session(rt, "s1", 64_000, model="m")
    clock = Clock()
    clock.drive(rt)
    return rt, eng, clock


def test_hermes_prompt_cache_ttl_of_1h_is_followed(tmp_path, monkeypatch):
    """Hermes 0.22's `prompt_caching.cache_ttl: 1h` keeps the provider's cache an hour; idle
    compaction used 300 s whatever it said, so every 5-minute pause rewrote a warm cache."""
    rt, eng, clock = _loaded_as_hermes_loads_it(tmp_path, monkeypatch, "1h")
    try:
        assert rt.settings.cache_ttl_s == 3_600 and "prompt_caching.cache_ttl: 1h" in rt.settings.cache_ttl_from
        conv = between_triggers(eng)
        answered(eng, conv)
        clock.pause(10 * 60)
        assert not eng.should_compress_preflight(conv), "a warm 1h cache rewritten after 10 min"
        clock.pause(3_600)
        assert eng.should_compress_preflight(conv)
    finally:
        rt.close()


@pytest.mark.parametrize("raw, seconds", [("5m", 300), ("auto", 3_600), ("off", 0), ("2h", 300)])
def test_each_value_hermes_reads_gives_its_ttl_and_an_explicit_setting_wins(tmp_path, monkeypatch, raw, seconds):
    rt, _eng, _clock = _loaded_as_hermes_loads_it(tmp_path, monkeypatch, raw)
    try:
        assert rt.settings.cache_ttl_s == seconds, rt.settings.cache_ttl_from
        assert "prompt_caching.cache_ttl: " in eng_status_line(rt)   # (YAML may read off as false)
    finally:
        rt.close()
    rt, _eng, _clock = _loaded_as_hermes_loads_it(tmp_path / "set", monkeypatch, raw, CACHE_TTL_S="120")
    try:
        assert rt.settings.cache_ttl_s == 120
        assert "TENCENTDB_OFFLOAD_CACHE_TTL_S" in eng_status_line(rt)
    finally:
        rt.close()


def eng_status_line(rt):
    """The line status (and the slash command) prints for the TTL."""
    from tencentdb_offload.status.render import cache_ttl_text
    return cache_ttl_text(rt.settings)
