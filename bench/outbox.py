#!/usr/bin/env python3
"""Outbox benchmarks: the disk cost of a waiting backlog (each result stored once) and the
peak memory of a process delivering a backlog of large results.

``python3 bench/outbox.py [--quick]`` prints the rows as JSON (run.py runs it in a child
process); ``python3 bench/outbox.py deliver HOME URL`` is the delivering process it measures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from _gateway import GatewayProc  # noqa: E402

HERE = Path(__file__).resolve().parent
BODY_LIMIT = 1_000_000          # the plugin's default




def _fill(bed: _common.Bed, texts: List[str]) -> None:
    for i, text in enumerate(texts):
        bed.hooks.post_tool_call(tool_name="read_file", args={"path": "/f%d" % i}, result=text,
                                 session_id="bench", tool_call_id="c%d" % i)
    bed.runtime.writer.flush(600)


def _disk(bed: _common.Bed) -> int:
    bed.runtime.store._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return bed.runtime.store.stats().db_bytes


def store_once(row) -> List[Dict[str, Any]]:
    ascii_text = _common.text_blob(100_000, seed=3)
    cjk = ("数据库连接失败，正在重试第三次。" * 2100)[:33_334]      # 100 KB of UTF-8
    texts = [ascii_text if i % 2 else cjk for i in range(100)]
    data = sum(len(t.encode("utf-8")) for t in texts)
    with GatewayProc(body_limit=BODY_LIMIT) as gw:
        gw.set_fault("refuse")
        bed = _common.Bed(gateway_url=gw.url)
        try:
            _fill(bed, texts)
            waiting = _disk(bed)
            gw.clear_fault()
            bed.runtime.client.breaker.record_success()
            bed.runtime.flush("bench", 120)
            left = bed.runtime.store.outbox.backlog()
            delivered = _disk(bed)
        finally:
            bed.close()
    case = "100 results of 100 KB (half CJK), %.1f MB of UTF-8" % (data / 1e6)
    return [
        row("outbox/disk_waiting", "store size, Gateway refusing", case, "MB", waiting / 1e6,
            None, 100, data / 1e6, "UTF-8 bytes of the results", "≤ 1.2× the data",
            waiting <= 1.2 * data, note="store.db + WAL after a checkpoint; 100 rows waiting",
            group="outbox"),
        row("outbox/disk_delivered", "store size, backlog delivered", case, "MB",
            delivered / 1e6, None, 100, data / 1e6, "UTF-8 bytes of the results",
            "≤ 1.1× the data", delivered <= 1.1 * data and left == 0,
            note="%d rows left undelivered" % left, group="outbox"),
    ]


def backlog_rss(row, results: int) -> List[Dict[str, Any]]:
    size = 10_000_000
    with GatewayProc(body_limit=BODY_LIMIT) as gw:
        gw.set_fault("refuse")
        bed = _common.Bed(gateway_url=gw.url)
        try:
            block = _common.text_blob(size, seed=5)
            for i in range(results):
                bed.hooks.post_tool_call(tool_name="cat", args={"i": i}, result=block,
                                         session_id="bench", tool_call_id="big%d" % i)
                bed.runtime.writer.flush(600)       # one 10 MB row in memory at a time
            bed.runtime.close()
            gw.clear_fault()
            home = str(Path(bed.tmp.name) / "home")
            proc = subprocess.run([sys.executable, str(HERE / "outbox.py"), "deliver", home, gw.url],
                                  capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise RuntimeError("delivery child failed: %s" % proc.stderr[-500:])
            out = json.loads(proc.stdout.splitlines()[-1])
            sent = len(gw.pair_ids("hermes-bench"))
        finally:
            bed.tmp.cleanup()
    peak_kb = out["peak_kb"]
    peak_mb = peak_kb / 1024
    return [row("outbox/backlog_rss", "peak RSS while delivering a backlog",
                "%d queued results of 10 MB (%d MB), body limit 1 MB" % (results, results * 10),
                "MB", peak_mb, None, 1, BODY_LIMIT / 1e6, "body limit",
                "≤ 6 body limits over the idle process", peak_kb <= 6 * BODY_LIMIT / 1024,
                note="peak resident memory over the idle process (ps every 20 ms) in a fresh process; %d/%d pairs sent in %.1f s"
                % (sent, results, out["seconds"]), group="outbox")]


def deliver(home: str, url: str) -> None:
    plugin = _common.load_plugin()
    rt = plugin.build_runtime(env={"HERMES_HOME": home, "TENCENTDB_OFFLOAD_GATEWAY_URL": url})
    started = time.monotonic()
    with _common.PeakRSS() as peak_rss:
        ok = rt.flush(None, 600)
    seconds = time.monotonic() - started
    peak = peak_rss.kb
    rt.close()
    print(json.dumps({"ok": ok, "peak_kb": peak, "seconds": seconds}))


def main(argv: List[str]) -> int:
    if argv[:1] == ["deliver"]:
        deliver(argv[1], argv[2])
        return 0
    import cases
    quick = "--quick" in argv
    rows = store_once(cases.row) + backlog_rss(cases.row, 8 if quick else 40)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
