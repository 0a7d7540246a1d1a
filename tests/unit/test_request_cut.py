"""A request the host sends near the window uncompacted (0.22's compression pool busy or
cooling down) is cut for that request alone: under the target, every pair kept, the current
user message and the system prompt as they were, what left recallable, the host's transcript
untouched, and the host's next check asks for a compaction of the transcript."""

from __future__ import annotations

import copy

from helpers import SELECTING_HOST, as_host, conversation, make_engine, tool_turn
from tencentdb_offload.compaction.request_cut import REQUEST_CEILING
from tencentdb_offload.context.tokens import request_tokens
from tencentdb_offload.context.validate import validation_errors

WINDOW = 64_000
SYSTEM = {"role": "system", "content": "You are a careful assistant. " * 40}


def _request(turns: int):
    """system + ``turns`` tool turns of ~8K tokens each, ending on a user message."""
    history = conversation(turns, 30_000)
    return [SYSTEM] + history + [{"role": "user", "content": "the question now: what changed?"}]


def _tokens(messages) -> int:
    return request_tokens(messages)[1]


def test_a_request_past_the_ceiling_is_cut_for_itself(tmp_path, caplog):
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    try:
        request = _request(12)
        assert _tokens(request) > WINDOW, "the workload must pass the window"
        before = copy.deepcopy(request)
        sent = eng.select_context(request)
        assert sent is not None, "sent past the window as it was"
        assert request == before, "the host's list is untouched"
        assert _tokens(sent) <= eng.compaction_target() * 1.05 < WINDOW * REQUEST_CEILING
        assert sent[0] == SYSTEM and sent[-1] == request[-1]
        assert validation_errors(sent) == []
        whole = {m.get("content") for m in sent if m.get("role") == "tool"}
        gone = [m["tool_call_id"] for m in request if m.get("role") == "tool" and m["content"] not in whole]
        assert gone, "something must have left"
        rt.writer.settled(5.0)
        state = eng.current_state()
        assert all(rt.store.holds(state.key, tid) for tid in gone), "what left is recallable"
        assert state.last_compaction.reason == "request"
        assert state.stats.request_cuts == 1
        assert eng.should_compress(0), "the host's next check compacts its transcript"
        assert eng.select_context(request) is not None and state.stats.request_cuts == 2
        said = [r for r in caplog.records if "cut for that request alone" in r.getMessage()]
        assert len(said) == 1, "warned once until the transcript is compacted"
        eng.compress(request[1:])
        assert not eng.should_compress(0)
    finally:
        rt.close()


def test_a_request_under_the_ceiling_goes_as_it_is(tmp_path):
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    try:
        request = _request(5)
        assert _tokens(request) < WINDOW * REQUEST_CEILING
        sent = eng.select_context(request)
        assert sent is None or sent == request
        state = eng.current_state()
        assert state.stats.request_cuts == 0 and not eng.should_compress(0)
    finally:
        rt.close()


def test_the_ceiling_follows_the_calibration(tmp_path):
    """Our estimate is calibrated against the provider's counts: a request our raw estimate puts
    under the ceiling, but the provider counts 1.3x of, is cut."""
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    try:
        request = _request(9)
        raw = _tokens(request)
        assert raw < WINDOW * REQUEST_CEILING < raw * 1.3
        state = eng.current_state()
        for size in (10_000, 20_000):
            state.calibrator.observe(size, int(size * 1.3))
        sent = eng.select_context(request)
        assert sent is not None and _tokens(sent) < raw
        assert state.stats.request_cuts == 1
    finally:
        rt.close()


def _request_ending_on_a_step():
    """system + 11 tool turns, then a turn whose newest step's 2 results the model has not
    read yet (the request that carries them to it)."""
    return [SYSTEM] + conversation(11, 30_000) + tool_turn(11, 15_000, calls=2)[:-1]


def _cut_then(tmp_path, since):
    """A request cut, then the host's compaction of its transcript: that request's messages
    (no system prompt, as the host hands them to compress) followed by ``since``."""
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    request = _request_ending_on_a_step()
    sent = eng.select_context(request)
    assert sent is not None and eng.should_compress(0)
    transcript = copy.deepcopy(request[1:]) + since
    return rt, eng, sent, transcript, eng.compress(transcript)


ANSWER = [{"role": "assistant", "content": "done with step 11"},
          {"role": "user", "content": "and now?"}]


