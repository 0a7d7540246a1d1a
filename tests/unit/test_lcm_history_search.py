"""hermes-lcm's history searched as the archive is (issue 51, items 5-7): any case in every
script and quotes dropped; a copied lcm.db with its committed WAL but no index keeps its
newest messages (nothing written beside it); and a search over huge messages stays within its
memory bound, its deadline saying how far it got."""

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tencentdb_offload as plugin
from fakes import lcm_store
from tencentdb_offload.archive import lcm_history, lcm_open

from helpers import env_for

ROOT = Path(__file__).resolve().parents[2]
READ, SEARCH = "tdai_read_cos", "tdai_offload_search"
TEXTS = ["Привет, мир: отчёт готов", "un café au lait, s'il vous plaît", "die Straße ist gesperrt",
         "ΣΊΣΥΦΟΣ rolls the stone"]
QUERIES = {"ПРИВЕТ": 0, "отчЁт": 0, "CAFÉ": 1, "Plaît": 1, "STRASSE": 2, '"straße"': 2,
           "\u201cStraße\u201d": 2, "`café`": 1, "σίσυφος": 3}


def snapshot(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def add_rows(db, texts, session="sess-x"):
    conn = sqlite3.connect(str(db))
    with conn:
        for text in texts:
            conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                         (session, "user", text, 1_700_000_000.0))
    conn.close()


def search(db, query, **kw):
    return lcm_history.LcmHistory(db).search(query, 5, **kw)


def test_any_case_in_every_script_and_quotes_dropped(tmp_path):
    db = lcm_store.build(tmp_path / "lcm.db", rows=30)
    add_rows(db, TEXTS)
    for query, wanted in QUERIES.items():
        found = [h["snippet"] for h in search(db, query)["results"]]
        assert any(TEXTS[wanted] in s for s in found), (query, found)


def test_the_recall_tool_finds_them_too(tmp_path):
    db = lcm_store.build(tmp_path / "lcm.db", rows=30)
    add_rows(db, TEXTS)
    rt = plugin.build_runtime(env=env_for(tmp_path, lcm_history=str(db)))
    eng = plugin.open_session(rt, "s1", 64_000, model="m")
    hits = json.loads(eng.handle_tool_call(SEARCH, {"query": "STRASSE"}))["lcm_history"]["results"]
    assert [h["snippet"] for h in hits] == [TEXTS[2]]


WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint=0")
conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES ('late','user','the newest wombatique',2e9)")
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def copied_with_wal(tmp_path):
    """An lcm.db copied as a backup tool copies it while hermes-lcm runs: the file and its
    committed -wal, no -shm."""
    live = tmp_path / "live"
    live.mkdir()
    db = lcm_store.build(live / "lcm.db", rows=300)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        copy = tmp_path / "copy"
        copy.mkdir()
        shutil.copyfile(db, copy / "lcm.db")
        shutil.copyfile(str(db) + "-wal", copy / "lcm.db-wal")
    finally:
        proc.communicate("done\n", timeout=10)
    assert (copy / "lcm.db-wal").stat().st_size > 32 and not (copy / "lcm.db-shm").exists()
    return copy


def test_a_copy_with_its_wal_but_no_index_keeps_its_newest_messages(copied_with_wal):
    before = snapshot(copied_with_wal)
    found = search(copied_with_wal / "lcm.db", "WOMBATIQUE")
    assert [h["session"] for h in found["results"]] == ["late"] and "incomplete" not in found
    item = lcm_history.LcmHistory(copied_with_wal / "lcm.db").read(found["results"][0]["key"], 0, 100)
    assert item["content"] == "the newest wombatique"
    assert snapshot(copied_with_wal) == before          # nothing written or created beside it


def test_one_too_big_to_copy_says_its_history_is_incomplete(copied_with_wal, monkeypatch):
    monkeypatch.setattr(lcm_open, "COPY_MAX", 1)
    before = snapshot(copied_with_wal)
    found = search(copied_with_wal / "lcm.db", "parser")
    assert found["results"] and "lcm.db-wal" in found["incomplete"], found
    rt = plugin.build_runtime(env=env_for(copied_with_wal.parent, lcm_history=str(copied_with_wal / "lcm.db")))
    eng = plugin.open_session(rt, "s1", 64_000, model="m")
    read = json.loads(eng.handle_tool_call(READ, {"key": found["results"][0]["key"]}))
    assert read["ok"] and "lcm.db-wal" in read["incomplete"], read
    assert snapshot(copied_with_wal) == before


def test_a_search_past_its_deadline_says_how_far_it_got(tmp_path, monkeypatch):
    db = lcm_store.build(tmp_path / "lcm.db", rows=3000)
    monkeypatch.setattr(lcm_history, "DEADLINE_S", 0.0)
    found = search(db, "no-such-word-anywhere")
    assert found["results"] == [] and "searched the newest" in found["incomplete"], found


HUGE = 29_000_000
MEASURE = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, sys.argv[2])
    from plugin_loader import load_plugin
    load_plugin()
    from tencentdb_offload.archive.lcm_history import LcmHistory
    h = LcmHistory(sys.argv[1])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    found = h.search(sys.argv[3], 5)
    took = time.monotonic() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    print(json.dumps({"grown": grown, "seconds": took, "hits": len(found["results"]),
                      "incomplete": found.get("incomplete", "")}))
""")


@pytest.fixture(scope="module")
def huge_rows(tmp_path_factory):
    """Six messages of ~29 MB each, the word at the end of each, newest last. The word holds a
    letter outside ASCII: the substring scan, where whole messages were once selected and
    folded to cut a snippet (+150 MB for this search)."""
    db = tmp_path_factory.mktemp("huge") / "lcm.db"
    lcm_store.build(db, rows=30)
    add_rows(db, ["x" * HUGE + " Needlequartz-ü %d" % i for i in range(6)])
    yield db
    db.unlink()


@pytest.mark.parametrize("query", ["needlequartz-ü", "absent-word"])
def test_huge_messages_are_searched_within_the_memory_bound(huge_rows, query):
    out = subprocess.run([sys.executable, "-c", MEASURE, str(huge_rows), str(ROOT / "tests"), query],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["grown"] <= 100 * 1024 * 1024, got
    assert got["hits"] == (5 if query == "needlequartz-ü" else 0) or got["incomplete"], got
