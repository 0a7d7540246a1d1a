"""``python3 <plugin dir> <command>``: argument parsing, dispatch, and ``status``.

Commands: ``demo`` and ``replay`` (``cli_demo``), ``doctor`` (``cli_doctor``), ``status``
(here). The environment is read the way Hermes reads it: the process environment with
``$HERMES_HOME/.env`` loaded over it, plus the optional ``tencentdb_offload:`` block of
``$HERMES_HOME/config.yaml``. Nothing here imports Hermes.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .config import Settings, hermes_home, load_settings

PROG = "python3 <plugin dir>"


class CliError(Exception):
    """A failure the user can act on; printed as one line, exit status 1."""


# --- environment, .env and config.yaml (stdlib only) ------------------------------------

def read_dotenv(path: Path) -> Dict[str, str]:
    """``KEY=VALUE`` lines of a .env file (``export``, quotes and comments understood)."""
    out: Dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if key:
            out[key] = value
    return out


def effective_env(base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment Hermes would give the plugin: ``$HERMES_HOME/.env`` wins (override)."""
    env = dict(os.environ if base is None else base)
    env.update(read_dotenv(hermes_home(env) / ".env"))
    return env


def _scalar(text: str) -> Any:
    s = text.strip()
    if not s or s in ("~", "null", "Null", "NULL"):
        return None
    if s[0] in "'\"" and len(s) >= 2 and s[-1] == s[0]:
        return s[1:-1]
    if s[0] == "[" and s[-1] == "]":
        return [_scalar(p) for p in _split_flow(s[1:-1]) if p.strip()]
    if s[0] == "{" and s[-1] == "}":
        out = {}
        for part in _split_flow(s[1:-1]):
            k, _, v = part.partition(":")
            if k.strip():
                out[str(_scalar(k))] = _scalar(v)
        return out
    low = s.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    for cast in (int, float):
        try:
            return cast(s)
        except ValueError:
            pass
    return s


