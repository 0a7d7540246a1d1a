"""``archive search`` and ``archive show`` over hermes-lcm's lcm.db at its default place
($HERMES_HOME/lcm.db): found, labelled, read in full, the file untouched; a broken one is a line."""

import json

from fakes import lcm_store
from tencentdb_offload.archive.store import ArchiveItem, Store

from test_cli import run_cli
from test_lcm_history import snapshot


def _home(tmp_path, with_store=True):
    home = tmp_path / "home"
    home.mkdir()
    lcm_store.build(home / "lcm.db")
    if with_store:
        st = Store(home / "tencentdb-offload")
        st.transaction([Store.op_archive("alice", [ArchiveItem("message", "the parser plan",
                                                               role="user")], 1.0)])
        st.close()
    return home


def test_archive_search_finds_lcm_history_and_show_reads_it_whole(tmp_path):
    home = _home(tmp_path)
    before = snapshot(home)
    found = run_cli("archive", "search", lcm_store.UNIQUE_CHINESE, home=home)
    assert found.returncode == 0, found.stderr
    line = next(l for l in found.stdout.splitlines() if l.startswith("lcm-"))
    assert "no archived item contains" not in found.stdout      # a hit follows: said as one
    assert "hermes-lcm's history does" in found.stdout.splitlines()[0]
    assert lcm_store.UNIQUE_CHINESE in line
    assert "hermes-lcm history, session sess-old" in line
    key = line.split()[0]
    hits = json.loads(run_cli("archive", "--json", "search", lcm_store.UNIQUE_WORD, home=home).stdout)
    assert [h["key"] for h in hits] == [key] and hits[0]["source"] == "hermes-lcm history"
    whole = json.loads(run_cli("archive", "--json", "show", key, "--limit", "100000", home=home).stdout)
    assert whole["content"].endswith(lcm_store.LONG_TAIL) and whole["next_offset"] is None
    assert len(whole["content"]) == whole["total_chars"]
    both = run_cli("archive", "search", "parser", home=home).stdout
    assert "#1 " in both and "hermes-lcm history" in both        # the plugin's own and LCM's
    assert snapshot(home) == before


def test_archive_search_before_any_chat_and_with_a_broken_lcm_db(tmp_path):
    home = _home(tmp_path, with_store=False)
    found = run_cli("archive", "search", lcm_store.UNIQUE_WORD, home=home)
    assert found.returncode == 0 and "hermes-lcm history" in found.stdout, found.stderr
    (home / "lcm.db").write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    broken = run_cli("archive", "search", "parser", home=home)
    assert broken.returncode == 0 and "LCM history unavailable: " in broken.stdout, broken.stderr
    off = run_cli("archive", "search", "parser", home=home, env={"TENCENTDB_OFFLOAD_LCM_HISTORY": "off"})
    assert "LCM history" not in off.stdout
