"""``archive search`` and ``archive show`` over hermes-lcm's old history (``archive/lcm_history``).

Read-only like the rest of ``archive``; a store that cannot be read is one line saying why,
never a failed command.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Tuple

from ..archive.lcm_history import KEY, LABEL, LcmHistory, LcmUnavailable, unavailable
from ..archive.visibility import OPERATOR
from ..common.humanize import count, printable
from .env import CliError, resolve_settings


def _history() -> Any:
    env, _config, settings, _warnings = resolve_settings()
    history = LcmHistory.from_settings(settings, env)
    return history if history is not None and history.exists() else None


def search(query: str, limit: int) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(hits, printed lines) of hermes-lcm's history for ``query``; nothing when there is none."""
    history = _history()
    if history is None:
        return [], []
    try:
        found = history.search(query, limit, sessions=OPERATOR.lcm_sessions)   # the host's operator: all
    except LcmUnavailable as exc:
        return [], [unavailable(str(exc))]
    lines = ["%s %s, session %s, %s: %s" % (h["key"], LABEL, printable(h["session"], 120, False),
                                            h["time"], printable(h["snippet"], 200, False))
             for h in found["results"]]
    if found["next_offset"] is not None:
        lines.append("(more %s matches: add words or raise --limit)" % LABEL)
    if found.get("incomplete"):
        lines.append("(%s incomplete: %s)" % (LABEL, found["incomplete"]))
    return found["results"], lines


def is_history_key(ident: str) -> bool:
    return bool(KEY.fullmatch(ident or ""))


def show(args: argparse.Namespace) -> int:
    """``archive show lcm-<id>``: one hermes-lcm message, paged like the archive's items."""
    history = _history()
    if history is None:
        raise CliError("no hermes-lcm store found (TENCENTDB_OFFLOAD_LCM_HISTORY, LCM_DATABASE_PATH "
                       "or $HERMES_HOME/lcm.db)")
    offset, limit = max(0, args.offset), max(1, args.limit)
    try:
        item = history.read(args.ident, offset, limit, OPERATOR.lcm_sessions)
    except LcmUnavailable as exc:
        raise CliError(unavailable(str(exc)))
    if item is None:
        raise CliError("no message %s in %s" % (args.ident, history.path))
    nxt = offset + len(item["content"])
    item["next_offset"] = nxt if nxt < item["total_chars"] else None
    if args.json:
        print(json.dumps(item, ensure_ascii=False, indent=2))
        return 0
    print("%s %s, session %s, %s, %s message" % (item["key"], LABEL, printable(item["session"], 120, False),
                                                 item["time"], item["role"] or "a"))
    moved = item.get("externalized")
    if moved:       # LCM-X kept the text in a payload file: say which, and whether it was read
        print("LCM-X kept this text outside lcm.db, in %s%s" % (
            moved["path"], "" if moved.get("read_from") else " (not read: %s)" % moved.get("unread", "")))
    print("chars %s..%s of %s\n" % (count(offset), count(nxt), count(item["total_chars"])))
    print(printable(item["content"]))
    if item["next_offset"] is not None:
        print("\n(more: --offset %d)" % nxt)
    return 0
