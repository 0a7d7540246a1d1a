"""What the operator commands share: the environment Hermes would give the plugin
(process env + ``$HERMES_HOME/.env``), config.yaml, settings, read-only SQLite, ``CliError``."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..config import Settings, hermes_home, load_settings


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


