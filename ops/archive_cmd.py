"""``archive``: look into what was archived without a chat (list, show, search, export, forget).

Hermes is not needed. Reads open the store read-only, so they are safe while a chat or the
messaging gateway writes it; ``forget`` waits for the write lock like any writer. The SQL is in
``archive/browse.py``; this file parses arguments and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..archive import browse, readonly
from ..common.humanize import count, plural, printable
from . import archive_lcm
from .env import PROG, CliError, int_at_least, resolve_settings, shared_options
from .out_file import write_out

PAGE = 4_000                # chars ``show`` prints by default


def add_parser(sub: Any) -> None:
    ap = sub.add_parser("archive", help="list, show, search, export or forget archived items",
                        description="What the plugin archived (tool results and messages that "
                        "left the context), read from the store without Hermes. Reads are "
                        "read-only and safe while another process writes the store.")
    shared_options(ap, argparse.SUPPRESS)
    cmds = ap.add_subparsers(dest="archive_command", metavar="ACTION")
    ls = cmds.add_parser("list", help="conversations with counts, sizes and dates")
    ls.add_argument("--session", metavar="ID", help="list this conversation's items instead")
    show = cmds.add_parser("show", help="one item, paged")
    show.add_argument("ident", metavar="ID", help="row number (#12), msg-... key or tool_call_id")
    show.add_argument("--session", metavar="ID", help="the conversation (keys repeat across them)")
    show.add_argument("--offset", type=int_at_least(0, ""), default=0, metavar="N",
                      help="first character (default 0)")
    show.add_argument("--limit", type=int_at_least(1, ""), default=PAGE, metavar="N",
                      help="characters to print (default %d)" % PAGE)
    find = cmds.add_parser("search", help="items containing every word")
    find.add_argument("query", nargs="+", metavar="WORD")
    find.add_argument("--session", metavar="ID", help="search one conversation only")
    find.add_argument("--limit", type=int_at_least(1, "", 200), default=20, metavar="N",
                      help="results (default 20, at most 200)")
    exp = cmds.add_parser("export", help="one conversation as JSON Lines, every item in order")
    exp.add_argument("session", metavar="SESSION")
    exp.add_argument("--out", metavar="FILE", help="write to FILE (default: standard output)")
    gone = cmds.add_parser("forget", help="delete one conversation's data")
    gone.add_argument("session", metavar="SESSION")
    gone.add_argument("--yes", action="store_true", help="really delete (without it: say what would go)")
    for action in (ls, show, find, exp, gone):      # before or after the action, as users type them
        shared_options(action, argparse.SUPPRESS)


def _store_dir(args: argparse.Namespace) -> Path:
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, _config, settings, _warnings = resolve_settings(overrides)
    return settings.resolved_store_dir(env)


def _day(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def _label(item: Dict[str, Any]) -> str:
    what = item["tool_name"] or item["kind"] if item["kind"] == "tool_result" else (
        "%s message" % (item["role"] or "a"))
    return "#%d %s  %s  %s  %s" % (item["id"], item["key"], printable(what, 60, False),
                                   plural(item["total_chars"], "char"), _day(item["created"]))


def cmd_archive(args: argparse.Namespace) -> int:
    action = getattr(args, "archive_command", None)
    if not action:
        # a missing action is a usage error, exit 2 as for any missing argument
        sys.stderr.write("%s archive: say what to do: list, show ID, search WORDS, export SESSION, forget SESSION (see --help)\n" % PROG)
        return 2
    args.store, args.json = getattr(args, "store", None), getattr(args, "json", False)
    if action == "show" and archive_lcm.is_history_key(args.ident):
        return archive_lcm.show(args)
    directory = _store_dir(args)
    if action == "search" and readonly.unwritten(directory / "store.db"):
        return _search(args, None)      # no store yet: hermes-lcm's history may still answer
    if action == "list" and readonly.unwritten(directory / "store.db"):
        # nothing archived yet is a state, not an error (status says the same and exits 0)
        return _print(args, [], ["nothing archived yet: no store at %s (the plugin creates it "
                                 "when it archives its first item)" % directory])
    try:
        if action == "forget":
            return _forget(args, directory)
        conn = browse.open_readonly(directory)
    except browse.BrowseError as exc:
        if action == "search":          # a broken store: hermes-lcm's history may still answer
            return _search(args, None, exc)
        raise CliError(str(exc))
    try:
        if getattr(args, "session", None):      # a rotated session id reads its whole conversation
            args.session = browse.conversation_of(conn, args.session)
        if action == "export":
            return _export(args, conn, directory)
        return {"list": _list, "show": _show, "search": _search}[action](args, conn)
    finally:
        conn.close()


def _print(args: argparse.Namespace, data: Any, lines: List[str]) -> int:
    print(json.dumps(data, ensure_ascii=False, indent=2) if args.json else "\n".join(lines))
    return 0


def _list(args: argparse.Namespace, conn: Any) -> int:
    if args.session:
        rows = list(browse.items(conn, args.session))
        return _print(args, rows, [_label(r) for r in rows] or ["nothing archived in %s" % args.session])
    convs = browse.conversations(conn)
    lines = ["%s  %s (%s, %s), %s, %s .. %s" % (
        printable(c["session"], 120, False), plural(c["items"], "item"),
        plural(c["messages"], "message"), plural(c["tool_results"], "tool result"),
        plural(c["chars"], "char"), _day(c["first"]), _day(c["last"])) for c in convs]
    return _print(args, convs, lines or ["the archive is empty"])


def _show(args: argparse.Namespace, conn: Any) -> int:
    found = browse.find(conn, args.ident, args.session)
    if not found:
        raise CliError("nothing archived under %r%s" % (
            args.ident, " in %s" % args.session if args.session else ""))
    if len(found) > 1:
        raise CliError("%r names %s; say which: %s" % (
            args.ident, plural(len(found), "item"),
            "; ".join("#%d in %s" % (f["id"], f["session"]) for f in found[:10])))
    item = found[0]
    offset, limit = max(0, args.offset), max(1, args.limit)
    if offset and offset >= item["total_chars"]:
        raise CliError("--offset %d is past the end of #%d (%s)" % (
            offset, item["id"], plural(item["total_chars"], "char")))
    text = browse.read(conn, item, offset, limit)
    nxt = offset + len(text)
    item.update(offset=offset, returned=len(text), content=text,
                next_offset=nxt if nxt < item["total_chars"] else None)
    lines = [_label(item) + "  in " + printable(item["session"], 120, False),
             "chars %s..%s of %s" % (count(offset), count(nxt), count(item["total_chars"])),
             "", printable(text)]
    if item["next_offset"] is not None:
        lines += ["", "(more: --offset %d)" % nxt]
    return _print(args, item, lines)


def _search(args: argparse.Namespace, conn: Any, broken: Optional[Exception] = None) -> int:
    """``conn`` None: no store (nothing to search in it), or a ``broken`` one: said on stderr,
    and a failure unless hermes-lcm's history answers."""
    query = " ".join(args.query)
    if not query.strip():       # every item would match: a listing is what `list` is for
        raise CliError("give a word to search for (archive list --session S lists a "
                       "conversation's items)")
    if len(query) > 1000:
        raise CliError("the query is %d chars; use a few words" % len(query))
    limit = max(1, min(args.limit, 200))
    hits = browse.search(conn, query, args.session, limit) if conn is not None else []
    lines = []
    for h in hits:
        lines += ["#%d %s in %s: %s" % (h["id"], h["key"], printable(h["session"], 120, False),
                                        printable(h["snippet"], 200, False))]
    old, old_lines = archive_lcm.search(query, limit) if not args.session else ([], [])
    if broken is not None:
        if not old:
            raise CliError(str(broken))
        sys.stderr.write("tencentdb-offload archive: %s (only hermes-lcm's history searched)\n"
                         % broken)
    if not lines:       # (not "no item contains" above hermes-lcm's hits that do)
        lines = ["nothing in this plugin's archive contains %r%s" % (
            query, "; hermes-lcm's history does:" if old else "")]
    lines += old_lines
    return _print(args, hits + old, lines)


