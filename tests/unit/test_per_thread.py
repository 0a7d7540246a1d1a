"""A per-thread resource is closed only by its owner thread or after the owner ended
(issue 16): closing a SQLite connection under the thread using it breaks its transaction."""

import json
import subprocess
import sys
import threading
from pathlib import Path

from tencentdb_offload.archive.store import Store
from tencentdb_offload.common.per_thread import PerThread

TESTS = Path(__file__).resolve().parent.parent


class Recorder:
    """The close callback: which resource was closed on which thread, and whether its owner
    could still have been using it then."""

    def __init__(self):
        self.owners = {}
        self.closed = []

    def make(self, name):
        self.owners[name] = threading.current_thread()
        return name

    def close(self, name):
        owner = self.owners[name]
        me = threading.current_thread()
        self.closed.append((name, "owner" if owner is me else
                            "running" if owner.is_alive() or owner is threading.main_thread()
                            else "ended"))


def in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0] if out else None


def test_close_all_leaves_a_running_thread_its_resource_until_its_next_call():
    rec = Recorder()
    pt = PerThread(rec.close)
    pt.put(rec.make("main"))
    have, go, done = threading.Event(), threading.Event(), []

    def worker():
        pt.put(rec.make("worker"))
        have.set()
        go.wait(10)
        done.append(pt.get())      # after close_all: retired, closed here, never handed out
    t = threading.Thread(target=worker)
    t.start()
    assert have.wait(10)
    pt.close_all()                 # from the main thread, the worker still running
    assert rec.closed == [("main", "owner")]
    go.set()
    t.join(10)
    assert done == [None]
    assert rec.closed == [("main", "owner"), ("worker", "owner")]
    assert len(pt) == 0


def test_resources_of_ended_threads_are_closed_by_anyone():
    rec = Recorder()
    pt = PerThread(rec.close)
    in_thread(lambda: pt.put(rec.make("a")))            # a's thread has ended
    pt.put(rec.make("main"))
    assert rec.closed == [("a", "ended")]
    in_thread(lambda: pt.put(rec.make("b")))
    pt.close_all()
    assert sorted(rec.closed) == [("a", "ended"), ("b", "ended"), ("main", "owner")]


def test_a_thread_replacing_its_own_resource_closes_the_old_one():
    rec = Recorder()
    pt = PerThread(rec.close)
    pt.put(rec.make("one"))
    pt.put(rec.make("two"))
    assert rec.closed == [("one", "owner")] and pt.get() == "two"
    pt.drop()
    assert rec.closed == [("one", "owner"), ("two", "owner")] and pt.get() is None


EXIT_HOOK = r"""
import atexit, json, sys, threading
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
load_plugin()
from tencentdb_offload.common.per_thread import PerThread
closed = []
pt = PerThread(lambda r: closed.append((r, threading.current_thread().name)))
pt.put("main-conn")

def at_exit():
    # what Hermes' exit hooks do: another thread opens its resource while the main thread
    # runs the hooks (and main_thread().is_alive() already answers False)
    alive = threading.main_thread().is_alive()
    t = threading.Thread(target=lambda: pt.put("hook-conn"), name="hook-thread")
    t.start()
    t.join()
    print(json.dumps({"main_alive": alive, "closed": closed, "main_has": pt.get()}))
atexit.register(at_exit)
"""


def test_a_put_during_exit_hooks_leaves_the_main_threads_connection_open():
    proc = subprocess.run([sys.executable, "-c", EXIT_HOOK, str(TESTS)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["main_alive"] is False                  # the trap this guards against
    assert out["closed"] == [] and out["main_has"] == "main-conn"


def test_store_close_from_another_thread_lets_a_running_transaction_commit(tmp_path):
    """The ingest sender or the writer may be inside a transaction when the runtime closes the
    store at exit; its connection must not be closed under it."""
    store = Store(tmp_path / "store")
    inside, go, errors = threading.Event(), threading.Event(), []

    def writer():
        conn = store._conn()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO counters(name,value) VALUES('probe',1)")
        inside.set()
        go.wait(10)
        try:
            conn.execute("COMMIT")
        except Exception as exc:    # today: "Cannot operate on a closed database."
            errors.append("%s: %s" % (type(exc).__name__, exc))
        assert store._conn() is not conn          # retired: a new connection from now on
    t = threading.Thread(target=writer)
    t.start()
    assert inside.wait(10)
    store.close()
    go.set()
    t.join(10)
    assert errors == []
    again = Store(tmp_path / "store")
    try:
        assert again._conn().execute("SELECT value FROM counters WHERE name='probe'").fetchone() == (1,)
    finally:
        again.close()
        store.close()
