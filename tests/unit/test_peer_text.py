"""Control characters a peer wrote never reach the operator's terminal or a log raw
(issue 27 items 4 and 12).

Tool-call ids and conversation ids come from the host and the model, config keys from a
file anyone may have edited, levels and refusals from the Gateway. ESC and BEL in any of them
are stripped where text leaves: the CLI's output streams and the plugin's loggers.
"""

import json
import logging
from pathlib import Path

import tencentdb_offload as plugin
from fakes.hostile import HostilePeer
from tencentdb_offload.hooks import HookHandlers

import helpers
from helpers import env_for, wait_for

EVIL = "\x1b[2J\x1b]0;owned\x07\x9b31m"
CONTROL = ("\x1b", "\x07", "\x9b")


def run_cli(home, *args):
    return helpers.run_cli(args, env={"HERMES_HOME": str(home), "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"},
                           cwd=home.parent)


def raw(text):
    return [c for c in CONTROL if c in text]


def test_ids_with_control_characters_print_clean_in_every_archive_view(tmp_path):
    env = env_for(tmp_path)
    rt = plugin.build_runtime(env=env)
    session, call = "chat" + EVIL, "call_" + EVIL
    HookHandlers(rt).post_tool_call(tool_name="cat" + EVIL, args={}, result="needle text " + EVIL,
                                    session_id=session, tool_call_id=call)
    assert rt.writer.flush(10)
    rt.close()
    home = Path(env["HERMES_HOME"])
    (home / "config.yaml").write_text("tencentdb_offload:\n  \"thresh%sold\": 0.5\n" % EVIL,
                                      encoding="utf-8")
    views = [("archive", "list"), ("archive", "search", "needle"),
             ("archive", "show", call), ("status",), ("doctor",)]
    listed = run_cli(home, "archive", "list")
    assert "chat" in listed.stdout, listed.stderr
    views.append(("archive", "list", "--session", session))
    for view in views:
        proc = run_cli(home, *view)
        assert not raw(proc.stdout) and not raw(proc.stderr), (view, proc.stdout, proc.stderr)
    # JSON is data: the characters are escaped, not removed, and read back unchanged
    for view in (("archive", "--json", "show", call), ("archive", "export", session)):
        proc = run_cli(home, *view)
        assert proc.returncode == 0 and not raw(proc.stdout), (view, proc.stdout, proc.stderr)
        out = proc.stdout.strip()
        objs = [json.loads(out)] if view[1] == "--json" else [json.loads(x) for x in out.splitlines()]
        assert any(o.get("content") == "needle text " + EVIL for o in objs), (view, objs)


def test_the_gateways_refusal_reaches_the_log_without_control_characters(tmp_path, caplog):
    refusal = {"code": 400, "message": "bad pair" + EVIL + "\nFAKE LOG LINE"}
    with HostilePeer({"/v2/offload/ingest": ("json", refusal)}) as peer:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=peer.url, api_key="k"))
        try:
            with caplog.at_level(logging.INFO, logger="tencentdb_offload"):
                HookHandlers(rt).post_tool_call(tool_name="cat", args={}, result="x",
                                                session_id="s" + EVIL, tool_call_id="c1")
                assert rt.writer.flush(10)
                rt.worker.wake()
                assert wait_for(lambda: any("refused" in r.getMessage() for r in caplog.records), 10)
        finally:
            rt.close()
    for record in caplog.records:
        text = record.getMessage()
        assert not raw(text) and "\n" not in text, text
