"""A calibration handed over by another process (or a damaged row) is trusted only as far as
physics allows: a provider counts 0.5–3 tokens per one of ours, and what it counts beyond the
messages is part of a request it counted (issue 27, item 3)."""

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.context.tokens import Calibrator, messages_tokens

from helpers import conversation, env_for, make_engine

WINDOW = 64_000
TEN_WINDOWS = [[3_700.0, 10 * WINDOW + 3_700.0], [3_800.0, 10 * WINDOW + 3_800.0]]


def test_seed_ignores_an_overhead_of_ten_windows_and_says_so():
    cal = Calibrator()
    ignored = cal.seed(TEN_WINDOWS)
    assert "2 of 2" in ignored and cal.points == 0
    assert cal.to_real(3_700) < 2 * 3_700


def test_seed_keeps_the_plausible_points_of_a_damaged_row():
    cal = Calibrator()
    ignored = cal.seed([[20_000.0, 24_000.0], [30_000.0, 34_000.0], [30_500.0, 1e8]])
    assert "1 of 3" in ignored and cal.points == 2
    assert cal.to_real(30_000) <= 40_000


# Hermes 0.22 shows the engine a request without its tool schemas: a session's first, small
# request counts several times our estimate; every later one counts the same schemas
FIRST_SMALL = [2_000.0, 11_000.0]
LATER = [[16_000.0, 24_000.0], [20_000.0, 29_000.0]]


def test_seed_keeps_a_first_small_request_whose_overhead_later_requests_also_counted():
    cal = Calibrator()
    assert cal.seed([FIRST_SMALL] + LATER) == ""
    assert cal.points == 3


def test_seed_ignores_an_overhead_larger_than_a_request_counted_in_band():
    # beyond 3 per token of ours: 18.9K, under the smallest in-band count (24K): kept
    assert Calibrator().seed([[3_700.0, 30_000.0]] + LATER) == ""
    for beyond in ([3_700.0, 40_000.0], TEN_WINDOWS[0]):        # 28.9K; 640K
        cal = Calibrator()
        assert "1 of 3" in cal.seed([beyond] + LATER) and cal.points == 2
    cal = Calibrator()
    assert cal.seed([FIRST_SMALL]) == "" and cal.points == 0   # nothing vouches for it: left out, unsaid


# what a 0.22 `hermes chat -q` session of two short turns hands over (fake provider, ~11K of
# tool schemas the engine never sees): no request large enough to fall in the band
SHORT_SESSION = [[3_408.0, 14_318.0], [3_798.0, 14_873.0]]


def test_each_resumed_turn_of_a_short_session_reports_no_error(tmp_path):
    rt, eng = make_engine(tmp_path)
    rt.leave_for_next_process(eng.current_state().key, "calibration", SHORT_SESSION)
    rt.flush_writes()
    rt.close()
    rt2 = plugin.build_runtime(env=env_for(tmp_path))
    eng2 = plugin.open_session(rt2, "s1", WINDOW, model="m")
    try:
        assert eng2.current_state().calibrator.points == 0       # still not trusted
        assert not [e for e in rt2.errors if "calibration" in e], rt2.errors
    finally:
        rt2.close()


def test_the_fit_never_yields_an_overhead_beyond_what_was_counted():
    cal = Calibrator()
    cal.observe(10_000, 40_000)
    cal.observe(30_000, 5_000)          # a damaged pair: the slope floor leaves 12,500
    assert cal.overhead <= 5_000 and cal.to_real(0) <= 5_000


# each point within the ratio band, yet their fit claims an overhead of two windows
IN_BAND_HUGE = [[50_000.0, 149_000.0], [60_000.0, 150_000.0]]


def test_the_fit_keeps_its_overhead_within_a_share_of_the_window():
    cal = Calibrator()
    assert cal.seed(IN_BAND_HUGE) == ""
    assert cal.overhead > WINDOW                     # unbounded, the fit says two windows
    cal.bound(WINDOW)
    assert cal.overhead <= WINDOW // 4 and cal.to_real(3_700) < WINDOW // 2


