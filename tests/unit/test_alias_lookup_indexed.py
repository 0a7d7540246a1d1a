"""A store of a long life holds an alias per Hermes 0.17 session rotation (one per compaction,
every conversation): reading one conversation's item (a recall, each pointer a compaction
checks) no longer walks every alias of every conversation. Work is counted in SQLite VM
steps, not time."""

import sqlite3
import time

from tencentdb_offload.archive import lookup
from tencentdb_offload.archive.store import ArchiveItem, Store
from helpers import alias, archive_items


def _steps_to_read(tmp_path, aliases):
    store = Store(tmp_path)
    archive_items(store, "conv", [ArchiveItem("tool_result", "r%d" % i, tool_call_id="c%d" % i)
                           for i in range(50)])
    alias(store, "rotated-1", "conv")
    store.close()
    conn = sqlite3.connect(str(tmp_path / "store.db"))
    conn.executemany("INSERT INTO aliases(session_id,conversation,created) VALUES (?,?,?)",
                     (("sid%d" % i, "other%d" % (i % 300), time.time()) for i in range(aliases)))
    conn.commit()
    steps = [0]

    def tick():
        steps[0] += 1
        return 0
    conn.set_progress_handler(tick, 10)
    for i in range(50):
        assert lookup.read_page(conn, "conv", "c%d" % i, 0, 10)["content"] == "r%d" % i
    conn.close()
    return steps[0]


def test_reading_an_item_does_not_walk_every_alias(tmp_path):
    (tmp_path / "few").mkdir()
    (tmp_path / "many").mkdir()
    few, many = _steps_to_read(tmp_path / "few", 0), _steps_to_read(tmp_path / "many", 20_000)
    assert many < 2 * few, (few, many)
