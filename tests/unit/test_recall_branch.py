"""A branched session (Hermes' /branch copies the transcript into a new session whose
parent_session_id names the old one) reads back what its copied digest and trims point to:
its parent's archived items, after its own; never those of an unrelated conversation."""

import json
import re

from tencentdb_offload.engine import TencentDBOffloadEngine
from tencentdb_offload.hooks import HookHandlers

from helpers import conversation, make_engine, tool_turn

READ, SEARCH = "tdai_read_cos", "tdai_offload_search"


class SessionDB:
    """Hermes' state.db as the engine sees it through bind_session_state."""

    def __init__(self, parents):
        self.parents = parents

    def get_session(self, session_id):
        if session_id not in self.parents and session_id not in self.parents.values():
            return None
        return {"id": session_id, "parent_session_id": self.parents.get(session_id)}


def call(eng, name, **args):
    return json.loads(eng.handle_tool_call(name, args))


def test_a_branch_reads_the_items_its_copied_history_points_to(tmp_path):
    rt, eng = make_engine(tmp_path, session="parent")
    hooks = HookHandlers(rt)
    conv = conversation(20, 3000) + sum((tool_turn(100 + i, 3000) for i in range(40)), [])
    for m in conv:
        if m["role"] == "tool":
            hooks.post_tool_call(tool_name="read_file", args={}, session_id="parent",
                                 tool_call_id=m["tool_call_id"], result=m["content"])
    hooks.post_tool_call(tool_name="t", args={}, session_id="stranger", tool_call_id="theirs",
                         result="a stranger's zebra")
    out = eng.compress(conv, current_tokens=200_000)
    rt.flush()
    shown = "".join(str(m.get("content")) for m in out)
    keys = set(re.findall(r"msg-[0-9a-f]{12}", shown) + re.findall(r"\[(call_[0-9_]+)\]", shown))
    assert len(keys) >= 8
    db = SessionDB({"branch": "parent", "parent": None, "stranger": None})
    eng.bind_session_state(session_db=db, session_id="branch")     # what /branch does
    assert eng.current_state().key == "branch"
    for key in keys:
        got = call(eng, READ, key=key)
        assert got["ok"], (key, got["error"])
    ref = call(eng, READ, path="offload/hermes-parent/refs/call_0_0.md")
    assert ref["ok"] and ref["content"].startswith("result call_0_0")
    assert call(eng, SEARCH, query="result call_0_0")["count"] == 1
    for args in ({"key": "theirs"}, {"path": "offload/hermes-stranger/refs/theirs.md"}):
        assert not call(eng, READ, **args)["ok"]
    assert call(eng, SEARCH, query="zebra")["count"] == 0
    other = TencentDBOffloadEngine(rt)                              # a session of its own
    other.update_model(model="m", context_length=64_000)
    other.bind_session_state(session_db=SessionDB({}), session_id="unrelated")
    assert not call(other, READ, key="call_0_0")["ok"]
    rt.close()
