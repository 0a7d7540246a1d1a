"""End-to-end: without a Gateway the model keeps the story, not only the bytes (issue 17).

One ``hermes chat`` session of 20 tool-heavy turns (local mode, 64K window, ~10K-char files,
2-3 ``read_file`` calls per turn, one rule "from now on ...", one read of a missing file) and a
recall turn. At the first request of every turn from the second on, the test measures which
earlier user requests (the first 80 characters of their first line) and which files read in
earlier turns (their paths: the read_file calls the model really made for existing files) are
still visible anywhere in the request, verbatim or in the digest.

On the current host (0.22; on any host with ``TDO_STORY_BUILTIN=1``) Hermes' built-in
compressor runs the same session at the same time (its own thread, fake LLM and HERMES_HOME:
the two sessions share nothing) and is printed with the same measures; no bar compares with
it, so the older hosts skip it for test time. Its summary model is the fake LLM, which answers
a fixed short text, so its figures show what it keeps verbatim.

Each bar is its own test on the one shared run. The digest's budget is the product's own
(``digest.budget_for`` of the target less the request's system prompt and tool schemas);
"recallable" means the plugin's ``tdai_read_cos`` handler returns the file's needle from the
session's archive (and the model recalls the first file in the session, after it left).
"""
from __future__ import annotations

import importlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.conftest import load_plugin  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, message_text, prompt_tokens  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
PAUSE, PAUSED_TTL = 1.5, 1    # test_story_paused: seconds before every turn, the plugin's cache TTL (a
#                               turn's process starts in ~2 s more: every turn starts on a cold cache)
CONTEXT, THRESHOLD, RATIO = 64000, 0.75, 0.5
TARGET = int(CONTEXT * RATIO)
TURNS = 20
LINES = 220                      # 220 x 44 chars: a ~11K-char read_file result
ASKED_CHARS = 80                 # of a request's first line
RULE = "From now on, always name the file you read in your answer."
SEAL_LINE = "[tdo-seal "
DIGEST_SEAL = "[tdo-seal digest "
PLUGIN = load_plugin().__name__
D = importlib.import_module(PLUGIN + ".context.digest")

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


def run_session(tmp: Path, engine: str, pause: float = 0.0, ttl: int = 0) -> Dict[str, Any]:
    """The session under ``engine`` ("plugin" or "builtin"), then one recall turn; with
    ``pause``, that many seconds before every turn, and the plugin's cache TTL ``ttl``."""
    t0 = time.monotonic()
    supply = harness.FileSupply(tmp / "files", tag="story")
    files = {}
    for n in range(TURNS):
        made = harness.make_text_files(tmp / "files", 3 if n % 4 == 2 else 2, lines=LINES,
                                       tag="story", start=len(supply.files))
        supply.files += made
        files[n] = [p for p, _ in made]
    said = prompts(files, str(tmp / "files" / "no_such_file.txt"))
    with FakeLLM() as llm:
        if engine == "plugin":
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, env={
                "TENCENTDB_OFFLOAD_GATEWAY_URL": "off",
                "TENCENTDB_OFFLOAD_THRESHOLD": str(THRESHOLD),
                "TENCENTDB_OFFLOAD_COMPACT_RATIO": str(RATIO),
                **({"TENCENTDB_OFFLOAD_CACHE_TTL_S": str(ttl)} if ttl else {})})
        else:
            home = harness.make_home(tmp, llm.url, context_length=CONTEXT, engine="compressor",
                                     enabled_plugins=())
        conv = harness.Conversation(llm, home, timeout=300)
        for text in said:
            time.sleep(pause)
            conv.say(text)
        first = harness.first_read_call(llm)
        time.sleep(pause)
        recall = conv.say("DO recall %s" % first[0], expect_ok=engine == "plugin")
    needles = dict(supply.files)
    # the files really read: read_file calls the model made in a turn, for a file that exists
    reads = {t.number: [(cid, a["path"]) for e in t.main for cid, name, a in e.reply_tool_calls
                        if name == "read_file" and a.get("path") in needles] for t in conv.turns}
    return {"conv": conv, "home": home, "llm": llm, "said": said + [recall.prompt],
            "reads": reads, "needles": needles, "recall": recall, "first": first,
            "seconds": time.monotonic() - t0}


def overhead(body: Dict[str, Any]) -> int:
    """Fake-LLM tokens of a request's system messages and tool schemas."""
    return prompt_tokens({"messages": [m for m in body["messages"] if m.get("role") == "system"],
                          "tools": body.get("tools") or []})


