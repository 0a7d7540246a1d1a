"""One status model: the slash command, ``status`` and doctor agree; the trigger shown is the
one that applies; local mode without a configured Gateway reads as local mode; counts agree."""

import re
import socket
import sqlite3

import pytest

from helpers import as_host, conversation, env_for, make_engine, plugin
from tencentdb_offload import ops
from tencentdb_offload.archive import browse, readonly
from tencentdb_offload.archive.outbox import Outbox
from tencentdb_offload.archive.store import Store
from tencentdb_offload.host.command import make_command
from tencentdb_offload.settings.thresholds import applying_trigger
from tencentdb_offload.ops import doctor
from tencentdb_offload.ops.report import _header
from tencentdb_offload.ops.settings_check import check_settings
from tencentdb_offload.settings.config import Settings

TRIGGER = re.compile(r"compaction at (\d+)% of the ([\d,]+)-token window = ([\d,]+) tokens")


def _num(text):
    return int(text.replace(",", ""))


def _status_cli(capsys, store_dir):
    assert ops.main(["status", "--store", str(store_dir)]) == 0
    return capsys.readouterr().out


def doctor_settings(tmp_path, directory):
    checks = doctor.Checks()
    check_settings(checks, {"TENCENTDB_OFFLOAD_STORE_DIR": str(directory)}, tmp_path / "home",
                   tmp_path / "home" / "config.yaml", {})
    return [c for c in checks.items if c["status"] == "pass"]


def _line(text, prefix):
    found = [l.strip() for l in text.splitlines() if l.strip().startswith(prefix)]
    assert len(found) == 1, (prefix, text)
    return found[0]


def test_slash_status_and_doctor_print_the_same_store_figures(tmp_path, capsys, monkeypatch):
    with socket.socket() as s:              # a configured Gateway that does not answer
        s.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % s.getsockname()[1]
    for k, v in env_for(tmp_path, gateway_url=url).items():
        monkeypatch.setenv(k, v)
    rt, eng = make_engine(tmp_path, gateway_url=url)
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    rt.store.transaction([Outbox.op_enqueue("s1", "pair", {"n": n}, 1.0) for n in range(3)])
    slash = make_command(rt)("status")
    directory = rt.store.directory
    rt.close()
    status = _status_cli(capsys, directory)
    checks = doctor.Checks()
    doctor.check_store(checks, Settings(gateway_url=url, gateway_configured=True, store_dir=str(directory)),
                       {}, tmp_path)
    (outbox,) = [c for c in checks.items if c["name"] == "outbox"]
    figures = _line(slash, "store: ")[len("store: "):]
    assert re.search(r"[1-9]\d* rows? waiting", figures), figures      # something to agree on
    assert _line(status, "store: ") == "store: " + figures and outbox["message"] == figures
    for prefix in ("archive: ", "compactions (every process): ", "last compaction: "):
        # the file's size is not a figure: closing the plugin checkpoints its WAL
        assert _line(slash, prefix).split("; database")[0] == _line(status, prefix).split("; database")[0]
    assert _line(slash, "compaction at ") == _line(status, "compaction at ")
    settings_line = [c["message"] for c in doctor_settings(tmp_path, directory)]
    assert any(TRIGGER.search(m).group(0) == TRIGGER.search(status).group(0) for m in settings_line)


def test_the_trigger_shown_is_the_one_that_applies():
    floored = applying_trigger(Settings(), 64_000, host_floor=True)
    assert floored.tokens == int(64_000 * floored.ratio) and floored.ratio > Settings().threshold
    assert floored.describe().startswith("%.0f%% of the 64,000-token window" % (floored.ratio * 100))
    assert applying_trigger(Settings(threshold_explicit=True), 64_000, host_floor=True).ratio == 0.75
    head = "\n".join(_header({"source": {"kind": "synthetic", "turns": 1, "seed": 1}, "command": "demo",
                              "mode": "local", "mode_reason": "", "context_length": 64_000,
                              "window_from": "default", "threshold": 0.75, "threshold_from": "default",
                              "threshold_tokens": floored.tokens, "ratio": 0.5, "target_tokens": 32_000,
                              "ratio_from": "default", "session_id": "x"}))
    pct, window, tokens = TRIGGER.search(head).groups()
    assert _num(tokens) == floored.tokens and int(pct) == round(100 * floored.tokens / _num(window))


@pytest.mark.parametrize("host_floor", [False, True], ids=["0.17-0.19", "0.22"])
def test_status_prints_the_engines_trigger(tmp_path, capsys, monkeypatch, host_floor):
    as_host(monkeypatch, selects_context=host_floor, small_window_floor=host_floor)
    rt, eng = make_engine(tmp_path)
    assert (eng.threshold_tokens > 0.75 * 64_000) == host_floor      # the floor binds at 64K
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    for text in (make_command(rt)("status"), _status_cli(capsys, rt.store.directory)):
        pct, window, tokens = TRIGGER.search(text).groups()
        assert _num(tokens) == eng.threshold_tokens and _num(window) == eng.context_length
        assert int(pct) == round(100 * eng.threshold_tokens / eng.context_length)
    rt.close()