def _split_flow(text: str) -> List[str]:
    parts, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def mini_yaml(text: str) -> Any:
    """A careful reader for the YAML subset config.yaml uses: block mappings and lists,
    flow lists/maps of scalars, quoted strings, comments. JSON (valid YAML) is parsed as
    JSON. Anything it does not understand is skipped, never guessed."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    lines: List[Tuple[int, str]] = []
    for raw in text.splitlines():
        if raw.strip() in ("---", "...") or not raw.strip():
            continue
        body = _strip_comment(raw.replace("\t", "    "))
        if body.strip():
            lines.append((len(body) - len(body.lstrip()), body.strip()))

    def block(i: int, indent: int) -> Tuple[Any, int]:
        if i < len(lines) and lines[i][1].startswith("- ") or (i < len(lines) and lines[i][1] == "-"):
            items: List[Any] = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1][:1] == "-":
                rest = lines[i][1][1:].strip()
                if rest and rest[0] not in "'\"[{" and (": " in rest or rest.endswith(":")):
                    lines[i] = (indent + 2, rest)          # "- key: value": a mapping item
                    value, i = block(i, indent + 2)
                    items.append(value)
                    continue
                i += 1
                if not rest:
                    if i < len(lines) and lines[i][0] > indent:
                        value, i = block(i, lines[i][0])
                        items.append(value)
                    else:
                        items.append(None)
                else:
                    items.append(_scalar(rest))
            return items, i
        mapping: Dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, sep, rest = lines[i][1].partition(":")
            i += 1
            if not sep:
                continue
            key = str(_scalar(key))
            if rest.strip() and rest.strip()[0] not in "|>":
                mapping[key] = _scalar(rest)
                continue
            if i < len(lines) and (lines[i][0] > indent or
                                   (lines[i][0] == indent and lines[i][1][:1] == "-")):
                if rest.strip()[:1] in ("|", ">"):
                    j = i
                    while j < len(lines) and lines[j][0] > indent:
                        j += 1
                    mapping[key] = "\n".join(t for _, t in lines[i:j])
                    i = j
                else:
                    mapping[key], i = block(i, lines[i][0])
            else:
                mapping[key] = None
            while i < len(lines) and lines[i][0] > indent:   # nothing we understood
                i += 1
        return mapping, i

    if not lines:
        return {}
    value, _ = block(0, lines[0][0])
    return value


def read_config_yaml(home: Path) -> Tuple[Optional[Dict[str, Any]], str]:
    """(config dict or None, error) of ``home/config.yaml`` with the stdlib reader."""
    path = home / "config.yaml"
    if not path.exists():
        return None, "no %s" % path
    try:
        data = mini_yaml(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, RecursionError) as exc:
        return None, "cannot read %s: %s" % (path, exc)
    if not isinstance(data, dict):
        return None, "%s is not a mapping" % path
    return data, ""


def offload_block(config: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    block = (config or {}).get("tencentdb_offload")
    return dict(block) if isinstance(block, Mapping) else None


def resolve_settings(overrides: Optional[Mapping[str, str]] = None
                     ) -> Tuple[Dict[str, str], Optional[Dict[str, Any]], Settings, List[str]]:
    """(env, config block, settings, warnings) as the plugin would see them in Hermes."""
    env = effective_env()
    env.update(overrides or {})
    config, _err = read_config_yaml(hermes_home(env))
    block = offload_block(config)
    settings, warnings = load_settings(env, block)
    return env, block, settings, warnings


# --- status -----------------------------------------------------------------------------

def _ro(path: Path) -> sqlite3.Connection:
    import urllib.request
    return sqlite3.connect("file:%s?mode=ro" % urllib.request.pathname2url(str(path)),
                           uri=True, timeout=5)


def unreadable(db: Path) -> str:
    """Why ``db`` cannot be read as a store (checked read-only, before ``Store`` would move a
    corrupt file aside); "" when it is fine."""
    try:
        conn = _ro(db)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return "cannot read %s: %s (the plugin moves a corrupt store aside and starts a new one)" % (db, exc)
    missing = {"archive", "outbox", "events"} - names
    return "%s is not a tencentdb-offload store (no %s table)" % (db, ", ".join(sorted(missing))) \
        if len(missing) == 3 else ""


def status_data(store_dir: Path, settings: Settings, recent: int = 10) -> Dict[str, Any]:
    from .store import Store, StoreError
    db = store_dir / "store.db"
    out: Dict[str, Any] = {"store_dir": str(store_dir), "exists": db.exists(),
                           "settings": settings.public()}
    if not db.exists():
        return out
    problem = unreadable(db)
    if problem:
        raise CliError(problem)
    try:
        store = Store(store_dir)
    except StoreError as exc:
        raise CliError(str(exc))
    try:
        out["store"] = store.stats()
        out["backlog"] = store.backlog()
        events = store.events("compaction", limit=100_000)
    finally:
        store.close()
    sessions: Dict[str, Dict[str, Any]] = {}
    errors: List[Dict[str, Any]] = []
    conn = _ro(db)
    try:
        for sess, items, chars, last in conn.execute(
                "SELECT session, count(*), sum(chars), max(created) FROM archive GROUP BY session"):
            sessions[sess] = {"session": sess, "archived_items": items, "archived_chars": chars or 0,
                              "last_activity": last, "compactions": 0, "tokens_saved": 0,
                              "backlog": 0}
        for sess, n, last in conn.execute(
                "SELECT session, count(*), max(created) FROM outbox WHERE dead=0 GROUP BY session"):
            row = sessions.setdefault(sess, {"session": sess, "archived_items": 0, "archived_chars": 0,
                                             "last_activity": last, "compactions": 0,
                                             "tokens_saved": 0, "backlog": 0})
            row["backlog"] = n
        for created, sess, err in conn.execute(
                "SELECT created, session, last_error FROM outbox WHERE last_error IS NOT NULL "
                "AND last_error != '' ORDER BY id DESC LIMIT 5"):
            errors.append({"ts": created, "session": sess, "source": "outbox", "error": err})
    finally:
        conn.close()
    levels: Dict[str, int] = {}
    saved = gateway = 0
    for ev in events:
        gain = max(0, int(ev.get("tokens_before", 0)) - int(ev.get("tokens_after", 0)))
        saved += gain
        gateway += 1 if str(ev.get("path", "")).startswith("gateway") else 0
        levels[str(ev.get("level") or "?")] = levels.get(str(ev.get("level") or "?"), 0) + 1
        row = sessions.setdefault(ev.get("session") or "?", {
            "session": ev.get("session") or "?", "archived_items": 0, "archived_chars": 0,
            "last_activity": ev.get("ts"), "compactions": 0, "tokens_saved": 0, "backlog": 0})
        row["compactions"] += 1
        row["tokens_saved"] += gain
        row["last_activity"] = max(row["last_activity"] or 0, ev.get("ts") or 0)
        if ev.get("error"):
            errors.append({"ts": ev.get("ts"), "session": ev.get("session"), "source": "compaction",
                           "error": ev["error"]})
    errors.sort(key=lambda e: e.get("ts") or 0, reverse=True)
    out["sessions"] = sorted(sessions.values(), key=lambda r: r["last_activity"] or 0, reverse=True)
    out["compactions"] = {
        "total": len(events), "gateway": gateway, "local": len(events) - gateway,
        "levels": levels, "tokens_saved": saved,
        "recent": [{k: ev.get(k) for k in ("ts", "session", "path", "level", "tokens_before",
                                           "tokens_after", "archived", "error")}
                   for ev in events[:recent]]}
    out["errors"] = errors[:recent]
    return out


def _when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def render_status_text(st: Dict[str, Any]) -> str:
    s = st["settings"]
    lines = ["tencentdb-offload status — store %s" % st["store_dir"],
             "  configured: %s; trigger %.0f%%, target %.0f%% of the window"
             % ("gateway %s (instance %s)" % (s["gateway_url"], s["instance_id"])
                if s["gateway_url"] else "local only (no Gateway)",
                s["threshold"] * 100, s["compact_ratio"] * 100)]
    if not st["exists"]:
        lines.append("  no store yet: the plugin has not archived anything with this "
                     "HERMES_HOME / TENCENTDB_OFFLOAD_STORE_DIR")
        return "\n".join(lines)
    store, comp = st["store"], st["compactions"]
    lines.append("  archive: %d items, %s chars in %d sessions; database %.1f KB"
                 % (store["archived_items"], format(store["archived_chars"], ","),
                    store["archived_sessions"], store["db_bytes"] / 1e3))
    lines.append("  outbox: %d waiting, %d refused for good, %d delivered"
                 % (store["outbox_backlog"], store["outbox_dead"], store["delivered"]))
    lines.append("  compactions: %d (gateway %d, local %d); levels: %s; tokens saved %s"
                 % (comp["total"], comp["gateway"], comp["local"],
                    ", ".join("%s %d" % kv for kv in sorted(comp["levels"].items())) or "none",
                    format(comp["tokens_saved"], ",")))
    if st["sessions"]:
        lines.append("  sessions (newest first):")
        for r in st["sessions"][:15]:
            lines.append("    %-36s %5d items %6d compactions  saved %9s  waiting %d  last %s"
                         % (r["session"][:36], r["archived_items"], r["compactions"],
                            format(r["tokens_saved"], ","), r["backlog"], _when(r["last_activity"])))
    if comp["recent"]:
        lines.append("  recent compactions:")
        for ev in comp["recent"]:
            lines.append("    %s  %-24s %-13s %-10s %8s -> %-8s archived %s%s"
                         % (_when(ev["ts"]), str(ev["session"])[:24], ev["path"], ev["level"] or "-",
                            format(ev["tokens_before"] or 0, ","), format(ev["tokens_after"] or 0, ","),
                            ev["archived"], "  error: %s" % ev["error"] if ev["error"] else ""))
    for e in st["errors"][:5]:
        lines.append("  error (%s, %s): %s" % (e["source"], _when(e["ts"]), str(e["error"])[:200]))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, _block, settings, warnings = resolve_settings(overrides)
    data = status_data(settings.resolved_store_dir(env), settings, args.recent)
    data["warnings"] = warnings
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(render_status_text(data))
        for w in warnings:
            print("  warning: %s" % w)
    return 0


# --- argument parsing -------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message))


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError("%s must be between 0 and 1" % text)
    return value


def _context_length(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % text)
    if value < 64_000:
        raise argparse.ArgumentTypeError("%d is below 64000 (Hermes refuses smaller windows)" % value)
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _tuning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--context-length", type=_context_length, default=128_000, metavar="N",
                   help="model context window in tokens (default 128000, at least 64000)")
    p.add_argument("--threshold", type=_fraction, metavar="F",
                   help="compaction trigger, fraction of the window (default: the configured "
                        "TENCENTDB_OFFLOAD_THRESHOLD, 0.75)")
    p.add_argument("--ratio", type=_fraction, metavar="F",
                   help="target after a compaction, fraction of the window (default: the "
                        "configured TENCENTDB_OFFLOAD_COMPACT_RATIO, 0.5)")
    p.add_argument("--gateway", metavar="URL|off",
                   help="Gateway to use instead of TENCENTDB_OFFLOAD_GATEWAY_URL ('off': local)")
    p.add_argument("--store", metavar="DIR",
                   help="keep the archive in DIR (default: a temporary directory, removed at exit)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description="tencentdb-offload command line: run a synthetic "
                 "session (demo), replay a real one (replay), check an installation (doctor), "
                 "show what the store knows (status).")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    demo = sub.add_parser("demo", help="drive a synthetic coding session through the engine",
                          description="Drive a deterministic synthetic agent session (a long "
                          "coding task: English, Chinese and code, large tool outputs, one "
                          "heartbeat turn) through the engine exactly as Hermes does, then "
                          "report every compaction, the context size per turn and a recall. "
                          "Uses the configured Gateway when it is healthy, else local mode.")
    _tuning(demo)
    demo.add_argument("--turns", type=_positive, default=40, metavar="N",
                      help="user turns in the session (default 40)")
    demo.add_argument("--seed", type=int, default=7, metavar="N",
                      help="seed of the synthetic session (default 7)")
    rep = sub.add_parser("replay", help="replay a real session through the engine",
                         description="Replay a real session turn by turn (split at real user "
                         "messages) through the same driver as demo and print the same report. "
                         "SOURCE is a Hermes session id (read-only from $HERMES_HOME/state.db), "
                         "a JSON or JSONL file of OpenAI-format messages, or a Hermes session "
                         "export (an object with a 'messages' list, or JSONL of them).")
    rep.add_argument("source", metavar="SOURCE", help="session id, or path to a .json/.jsonl file")
    rep.add_argument("--session", metavar="ID", help="which session of a multi-session export")
    _tuning(rep)
    doc = sub.add_parser("doctor", help="check the installation, settings and Gateway",
                         description="One line per check (pass / warn / fail) with the fix: "
                         "Python, plugin install, config.yaml, settings, Gateway health and "
                         "credentials, store, outbox backlog. Exit 1 if any check fails.")
    doc.add_argument("--json", action="store_true", help="print the checks as JSON")
    doc.add_argument("--timeout", type=float, default=5.0, metavar="S",
                     help="seconds to wait for the Gateway (default 5)")
    st = sub.add_parser("status", help="what the store knows across processes",
                        description="Sessions, archive size, outbox backlog, recent compactions "
                        "(levels, tokens saved) and last errors, read from the store.")
    st.add_argument("--store", metavar="DIR", help="store directory (default: the configured one)")
    st.add_argument("--recent", type=_positive, default=10, metavar="N",
                    help="recent compactions and errors to list (default 10)")
    st.add_argument("--json", action="store_true", help="print as JSON")
    return ap


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
    if not args.command:
        parser.print_help()
        return 2
    args.plugin_dir = plugin_dir or str(Path(__file__).resolve().parent)
    try:
        if args.command == "status":
            return cmd_status(args)
        if args.command == "doctor":
            from .cli_doctor import cmd_doctor
            return cmd_doctor(args)
        from .cli_demo import cmd_demo, cmd_replay
        return cmd_demo(args) if args.command == "demo" else cmd_replay(args)
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