def visibility(run: Dict[str, Any]) -> Dict[str, List[Any]]:
    """Per turn from the second on, at its first request: shares of the earlier requests and
    of the files read in earlier turns that are visible, whether the rule is, and the
    digest's size (fake-LLM tokens) beside its budget."""
    conv, said, reads = run["conv"], run["said"], run["reads"]
    out: Dict[str, List[Any]] = {"asked": [], "read": [], "rule": [], "digest": [], "cap": [],
                                 "missing": []}
    for t in conv.turns[1:]:
        body = t.main[0].body
        text = harness.request_text(body)
        earlier = said[:t.number - 1]
        out["asked"].append(sum(p.splitlines()[0][:ASKED_CHARS] in text for p in earlier)
                            / len(earlier))
        paths = [p for n in range(1, t.number) for _cid, p in reads[n]]
        if paths:
            out["read"].append(sum(p in text for p in paths) / len(paths))
        gone = [p.splitlines()[0][:ASKED_CHARS] for p in earlier
                if p.splitlines()[0][:ASKED_CHARS] not in text] + [p for p in paths if p not in text]
        if gone:
            out["missing"].append((t.number, gone))
        if t.number > 2:
            out["rule"].append(RULE in text)
        out["digest"].append(sum(len(message_text(m)) // 4 for m in body["messages"]
                                 if m.get("role") == "tool" and DIGEST_SEAL in message_text(m)))
        out["cap"].append(D.budget_for(TARGET - overhead(body)))
    return out


def figures(name: str, run: Dict[str, Any]) -> str:
    v = visibility(run)
    mains = run["conv"].main_exchanges
    drops = harness.compactions([e.body for e in mains])
    return ("STORY hermes=%s engine=%s turns=%d compactions=%d requests visible median/worst="
            "%.2f/%.2f files visible median/worst=%.2f/%.2f rule kept %d/%d turns %s "
            "after/target max=%.2f largest request=%.2f of the window wall=%.0fs"
            % (HERMES_VERSION, name, len(run["conv"].turns) - 1, len(drops),
               statistics.median(v["asked"]), min(v["asked"]), statistics.median(v["read"]),
               min(v["read"]), sum(v["rule"]), len(v["rule"]),
               "digest max=%d tok (budget %d)" % (max(v["digest"]), min(v["cap"]))
               if max(v["digest"]) else "no digest",
               max((c.tokens_after / TARGET for c in drops), default=0),
               max(prompt_tokens(e.body) for e in mains) / CONTEXT, run["seconds"]))


def plugin_text_shown_as_words(home: Path) -> List[str]:
    """user/assistant rows of state.db (what every host's resume recap and `hermes sessions`
    show) that carry plugin text; tool rows are never shown as words."""
    with sqlite3.connect(str(home / "state.db")) as db:
        rows = db.execute("SELECT role, content FROM messages").fetchall()
    return [c[:120] for r, c in rows if r in ("user", "assistant") and isinstance(c, str)
            and (harness.NOTICE_MARKER in c or SEAL_LINE in c)]


def not_recallable(run: Dict[str, Any]) -> List[str]:
    """Files read whose content the plugin's tdai_read_cos handler does not return in full
    from the archive (the tool's own code over the session's store)."""
    recall = importlib.import_module(PLUGIN + ".archive.recall")
    store_mod = importlib.import_module(PLUGIN + ".archive.store")
    directory = run["home"] / "tencentdb-offload"
    with sqlite3.connect(str(directory / "store.db")) as db:
        conversations = [r[0] for r in db.execute("SELECT DISTINCT session FROM archive")]
    store = store_mod.Store(directory)
    try:
        tools = recall.RecallTools(store, lambda _wait: None)
        missing = []
        for cid, path in [r for rows in run["reads"].values() for r in rows]:
            got = [json.loads(tools.handle("tdai_read_cos", {"tool_call_id": cid, "limit": 100_000},
                                           c, "")) for c in conversations]
            if not any(g.get("ok") and run["needles"][path] in g.get("content", "") for g in got):
                missing.append("%s %s" % (cid, path))
        return missing
    finally:
        store.close()


def sessions(tmp: Path) -> Tuple[Dict[str, Any], float]:
    """The story's sessions, all at once: the plugin and the built-in, and on Hermes 0.22 the
    plugin again with a pause before every turn (tests/e2e/test_story_paused.py). A per-turn
    process mostly waits on one core, so three take little more wall time than two (run one
    after the other, the paused session added ~110 s to the test command)."""
    problem = harness.plugin_problem()
    if problem:
        pytest.fail(problem)
    arms = {"plugin": (tmp / "plugin", "plugin")}
    if HERMES_VERSION.startswith("0.22") or os.environ.get("TDO_STORY_BUILTIN"):
        arms["builtin"] = (tmp / "builtin", "builtin")   # printed beside ours, no bar: one host's
    if HERMES_VERSION.startswith("0.22"):
        arms["paused"] = (tmp / "paused", "plugin", PAUSE, PAUSED_TTL)
    t0 = time.monotonic()
    return harness.at_once(run_session, arms), time.monotonic() - t0


