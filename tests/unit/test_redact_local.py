"""What persists on this side is masked like the built-in's summary: the digest and the notes
quote requests, arguments and result heads with secrets masked (they re-enter every prompt
and stay in Hermes' session store); an ``archive export`` says whether it holds secrets."""

from __future__ import annotations

import json
import time

from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.context import digest
from tencentdb_offload.context.notes import clean_peer
from tencentdb_offload.context.provenance import Seal

from helpers import make_engine
from test_cli import run_cli
from test_redact_boundary import ENV_DUMP, SECRETS, leaked


def turn_with_secrets(i: int):
    token = "sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ"
    return [
        {"role": "user", "content": "from now on use OPENAI_API_KEY=%s for every call" % token},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c%d" % i, "type": "function",
                                                             "function": {"name": "terminal", "arguments": json.dumps(
                                                                 {"command": "psql postgres://app:Sup3rS3cretPw@db/x"})}}]},
        {"role": "tool", "tool_call_id": "c%d" % i,
         "content": json.dumps({"exit_code": 1, "output": "error " + ENV_DUMP})},
        {"role": "assistant", "content": "Done; the key is " + token}]


def test_the_digest_quotes_no_secret_and_keeps_its_keys(tmp_path):
    cut = turn_with_secrets(0) + turn_with_secrets(1)
    msgs, _collapsed = digest.build([], cut, seal=Seal(b"k" * 32), cap=4000)
    body = msgs[1]["content"]
    assert leaked(body) == []
    assert "[c0]" in body and "[c1]" in body and "msg-" in body     # what recall reads by
    assert "psql postgres://" in body and ":***@db/x" in body          # the rest stays readable


def test_a_local_compaction_masks_its_digest_and_the_archive_keeps_the_originals(tmp_path):
    rt, eng = make_engine(tmp_path, context_length=8_000)
    conv = []
    for i in range(12):
        conv += turn_with_secrets(i)
        conv[-2]["content"] += "\n" + "x" * 1500
    conv.append({"role": "user", "content": "next"})
    eng.update_from_response({"prompt_tokens": 7_000})
    out = eng.compress(conv, current_tokens=7_000)
    digest = next(m["content"] for m in out if m.get("role") == "tool" and "Digest" in m["content"])
    assert leaked(digest) == []
    rt.flush_writes()
    page = rt.tools.handle("tdai_read_cos", {"key": "c0"}, "s1", "hermes-s1")
    assert "Sup3rS3cretPw" in page              # recall returns what the model saw
    rt.close()


def test_memory_provider_text_is_masked():
    assert leaked(clean_peer("user's creds: " + ENV_DUMP)) == []


def test_export_says_whether_it_holds_secrets(tmp_path):
    home = tmp_path / "home"
    st = Store(home / "tencentdb-offload")
    st.transaction([
        Store.op_archive("plain", [ArchiveItem("tool_result", "def f(x):\n    return x\n", "c1", "read_file",
                                               args={"path": "/src/f.py"})], time.time()),
        Store.op_archive("keys", [ArchiveItem("tool_result", "x" * 70_000 + ENV_DUMP, "c1", "terminal",
                                              args={"command": "env"}),
                                  ArchiveItem("tool_result", "ok", "c2", "terminal",
                                              args={"command": "login --password=hunter2 "
                                                               "--token ghp_R7tY2uI9oP4aS6dF1gH8jK3lZ5xC0vB2nM4q"})],
                          time.time())])
    st.close()
    clean = run_cli("archive", "export", "plain", home=home)
    assert clean.returncode == 0 and "holds no secret" in clean.stderr
    out = tmp_path / "keys.jsonl"
    held = run_cli("archive", "export", "keys", "--out", str(out), home=home)
    assert held.returncode == 0 and "HOLDS SECRETS, unmasked, in 2 items" in held.stderr
    assert leaked(held.stderr) == [] and leaked(out.read_text()) != []     # says which, not what
