"""Read Hermes' config.yaml: one reader for the plugin and the command line, no side effects.

Inside Hermes the file is parsed with Hermes' own YAML loader (``fast_safe_load`` on 0.19+,
PyYAML's ``safe_load`` on 0.17). Hermes' ``load_config()`` and ``read_raw_config()`` are not
used: the first creates ``$HERMES_HOME`` and its sub-directories, the second snapshots a
broken file to a ``.bak``; and importing ``hermes_cli.config`` from outside Hermes creates
``$HERMES_HOME`` on 0.22. So Hermes' loader is taken only from an already loaded
``hermes_cli.config``; otherwise PyYAML (or 0.22's ``hermes_yaml``) when importable, and
else a small stdlib reader for the YAML subset config files use.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

BLOCK = "tencentdb_offload"


@dataclass(frozen=True)
class ConfigFile:
    """What was read: ``data`` is None when the file is missing or unreadable (``error``)."""
    path: Path
    data: Optional[Dict[str, Any]]
    error: str          # "" when read; "missing" when there is no file; else why not
    reader: str         # which parser read it

    def block(self) -> Any:
        """The ``tencentdb_offload:`` block, or None; a list or a bare value there is returned
        as it is, for ``load_settings`` to say that none of it is applied."""
        value = (self.data or {}).get(BLOCK)
        return dict(value) if isinstance(value, Mapping) else value

    def get(self, *keys: str) -> Any:
        """A nested value (``get("model", "context_length")``), None when absent."""
        node: Any = self.data
        for key in keys:
            if not isinstance(node, Mapping):
                return None
            node = node.get(key)
        return node


def hermes_home(env: Mapping[str, str] = os.environ) -> Path:
    """Hermes' home: ``$HERMES_HOME`` or ``~/.hermes``, expanded as Hermes 0.22 expands it
    (``os.path.expandvars`` then ``expanduser``, against ``env``: ``$VAR`` and ``${VAR}``, an
    unset one left as written)."""
    raw = env.get("HERMES_HOME", "").strip()
    if not raw:
        return Path.home() / ".hermes"
    raw = expand_vars(raw, env)
    try:
        return Path(raw).expanduser()
    except RuntimeError:            # ~user with no such user: the host would not expand it either
        return Path(raw)


_VAR = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)      # posixpath.expandvars' own pattern


def expand_vars(text: str, env: Mapping[str, str]) -> str:
    """``os.path.expandvars(text)`` with ``env`` for the environment."""
    def one(found: "re.Match[str]") -> str:
        name = found.group(1)
        if name.startswith("{") and name.endswith("}"):
            name = name[1:-1]
        return env[name] if name in env else found.group(0)
    return _VAR.sub(one, text)


def _yaml_loader() -> Tuple[Optional[Callable[[str], Any]], str]:
    loaded = sys.modules.get("hermes_cli.config")       # inside Hermes: its own loader
    if loaded is not None:
        fast = getattr(loaded, "fast_safe_load", None)
        if callable(fast):
            return fast, "hermes_cli.config.fast_safe_load"
        yaml = getattr(loaded, "yaml", None)
        if yaml is not None and callable(getattr(yaml, "safe_load", None)):
            return yaml.safe_load, "hermes_cli.config yaml.safe_load"
    for name in ("yaml", "hermes_yaml"):                  # Hermes' parsers, importable alone
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        if callable(getattr(module, "safe_load", None)):
            return module.safe_load, "%s.safe_load" % name
    return None, "stdlib reader"


def parse(text: str) -> Tuple[Any, str]:
    """(parsed document, reader name); raises ValueError when the text is not YAML."""
    loader, name = _yaml_loader()
    if loader is None:
        return mini_yaml(text), name
    try:
        return loader(text), name
    except Exception as exc:   # each parser has its own error class
        raise ValueError(_first_line(exc))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in text[:3]) or type(exc).__name__


def read_config(home: Optional[Path] = None) -> ConfigFile:
    """``home/config.yaml`` (default: this process's Hermes home). Never raises."""
    path = (home if home is not None else hermes_home()) / "config.yaml"
    if not path.exists():
        return ConfigFile(path, None, "missing", "")
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        return ConfigFile(path, None, "cannot read it (%s)" % (exc.strerror or exc), "")
    try:
        data, reader = parse(text)
    except (ValueError, RecursionError) as exc:
        return ConfigFile(path, None, "not valid YAML: %s" % exc, "")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return ConfigFile(path, None, "not a mapping of settings", reader)
    return ConfigFile(path, data, "", reader)


# --- the stdlib fallback ----------------------------------------------------------------

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
    """The YAML subset config files use: block mappings and lists, flow lists/maps of
    scalars, quoted strings, comments. JSON (valid YAML) is parsed as JSON. Anything it
    does not understand is skipped, never guessed."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    lines = _yaml_lines(text)
    return _yaml_block(lines, 0, lines[0][0])[0] if lines else {}


_Lines = List[Tuple[int, str]]


def _yaml_lines(text: str) -> _Lines:
    """(indent, text) of every line that holds something, comments and markers gone."""
    lines: _Lines = []
    for raw in text.splitlines():
        if raw.strip() in ("---", "...") or not raw.strip():
            continue
        body = _strip_comment(raw.replace("\t", "    "))
        if body.strip():
            lines.append((len(body) - len(body.lstrip()), body.strip()))
    return lines


def _yaml_block(lines: _Lines, i: int, indent: int) -> Tuple[Any, int]:
    if i < len(lines) and (lines[i][1].startswith("- ") or lines[i][1] == "-"):
        return _yaml_list(lines, i, indent)
    return _yaml_map(lines, i, indent)


def _yaml_list(lines: _Lines, i: int, indent: int) -> Tuple[List[Any], int]:
    items: List[Any] = []
    while i < len(lines) and lines[i][0] == indent and lines[i][1][:1] == "-":
        rest = lines[i][1][1:].strip()
        if rest and rest[0] not in "'\"[{" and (": " in rest or rest.endswith(":")):
            lines[i] = (indent + 2, rest)          # "- key: value": a mapping item
            value, i = _yaml_block(lines, i, indent + 2)
            items.append(value)
            continue
        i += 1
        if rest:
            items.append(_scalar(rest))
        elif i < len(lines) and lines[i][0] > indent:
            value, i = _yaml_block(lines, i, lines[i][0])
            items.append(value)
        else:
            items.append(None)
    return items, i


def _yaml_map(lines: _Lines, i: int, indent: int) -> Tuple[Dict[str, Any], int]:
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
                mapping[key], i = _yaml_block(lines, i, lines[i][0])
        else:
            mapping[key] = None
        while i < len(lines) and lines[i][0] > indent:   # nothing we understood
            i += 1
    return mapping, i
