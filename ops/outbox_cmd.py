"""``outbox``: the rows the Gateway refused for good, and re-queueing them once fixed.

``outbox refused`` lists why rows were refused; ``outbox requeue [--session ID]`` puts them
back in line (the running sender picks them up within a second or so). Nothing is deleted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..archive import browse, readonly, refused
from ..common.humanize import plural, printable
from .env import PROG, CliError, resolve_settings, shared_options


def add_parser(sub: Any) -> None:
    ap = sub.add_parser("outbox", help="rows the Gateway refused for good; re-queue them",
                        description="Rows the Gateway refused for good (a bad request, a missing "
                        "route) are kept, not deleted. List the reasons, fix the cause, then "
                        "re-queue them for delivery.")
    shared_options(ap, argparse.SUPPRESS)
    cmds = ap.add_subparsers(dest="outbox_command", metavar="ACTION")
    listed = cmds.add_parser("refused", help="why rows were refused, with counts")
    again = cmds.add_parser("requeue", help="send the refused rows again")
    again.add_argument("--session", metavar="ID", help="only this conversation's rows")
    for action in (listed, again):                  # before or after the action, as for archive
        shared_options(action, argparse.SUPPRESS)


def cmd_outbox(args: argparse.Namespace) -> int:
    action = getattr(args, "outbox_command", None)
    if not action:
        # a missing action is a usage error, exit 2 as for any missing argument
        sys.stderr.write("%s outbox: say what to do: refused, or requeue [--session ID] (see --help)\n" % PROG)
        return 2
    args.store, args.json = getattr(args, "store", None), getattr(args, "json", False)
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, _config, settings, _warnings = resolve_settings(overrides)
    directory = settings.resolved_store_dir(env)
    if readonly.unwritten(directory / "store.db"):   # nothing recorded yet is a state, not an error
        print(json.dumps({"requeued": 0} if action == "requeue" else []) if args.json else
              "nothing refused: no store at %s yet" % directory)
        return 0
    try:
        if action == "requeue":
            moved = refused.requeue(directory, args.session)
            print(json.dumps({"requeued": moved}) if args.json else
                  "%s waiting for the Gateway again" % plural(moved, "refused row"))
            return 0
        conn = browse.open_readonly(directory)
    except browse.BrowseError as exc:
        raise CliError(str(exc))
    try:
        reasons = refused.refused_by_reason(conn, limit=20)
    finally:
        conn.close()
    if args.json:
        print(json.dumps(reasons, ensure_ascii=False))
        return 0
    for r in reasons:
        print("%s (%s): %s" % (plural(r["rows"], "row"), plural(r["sessions"], "session"),
                               printable(r["reason"], 300, False)))
    if not reasons:
        print("no refused rows")
    else:
        print("fix the cause, then: %s" % (refused.requeue_command(args.plugin_dir)))
    return 0
