#!/usr/bin/env python3
"""Bench row: ``archive export`` of a 1 GB archive streams with flat memory.

``python3 bench/archive_export.py`` (``--gb N`` for another size) builds an archive of about
N GB in a temporary directory with a fast bulk insert (the plugin's schema, journaling off while
building), then runs ``python3 <plugin dir> archive export`` on it in a child process exactly as
a user would, sampling the child's resident memory from ``/proc`` every 50 ms. The same is done
for ``archive list`` (the interpreter and the plugin loading, nothing streamed): the row's
number is the export's peak RSS minus that. Prints the row as JSON and writes
``bench/results/archive_export.json``. About 1–2 minutes and 2.5 GB of temporary disk.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

MB = 1_000_000
BIG = 50 * MB               # a few huge tool results (one row bigger than any buffer)
BIG_ROWS = 4
SMALL = 100_000             # and many ordinary ones, messages among them


def build(directory: Path, total: int) -> Tuple[int, int]:
    """An archive of about ``total`` chars in conversation ``bench``: (items, chars)."""
    _common.load_plugin()
    from tencentdb_offload.archive.store import Store
    Store(directory).close()                      # the real schema
    conn = sqlite3.connect(str(directory / "store.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    line = "line %09d of a long build log: compiling module, 日本語 and \"quotes\"\n"
    big_text = "".join(line % i for i in range(BIG // len(line % 0)))
    small_rows = max(0, total - BIG_ROWS * len(big_text)) // SMALL
    items = chars = 0
    conn.execute("BEGIN")
    for i in range(BIG_ROWS + small_rows):
        if i < BIG_ROWS:
            text, kind, call = big_text, "tool_result", "big-%d" % i
        else:
            text = (line % i) * (SMALL // len(line % 0))
            kind, call = ("message", None) if i % 10 == 0 else ("tool_result", "call-%d" % i)
        conn.execute("INSERT INTO archive(session,item_key,kind,tool_call_id,tool_name,role,args,"
                     "content,chars,created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                     ("bench", "row:%d" % i, kind, call, "cat", "tool", "{}", text, len(text),
                      time.time()))
        items, chars = items + 1, chars + len(text)
    conn.execute("COMMIT")
    conn.close()
    return items, chars


def _status_kb(pid: int, field: str) -> int:
    try:
        for ln in Path("/proc/%d/status" % pid).read_text().splitlines():
            if ln.startswith(field + ":"):
                return int(ln.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_sampled(args: List[str]) -> Tuple[int, float, int]:
    """(peak RSS in KB sampled every 50 ms, seconds, exit status) of a child process."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(_common.ROOT)] + args, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _status_kb(proc.pid, "VmRSS"), _status_kb(proc.pid, "VmHWM"))
        time.sleep(0.05)
    proc.wait()
    return peak, time.monotonic() - start, proc.returncode


def measure(gb: float) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tdo-bench-export-") as tmp:
        store, out = Path(tmp) / "store", Path(tmp) / "export.jsonl"
        store.mkdir()
        t = time.monotonic()
        items, chars = build(store, int(gb * 1e9))
        built_s = time.monotonic() - t
        db_bytes = (store / "store.db").stat().st_size
        base_kb, _s, rc = run_sampled(["archive", "--store", str(store), "list"])
        assert rc == 0
        peak_kb, secs, rc = run_sampled(["archive", "--store", str(store), "export", "bench",
                                         "--out", str(out)])
        assert rc == 0
        lines = 0
        with open(out, "rb") as f:
            for _ in f:
                lines += 1
        return {"items": items, "chars": chars, "db_bytes": db_bytes,
                "export_bytes": out.stat().st_size, "lines": lines, "build_s": built_s,
                "export_s": secs, "peak_mb": peak_kb / 1024, "base_mb": base_kb / 1024}


def rows(gb: float = 1.0) -> List[Dict[str, Any]]:
    from cases import row
    got = measure(gb)
    extra = got["peak_mb"] - got["base_mb"]
    ok = got["lines"] == got["items"] and extra <= 32
    note = ("archive export of %s items (%.2f GB store, %d rows of 50 MB), %.2f GB of JSON "
            "Lines in %.0f s (%.0f MB/s); peak RSS %.1f MB vs %.1f MB for `archive list`"
            % (got["items"], got["db_bytes"] / 1e9, BIG_ROWS, got["export_bytes"] / 1e9,
               got["export_s"], got["export_bytes"] / MB / max(got["export_s"], 1e-9),
               got["peak_mb"], got["base_mb"]))
    return [row("archive/export-1GB", "archive export", "%.1f GB archive" % (got["db_bytes"] / 1e9),
                "MB", extra, None, 1, None, "", "RSS +≤ 32 MB over `archive list`, every item",
                ok, note=note, group="archive", raw=got)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="archive size in GB (default 1)")
    args = ap.parse_args()
    out = rows(args.gb)
    text = json.dumps(out, ensure_ascii=False, indent=2)
    print(text)
    (_common.BENCH / "results").mkdir(exist_ok=True)
    (_common.BENCH / "results" / "archive_export.json").write_text(text + "\n", encoding="utf-8")
    return 0 if all(r["met"] for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
