"""A new task: the Gateway makes a new, empty canvas file active (its own injection then drops
the old canvas). The previous task's canvas, shown as "the current task", kept being fetched
as current and re-pinned after every compaction; it is no longer current."""

import pytest

from fakes.gateway import FakeGateway
from tencentdb_offload.context import canvas
from tencentdb_offload.context import messages
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.runtime.ingest import Canvas, current_canvas

from helpers import conversation, make_engine, wait_for


def test_an_empty_active_canvas_clears_the_previous_tasks(tmp_path):
    with FakeGateway(api_key="k") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k")
        try:
            hooks = HookHandlers(rt)
            hooks.pre_llm_call(session_id="s1", user_message="Task one: refactor the parser",
                               conversation_history=[])
            for i in range(5):
                hooks.post_tool_call(tool_name="read_file", args={"path": "/p%d.py" % i},
                                     result="x" * 400, session_id="s1", tool_call_id="c%d" % i)
            assert rt.writer.flush(10) and rt.flush("s1", 10)
            state = eng.current_state()
            assert wait_for(lambda: "Goal: Task one" in state.canvas_text)
            hooks.pre_llm_call(session_id="s1", user_message="NEW TASK: Task two, write docs",
                               conversation_history=[])
            assert rt.writer.flush(10) and rt.flush("s1", 10)
            assert wait_for(lambda: not state.canvas_wanted)
            assert state.canvas_text == "" and state.canvas_hash == ""
        finally:
            rt.close()


def test_a_cleared_canvas_is_not_pinned_again_after_a_compaction(tmp_path):
    rt, eng = make_engine(tmp_path)
    try:
        state = eng.current_state()
        old = canvas.format_block("001-one.mmd", "flowchart TD\n  A[task one]")
        state.set_canvas(old)
        history = [{"role": "system", "content": "sys"}] + conversation(2, 50) + [
            {"role": "user", "content": "turn 9: go on"}]
        shown = eng.select_context(history)
        assert canvas.blocks(messages.text_of(shown[-1]), rt.seal)
        state.canvas_fetched(state.canvas_ask(), "")        # the Gateway: a new, empty task
        with state.lock:
            state.canvas_repin = True                       # what a landed compaction sets
        out = eng.select_context(history) or history
        assert not any(canvas.blocks(messages.text_of(m), rt.seal) for m in out)
    finally:
        rt.close()


def test_which_answers_clear_the_canvas():
    assert current_canvas({"currentMmd": "002-b.mmd", "mmds": [
        {"filename": "002-b.mmd", "content": ""}]}) == Canvas("002-b.mmd", "")
    assert current_canvas({"currentMmd": None, "mmds": []}) is None      # nothing known
    assert current_canvas({"mmds": [{"filename": "a", "content": " "}]}) is None


def test_a_canvas_back_after_a_cleared_one_is_injected_again_before_0_22(tmp_path):
    """0.17/0.19: the task's canvas comes back as current (the Gateway judged a continuation)
    after a compaction removed the old copy: it is shown again, not taken for the one shown."""
    from tencentdb_offload.hermes.host import running_host
    if running_host().selects_context:
        pytest.skip("0.22 shows the canvas per request (select_context)")
    rt, eng = make_engine(tmp_path)
    try:
        hooks = HookHandlers(rt)
        state = eng.current_state()
        block = canvas.format_block("001-one.mmd", "flowchart TD\n  A[task one]")
        state.set_canvas(block)
        turn = [{"role": "user", "content": "turn 1: go on"}]
        assert hooks.pre_llm_call(session_id="s1", user_message="turn 1: go on",
                                  conversation_history=turn)
        state.canvas_fetched(state.canvas_ask(), "")        # a new task, still empty
        state.canvas_fetched(state.canvas_ask(), block)     # back to the first one
        later = [{"role": "user", "content": "turn 5: and now?"}]     # compacted: no copy
        out = hooks.pre_llm_call(session_id="s1", user_message="turn 5: and now?",
                                 conversation_history=later)
        assert out and canvas.blocks(out["context"], rt.seal)
    finally:
        rt.close()


def test_with_no_active_file_the_newest_drawn_canvas_is_current_not_the_oldest(tmp_path):
    """After a short task the Gateway has no active file; query-mmd with limit 1 then answers
    the oldest file (task 001, long finished), which was shown as the current task. The
    Gateway's own injection shows the newest file with content."""
    with FakeGateway(api_key="k") as gw:
        gw.set_canvas("hermes-s1", "flowchart TD\n  A[task one]", "001-one.mmd")
        gw.set_canvas("hermes-s1", "flowchart TD\n  B[task two]", "002-two.mmd", active=False)
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k")
        try:
            state = eng.current_state()
            state.ask_canvas()          # (a prompt would make the fake draw a new task)
            rt.worker.wake()
            assert wait_for(lambda: state.canvas_text != "")
            assert "002-two.mmd" in state.canvas_text, state.canvas_text
        finally:
            rt.close()
    assert current_canvas({"currentMmd": None, "mmds": [
        {"filename": "001-a.mmd", "content": "x"}, {"filename": "003-c.mmd", "content": ""},
        {"filename": "002-b.mmd", "content": "y"}]}) == Canvas("002-b.mmd", "y")
