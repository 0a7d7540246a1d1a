"""store.db as a link to a file elsewhere (a store moved to a bigger disk): SQLite writes the
-wal and -shm beside the target, so a read-only opener that looked for them beside the link
read the main file alone: "no such table: archive" (demo's report said "internal error") or
figures missing everything still in the WAL."""

from tencentdb_offload.archive import readonly
from tencentdb_offload.archive.store import ArchiveItem, Store
from helpers import archive_items


def test_a_linked_store_is_read_with_its_wal_while_a_writer_holds_it(tmp_path):
    (tmp_path / "disk").mkdir()
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "store.db").symlink_to(tmp_path / "disk" / "store.db")
    writer = Store(tmp_path / "store")          # open: the commits stay in the WAL
    try:
        archive_items(writer, "s", [ArchiveItem("tool_result", "x" * 500, "c%d" % i, "t")
                             for i in range(5)])
        assert (tmp_path / "disk" / "store.db-wal").exists()
        assert readonly.problem(tmp_path / "store" / "store.db") == ""
        reader = readonly.StoreReader(tmp_path / "store")
        try:
            assert [r[:2] for r in reader.archive_by_session()] == [("s", 5)]
        finally:
            reader.close()
    finally:
        writer.close()
