"""A conversation's state is read by the ingest worker's thread while Hermes' threads write
it (issue 27, "SessionState fields are written without its lock"). Every write of one of its
fields happens under its lock, and an ask for a fresh canvas is never lost to a fetch that
was already under way."""

import ast
import re
import threading
import time
from pathlib import Path


from tencentdb_offload.runtime.ingest import Canvas
from tencentdb_offload.runtime.ingest_policy import SessionIngestPolicy
from tencentdb_offload.session.state import SessionRegistry

ROOT = Path(__file__).resolve().parents[2]
RECEIVER = re.compile(r"(^|\.)(state|current_state\(\))$")    # how the product names one


def _fields():
    tree = ast.parse((ROOT / "session/state.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SessionState")
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)} - {"lock"}


def _unlocked_writes(node, fields, locked=False):
    if isinstance(node, ast.With):
        locked = locked or any(isinstance(i.context_expr, ast.Attribute) and i.context_expr.attr == "lock"
                               for i in node.items)
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and not locked:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if (isinstance(t, ast.Attribute) and t.attr in fields
                        and RECEIVER.search(ast.unparse(t.value))):
                    yield node.lineno, ast.unparse(t)
    for child in ast.iter_child_nodes(node):
        yield from _unlocked_writes(child, fields, locked)


def test_every_write_of_a_conversations_fields_elsewhere_holds_its_lock():
    fields = _fields()
    assert {"canvas_text", "request_estimate", "threshold_tokens"} <= fields
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "bench") or rel == Path("session/state.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += ["%s:%d %s" % (rel, line, what) for line, what in _unlocked_writes(tree, fields)]
    assert not found, "written without the state's lock (use a SessionState method): %s" % found


def test_an_ask_made_during_a_fetch_outlives_that_fetchs_answer():
    registry = SessionRegistry(4)
    policy = SessionIngestPolicy(registry)
    state = registry.get("s1")
    policy.accepted("s1")
    (under_way,) = policy.canvases_due(set())
    state.ask_canvas()                  # a new prompt while the worker's fetch is out
    policy.canvas(under_way, Canvas("001-a.mmd", "flowchart TD"))
    assert "001-a.mmd" in state.canvas_text
    assert [d.session for d in policy.canvases_due(set())] == ["s1"], "the later ask was lost"
    (again,) = policy.canvases_due(set())
    policy.canvas(again, None)          # answered (the Gateway had nothing): not asked forever
    assert policy.canvases_due(set()) == [] and "001-a.mmd" in state.canvas_text


def test_many_askers_and_a_fetching_worker_leave_no_ask_unanswered(busy_switching):
    """Hook threads ask while the worker fetches; when the askers stop, the worker fetches
    until nothing is due: every conversation's last fetch began after its last ask."""
    registry = SessionRegistry(16)
    policy = SessionIngestPolicy(registry)
    keys = ["c%d" % i for i in range(12)]
    states = [registry.get(k) for k in keys]
    clock = iter(range(10 ** 9)).__next__          # one order for asks and fetch starts
    tick_lock = threading.Lock()
    last_ask = {k: -1 for k in keys}
    last_fetch = {k: -1 for k in keys}
    stop = threading.Event()

    def tick():
        with tick_lock:
            return clock()

    def ask(worker):
        for i in range(3000):
            state = states[(worker * 7 + i) % len(states)]
            with tick_lock:         # the ask and its time, as one step
                state.ask_canvas()
                last_ask[state.key] = clock()

    def fetch():
        while True:
            # read "stop" before taking the asks: read after, an ask made between the two
            # (the askers' last, then stop) would be left for a worker that has gone
            stopping = stop.is_set()
            due = policy.canvases_due(set())
            if not due and stopping:
                return
            began = tick()              # the Gateway is asked after the asks were taken
            for d in due:
                last_fetch[d.session] = began
                time.sleep(0.001)       # the Gateway's round trip: asks arrive meanwhile
                policy.canvas(d, Canvas("001-%d.mmd" % began, "flowchart TD"))

    worker = threading.Thread(target=fetch)
    worker.start()
    askers = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
    for t in askers:
        t.start()
    for t in askers:
        t.join(60)
    stop.set()
    worker.join(60)
    assert not worker.is_alive()
    stale = [k for k in keys if last_fetch[k] < last_ask[k]]
    assert not stale, "asks no fetch answered: %s" % stale
