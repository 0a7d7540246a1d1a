"""demo/replay end with a recall of an archived result, read back page by page as the model
would. The driver stopped after 200 pages of 100,000 characters: a result over 20 MB (a whole
log ``cat`` in one tool call) was reported "recall … FAILED: text differs from the original" and
the command exited 1, though the archive held it whole. A page is at most what the host shows
whole (``host_limit``), so a result of 201 of those takes over 200 reads."""

from __future__ import annotations

import json

from tencentdb_offload.archive.recall import host_limit

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)

WINDOW = 64_000


def test_a_result_over_200_pages_is_recalled_whole(home, tmp_path):
    line = "2026-12-06 INFO served /api/v1/items in 12ms\n"
    result = line * (201 * host_limit(WINDOW) // len(line) + 1)     # over 200 pages
    msgs = [{"role": "user", "content": "dump the log"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "terminal", "arguments": "{\"cmd\": \"cat app.log\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": "the log is long"}]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    rep = report_of(run_cli("replay", str(path), "--context-length", str(WINDOW), "--json",
                            home=home, env=LOCAL))
    assert rep["recall"]["ok"] and rep["recall"]["chars"] == len(result), rep["recall"]
