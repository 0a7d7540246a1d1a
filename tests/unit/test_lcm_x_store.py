"""A store written by LCM-X v0.24-v0.26 (hermes-lcm renamed; schema 5 with side tables) is read
as hermes-lcm's was, and a row whose text LCM-X externalized (the row holds a one-line stub
naming ``lcm_expand(externalized_ref=…)``) is never shown as if the stub were the message: the
hit says the text was kept outside lcm.db and where, and reading the row reads that text.
Before, a search hit showed "[Externalized tool output: … ref=…]" as the message and a read
returned the stub."""

from __future__ import annotations

import json

import tencentdb_offload as plugin
from fakes import lcm_store
from tencentdb_offload.archive import lcm_history

from helpers import env_for
from test_cli import run_cli
from test_lcm_history import snapshot

READ, SEARCH = "tdai_read_cos", "tdai_offload_search"


def _home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return home, lcm_store.build_x(home)


def test_stub_forms_are_recognised_and_nothing_else():
    ref = "20261001_120000_call_read_0123456789ab_18a2b3c4d5e6f708.json"
    new = lcm_history.stub_of(lcm_store.stub(ref, "call_read", 12345, "read_file"))
    assert new["ref"] == ref and new["tool"] == "read_file" and new["chars"] == 12345
    old = lcm_history.stub_of(lcm_store.stub(ref, "call_read", 99, rollback_form=True))
    assert old["ref"] == ref and old["tool"] == "" and old["tool_call_id"] == "call_read"
    payload = lcm_history.stub_of("[Externalized payload: kind=raw_payload; role=user; chars=9; bytes=9; ref=%s]" % ref)
    assert payload["what"] == "payload" and payload["role"] == "user"
    gc = lcm_history.stub_of("[GC'd externalized tool output: tool_call_id=c; chars=5; ref=%s]" % ref)
    assert gc["collected"]
    # a message that quotes a stub, or a ref that is a path, is no stub of a file in the folder
    assert lcm_history.stub_of("see " + lcm_store.stub(ref, "c", 1)) is None
    assert lcm_history.stub_of(lcm_store.stub("../../.ssh/id_rsa", "c", 1)) is None
    assert lcm_history.stub_of(lcm_store.stub(".hidden.json", "c", 1)) is None


def test_the_model_finds_an_externalized_output_and_reads_its_text(tmp_path):
    home, made = _home(tmp_path)
    before = ({k: v for k, v in snapshot(home).items() if k.startswith("lcm")}, snapshot(made["folder"]))
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = plugin.open_session(rt, "s1", 64_000, model="m")
    hits = json.loads(eng.handle_tool_call(SEARCH, {"query": "read_file"}))["lcm_history"]["results"]
    hit = next(h for h in hits if h["key"] == "lcm-%d" % made["new"]["store_id"])
    assert "[Externalized tool output" not in hit["snippet"], hit      # not the stub as the message
    assert "kept this tool output (read_file" in hit["snippet"] and str(made["new"]["path"]) in hit["snippet"]
    assert hit["externalized"]["exists"] and hit["externalized"]["path"] == str(made["new"]["path"])
    page = json.loads(eng.handle_tool_call(READ, {"key": hit["key"], "limit": 100_000}))
    assert page["ok"] and page["content"] == made["new"]["text"], page.get("content", "")[:200]
    assert page["total_chars"] == len(made["new"]["text"]) and page["externalized"]["read_from"]
    # the schema-5 store's ordinary rows read as hermes-lcm's did
    plain = json.loads(eng.handle_tool_call(SEARCH, {"query": "step 299"}))["lcm_history"]["results"]
    assert plain and plain[0]["snippet"] == "step 299 of the deploy" and "externalized" not in plain[0]
    rt.close()
    after = ({k: v for k, v in snapshot(home).items() if k.startswith("lcm")}, snapshot(made["folder"]))
    assert after == before          # lcm.db and the payload folder untouched


def test_the_cli_shows_where_each_text_lives(tmp_path):
    home, made = _home(tmp_path)
    found = run_cli("archive", "--json", "search", "output", home=home)
    assert found.returncode == 0, found.stderr
    hits = {h["key"]: h for h in json.loads(found.stdout)}
    old = hits["lcm-%d" % made["old"]["store_id"]]
    assert "kept this tool output" in old["snippet"] and made["old"]["ref"] in old["snippet"]
    gone = hits["lcm-%d" % made["gone"]["store_id"]]
    assert not gone["externalized"]["exists"] and "not there now" in gone["snippet"]
    shown = run_cli("archive", "show", "lcm-%d" % made["old"]["store_id"], "--limit", "100000", home=home)
    assert shown.returncode == 0 and made["old"]["text"] in shown.stdout
    assert "LCM-X kept this text outside lcm.db, in %s" % made["old"]["path"] in shown.stdout
    missing = run_cli("archive", "show", "lcm-%d" % made["gone"]["store_id"], home=home)
    assert missing.returncode == 0 and "not read" in missing.stdout
    assert "[Externalized tool output" not in missing.stdout


def test_a_conversation_limited_reader_reads_only_its_own_payloads(tmp_path):
    home, made = _home(tmp_path)
    history = lcm_history.LcmHistory(made["db"])
    mine = history.read("lcm-%d" % made["new"]["store_id"], 0, 100, sessions={"sess-x"})
    assert mine["content"] == made["new"]["text"][:100]
    # the stub sits in this conversation's row, but the file LCM-X wrote is another's
    other = history.read("lcm-%d" % made["other"]["store_id"], 0, 100_000, sessions={"sess-x"})
    assert lcm_store.X_WORD not in other["content"] and "another conversation" in other["externalized"]["unread"]
    every = history.read("lcm-%d" % made["other"]["store_id"], 0, 100_000)     # the operator: all
    assert every["content"] == made["other"]["text"]


def test_doctor_reports_the_lcm_x_store_and_its_payload_folder(tmp_path):
    from tencentdb_offload.hermes.config import read_config
    from tencentdb_offload.ops.doctor_lcm import lcm_checks
    from tencentdb_offload.settings.config import load_settings
    home, made = _home(tmp_path)
    settings, _ = load_settings({})
    rows = lcm_checks({"HERMES_HOME": str(home)}, read_config(home), settings, home)
    store = next(r for r in rows if "hermes-lcm store" in r["message"])
    assert store["status"] == "pass" and "304 messages in 1 sessions" in store["message"], store
    assert "3 outputs LCM-X kept outside it, in %s" % made["folder"] in store["message"]
