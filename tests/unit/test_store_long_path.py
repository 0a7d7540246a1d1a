"""A store directory whose path is too long for SQLite (a long or non-ASCII HERMES_HOME):
every open failed with a bare "unable to open database file" and doctor passed the store;
both now say the path is too long and which setting fixes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tencentdb_offload.archive.repair import SQLITE_MAX_PATH
from tencentdb_offload.archive.store import Store, StoreError
from tencentdb_offload.ops.doctor import Checks
from tencentdb_offload.ops.doctor_store import check_store
from tencentdb_offload.settings.config import Settings

LONGEST_DIR = SQLITE_MAX_PATH - len("-journal/store.db")


def _dir_of(tmp_path: Path, size: int) -> Path:
    """A directory under ``tmp_path`` whose absolute path is ``size`` UTF-8 bytes."""
    rest = size - len(str(tmp_path).encode()) - 1
    parts = []
    while rest > 0:
        take = min(rest, 150)
        parts.append("文" * (take // 3) + "d" * (take % 3))     # non-ASCII: bytes, not characters
        rest -= take + 1
    path = tmp_path.joinpath(*parts)
    assert len(str(path).encode()) in (size, size - 1)
    return path


def test_a_store_directory_too_long_for_sqlite_is_named_as_such(tmp_path):
    directory = _dir_of(tmp_path, LONGEST_DIR + 40)
    with pytest.raises(StoreError, match="path is .* bytes.*TENCENTDB_OFFLOAD_STORE_DIR"):
        Store(directory)
    c = Checks()
    check_store(c, Settings(store_dir=str(directory)), {"HERMES_HOME": str(tmp_path)}, tmp_path)
    assert [i["status"] for i in c.items] == ["fail"], c.items
    assert "TENCENTDB_OFFLOAD_STORE_DIR" in c.items[0]["fix"]


def test_the_longest_directory_named_as_fitting_opens(tmp_path):
    directory = _dir_of(tmp_path, LONGEST_DIR)
    Store(directory).close()
    c = Checks()
    check_store(c, Settings(store_dir=str(directory)), {"HERMES_HOME": str(tmp_path)}, tmp_path)
    assert all(i["status"] == "pass" for i in c.items), c.items