def test_the_transcript_compaction_after_a_cut_keeps_the_cuts_bytes(tmp_path):
    """The request cut was the model's prefix: the transcript's compaction starts with exactly
    it (one prompt-cache rewrite, not two) and lands under the trigger. Compacted afresh, the
    results the cut kept whole for the model (unread then, read since) would be trimmed."""
    rt, eng, sent, transcript, out = _cut_then(tmp_path, copy.deepcopy(ANSWER))
    try:
        assert out[:len(sent) - 1] == sent[1:] and out[len(sent) - 1:] == ANSWER
        assert eng.estimate_real(out) < eng.threshold_tokens
        assert validation_errors(out) == []
        assert not eng.should_compress(0)
        state = eng.current_state()
        assert state.last_compaction.reason == "adopted" and state.cut_memo is None
    finally:
        rt.close()


def test_a_transcript_that_no_longer_begins_with_the_cut_is_compacted_afresh(tmp_path):
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    try:
        request = _request_ending_on_a_step()
        sent = eng.select_context(request)
        transcript = copy.deepcopy(request[1:]) + copy.deepcopy(ANSWER)
        transcript[0]["content"] = "an earlier message, edited since"
        out = eng.compress(transcript)
        assert out[:len(sent) - 1] != sent[1:]
        assert eng.estimate_real(out) <= eng.compaction_target() * 1.05
        assert not eng.should_compress(0)
    finally:
        rt.close()


def test_a_catch_up_that_would_pass_the_trigger_is_compacted_afresh(tmp_path):
    big = [{"role": "assistant", "content": " ".join("w%d" % i for i in range(40_000))},
           {"role": "user", "content": "and now?"}]
    rt, eng, sent, transcript, out = _cut_then(tmp_path, big)
    try:
        assert eng.estimate_real(sent[1:] + big) > eng.threshold_tokens
        assert eng.estimate_real(out) < eng.threshold_tokens and out != sent[1:] + big
        assert validation_errors(out) == [] and not eng.should_compress(0)
    finally:
        rt.close()


def test_the_canvas_stays_where_the_cut_request_showed_it(tmp_path):
    """The transcript compaction after a cut sends nothing new (the cut's bytes): the canvas
    the cut request carried stays on its user message. Pinned anew to the next turn's user
    message instead, it would rewrite the prefix one request after the cut (seen on the
    messaging side-by-side with the real Gateway: 4 rewrites where 3 suffice)."""
    from tencentdb_offload.context import canvas
    from tencentdb_offload.context import messages
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    try:
        eng.current_state().set_canvas(canvas.format_block(
            "001-fix.mmd", "flowchart TD\n  A[fix the bug] --> B[run tests]"))
        step = _request_ending_on_a_step()
        user_at = max(i for i, m in enumerate(step) if m.get("role") == "user")
        first = eng.select_context(step[:user_at + 1])      # the turn's first request: pinned
        assert first is not None and canvas.blocks(messages.text_of(first[-1]), rt.seal)
        sent = eng.select_context(step)                     # the cut, canvas where it was
        assert sent is not None and eng.should_compress(0)
        out = eng.compress(copy.deepcopy(step[1:]) + copy.deepcopy(ANSWER))
        assert not eng.should_compress(0)
        after = eng.select_context([SYSTEM] + out)
        assert after is not None and after[:len(sent)] == sent, "the prefix was rewritten"
    finally:
        rt.close()


def test_in_the_messaging_gateway_the_cut_starts_earlier(tmp_path, monkeypatch):
    """With the messaging gateway's later trigger (0.85 of an 85K-128K window) a request the
    pool let through is cut past MESSAGING_REQUEST_CEILING, so none reaches 0.90 of the window; the
    same request elsewhere goes as it is."""
    from tencentdb_offload.compaction.request_cut import MESSAGING_REQUEST_CEILING
    window = 100_000
    request = next(r for r in (_request(n) for n in range(6, 20))
                   if _tokens(r) > window * (MESSAGING_REQUEST_CEILING + 0.01))
    assert _tokens(request) < window * REQUEST_CEILING, "the case: between the two ceilings"
    rt, eng = make_engine(tmp_path / "cli", context_length=window)
    try:
        sent = eng.select_context(request)
        assert sent is None or sent == request
    finally:
        rt.close()
    as_host(monkeypatch, **SELECTING_HOST, messaging_gateway=True)
    rt, eng = make_engine(tmp_path / "messaging", context_length=window)
    try:
        sent = eng.select_context(request)
        assert sent is not None and _tokens(sent) <= window * 0.90
        assert eng.current_state().stats.request_cuts == 1
    finally:
        rt.close()


