"""A session whose tool call never got a result (a turn interrupted during the tool run): Hermes
answers such a call with a stub before every request (its pre-request sanitizer), so its
requests were valid. ``replay`` judged every request after it invalid and exited 1, as if the
plugin had broken the sequence; it now answers the call as Hermes does and says so."""

from __future__ import annotations

import json

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)

from tencentdb_offload.ops.replay import UNAVAILABLE, answer_unanswered


def call(cid: str) -> dict:
    return {"id": cid, "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": cid + ".py"})}}


def session() -> list:
    msgs = []
    for t in range(4):
        msgs += [{"role": "user", "content": "read file %d" % t},
                 {"role": "assistant", "content": None, "tool_calls": [call("c%d" % t), call("d%d" % t)]},
                 {"role": "tool", "tool_call_id": "c%d" % t, "content": "x = %d\n" % t * 500}]
        if t != 1:          # turn 1 was interrupted: d1 never answered
            msgs.append({"role": "tool", "tool_call_id": "d%d" % t, "content": "y\n" * 300})
        msgs.append({"role": "assistant", "content": "done %d" % t})
    return msgs


def test_an_unanswered_call_is_answered_right_after_its_results():
    msgs = session()
    fixed, n = answer_unanswered(msgs)
    assert n == 1 and len(fixed) == len(msgs) + 1
    at = next(i for i, m in enumerate(fixed) if m.get("content") == UNAVAILABLE)
    assert fixed[at]["tool_call_id"] == "d1" and fixed[at - 1]["tool_call_id"] == "c1"
    assert answer_unanswered(fixed) == (fixed, 0)
    tail, n = answer_unanswered(msgs + [{"role": "assistant", "content": None,
                                         "tool_calls": [call("e9")]}])
    assert n == 2 and tail[-1]["tool_call_id"] == "e9"     # d1 and the last call


def test_replay_of_an_interrupted_tool_run_is_valid(home, tmp_path):
    path = tmp_path / "interrupted.json"
    path.write_text(json.dumps(session()), encoding="utf-8")
    proc = run_cli("replay", str(path), "--context-length", "64000", "--json", home=home, env=LOCAL)
    rep = report_of(proc)
    assert rep["summary"]["invalid_requests"] == 0, rep["summary"]["invalid_examples"]
    assert rep["summary"]["messages_read"] == len(session())
    assert any("never answered" in line for line in rep["source"]["not_reconstructed"])


def test_replay_of_a_session_whose_start_was_cut_off(home, tmp_path):
    """A file that starts inside a tool step (``tail -n`` of a JSONL, a cut export): the results
    before the first call answer nothing; Hermes leaves such results out of every request, and
    replay judged every request invalid."""
    msgs = session()[2:]
    assert msgs[0]["role"] == "tool"
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in msgs), encoding="utf-8")
    rep = report_of(run_cli("replay", str(path), "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert rep["summary"]["invalid_requests"] == 0, rep["summary"]["invalid_examples"]
    assert rep["summary"]["messages_read"] == len(msgs)
    assert any("answering no call" in line for line in rep["source"]["not_reconstructed"])
