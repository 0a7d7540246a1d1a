"""``outbox``: the rows the Gateway refused for good, and re-queueing them once fixed; the rows
queued while no Gateway was configured, and the user's choice for them.

``outbox refused`` lists why rows were refused; ``outbox requeue [--session ID]`` puts them
back in line (the running sender picks them up within a second or so). Nothing is deleted.
``outbox held`` lists the rows queued while no Gateway was configured, which a Gateway
configured later does not get unasked; ``outbox send-held`` sends them to it, ``outbox
drop-held`` takes them out of the queue (the archive keeps what they carried).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..archive import browse, held, readonly, refused
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
    kept = cmds.add_parser("held", help="rows queued while no Gateway was configured, held from "
                           "a Gateway configured later")
    release = cmds.add_parser("send-held", help="send the held rows to the configured Gateway")
    release.add_argument("--session", metavar="ID", help="only this conversation's rows")
    forget = cmds.add_parser("drop-held", help="take the held rows out of the queue (the archive "
                             "keeps them)")
    forget.add_argument("--session", metavar="ID", help="only this conversation's rows")
    for action in (listed, again, kept, release, forget):   # before or after the action, as for archive
        shared_options(action, argparse.SUPPRESS)


def cmd_outbox(args: argparse.Namespace) -> int:
    action = getattr(args, "outbox_command", None)
    if not action:
        # a missing action is a usage error, exit 2 as for any missing argument
        sys.stderr.write("%s outbox: say what to do: refused, requeue [--session ID], held, send-held "
                         "[--session ID] or drop-held [--session ID] (see --help)\n" % PROG)
        return 2
    args.store, args.json = getattr(args, "store", None), getattr(args, "json", False)
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, _config, settings, _warnings = resolve_settings(overrides)
    directory = settings.resolved_store_dir(env)
    if action in ("held", "send-held", "drop-held"):
        return _held(args, action, directory, settings)
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


def _held(args: argparse.Namespace, action: str, directory: Any, settings: Any) -> int:
    """``held``, ``send-held``, ``drop-held``: the rows queued while no Gateway was configured."""
    key = {"held": "held", "send-held": "sent", "drop-held": "dropped"}[action]
    if readonly.unwritten(directory / "store.db"):
        print(json.dumps({key: 0} if action != "held" else []) if args.json else
              "nothing held: no store at %s yet" % directory)
        return 0
    session = getattr(args, "session", None)
    try:
        if action == "send-held":
            moved = held.send(directory, session)
            target = settings.gateway_url if settings.gateway_configured else ""
            print(json.dumps({"sent": moved}) if args.json else "%s now wait%s for %s" % (
                plural(moved, "held row"), "s" if moved == 1 else "",
                "the Gateway at %s (sent at its next pass)" % target if target else
                "a configured Gateway (none is configured now: TENCENTDB_OFFLOAD_GATEWAY_URL)"))
            return 0
        if action == "drop-held":
            gone = held.drop(directory, session)
            print(json.dumps({"dropped": gone}) if args.json else
                  "%s taken out of the queue; the archive keeps what they carried" % plural(gone, "held row"))
            return 0
        conn = browse.open_readonly(directory)
    except browse.BrowseError as exc:
        raise CliError(str(exc))
    try:
        rows = held.by_session(conn, limit=50)
    finally:
        conn.close()
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    for r in rows:
        print("%s: %s, queued %s – %s" % (printable(r["session"], 120, False), plural(r["rows"], "row"),
                                          held.stamp(r["oldest"]), held.stamp(r["newest"])))
    if not rows:
        print("no rows held: none was queued while no Gateway was configured")
    else:
        send, drop = held.commands(args.plugin_dir)
        print("queued while no Gateway was configured; a Gateway configured later gets them only "
              "after: %s   (or drop them from the queue: %s)" % (send, drop))
    return 0