def test_in_the_messaging_gateway_a_request_under_a_chosen_trigger_is_not_cut(tmp_path, monkeypatch):
    """The earlier ceiling is for the messaging gateway's own later trigger: where the user
    set THRESHOLD (or a model's threshold applies) and it lies past that ceiling, a request
    still under the trigger goes as it is; the transcript is compacted at the trigger."""
    from tencentdb_offload.compaction.request_cut import MESSAGING_REQUEST_CEILING
    window = 100_000
    as_host(monkeypatch, **SELECTING_HOST, messaging_gateway=True)
    for n, how in enumerate(({"threshold": "0.93"}, {"model": 0.93})):
        env = {k: v for k, v in how.items() if k == "threshold"}
        rt, eng = make_engine(tmp_path / str(n), context_length=window, **env)
        try:
            if "model" in how:
                eng.model_thresholds = {"m": how["model"]}
                eng.update_model(model="m", context_length=window)
            request = next(r for r in (_request(k) for k in range(6, 20))
                           if _tokens(r) > window * (MESSAGING_REQUEST_CEILING + 0.01))
            assert _tokens(request) < eng.threshold_tokens, "the case: under the trigger"
            sent = eng.select_context(request)
            assert sent is None or sent == request, how
            assert eng.current_state().stats.request_cuts == 0 and not eng.should_compress(0)
        finally:
            rt.close()


def test_a_request_under_a_trigger_past_the_ceiling_is_not_cut(tmp_path):
    """THRESHOLD 0.98: the host compacts at 0.98 and status says so; a request between the
    ceiling (0.95) and that trigger goes as it is, one past the trigger is still cut."""
    window = 400_000
    rt, eng = make_engine(tmp_path, context_length=window, threshold="0.98")
    try:
        between = next(r for r in (_request(k) for k in range(6, 80))
                       if _tokens(r) > window * (REQUEST_CEILING + 0.005))
        assert _tokens(between) < eng.threshold_tokens, "the case: between ceiling and trigger"
        sent = eng.select_context(between)
        assert sent is None or sent == between
        assert eng.current_state().stats.request_cuts == 0
        past = next(r for r in (_request(k) for k in range(6, 80)) if _tokens(r) > window)
        assert eng.select_context(past) is not None
        assert eng.current_state().stats.request_cuts == 1
    finally:
        rt.close()


def test_a_cut_the_transcript_takes_is_one_saving_and_one_departure_list(tmp_path):
    """On 0.22 the store held two rows with the same "67,302 → 18,243": the request cut ("2
    items archived") and the transcript's compaction that took its bytes ("0 items archived",
    listing the same keys). status, report (tokens saved, arrows) and the compaction counts
    counted the saving twice. They are two kinds: the cut, counted, and the transcript's taking
    of it, shown but counted with the cut."""
    from tencentdb_offload.ops.report_data import figures
    from tencentdb_offload.ops.report_html import render_page
    from tencentdb_offload.status.model import read_store_view
    rt, eng, sent, transcript, out = _cut_then(tmp_path, copy.deepcopy(ANSWER))
    try:
        rt.writer.settled(5.0)
        state = eng.current_state()
        cut, took = state.stats.request_cuts, state.last_compaction
        assert cut == 1 and took.adopted and took.left == () and took.saved == 0
        assert "took the cut" in took.describe()
        live = state.stats.as_dict()
        assert live["compactions"] == 1 and live["cuts_adopted"] == 1
        store_dir = rt.store.directory
        view = read_store_view(store_dir)
        rows = view.compactions.recent
        assert [r["reason"] for r in rows] == ["adopted", "request"], rows
        first = rows[1]
        assert first["left"] and not rows[0]["left"], "what left is listed once, with the cut"
        saving = first["tokens_before"] - first["tokens_after"]
        assert view.compactions.total == 1 and view.compactions.adopted == 1
        assert view.compactions.tokens_saved == saving == live["tokens_saved"]
        (row,) = view.sessions
        assert row.compactions == 1 and row.tokens_saved == saving
        fig = figures(store_dir, rt.settings, None)
        assert fig["summary"]["compactions"] == 1 and fig["summary"]["tokens_saved"] == saving
        assert sum(fig["summary"]["levels"].values()) == 1
        page = render_page(fig)
        assert page.count('<g class="compaction"') == 1, "one arrow per saving"
        cut_row, took_row = page.split('<tr class="compaction-row"')[1:]
        assert "for one request only" in cut_row and "took the cut" in took_row, "two kinds"
        assert "older version" not in took_row and "listed with the cut" in took_row, took_row
    finally:
        rt.close()
