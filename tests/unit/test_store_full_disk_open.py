"""A store opened on a full disk is left where it is: SQLite says "disk I/O error" for a file
size limit or a full disk as for a lost WAL, and that error used to set a healthy store aside
as "corrupt" (the next start began an empty archive)."""

import json
import subprocess
import sys
from pathlib import Path

from tencentdb_offload.archive.store import ArchiveItem, Store

from helpers import archive_items, count_archived

TESTS = Path(__file__).resolve().parent.parent

OPEN_FULL = r"""
import json, resource, signal, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
load_plugin()
from tencentdb_offload.archive.store import Store, StoreError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)            # EFBIG instead of being killed
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))
try:
    Store(sys.argv[2]).close()
    print(json.dumps({"error": ""}))
except StoreError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def _open_with_limit(store_dir: Path, limit: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", OPEN_FULL, str(TESTS), str(store_dir),
                           str(limit)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_full_disk_at_open_keeps_the_store_and_says_why(tmp_path):
    st = Store(tmp_path)
    archive_items(st, "s", [ArchiveItem("tool_result", "kept " * 100, "c1", "t")])
    st.close()
    before = (tmp_path / "store.db").read_bytes()
    for limit in (0, 1000, 20000):
        out = _open_with_limit(tmp_path, limit)
        assert "disk I/O error" in out["error"] and "nothing was moved" in out["error"]
        assert "File too large" in out["error"]
        assert not list(tmp_path.glob("store.db.corrupt-*"))
        assert not list(tmp_path.glob(".space-probe-*"))
        assert (tmp_path / "store.db").read_bytes() == before
    again = Store(tmp_path)                                 # space freed: all of it is there
    assert count_archived(again, "s") == 1
    again.close()
