"""A session file written after a live compaction (Hermes 0.19's ``sessions/session_<id>.json``
snapshot holds the compacted list) carries the plugin's digest as a ``tdai_offload_search``
tool pair. The recall tools' own results are never archived, so replay's closing recall picked
it and failed: "recall of tdo_digest_1 failed: nothing archived under 'tdo_digest_1'", exit 1."""

from __future__ import annotations

import json

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)


def call(cid: str, name: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_a_digest_pair_in_the_source_is_not_the_recall_checked(home, tmp_path):
    msgs = [{"role": "user", "content": "DO read a.txt b.txt"},
            {"role": "assistant", "content": "", "tool_calls": [call("tdo_digest_1", "tdai_offload_search")]},
            {"role": "tool", "tool_call_id": "tdo_digest_1",
             "content": "[tencentdb-offload] Digest of earlier turns. (written on another machine)"},
            {"role": "assistant", "content": "", "tool_calls": [call("call_4", "read_file")]},
            {"role": "tool", "tool_call_id": "call_4", "content": "line of a.txt\n" * 300},
            {"role": "assistant", "content": "done: read 1 file(s)"}]
    path = tmp_path / "session_snapshot.json"
    path.write_text(json.dumps({"session_id": "s1", "messages": msgs}), encoding="utf-8")
    rep = report_of(run_cli("replay", str(path), "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert rep["recall"]["ok"] and rep["recall"]["tool_call_id"] == "call_4", rep["recall"]
