"""Compaction ahead of the ceiling (issue 55): at a turn start, where the host checks the
request before sending it, a conversation whose next step (the size of the last turn's
largest) would carry it past 90 % of the window compacts now and lands deep; mid-turn, over
fresh results, it never does; a host without that check keeps the threshold alone."""
from tencentdb_offload.compaction import ceiling
from tencentdb_offload.session.cache_clock import CacheClock
from tencentdb_offload.context.tokens import messages_tokens

from helpers import SELECTING_HOST, as_host, conversation, make_engine


def near(eng, low, high):
    """A conversation whose estimate lies in [low, high)."""
    for turns in range(4, 400):
        conv = conversation(turns, 1000)
        if low <= eng.estimate_real(conv) < high:
            return conv
    raise AssertionError("no conversation between %d and %d tokens" % (low, high))


def steps(eng, *prompts):
    for prompt in prompts:
        eng.update_from_response({"prompt_tokens": prompt})


def landed(eng, out):
    state = eng.current_state()
    return state.calibrator.to_real(state.overhead_estimate + messages_tokens(out))


def test_a_step_is_learned_per_turn_and_survives_a_process():
    clock = CacheClock()
    for wall, prompt in enumerate((10_000, 29_000, 29_500, 48_000)):
        clock.responded(prompt, {}, 300, float(wall + 1), float(wall + 1))
    assert clock.step_growth() == 19_000          # none finished yet: this turn's so far
    clock.turn_started()
    clock.responded(20_000, {}, 300, 9.0, 9.0)      # a compaction landed: no step
    clock.responded(24_000, {}, 300, 10.0, 10.0)
    assert clock.step_growth() == 19_000          # the last finished turn's
    clock.turn_started()
    assert clock.step_growth() == 4_000
    later = CacheClock()
    later.seed(clock.export())
    assert later.step_growth() == 4_000 and later.last_prompt == 24_000


def test_a_damaged_handover_teaches_no_step():
    clock = CacheClock()
    clock.seed({"at": 5.0, "last_prompt": "x", "this_turn": -3, "last_turn": 1e30})
    assert clock.step_growth() == 0 and clock.last_prompt == 0


def test_a_turn_start_before_a_step_over_the_ceiling_compacts_deep(tmp_path, monkeypatch):
    as_host(monkeypatch, **SELECTING_HOST)
    rt, eng = make_engine(tmp_path, THRESHOLD="0.9")
    edge = ceiling.limit(eng)
    conv = near(eng, edge - 11_000, edge - 4_000)
    now = eng.estimate_real(conv)
    steps(eng, now - 12_000, now)                   # the last turn took a 12K step
    assert not eng.should_compress(now)             # under the trigger: the threshold is silent
    assert eng.should_compress_preflight(conv)      # the next 12K step would pass the ceiling
    out = eng.compress(conv, current_tokens=now)
    assert eng.current_state().last_compaction.reason == "ceiling"
    assert landed(eng, out) <= eng.compaction_target(deep=True)
    assert "would pass 90% of the window" in eng.current_state().last_compaction.describe()
    # as deep as the unseen allows (issue 55): the digest and the current turn, no earlier
    # turn kept whole; what the model read is behind recall
    kept = [m for m in out if m.get("role") != "system"]
    newest = max(i for i, m in enumerate(kept) if m.get("role") == "user")
    assert kept[newest] == [m for m in conv if m.get("role") == "user"][-1]
    assert all(rt.sealed.is_ours(m.get("content"))
               or all(c["id"].startswith("tdo_") for c in m.get("tool_calls") or [{"id": ""}])
               for m in kept[:newest]), kept[:newest]


def test_a_small_step_or_a_request_under_the_landing_waits(tmp_path, monkeypatch):
    as_host(monkeypatch, **SELECTING_HOST)
    rt, eng = make_engine(tmp_path, THRESHOLD="0.9")
    conv = near(eng, ceiling.limit(eng) - 11_000, ceiling.limit(eng) - 4_000)
    now = eng.estimate_real(conv)
    steps(eng, now - 2_000, now)                    # a 2K step fits under the ceiling
    assert not eng.should_compress_preflight(conv)
    small = near(eng, 0, eng.compaction_target() - 1_000)
    steps(eng, eng.estimate_real(small) + 60_000)   # a huge step, but a landing never triggers
    eng.current_state().cache.turn_started()
    assert not ceiling.passes_next(eng, eng.estimate_real(small))


def test_mid_turn_over_fresh_results_the_threshold_decides(tmp_path, monkeypatch):
    as_host(monkeypatch, **SELECTING_HOST)
    rt, eng = make_engine(tmp_path, THRESHOLD="0.9")
    conv = near(eng, ceiling.limit(eng) + 500, eng.context_length)
    now = eng.estimate_real(conv)
    steps(eng, now - 12_000, now)
    out = eng.compress(conv, current_tokens=now)
    assert eng.current_state().last_compaction.reason == "threshold"
    assert landed(eng, out) > eng.compaction_target(deep=True)


def test_a_host_without_a_preflight_keeps_the_threshold(tmp_path, monkeypatch):
    as_host(monkeypatch)
    rt, eng = make_engine(tmp_path, THRESHOLD="0.9")
    conv = near(eng, ceiling.limit(eng) - 11_000, ceiling.limit(eng) - 4_000)
    now = eng.estimate_real(conv)
    steps(eng, now - 12_000, now)
    assert not ceiling.passes_next(eng, now)
    assert not eng.should_compress_preflight(conv)



def test_the_messaging_gateway_compacts_before_a_step_over_the_ceiling_too(tmp_path, monkeypatch):
    """Its turn start is checked as the CLI's is (issue 55: on a 64K window, 0 reads hidden
    where the mid-turn trigger trimmed a step's fresh reads, at the floor's rewrites), at the
    small-window floor's trigger, the ceiling."""
    as_host(monkeypatch, messaging_gateway=True, **SELECTING_HOST)
    rt, eng = make_engine(tmp_path)
    assert eng.threshold_tokens == ceiling.limit(eng) == 57_600
    conv = near(eng, ceiling.limit(eng) - 11_000, ceiling.limit(eng) - 4_000)
    now = eng.estimate_real(conv)
    steps(eng, now - 12_000, now)
    assert not eng.should_compress(now) and eng.should_compress_preflight(conv)
    out = eng.compress(conv, current_tokens=now)
    assert eng.current_state().last_compaction.reason == "ceiling"
    assert landed(eng, out) <= eng.compaction_target(deep=True)
