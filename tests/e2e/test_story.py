"""End-to-end: without a Gateway the model keeps the story, not only the bytes (issue 17).

One ``hermes chat`` session of 20 tool-heavy turns (local mode, 64K window, small files,
2-3 ``read_file`` calls per turn, one rule "from now on ...", one read of a missing file).
At the first request of every turn the test measures which earlier user requests (their
first 80 characters) and which files read earlier (their paths) are still visible anywhere
in the request, verbatim or in the digest. The built-in compressor runs the same session
beside it and is printed with the same measures (its summary model is the fake LLM, which
answers a fixed short text: the built-in's figures show what it keeps verbatim).
"""
from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, message_text, prompt_tokens  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
CONTEXT, THRESHOLD, RATIO = 64000, 0.75, 0.5
TARGET = int(CONTEXT * RATIO)
TURNS = 20
LINES = 220                      # 220 x 44 chars: a ~10K-char read_file result
DIGEST_SHARE = 0.08              # context/digest.py SHARE: the digest's share of the budget
RULE = "From now on, always name the file you read in your answer."
SEAL_LINE = "[tdo-seal "

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}", allow_module_level=True)


def prompts(files: Dict[int, List[str]], missing: str) -> List[str]:
    out = []
    for n in range(TURNS):
        if n == 1:
            out.append(RULE)
        elif n == 7:
            out.append("DO read %s %s" % (missing, files[n][0]))
        else:
            out.append("DO read " + " ".join(files[n]))
    return out


def run_session(tmp: Path, engine: str) -> Dict[str, object]:
    supply = harness.FileSupply(tmp / "files", tag="story")
    files = {}
    for n in range(TURNS):
        made = harness.make_text_files(tmp / "files", 3 if n % 4 == 2 else 2, lines=LINES,
                                       tag="story", start=len(supply.files))
        supply.files += made
        files[n] = [p for p, _ in made]
    missing = str(tmp / "files" / "no_such_file.txt")
    with FakeLLM() as llm:
        if engine == "plugin":
            if harness.plugin_problem():
                pytest.fail(harness.plugin_problem())
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, env={
                "TENCENTDB_OFFLOAD_GATEWAY_URL": "off",
                "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD),
                "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO)},
                extra_config={"memory": {"nudge_interval": 0}})
        else:
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, engine="compressor",
                                     enabled_plugins=(), extra_config={"memory": {"nudge_interval": 0}})
        conv = harness.Conversation(llm, home, timeout=300)
        for text in prompts(files, missing):
            conv.say(text)
        first_read = harness.first_read_call(llm) if engine == "plugin" else None
        recall = conv.say("DO recall %s" % first_read[0]) if first_read else None
        calls = {a.get("path"): cid for cid, name, a in llm.tool_calls_issued if name == "read_file"}
    return {"conv": conv, "files": files, "home": home, "llm": llm, "calls": calls,
            "recall": recall, "supply": supply, "prompts": prompts(files, missing)}


def visibility(run: Dict[str, object]) -> Dict[str, List[float]]:
    """Per turn from the second on: shares of earlier requests / files visible at its first
    request, and the digest's size there (fake-LLM tokens)."""
    conv, files, said = run["conv"], run["files"], run["prompts"]
    asked, read, digest = [], [], []
    for t in conv.turns[1:TURNS]:
        body = t.main[0].body
        text = harness.request_text(body)
        earlier = said[:t.number - 1]
        asked.append(sum(p.splitlines()[0][:80] in text for p in earlier) / len(earlier))
        paths = [p for n in range(t.number - 1) for p in files[n] if p in said[n]]
        if paths:
            read.append(sum(p in text for p in paths) / len(paths))
        digest.append(sum(len(message_text(m)) // 4 for m in body["messages"]
                          if m.get("role") == "tool" and "[tdo-seal digest" in message_text(m)))
    return {"asked": asked, "read": read, "digest": digest}


def figures(name: str, run: Dict[str, object]) -> str:
    v = visibility(run)
    drops = harness.compactions([e.body for e in run["conv"].main_exchanges])
    biggest = max(prompt_tokens(e.body) for e in run["conv"].main_exchanges)
    return ("STORY hermes=%s engine=%s turns=%d compactions=%d requests visible median/worst="
            "%.2f/%.2f files visible median/worst=%.2f/%.2f digest max=%d tok after/target max=%.2f "
            "largest request=%.2f of the window"
            % (HERMES_VERSION, name, TURNS, len(drops), statistics.median(v["asked"]),
               min(v["asked"]), statistics.median(v["read"]), min(v["read"]), max(v["digest"]),
               max((c.tokens_after / TARGET for c in drops), default=0), biggest / CONTEXT))


def plugin_text_shown_as_words(home: Path) -> List[str]:
    """user/assistant rows of state.db (what every host's resume recap and `hermes sessions`
    show) that carry plugin text; tool rows are never shown."""
    with sqlite3.connect(str(home / "state.db")) as db:
        rows = db.execute("SELECT role, content FROM messages").fetchall()
    return [c[:120] for r, c in rows if r in ("user", "assistant") and isinstance(c, str)
            and (harness.NOTICE_MARKER in c or SEAL_LINE in c)]


def archived_reads(home: Path) -> Dict[str, str]:
    with sqlite3.connect(str(home / "tencentdb-offload" / "store.db")) as db:
        return dict(db.execute("SELECT tool_call_id, content FROM archive "
                               "WHERE kind='tool_result'").fetchall())


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_the_model_keeps_the_story_without_a_gateway(tmp_path, hermes):
    ours = run_session(tmp_path / "plugin", "plugin")
    builtin = run_session(tmp_path / "builtin", "compressor")
    line, other = figures("tencentdb-offload", ours), figures("built-in", builtin)
    print(line + "\n" + other + "\n" + ours["conv"].summary())
    conv = ours["conv"]
    harness.assert_engine_used(conv)
    harness.assert_all_valid(ours["llm"])
    drops = harness.compactions([e.body for e in conv.main_exchanges])
    assert len(drops) >= 4, line
    assert max(c.tokens_after for c in drops) <= TARGET * 1.05, line
    v = visibility(ours)
    assert min(v["asked"]) >= 0.9 and min(v["read"]) >= 0.9, line
    assert max(v["digest"]) <= DIGEST_SHARE * TARGET, line
    assert RULE in harness.request_text(conv.turns[-1].main[0].body), "the user's rule was lost"
    # every file's content is recallable: archived under its call id, and read back by the tool
    held = archived_reads(ours["home"])
    read = [(p, needle) for p, needle in ours["supply"].files if p in ours["calls"]]
    assert len(read) >= 2 * TURNS - 3
    for path, needle in read:
        cid = ours["calls"].get(path)
        assert cid and needle in held.get(cid, ""), (path, cid)
    harness.check_turn(ours["recall"], "recall", "recalled: ")
    # resumed history shows no plugin text as the user's or the assistant's words
    assert plugin_text_shown_as_words(ours["home"]) == []
    listed = subprocess.run([str(harness.hermes_bin()), "sessions", "list"], capture_output=True,
                            text=True, env=harness._child_env(ours["home"], None), timeout=120)
    assert harness.NOTICE_MARKER not in listed.stdout + listed.stderr