@pytest.fixture(scope="module")
def story(story_sessions, request):
    """Both sessions' runs (from ``sessions``), their figures printed side by side."""
    every, wall = story_sessions
    runs = {"plugin": every["plugin"]}
    runs["line"] = figures("tencentdb-offload", runs["plugin"])
    builtin = figures("built-in", every["builtin"]) if "builtin" in every else "STORY built-in: not run on this host"
    harness.print_past_capture(request, "%s\n%s\nSTORY wall time %.0fs (%d sessions at once)\n%s" % (
        runs["line"], builtin, wall, len(every),
        runs["plugin"]["conv"].summary()))
    return runs


def test_the_plugin_ran_and_every_request_was_valid(story):
    harness.assert_engine_used(story["plugin"]["conv"])
    harness.assert_all_valid(story["plugin"]["llm"])


def test_no_history_lost_across_resume(story):
    harness.assert_history_continuity(story["plugin"]["conv"], int(CONTEXT * THRESHOLD))


def test_at_most_one_notice_per_request(story):
    for n, e in story["plugin"]["conv"].main_with_turns():
        notices = sum(harness.NOTICE_MARKER in harness.request_text({"messages": [m]}) for m in e.messages)
        assert notices <= 1, "turn %d: %d messages carry %s" % (n, notices, harness.NOTICE_MARKER)


def test_compactions_come_at_most_once_per_two_turns(story):
    """Landing at the target leaves room for more than one turn before the next trigger."""
    drops = harness.compactions([e.body for e in story["plugin"]["conv"].main_exchanges])
    assert len(drops) <= TURNS // 2 + 1, story["line"]


def test_compaction_happened_at_least_four_times(story):
    drops = harness.compactions([e.body for e in story["plugin"]["conv"].main_exchanges])
    assert len(drops) >= 4, story["line"]


def test_every_compaction_lands_at_or_under_the_target(story):
    drops = harness.compactions([e.body for e in story["plugin"]["conv"].main_exchanges])
    assert max(c.tokens_after for c in drops) <= TARGET, story["line"]


def test_turns_left_the_context_and_the_digest_tells_them(story):
    """Without this the visibility bars below would hold because nothing ever left."""
    v = visibility(story["plugin"])
    assert max(v["digest"]) > 0, story["line"]


@pytest.mark.xfail(HERMES_VERSION.startswith("0.19"), strict=False, reason=(
    "files visible at the worst turn 0.82 < 0.9 on 0.19 in the test command's run: its files "
    "live under the long temporary directory tests/run.py makes, so the 4th "
    "compaction's digest collapses and shortens the lines of turns 1-8 to 90 characters, "
    "which drops their paths (their ids stay: everything reads back). With a short base path "
    "(pytest --basetemp) it holds at 0.93-0.95: the bar depends on path length, not on timing"))
def test_earlier_requests_and_files_stay_visible_at_every_turn(story):
    v = visibility(story["plugin"])
    assert min(v["asked"]) >= 0.9 and min(v["read"]) >= 0.9, (story["line"], v["missing"][-3:])


def test_the_digest_stays_within_its_budget(story):
    v = visibility(story["plugin"])
    assert all(d <= cap for d, cap in zip(v["digest"], v["cap"])), (v["digest"], v["cap"])


def test_the_users_rule_is_kept_at_every_turn(story):
    v = visibility(story["plugin"])
    assert all(v["rule"]), "the user's rule was lost at turns %s" % [
        n + 3 for n, kept in enumerate(v["rule"]) if not kept]


def test_every_files_content_is_recallable_through_the_tools(story):
    """All of them through the plugin's tdai_read_cos handler, the first one also by the
    model in the session, after it had left the context."""
    ours = story["plugin"]
    reads = [r for rows in ours["reads"].values() for r in rows]
    assert len(reads) >= 2 * TURNS, ours["reads"]
    assert not_recallable(ours) == []
    harness.check_turn(ours["recall"], "recall", "recalled: ")
    harness.assert_recalled(ours["conv"], ours["recall"], ours["needles"][ours["first"][1]["path"]])


def test_a_compacted_prefix_survives_the_next_process(story):
    """One process per turn: the turn after a compaction starts with exactly what the
    compacted turn last sent (after the system prompt), or its cache breaks for nothing."""
    conv = story["plugin"]["conv"]
    assert conv.compactions_by_turn(), story["line"]
    breaks = harness.prefix_breaks(conv)
    assert not breaks, "\n".join(breaks) + "\n" + conv.summary()


def test_resumed_history_shows_no_plugin_text_as_words(story):
    ours = story["plugin"]
    assert plugin_text_shown_as_words(ours["home"]) == []
    listed = subprocess.run([str(harness.hermes_bin()), "sessions", "list"], capture_output=True,
                            text=True, env=harness._child_env(ours["home"], None), timeout=120)
    out = listed.stdout + listed.stderr
    assert listed.returncode == 0 and ours["conv"].session_id[:12] in listed.stdout, out[-800:]
    assert harness.NOTICE_MARKER not in out and SEAL_LINE not in out, out[-800:]
