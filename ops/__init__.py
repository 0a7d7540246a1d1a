"""``python3 <plugin dir> <command>``: argument parsing and dispatch.

Commands: ``demo`` and ``replay`` (``ops.demo``), ``doctor`` (``ops.doctor``), ``status``
(``ops.status``), ``archive`` (``ops.archive_cmd``); what they share is in ``ops.env``. The environment is read the way Hermes reads it: the process environment with
``$HERMES_HOME/.env`` loaded over it, plus the optional ``tencentdb_offload:`` block of
``$HERMES_HOME/config.yaml``. Nothing here imports Hermes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from ..common.peer_text import OutputError, printable_output
from ..settings.config import PREFIX, Settings, load_settings
from .env import MIN_WINDOW, PROG, CliError, int_at_least as _int_at_least
from .status import cmd_status
from . import archive_cmd, outbox_cmd, report_cmd


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message))


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)


MAX_WAIT_S = 3600.0


def _seconds(text: str) -> float:
    """A positive number of seconds, at most an hour (``inf`` or ``1e308`` overflow the
    client's millisecond timeouts; 0, negatives and ``nan`` mean nothing)."""
    value = _number(text)
    if not (0.0 < value <= MAX_WAIT_S):
        raise argparse.ArgumentTypeError("%s must be a number of seconds above 0 and at most %g"
                                         % (text, MAX_WAIT_S))
    return value


def _setting_flag(suffix: str):
    """An argparse type for the flag that stands in for the setting ``suffix``: the setting's
    own parser and bounds, so a value the setting would refuse never reaches the engine (where
    it would be blamed on the setting and replaced by the default)."""
    def parse(text: str) -> Any:
        value = _number(text) if suffix in ("THRESHOLD", "COMPACT_RATIO") else text
        problems = [w for w in load_settings({PREFIX + suffix: text})[1]
                    if w.startswith(PREFIX + suffix + "=") and " must be below " not in w]
        if problems:        # "VAR=VALUE is invalid (why); using ..." without the VAR= and after
            raise argparse.ArgumentTypeError(problems[0].partition("=")[2].partition("; ")[0])
        return value
    return parse


_context_length = _int_at_least(MIN_WINDOW, " (Hermes refuses smaller windows)")
_positive = _int_at_least(1, "")
_turns = _int_at_least(1, "", highest=1000)


def _tuning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--context-length", type=_context_length, metavar="N",
                   help="model context window in tokens, at least 64000 (default: "
                        "model.context_length from config.yaml; otherwise 128000)")
    p.add_argument("--threshold", type=_setting_flag("THRESHOLD"), metavar="F",
                   help="compaction trigger, fraction of the window (default: the configured "
                        "TENCENTDB_OFFLOAD_THRESHOLD, %g)" % Settings().threshold)
    p.add_argument("--ratio", type=_setting_flag("COMPACT_RATIO"), metavar="F",
                   help="target after a compaction, fraction of the window (default: the "
                        "configured TENCENTDB_OFFLOAD_COMPACT_RATIO, %g)" % Settings().compact_ratio)
    p.add_argument("--gateway", type=_setting_flag("GATEWAY_URL"), metavar="URL",
                   help="send the session to this Gateway (default: none; the configured "
                        "TENCENTDB_OFFLOAD_GATEWAY_URL is never used, so no synthetic or replayed "
                        "session lands in your memory)")
    p.add_argument("--store", metavar="DIR",
                   help="keep the archive in DIR (default: a temporary directory, removed at exit)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description="tencentdb-offload command line: run a synthetic "
                 "session (demo), replay a real one (replay), check an installation (doctor), "
                 "show what the store knows (status), list, read, search, export or forget what "
                 "was archived (archive), draw a conversation as an HTML page (report), see and "
                 "re-queue what the Gateway refused (outbox).",
                 epilog="Every command takes --json; demo, replay, doctor, status, archive, report "
                 "and outbox take --store DIR (before or after an archive or outbox action). "
                 "COMMAND --help for more.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    demo = sub.add_parser("demo", help="drive a synthetic coding session through the engine",
                          description="Drive a deterministic synthetic agent session (a long "
                          "coding task: English, Chinese and code, large tool outputs, one "
                          "heartbeat turn) through the engine exactly as Hermes does, then "
                          "report every compaction, the context size per turn and a recall. "
                          "Runs local-only unless --gateway URL is given.")
    _tuning(demo)
    demo.add_argument("--turns", type=_turns, default=40, metavar="N",
                      help="user turns in the session (default 40)")
    demo.add_argument("--seed", type=int, default=7, metavar="N",
                      help="seed of the synthetic session (default 7)")
    rep = sub.add_parser("replay", help="replay a real session through the engine",
                         description="Replay a real session turn by turn (split at real user "
                         "messages) through the same driver as demo and print the same report. "
                         "SOURCE is a Hermes session id (read-only from $HERMES_HOME/state.db), "
                         "a JSON or JSONL file of OpenAI-format messages, or a Hermes session "
                         "export (an object with a 'messages' list, or JSONL of them), or a state.db "
                         "file (with --session ID). The window and "
                         "thresholds are the ones the session ran with (config.yaml, .env), unless "
                         "given as flags; rows Hermes marked as compacted are replayed too. Runs "
                         "local-only unless --gateway URL is given.")
    rep.add_argument("source", metavar="SOURCE", help="session id, or path to a .json/.jsonl file")
    rep.add_argument("--session", metavar="ID", help="which session of a multi-session export or "
                     "of a state.db file")
    _tuning(rep)
    doc = sub.add_parser("doctor", help="check the installation, settings and Gateway",
                         description="One line per check (pass / warn / fail) with the fix: "
                         "Python, plugin install, config.yaml, settings, Gateway health and "
                         "credentials, store, outbox backlog. Exit 1 if any check fails.")
    doc.add_argument("--json", action="store_true", help="print the checks as JSON")
    doc.add_argument("--store", metavar="DIR", help="check this store directory (default: the "
                     "configured one)")
    doc.add_argument("--timeout", type=_seconds, default=5.0, metavar="S",
                     help="seconds to wait for the Gateway (default 5)")
    st = sub.add_parser("status", help="what the store knows across processes",
                        description="Sessions, archive size, outbox backlog, recent compactions "
                        "(levels, tokens saved) and last errors, read from the store.")
    st.add_argument("--store", metavar="DIR", help="store directory (default: the configured one)")
    st.add_argument("--recent", type=_positive, default=10, metavar="N",
                    help="recent compactions and errors to list (default 10)")
    st.add_argument("--json", action="store_true", help="print as JSON")
    archive_cmd.add_parser(sub)
    report_cmd.add_parser(sub)
    outbox_cmd.add_parser(sub)
    return ap


