"""Status on a store of a long life: every compaction counted, whatever their number."""

import json
import sqlite3
import time

from tencentdb_offload.archive.store import Store
from tencentdb_offload.status.model import read_store_view

MANY = 100_001          # past the 100,000 rows status once read


def test_status_counts_every_compaction_of_a_busy_store(tmp_path):
    Store(tmp_path).close()
    conn = sqlite3.connect(str(tmp_path / "store.db"))
    record = json.dumps({"route": "local", "tokens_before": 3, "tokens_after": 1,
                         "left": ["call_%d" % i for i in range(50)]})
    now = time.time()
    conn.executemany("INSERT INTO events(ts,session,kind,data) VALUES (?,?,'compaction',?)",
                     ((now - MANY + i, "s%d" % (i % 2), record) for i in range(MANY)))
    conn.commit()
    conn.close()
    view = read_store_view(tmp_path, recent=3)
    assert view.compactions.total == MANY and view.compactions.local == MANY
    assert view.compactions.tokens_saved == 2 * MANY
    rows = {r.session: r.compactions for r in view.sessions}
    assert rows == {"s0": MANY // 2 + 1, "s1": MANY // 2}
    assert len(view.compactions.recent) == 3
    assert view.compactions.recent[0]["left"][:2] == ["call_0", "call_1"]
