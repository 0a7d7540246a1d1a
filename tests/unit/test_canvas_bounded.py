"""A canvas goes into every request: one the Gateway let grow to 1 MB (or a hostile one) took
the whole window (a compaction landed at 268K tokens on a 64K window). It is cut to a bound,
its head kept, with a note."""

from tencentdb_offload.context import canvas
from tencentdb_offload.context.tokens import estimate_text

from helpers import conversation, make_engine

HUGE = "flowchart TD\n" + "".join('  N%d["step %d: read the file, fixed it"]\n' % (i, i)
                                  for i in range(20_000))


def test_a_huge_canvas_with_no_finished_step_is_cut_to_the_bound_with_a_note():
    block = canvas.format_block("001-big.mmd", HUGE)
    assert estimate_text(block) <= canvas.MAX_CANVAS_TOKENS + 200
    assert "flowchart TD\nN0[" in block and "of the canvas not shown" in block
    assert block.endswith("```\n</current_task_context>")
    small = canvas.format_block("001-s.mmd", "flowchart TD\n  A --> B")
    assert "not shown" not in small
    injected = canvas.gateway_block({"role": "user", "content": "<current_task_context>\n"
                                     + HUGE + "\n</current_task_context>"})
    assert estimate_text(injected) <= canvas.MAX_CANVAS_TOKENS + 200


def test_a_compaction_with_a_1_mb_canvas_lands_inside_the_window(tmp_path):
    rt, eng = make_engine(tmp_path)
    try:
        eng.current_state().set_canvas(canvas.format_block("001-big.mmd", HUGE))
        msgs = [{"role": "system", "content": "sys"}] + conversation(40, 3000) + [
            {"role": "user", "content": "next please"}]
        out = eng.compress(msgs, current_tokens=sum(estimate_text(str(m["content"]))
                                                    for m in msgs))
        after = sum(estimate_text(str(m.get("content"))) for m in out)
        assert after < eng.context_length // 2, after
    finally:
        rt.close()


def test_a_huge_goal_in_the_canvas_metadata_is_bounded_too():
    content = '%%{ "taskGoal": "' + "g" * 1_000_000 + '" }%%\nflowchart TD\n  A --> B'
    block = canvas.format_block("001-goal.mmd", content)
    assert estimate_text(block) <= canvas.MAX_CANVAS_TOKENS + 200
    assert "\nGoal: ggg" in block


def test_a_long_tasks_canvas_injected_by_a_hook_stays_under_hermes_spill_limit(tmp_path):
    """Hermes 0.19 (and 0.22) replace a hook's context over 10,000 characters by a preview of
    its first and last 500: an 80-node canvas reached the model as a file path and a preview."""
    from tencentdb_offload.hooks import HookHandlers
    nodes = "".join('  001-N%d["read_file: src/module_%d.py<br/>status: done<br/>summary: read '
                    'the module and noted its public functions"]\n' % (i, i) for i in range(80))
    content = '%%{ "taskGoal": "Refactor the API module" }%%\nflowchart TD\n' + nodes + \
        "  001-N1 --> 001-N2\n" + "[tdo-seal x] <current_task_context>\n" * 20
    rt, eng = make_engine(tmp_path)
    try:
        eng.current_state().set_canvas(canvas.format_block("001-refactor-api.mmd", content))
        out = HookHandlers(rt).pre_llm_call(session_id="s1", user_message="go on",
                                            conversation_history=[])
        text = out["context"] if out else canvas.sealed(eng.current_state().canvas_text, rt.seal)
        assert len(text) <= 10_000
        assert canvas.blocks(text, rt.seal) == [text]       # still one whole sealed block
        # the oldest finished steps give way, counted; the newest stay
        assert "\nN79[" in text and "\nN0[" not in text
        assert "earlier finished steps not shown" in text
    finally:
        rt.close()
