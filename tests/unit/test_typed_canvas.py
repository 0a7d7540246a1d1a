"""A user who pastes a canvas in the unsealed shape 0.2 wrote (its preamble is public: the
model reads it in every canvas) writes text like any other: kept, never taken for ours."""

import json

from tencentdb_offload.compaction.request_view import RequestView
from tencentdb_offload.context import canvas
from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import messages_tokens
from tencentdb_offload.hooks import HookHandlers

from helpers import conversation, make_engine

TYPED = ("<current_task_context>\n" + canvas.PREAMBLE +
         "\nMy notes: the deploy key is in vault path secret/deploy\n</current_task_context>")


def test_compress_keeps_a_typed_block_in_the_newest_user_message(tmp_path):
    rt, eng = make_engine(tmp_path)
    msgs = conversation(12, 8000) + [{"role": "user", "content": TYPED}]
    out = eng.compress(msgs, current_tokens=messages_tokens(msgs) * 2, force=True)
    assert messages.validation_errors(out) == []
    assert out[-1] == {"role": "user", "content": TYPED}


def test_a_request_keeps_the_typed_block(tmp_path):
    rt, eng = make_engine(tmp_path)
    typed = "please keep this:\n\n" + TYPED
    req = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
           {"role": "assistant", "content": "hello"}, {"role": "user", "content": typed}]
    out, _ = RequestView(rt.sealed).build(eng.current_state(), req, "")
    assert out is None or messages.text_of(out[-1]).startswith(typed)


def test_the_guard_keeps_our_canvas_and_the_typed_text(tmp_path):
    rt, eng = make_engine(tmp_path)
    ours = canvas.sealed(canvas.format_block("001.mmd", "flowchart TD\n A-->B"), rt.seal)
    req = [{"role": "user", "content": "earlier\n\n" + ours}, {"role": "assistant", "content": "ok"},
           {"role": "user", "content": TYPED}]
    fixed, removed = canvas.keep_newest(req, rt.seal)
    assert removed == 0 and (fixed is None or fixed == req)


def test_a_typed_block_in_the_history_does_not_hold_back_the_canvas(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.current_state().set_canvas(canvas.format_block("001-task.mmd", "flowchart TD\n A[plan]-->B"))
    hist = [{"role": "user", "content": TYPED}, {"role": "assistant", "content": "noted"}]
    out = HookHandlers(rt).pre_llm_call(session_id="s1", user_message="next",
                                        conversation_history=hist)
    assert out and "A[plan]-->B" in out["context"]
    assert json.dumps(hist[0]) == json.dumps({"role": "user", "content": TYPED})
