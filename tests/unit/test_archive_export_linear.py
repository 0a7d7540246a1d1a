"""`archive export` and `archive list --session` of a long conversation: work linear in its
items (a page per query walked the conversation's whole index again: quadratic). Work is
counted in SQLite VM steps, not time."""

import io

from tencentdb_offload.archive import browse, readonly
from tencentdb_offload.archive.store import ArchiveItem, Store
from helpers import archive_items


def _work(tmp_path, n):
    store = Store(tmp_path)
    for conv in ("conv", "other"):
        archive_items(store, conv, [ArchiveItem("tool_result", "%s %d" % (conv, i), tool_call_id="%s%d" % (conv, i))
                             for i in range(n)])
    store.close()
    conn = readonly.connect(tmp_path / "store.db")
    steps = [0]

    def tick():
        steps[0] += 1
        return 0
    conn.set_progress_handler(tick, 100)
    out = io.StringIO()
    assert browse.export(conn, "conv", out.write) == n
    exported, steps[0] = steps[0], 0
    assert [i["key"] for i in browse.items(conn, "conv")] == ["conv%d" % i for i in range(n)]
    listed = steps[0]
    conn.close()
    assert out.getvalue().count("\n") == n
    return exported, listed


def test_export_and_list_work_grows_linearly(tmp_path):
    (tmp_path / "small").mkdir()
    (tmp_path / "big").mkdir()
    small, big = _work(tmp_path / "small", 1_500), _work(tmp_path / "big", 6_000)
    assert big[0] < 5 * small[0], (small, big)     # 4x the items: ~4x the work, not ~8x
    assert big[1] < 5 * small[1], (small, big)
