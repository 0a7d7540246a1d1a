import threading
import time

from tencentdb_offload.archive.outbox import Outbox
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.archive.writer import StoreWriter
from tencentdb_offload import build_runtime
from tencentdb_offload.context import result_keys

from helpers import archive_items, count_archived, env_for


def test_archive_read_search_and_dedup(tmp_path):
    st = Store(tmp_path)
    archive_items(st, "conv", [ArchiveItem("tool_result", "alpha beta gamma", "c1", "grep", "tool", "{}")])
    archive_items(st, "conv", [ArchiveItem("tool_result", "alpha beta gamma", "c1", "grep")])  # a copy
    archive_items(st, "conv", [ArchiveItem("tool_result", "c1 reused", "c1", "grep")])  # kept apart
    archive_items(st, "conv", [ArchiveItem("message", "中文 消息 内容", role="user")])
    assert st.read_page("conv", "c1")["content"] == "alpha beta gamma"
    assert st.read_page("other", "c1") is None       # another conversation's item is not found
    assert [h["tool_call_id"] for h in st.search("conv", "BETA alpha")] == ["c1"]
    assert st.search("conv", "消息")[0]["role"] == "user"
    assert st.search("other", "alpha") == []
    assert count_archived(st, "conv") == 3
    assert st.read_page("conv", "c1")["other_keys"] == [result_keys.suffixed("c1", "c1 reused")]


def test_outbox_order_delivery_and_dead_rows(tmp_path):
    st = Store(tmp_path)
    now = time.time()
    st.transaction([Outbox.op_enqueue("s", "prompt", {"prompt": "p"}, now)] +
                   [Outbox.op_enqueue("s", "pair", {"n": i}, now) for i in range(3)])
    rows = st.outbox.heads("s")
    assert [r.kind for r in rows] == ["prompt", "pair", "pair", "pair"]
    assert [r.payload for r in st.outbox.load(rows)][:2] == [{"prompt": "p"}, {"n": 0}]
    st.outbox.mark_delivered([rows[0].id, rows[1].id])
    st.outbox.mark_failed([rows[2].id], "400 bad", dead=True)
    assert st.outbox.backlog("s") == 1
    stats = st.stats()
    assert stats.delivered == 2 and stats.outbox_dead == 1


def test_reclaim_deletes_only_old_rows(tmp_path):
    st = Store(tmp_path)
    old = time.time() - 40 * 86400
    st.transaction([Store.op_archive("s", [ArchiveItem("message", "old", role="user")], old),
                    Store.op_archive("s", [ArchiveItem("message", "new", role="user")], time.time()),
                    Outbox.op_enqueue("s", "pair", {"n": 1}, old)])
    counts = st.reclaim(30)
    assert counts["archive"] == 1 and counts["outbox"] == 1
    assert [h["snippet"] for h in st.search("s", "")] == ["new"]
    assert st.reclaim(0) == {}


def test_corrupt_store_is_moved_aside(tmp_path):
    (tmp_path / "store.db").write_bytes(b"this is not sqlite" * 100)
    st = Store(tmp_path)
    assert "corrupt" in st.last_error
    assert list(tmp_path.glob("store.db.corrupt-*"))
    archive_items(st, "s", [ArchiveItem("message", "works again", role="user")])
    assert count_archived(st, "s") == 1


def test_unwritable_store_degrades_not_crashes(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rt = build_runtime(env=dict(env_for(tmp_path), TENCENTDB_OFFLOAD_STORE_DIR=str(blocker / "sub")))
    assert rt.store is None and "cannot create" in rt.store_error
    from tencentdb_offload.engine import TencentDBOffloadEngine
    eng = TencentDBOffloadEngine(rt)
    eng.update_model(model="m", context_length=64000)
    out = eng.handle_tool_call("tdai_read_cos", {"tool_call_id": "x"})
    assert '"ok": false' in out and "unavailable" in out


def test_writer_batches_from_many_threads(tmp_path):
    st = Store(tmp_path)
    w = StoreWriter(st)

    def go(n):
        for i in range(50):
            w.submit(Store.op_archive("s%d" % n, [ArchiveItem("tool_result", "r", "c%d_%d" % (n, i))], time.time()))

    ts = [threading.Thread(target=go, args=(n,)) for n in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert w.flush(5)
    assert st.stats().archived_items == 300
    w.close()


def test_writer_runs_housekeeping_when_idle(tmp_path):
    calls = []
    StoreWriter.IDLE_S, saved = 0.05, StoreWriter.IDLE_S
    try:
        w = StoreWriter(Store(tmp_path), on_idle=lambda: calls.append(1))
        time.sleep(0.3)
        w.close()
    finally:
        StoreWriter.IDLE_S = saved
    assert len(calls) >= 2            # at start-up and again when due



def test_connections_of_finished_threads_are_closed(tmp_path):
    """Hermes runs tools on short-lived threads: one SQLite connection per finished thread
    must not pile up (an fd each) until the process ends."""
    import os
    import threading

    st = Store(tmp_path / "st")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        t = threading.Thread(target=lambda: count_archived(st, "s"))
        t.start()
        t.join()
    count_archived(st, "s")                      # the next connection closes the stale ones
    assert len(os.listdir("/proc/self/fd")) <= before + 4
    st.close()
