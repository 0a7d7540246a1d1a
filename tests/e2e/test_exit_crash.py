"""How the harness judges a turn's exit (issue 16): a turn that died by a signal after its answer
and its ``session_id:`` line is the host's exit crash (used, recorded with its evidence, never
retried); every other failure fails the turn as before. Runs a stand-in ``hermes`` (a Python
script that really crashes with SIGSEGV under ``PYTHONFAULTHANDLER=1``), not Hermes."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.e2e import exit_crash  # noqa: E402  (the name harness and conftest use: one module)

STAND_IN = """#!%(python)s
import ctypes, os, sys
mode = os.environ["STAND_IN_MODE"]
with open(os.environ["STAND_IN_COUNT"], "a") as f:
    f.write("run\\n")
if mode == "crash_before":
    ctypes.string_at(0)
print("ok: the answer")
if mode != "no_id":
    print("\\nsession_id: 20260101_000000_abcdef", file=sys.stderr)
if mode == "rc1":
    sys.exit(1)
if mode in ("crash_after", "crash_in_plugin"):
    if mode == "crash_in_plugin":
        sys.path.insert(0, os.environ["STAND_IN_PLUGIN"])
        import crashing_module
        crashing_module.crash()
    ctypes.string_at(0)         # SIGSEGV: faulthandler dumps the Python stack first
"""


class _Exchange:
    auxiliary = False


class _LLM:
    exchanges = []


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "hermes"
    exe.parent.mkdir()
    exe.write_text(STAND_IN % {"python": sys.executable})
    exe.chmod(0o755)
    plugin = tmp_path / "home" / "plugins" / "tencentdb-offload"
    plugin.mkdir(parents=True)
    (plugin / "crashing_module.py").write_text("import ctypes\ndef crash():\n    ctypes.string_at(0)\n")
    monkeypatch.setattr(harness, "hermes_bin", lambda: exe)
    monkeypatch.setenv("TDO_EXIT_CRASH_LOG", str(tmp_path / "suite.jsonl"))
    count = tmp_path / "runs"

    def say(mode):
        llm = _LLM()
        llm.exchanges = [_Exchange()]       # the turn "made" a model request
        conv = harness.Conversation(llm, tmp_path / "home", env={
            "STAND_IN_MODE": mode, "STAND_IN_COUNT": str(count), "STAND_IN_PLUGIN": str(plugin)})
        conv.llm.exchanges = []
        orig = harness.run_chat

        def run_and_answer(*a, **k):
            res = orig(*a, **k)
            conv.llm.exchanges.append(_Exchange())
            return res
        monkeypatch.setattr(harness, "run_chat", run_and_answer)
        return conv.say("hello")
    before = list(exit_crash.RECORDED)
    say.runs = lambda: len(count.read_text().splitlines()) if count.exists() else 0
    say.home = tmp_path / "home"
    say.suite = tmp_path / "suite.jsonl"
    yield say
    exit_crash.RECORDED[:] = before       # the stand-in's crashes are not the host's


def test_a_crash_after_the_session_id_is_used_recorded_and_not_retried(stand_in):
    with pytest.warns(exit_crash.HostExitCrash, match="SIGSEGV"):
        turn = stand_in("crash_after")
    assert stand_in.runs() == 1                          # never retried
    res = turn.result
    assert res.returncode == -11 and res.session_id == "20260101_000000_abcdef"
    assert "ok: the answer" in res.stdout
    rec = json.loads((stand_in.home.parent / exit_crash.RECORD_NAME).read_text().splitlines()[-1])
    assert rec["rc"] == -11 and rec["signal"] == "SIGSEGV" and rec["turn"] == 1
    assert rec["faulthandler"].startswith("Fatal Python error: Segmentation fault")
    assert rec["plugin_frames"] == []
    assert any("session_id:" in line for line in rec["stderr_tail"])
    assert json.loads(stand_in.suite.read_text().splitlines()[-1]) == rec
    assert res.exit_crash == rec and rec in exit_crash.RECORDED


def test_a_crash_in_a_plugin_frame_is_named_in_the_record(stand_in):
    with pytest.warns(exit_crash.HostExitCrash, match="plugin frames in the traceback"):
        turn = stand_in("crash_in_plugin")
    frames = turn.result.exit_crash["plugin_frames"]
    assert len(frames) == 1 and "crashing_module.py:3 in crash" in frames[0]


@pytest.mark.parametrize("mode, why", [
    ("crash_before", "no_session_id"),      # died before its output was complete
    ("no_id", "no session_id printed"),     # rc 0 without the id (0.17's review redirect)
    ("rc1", "rc=1"),                        # an error exit is an error, id or not
])
def test_everything_else_fails_the_turn_as_before(stand_in, mode, why):
    with pytest.raises(AssertionError) as err:
        stand_in(mode)
    assert stand_in.runs() == 1
    assert not (stand_in.home.parent / exit_crash.RECORD_NAME).exists()
    if why != "no_session_id":
        assert why in str(err.value)
    else:
        assert "rc=-11" in str(err.value)


def test_a_kill_or_a_timeout_is_no_exit_crash():
    line = "ok\n"
    err = "x\nsession_id: 1\n"
    assert exit_crash.evidence(-11, line, err) is not None
    assert exit_crash.evidence(-9, line, err) is None         # SIGKILL: OOM killer or the timeout
    assert exit_crash.evidence(-15, line, err) is None        # SIGTERM: someone stopped it
    assert exit_crash.evidence(-11, "", err) is None          # no answer written
    assert exit_crash.evidence(0, line, err) is None