def test_status_prints_a_model_thresholds_trigger(tmp_path, capsys):
    """Hermes' ``compression.model_thresholds`` moved the trigger: the status a separate
    process prints (the CLI, doctor) shows that trigger, not THRESHOLD's."""
    rt, eng = make_engine(tmp_path, context_length=100_000)
    eng.model_thresholds = {"m": 0.6}
    eng.update_model(model="m", context_length=100_000)
    assert eng.threshold_tokens != rt.settings.trigger_tokens(100_000)
    eng.compress(conversation(60, 5000), current_tokens=80_000)
    for text in (make_command(rt)("status"), _status_cli(capsys, rt.store.directory)):
        pct, window, tokens = TRIGGER.search(text).groups()
        assert _num(tokens) == eng.threshold_tokens and _num(window) == eng.context_length, text
    rt.close()


def test_a_cap_that_a_model_threshold_leaves_unbound_changes_no_landing(tmp_path):
    """MAX_CONTEXT_TOKENS 120K under THRESHOLD's 150K, but a model's 0.5 triggers at 100K: the
    cap does not bind, so the landing stays 45% of the window (it was the cap's 72K); where the
    cap binds under a model's 0.9, it lands at cap x COMPACT_RATIO / that threshold."""
    for ratio, cap, landing, shown in ((0.5, 120_000, 90_000, "down to 45%"),
                                       (0.9, 160_000, 80_000, "down to 80,000 tokens")):
        rt, eng = make_engine(tmp_path / str(ratio), context_length=200_000,
                              max_context_tokens=str(cap))
        eng.model_thresholds = {"m": ratio}
        eng.update_model(model="m", context_length=200_000)
        assert eng.threshold_tokens == min(cap, int(200_000 * ratio))
        assert eng.compaction_target() == landing
        eng.compress(conversation(60, 5000), current_tokens=eng.threshold_tokens + 1)
        status = make_command(rt)("status")
        assert shown in status and "down to 72,000" not in status, status
        rt.close()


@pytest.mark.default_port
def test_no_gateway_configured_reads_as_local_mode(tmp_path, capsys):
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 8420)) == 0:
            pytest.skip("127.0.0.1:8420 is in use on this machine")
    rt = plugin.build_runtime(env={"HERMES_HOME": str(tmp_path / "home")})
    eng = plugin.open_session(rt, "s1", 64_000, model="m")
    assert rt.client is not None and not rt.settings.gateway_configured    # the default URL is tried
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    text = make_command(rt)("status")
    assert "local mode (no Gateway configured)" in text
    for outage in ("gateway unavailable", "breaker", "last Gateway error", "waiting for the Gateway",
                   "error: "):
        assert outage not in text, (outage, text)
    rt.store.transaction([Outbox.op_enqueue("s1", "pair", {"n": 1}, 1.0)])
    flushed = make_command(rt)("flush")
    assert "no Gateway configured" in flushed and "not delivered" not in flushed, flushed
    directory = rt.store.directory
    rt.close()
    cli = _status_cli(capsys, directory)
    assert "local mode (no Gateway configured)" in cli and "waiting for the Gateway" not in cli


def test_counts_agree_and_no_session_is_invented(tmp_path, capsys):
    rt, eng = make_engine(tmp_path)
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    text = make_command(rt)("status")
    held = re.search(r"sessions in memory: (\d+) .*\n.*stays with its chat\)(.*)", text)
    listed = [x for x in held.group(2).lstrip(": ").split(", ") if x]
    assert int(held.group(1)) == len(listed) and not any(x.startswith("default") for x in listed)
    rt.close()
    store = Store(tmp_path / "other")          # a session known only by its outbox row
    store.transaction([Outbox.op_enqueue("waiting", "pair", {"n": 1}, 1.0)])
    store.close()
    cli = _status_cli(capsys, tmp_path / "other")
    known = int(re.search(r"of the (\d+) sessions? the store knows", cli).group(1))
    rows = cli.split("sessions (newest first):\n")[1].split("\n  ")[0].strip().splitlines()
    assert known == len(rows) == 1


def test_one_event_reader_and_one_read_only_opener(tmp_path):
    store = Store(tmp_path)
    store.transaction([Store.op_event("real", "compaction", {"session": "forged", "ts": 5}, 100.0)])
    (mine,) = store.events("compaction")
    store.close()
    reader = readonly.StoreReader(tmp_path)
    (theirs,) = reader.events("compaction", 10)
    reader.close()
    assert mine == theirs and mine["session"] == "real" and mine["ts"] == 100.0
    assert store.stats.__annotations__ == readonly.StoreReader.stats.__annotations__
    for side in ("-wal", "-shm"):
        (tmp_path / ("store.db" + side)).unlink(missing_ok=True)
    conn = browse.open_readonly(tmp_path)
    conn.execute("SELECT count(*) FROM archive").fetchone()
    conn.close()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(("-wal", "-shm"))]
