"""Hermes 0.17 starts a new session id at each compaction and prints the newest one at exit;
the store keeps each as an alias of the conversation. ``report`` and the model's recall tools
read a rotated id as its conversation; ``archive list/show/search/export --session ID`` said
"nothing archived in ID" (exit 1 for export) for the very id Hermes printed."""

from __future__ import annotations

import json
import time

from tencentdb_offload.archive.store import ArchiveItem, Store

from test_cli import run_cli
from helpers import alias


def _store(home):
    st = Store(home / "tencentdb-offload")
    st.transaction([Store.op_archive("first-id", [
        ArchiveItem("tool_result", "the retry loop never backs off", "call_1", "read_file"),
        ArchiveItem("message", "plan: add jitter", role="assistant")], time.time())])
    alias(st, "second-id", "first-id")       # rotated at the first compaction
    alias(st, "third-id", "first-id")        # and at the second: Hermes printed this one
    st.close()


def test_a_rotated_id_reads_its_conversation(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _store(home)
    proc = run_cli("archive", "export", "third-id", home=home)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["key"] for line in proc.stdout.splitlines()][0] == "call_1"
    listed = json.loads(run_cli("archive", "list", "--session", "third-id", "--json",
                                home=home).stdout)
    assert len(listed) == 2
    found = json.loads(run_cli("archive", "search", "backs", "off", "--session", "second-id",
                               "--json", home=home).stdout)
    assert [h["key"] for h in found] == ["call_1"]
    shown = run_cli("archive", "show", "call_1", "--session", "third-id", home=home)
    assert shown.returncode == 0 and "never backs off" in shown.stdout, shown.stderr


def test_an_unknown_id_is_still_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _store(home)
    proc = run_cli("archive", "export", "no-such-id", home=home)
    assert proc.returncode == 1 and "nothing archived in no-such-id" in proc.stderr
