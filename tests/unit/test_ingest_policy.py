"""The ingest worker does Gateway I/O only; what it sends and what a canvas changes is the
runtime's session policy (``runtime/ingest_policy``)."""

import ast
from pathlib import Path

from fakes.gateway import FakeGateway
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.runtime.ingest_policy import SessionIngestPolicy
from tencentdb_offload.runtime.ingest import Canvas, Outgoing, current_canvas
from tencentdb_offload.session.state import SessionRegistry

from helpers import make_engine, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_imports_no_session_or_canvas_policy():
    tree = ast.parse((ROOT / "runtime" / "ingest.py").read_text(encoding="utf-8"))
    imported = {(n.level, n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for level, m in imported if level == 2 and m in ("session", "context", "context.canvas")}
    assert "registry" not in (ROOT / "runtime" / "ingest.py").read_text(encoding="utf-8")


class Recording:
    """The runtime's policy, with every call the worker makes written down."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def record(*args):
            out = method(*args)
            self.calls.append((name, args, out))
            return out
        return record


def test_the_worker_sends_what_the_policy_hands_it_and_reports_back(tmp_path):
    with FakeGateway(api_key="k") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k")
        policy = rt.worker.policy = Recording(rt.worker.policy)
        hooks = HookHandlers(rt)
        gw.set_canvas("hermes-s1", "flowchart TD\n  001-N1[\"read the parser\"]")
        hooks.pre_llm_call(session_id="s1", user_message="refactor the parser",
                           conversation_history=[{"role": "assistant", "content": "which module is it?"}])
        hooks.post_tool_call(tool_name="read_file", args={"path": "/p.py"}, result="x" * 400,
                             session_id="s1", tool_call_id="c1")
        assert rt.flush("s1", 10)
        state = eng.current_state()
        assert wait_for(lambda: "001-task.mmd" in state.canvas_text)
        pairs = [r.body for r in gw.requests if r.path.endswith("/ingest") and r.body["tool_pairs"]]
        rt.close()
    assert pairs[0]["prompt"] == "refactor the parser"
    names = [c[0] for c in policy.calls]
    assert "outgoing" in names and "accepted" in names and "canvases_due" in names
    assert ("outgoing", ("s1",), Outgoing("hermes-s1", "refactor the parser", tuple(state.recent))) \
        in policy.calls
    found = [c[1][1] for c in policy.calls if c[0] == "canvas" and c[1][1] is not None]
    assert found and found[-1].filename == "001-task.mmd" and not state.canvas_wanted


def test_the_policy_alone():
    registry = SessionRegistry(4)
    policy = SessionIngestPolicy(registry)
    assert policy.outgoing("gone:1").gateway_id.startswith("hermes.gone-1.")   # evicted or unknown
    state = registry.get("s1")
    state.prompt, state.recent = "p", [{"role": "user", "content": "u"}]
    assert policy.outgoing("s1") == Outgoing("hermes-s1", "p", ({"role": "user", "content": "u"},))
    assert policy.canvases_due(set()) == []
    policy.accepted("s1")
    due = policy.canvases_due(set())
    assert [d[:2] for d in due] == [("s1", "hermes-s1")]
    policy.canvas(due[0], Canvas("001-a.mmd", "flowchart TD"))
    assert not state.canvas_wanted and "001-a.mmd" in state.canvas_text
    assert SessionIngestPolicy(registry, canvas=False).canvases_due({"s1"}) == []
    assert current_canvas({"mmds": [{"filename": "a", "content": " "}]}) is None
    assert current_canvas({"currentMmd": "b", "mmds": [{"filename": "a", "content": "x"},
                                                       {"filename": "b", "content": "y"}]}) == Canvas("b", "y")
