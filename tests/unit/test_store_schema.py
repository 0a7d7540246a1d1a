"""A store written by a newer version (or another program) is refused with a clear error at
open, not failed on at every write; a store this version makes records its schema."""

import sqlite3

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.archive.store import SCHEMA_VERSION, ArchiveItem, Store, StoreError

from helpers import archive_items, env_for


def _user_version(path):
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_a_new_store_records_its_schema_version(tmp_path):
    Store(tmp_path).close()
    assert _user_version(tmp_path / "store.db") == SCHEMA_VERSION


def test_a_store_of_a_newer_version_is_refused_clearly(tmp_path):
    home = tmp_path / "home" / "tencentdb-offload"
    Store(home).close()
    conn = sqlite3.connect(str(home / "store.db"))
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(StoreError, match="newer version of tencentdb-offload"):
        Store(home)
    rt = plugin.build_runtime(env=env_for(tmp_path))
    try:
        assert rt.store is None and "newer version" in rt.status()["store_error"]
    finally:
        rt.close()


def test_a_store_whose_archive_lacks_our_columns_is_refused(tmp_path):
    conn = sqlite3.connect(str(tmp_path / "store.db"))
    conn.execute("CREATE TABLE archive(id INTEGER PRIMARY KEY, session TEXT, blob_ref TEXT)")
    conn.close()
    with pytest.raises(StoreError, match="unknown schema.*item_key"):
        Store(tmp_path)


def test_status_doctor_and_report_say_a_newer_store_is_refused(tmp_path):
    """The plugin refuses a store of a newer schema (no archive, recall answers an error):
    status showed it as healthy and doctor passed its store check."""
    from tencentdb_offload.ops.doctor import Checks
    from tencentdb_offload.ops.doctor_store import check_store
    from tencentdb_offload.ops.env import CliError
    from tencentdb_offload.ops.report_data import figures
    from tencentdb_offload.ops.status import status_report
    from tencentdb_offload.settings.config import Settings
    from tencentdb_offload.status.render import render

    st = Store(tmp_path)
    archive_items(st, "conv-1", [ArchiveItem("tool_result", "alpha " * 50, "c1")])
    st.close()
    conn = sqlite3.connect(str(tmp_path / "store.db"))
    conn.execute("PRAGMA user_version=%d" % (SCHEMA_VERSION + 1))
    conn.close()
    text = render(status_report(tmp_path, Settings()))
    assert "archive: UNAVAILABLE" in text and "newer version" in text, text
    c = Checks()
    check_store(c, Settings(store_dir=str(tmp_path)), {}, tmp_path)
    bad = [i for i in c.items if i["status"] == "fail"]
    assert bad and "newer version" in bad[0]["message"], c.items
    with pytest.raises(CliError, match="newer version"):
        figures(tmp_path, Settings(), None)
