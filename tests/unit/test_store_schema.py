"""A store written by a newer version (or another program) is refused with a clear error at
open, not failed on at every write; a store this version makes records its schema."""

import sqlite3

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.archive.store import SCHEMA_VERSION, Store, StoreError

from helpers import env_for


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