@pytest.mark.parametrize("handed_over", [TEN_WINDOWS, IN_BAND_HUGE], ids=["ten", "in-band"])
def test_a_new_process_on_that_conversation_neither_compacts_early_nor_cuts_to_nothing(
        tmp_path, handed_over):
    rt, eng = make_engine(tmp_path)
    key = eng.current_state().key
    rt.leave_for_next_process(key, "calibration", handed_over)
    rt.flush_writes()
    rt.close()
    rt2 = plugin.build_runtime(env=env_for(tmp_path))
    eng2 = plugin.open_session(rt2, "s1", WINDOW, model="m")
    small = conversation(2, 200)
    assert not eng2.should_compress(eng2.estimate_real(small))      # the engine's own count
    big = conversation(30, 6_000)
    out = eng2.compress(big, current_tokens=messages_tokens(big))
    assert messages_tokens(out) > 8_000           # compacted to the target, not to nothing
    assert handed_over is IN_BAND_HUGE or any("calibration" in e and "ignored" in e
                                              for e in rt2.errors)
    rt2.close()


def test_one_count_far_off_the_fit_is_set_aside_three_in_a_row_are_believed():
    from tencentdb_offload.context.tokens import Calibrator
    cal = Calibrator()
    for x in (10_000, 14_000, 18_000, 22_000, 26_000):
        cal.observe(x, int(x * 1.2))
    slope = cal.slope
    cal.observe(30_000, 360_000)            # one provider report 10x the truth
    assert cal.slope == slope and cal.to_real(30_000) < 40_000
    cal.observe(31_000, 37_200)             # honest again: the fit goes on as it was
    assert abs(cal.slope - slope) < 0.05
    for x in (32_000, 33_000, 34_000):      # the content (or the provider) really changed
        cal.observe(x, x * 3)
    assert cal.slope > slope


def test_a_host_count_no_provider_could_make_is_not_the_first_anchor(tmp_path):
    from helpers import make_engine
    from tencentdb_offload.context import messages
    from tencentdb_offload.context.tokens import messages_tokens
    rt, eng = make_engine(tmp_path, context_length=200_000)
    chat = "这是一个关于上下文压缩的测试文本包含中文字符" * 3
    msgs = []
    for i in range(1400):
        msgs += [{"role": "user", "content": "问题%d：%s" % (i, chat)},
                 {"role": "assistant", "content": "回答%d：%s" % (i, chat)}]
    msgs.append({"role": "user", "content": "继续"})
    rough = sum(len(messages.text_of(m)) for m in msgs) // 4      # a host's chars / 4 of CJK text
    out = eng.compress(msgs, current_tokens=rough)
    assert out is not msgs and messages_tokens(out) <= eng.compaction_target()
    assert eng.current_state().calibrator.points == 0      # nothing learnt from it
    rt.close()


def test_a_system_prompt_over_the_target_is_named_as_the_cause(tmp_path):
    from helpers import conversation, make_engine
    from tencentdb_offload.context.tokens import messages_tokens
    rt, eng = make_engine(tmp_path, context_length=64_000)
    big = {"role": "system", "content": "Rules: always be precise and careful. " * 6_000}
    msgs = conversation(10, 8_000)
    eng.update_from_response({"prompt_tokens": messages_tokens([big] + msgs)})
    eng.compress(msgs, current_tokens=messages_tokens([big] + msgs))
    said = " ".join(rt.errors)
    rt.close()
    assert "system prompt and tool schemas" in said and "user message" not in said, said


def test_a_first_request_counted_beyond_any_tokenizer_is_overhead_not_slope():
    """The messaging gateway's first request of a conversation: its system prompt and the user
    message (~1.3K of ours) counted at ~13.8K, the tool schemas the engine's view leaves out.
    Read as a slope of 3 the next request, with a step's three fresh reads, was estimated at
    61.7K where the provider counted 33K, past the request ceiling: cut, the reads trimmed."""
    cal = Calibrator()
    cal.bound(WINDOW)
    cal.observe(1_317, 13_834)
    assert abs(cal.to_real(17_278) - 33_119) <= 0.15 * 33_119
    assert cal.to_real(1_317) == 13_834                 # the request it saw, as counted
    cal.observe(17_278, 33_119)                          # the second size: the fit takes over
    assert abs(cal.to_real(34_804) - 53_101) <= 0.05 * 53_101
