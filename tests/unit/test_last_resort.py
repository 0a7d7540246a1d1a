"""The last resort: when the compaction flow itself fails (a defect of ours), the plain local
compaction still runs so the host does not loop, and what it removes stays recallable."""

import json

from tencentdb_offload.compaction import flow
from tencentdb_offload.context import messages

from helpers import conversation, make_engine


def test_last_resort_archives_what_it_removes(tmp_path, monkeypatch):
    rt, eng = make_engine(tmp_path)
    question = "a question, marker LASTRESORT-7 " + "w " * 3000
    answer = "an answer worth keeping: ANSWER-LASTRESORT-8 " + "v " * 1000
    conv = conversation(3, 6000) + [{"role": "user", "content": question},
                                    {"role": "assistant", "content": answer}]
    for i in range(40):
        conv += [{"role": "user", "content": "talk %d " % i + "w " * 3000},
                 {"role": "assistant", "content": "reply %d " % i + "v " * 1000}]

    def broken(self, *args, **kwargs):
        raise RuntimeError("a defect in the flow")
    monkeypatch.setattr(flow.CompactionRun, "run", broken)
    eng.update_from_response({"prompt_tokens": 70_000})
    out = eng.compress(conv, current_tokens=70_000)
    assert any("compress failed" in line for line in rt.errors)
    assert len(out) < len(conv) and messages.validation_errors(out) == []
    texts = [m.get("content") for m in out]
    for marker, whole in (("LASTRESORT-7", question), ("ANSWER-LASTRESORT-8", answer)):
        assert whole not in texts       # it left the context ...
        found = json.loads(eng.handle_tool_call("tdai_offload_search", {"query": marker}))
        assert found["count"] >= 1, marker      # ... and the recall tools find it