def _export(args: argparse.Namespace, conn: Any, directory: Path) -> int:
    """To standard output, or to ``--out`` (``ops/out_file``: whole or not at all): a typo in
    the conversation's name, a full disk or an interrupt leaves the user's file as it was, and
    no output path may land in the store itself."""
    if next(browse.items(conn, args.session), None) is None:
        raise CliError(_nothing_in(args.session))
    secrets: List[int] = []
    if not args.out:
        browse.export(conn, args.session, sys.stdout.write, secrets)
        sys.stderr.write(_secrets_note(secrets))
        return 0
    out = Path(args.out).expanduser()
    n = write_out(out, lambda f: browse.export(conn, args.session, f.write, secrets), [directory])
    sys.stderr.write("exported %s to %s\n" % (plural(n, "item"), out) + _secrets_note(secrets))
    return 0


def _secrets_note(ids: List[int]) -> str:
    """Whether the export holds secrets (the archive keeps originals): which items, never what."""
    if not ids:
        return "the export holds no secret the redactor recognises (keys, tokens, passwords)\n"
    shown = ", ".join(str(i) for i in ids[:10]) + (" …" if len(ids) > 10 else "")
    return ("the export HOLDS SECRETS, unmasked, in %s (ids %s): the archive keeps the originals "
            "the model saw; share it only as you would the keys themselves\n"
            % (plural(len(ids), "item"), shown))


def _forget(args: argparse.Namespace, directory: Path) -> int:
    """Without --yes: what would go, exit 0 (a dry run that did what it was asked: nothing
    deleted); a conversation with nothing stored is an error either way, as for export and show."""
    if not args.yes:
        conn = browse.open_readonly(directory)
        try:
            would = browse.forget_counts(conn, args.session)
        finally:
            conn.close()
        _check_known(args.session, would)
        print(json.dumps({"would_remove": would}) if args.json else
              "would remove from %s: %s; run again with --yes to delete" % (args.session, _counts(would)))
        sys.stderr.write("tencentdb-offload archive: nothing deleted without --yes\n")
        return 0
    removed = browse.forget(directory, args.session)
    _check_known(args.session, removed)
    if args.json:
        print(json.dumps(removed))
    else:
        print("removed %s: %s" % (args.session, _counts(removed)))
        print("a chat still open on this conversation can archive new items into it")
    return 0


def _check_known(session: str, table_counts: Dict[str, int]) -> None:
    if not sum(table_counts.values()):
        raise CliError(_nothing_in(session))


def _nothing_in(session: str) -> str:
    return "nothing archived in %s (see: archive list)" % session


def _counts(table_counts: Dict[str, int]) -> str:
    return ", ".join("%s %s" % (count(n), table) for table, n in table_counts.items())
