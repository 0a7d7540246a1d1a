#!/usr/bin/env python3
"""Bench rows for the recall tools: what a page (and a search) of a 50 MB archived result costs.

``python3 bench/recall_paging.py`` prints the rows as JSON. The archive is built first, then a
child process reads it, so the peak RSS it reports is the reading's own (not the building's).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

MB = 1_000_000
PAGE = 20_000
SIZES = {"ascii": "line %08d of a long build log\n", "utf8": "строка %08d журнала сборки\n"}




def build(home: str) -> None:
    _common.load_plugin()
    from tencentdb_offload.archive.store import ArchiveItem, Store
    store = Store(Path(home))

    def archive_items(store: Store, session: str, items: list) -> None:
        store.transaction([store.op_archive(session, items, time.time())])

    for kind, pattern in SIZES.items():
        n = 50 * MB // len(pattern % 0)
        archive_items(store, "bench", [ArchiveItem("tool_result", "".join(pattern % i for i in range(n)),
                                            "big-" + kind, "cat")])
    archive_items(store, "bench", [ArchiveItem("tool_result", "small result line\n" * 1_200, "small",
                                        "cat")])
    archive_items(store, "many", [ArchiveItem("tool_result", "result %d: " % i + "lorem ipsum dolor " * 55,
                                       "m%d" % i, "grep") for i in range(10_000)])
    store.close()


def read(home: str) -> Dict[str, Any]:
    _common.load_plugin()
    from tencentdb_offload.archive.recall import RecallTools
    from tencentdb_offload.archive.store import Store
    tools = RecallTools(Store(Path(home)), lambda _wait: None)
    out: Dict[str, Any] = {}
    peak = _common.PeakRSS(interval=0.05).__enter__()     # sampled while pages and search run

    def page_ms(call_id: str, offset: int) -> float:
        t = time.perf_counter()
        reply = json.loads(tools.handle("tdai_read_cos", {"tool_call_id": call_id, "offset": offset,
                                                          "limit": PAGE}, "bench", "hermes-bench"))
        assert reply["ok"] and reply["returned"] == PAGE, reply.get("error")
        return (time.perf_counter() - t) * 1000

    out["small"] = [page_ms("small", 0) for _ in range(30)]
    for kind in SIZES:
        total = json.loads(tools.handle("tdai_read_cos", {"tool_call_id": "big-" + kind, "limit": 1},
                                        "bench", "hermes-bench"))["total_chars"]
        offsets = [int(total * k / 20) for k in range(20)]     # pages from the start to the end
        out[kind] = [page_ms("big-" + kind, off) for off in offsets]
    t = time.perf_counter()
    hits = json.loads(tools.handle("tdai_offload_search", {"query": "absent-word"}, "bench",
                                   "hermes-bench"))
    out["search"] = (time.perf_counter() - t) * 1000
    assert hits["ok"] and hits["count"] == 0
    many = []
    for _ in range(5):
        t = time.perf_counter()
        hits = json.loads(tools.handle("tdai_offload_search", {"query": "ABSENT-word"}, "many",
                                       "hermes-many"))
        many.append((time.perf_counter() - t) * 1000)
    out["search_many"] = many
    peak.__exit__(None, None, None)
    out["peak_mb"] = peak.kb / 1024
    conn = tools.store._conn()        # the way pages were read before: the whole row each time
    whole = []
    for off in offsets[::4]:
        t = time.perf_counter()
        text = conn.execute("SELECT content FROM archive WHERE tool_call_id='big-ascii'").fetchone()[0]
        json.dumps({"content": text[off:off + PAGE]})
        whole.append((time.perf_counter() - t) * 1000)
        del text
    out["whole"] = whole
    return out


def rows() -> List[Dict[str, Any]]:
    from cases import row
    with tempfile.TemporaryDirectory(prefix="tdo-bench-recall-") as home:
        build(home)
        proc = subprocess.run([sys.executable, __file__, "read", home], capture_output=True,
                              text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError("recall read failed: %s" % proc.stderr[-500:])
        got = json.loads(proc.stdout)
    small, whole = statistics.median(got["small"]), statistics.median(got["whole"])
    peak = got["peak_mb"]
    note = ("tdai_read_cos end to end (JSON included), 20 pages of %d chars spread from the "
            "start to the end; peak RSS of the reading process +%.1f MB over its start "
            "(pages and search together)" % (PAGE, peak))
    return [
        row("recall/page-50MB", "recall page", "50 MB ASCII result", "ms",
            statistics.median(got["ascii"]), max(got["ascii"]), len(got["ascii"]), whole,
            "loading the whole row, as before", "≤ 0.5× the whole row, RSS +≤ 16 MB",
            statistics.median(got["ascii"]) <= 0.5 * whole and peak <= 16,
            note=note + "; a page of a 20 KB result: %.2f ms. The page is read in place, but "
            "SQLite walks the row's overflow-page chain up to it" % small, group="recall"),
        row("recall/page-50MB-utf8", "recall page", "50 MB Cyrillic result", "ms",
            statistics.median(got["utf8"]), max(got["utf8"]), len(got["utf8"]), None, "",
            "≤ 1 s, RSS +≤ 16 MB", max(got["utf8"]) <= 1000 and peak <= 16,
            note="non-ASCII offsets are found by decoding up to the page, 256 KB at a time",
            group="recall"),
        row("recall/search-50MB", "recall search", "no match in 100 MB of results", "ms",
            got["search"], None, 1, None, "", "≤ 2 s, RSS +≤ 16 MB",
            got["search"] <= 2000 and peak <= 16,
            note="every row folded (str.casefold) 256 KB at a time", group="recall"),
        row("recall/search-10k", "recall search", "no match in 10,000 results of 1 KB", "ms",
            statistics.median(got["search_many"]), max(got["search_many"]),
            len(got["search_many"]), None, "", "≤ 500 ms",
            statistics.median(got["search_many"]) <= 500,
            note="small rows fetched 1 MB at a time and folded in Python (Unicode case folding; "
            "SQLite's lower() is ASCII-only)", group="recall"),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "read":
        print(json.dumps(read(sys.argv[2])))
    else:
        print(json.dumps(rows(), indent=1))