def _prints_json(args: argparse.Namespace) -> bool:
    """``--json`` and an export to standard output print JSON: data, escaped not stripped."""
    return bool(getattr(args, "json", False)) or (
        getattr(args, "archive_command", None) == "export" and not getattr(args, "out", None))


def main(argv: Optional[Sequence[str]] = None, plugin_dir: Optional[str] = None) -> int:
    for stream in (sys.stdout, sys.stderr):      # never die on a terminal without UTF-8
        try:
            stream.reconfigure(errors="replace")  # type: ignore[attr-defined]
        except Exception:
            pass
    import logging
    if os.environ.get("TDO_DEBUG"):
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    else:   # the reports carry the plugin's warnings and errors; keep stderr for one-liners
        logging.getLogger("tencentdb_offload").addHandler(logging.NullHandler())
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    ratio, threshold = getattr(args, "ratio", None), getattr(args, "threshold", None)
    if ratio is not None and threshold is not None and ratio >= threshold:
        # a pair of flags no setting allows: a usage error (exit 2), as one flag out of range
        parser.error("argument --ratio: %g must be below --threshold %g" % (ratio, threshold))
    if not args.command:
        parser.print_help()
        return 2
    args.plugin_dir = plugin_dir or str(Path(__file__).resolve().parent.parent)
    if getattr(args, "store", None) and isinstance(args.store, str):
        # --store DIR names a directory from here, not the STORE_DIR setting that must be absolute
        args.store = os.path.abspath(os.path.expanduser(args.store))
    with printable_output(json_stdout=_prints_json(args)):  # ids, keys, the Gateway's words
        return _dispatch(args)


def _run(args: argparse.Namespace) -> int:
    if args.command == "status":
        return cmd_status(args)
    if args.command == "archive":
        return archive_cmd.cmd_archive(args)
    if args.command == "report":
        return report_cmd.cmd_report(args)
    if args.command == "outbox":
        return outbox_cmd.cmd_outbox(args)
    if args.command == "doctor":
        from .doctor import cmd_doctor
        return cmd_doctor(args)
    from .demo import cmd_demo, cmd_replay
    return cmd_demo(args) if args.command == "demo" else cmd_replay(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        status = _run(args)
        sys.stdout.flush()      # what is still buffered fails here, where it can be said
        return status
    except OutputError as exc:  # a full disk under "> FILE": its words, no "internal error"
        try:
            sys.stderr.write("tencentdb-offload %s: %s\n" % (args.command, exc))
        except (OSError, OutputError):
            pass
        return 1
    except CliError as exc:
        sys.stderr.write("tencentdb-offload %s: %s\n" % (args.command, exc))
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("tencentdb-offload %s: interrupted\n" % args.command)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line (TDO_DEBUG=1 shows the traceback)
        if os.environ.get("TDO_DEBUG"):
            raise
        sys.stderr.write("tencentdb-offload %s: internal error: %s: %s (TDO_DEBUG=1 shows the "
                         "traceback)\n" % (args.command, type(exc).__name__, exc))
        return 1
