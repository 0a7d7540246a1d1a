"""Doctor's settings check: every value with the file it came from, misspelt names with a
suggestion, and a fix the user can paste."""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..settings.config import (PREFIX, SPEC, Settings, in_block, load_settings, setting_text,
                               shown_value)
from ..host.thresholds import landing_text, trigger_text
from .env import read_dotenv
from .status import known_trigger

FRACTIONS = ("THRESHOLD", "COMPACT_RATIO")


@dataclass(frozen=True)
class Source:
    """Where a setting's value came from, and how to change it there."""
    label: str        # shown in messages: the .env path, "the environment", config.yaml block
    kind: str         # "dotenv" | "environ" | "block"
    path: str = ""

    def set_command(self, suffix: str, value: str) -> str:
        var = PREFIX + suffix
        if self.kind == "block":
            return "hermes config set tencentdb_offload.%s %s" % (SPEC[suffix][0], shlex.quote(value))
        if self.kind == "dotenv" and var in read_dotenv(Path(self.path)):   # one line, replaced
            return sed_line(var, "%s=%s" % (var, value), self.path)
        if self.kind == "dotenv":
            return "echo %s >> %s" % (shlex.quote("%s=%s" % (var, value)), shlex.quote(self.path))
        return "export %s=%s" % (var, shlex.quote(value))

    def rename_command(self, old: str, new: str) -> str:
        if self.kind == "dotenv":
            return sed_line(old, "%s=" % new, self.path, keep_value=True)
        if self.kind == "block":
            return "rename %s to %s in the tencentdb_offload: block of %s" % (
                shlex.quote(old), shlex.quote(new), shlex.quote(self.path))
        return "unset %s; export %s=..." % (shlex.quote(old), shlex.quote(new))


def _literal(text: str) -> str:
    """``text`` as an extended regular expression matching exactly it (sed -E)."""
    return "".join("[%s]" % ch if ch in ".[*$|()+?{}" else "\\" + ch if ch in "\\^]" else ch
                   for ch in text)


def sed_line(var: str, replacement: str, path: str, keep_value: bool = False) -> str:
    """A ``sed -i`` that rewrites the .env line setting ``var`` (as python-dotenv reads it:
    spaces, ``export``) to ``replacement``, or only its ``NAME=`` part with ``keep_value``.
    One quoted shell word per part, whatever the name, value or path hold: pasting it never
    runs anything but sed."""
    rest = "" if keep_value else ".*"
    line = replacement.replace("\\", "\\\\").replace("&", "\\&").replace("|", "\\|") \
        .replace("\n", "\\n")
    expression = "s|^[[:space:]]*(export[[:space:]]+)?%s[[:space:]]*=%s|%s|" % (_literal(var), rest, line)
    return "sed -i -E %s %s" % (shlex.quote(expression), shlex.quote(path))


def sources(env: Mapping[str, str], home: Path, config_path: Path
            ) -> Tuple[Dict[str, Source], Source, Source, Source]:
    """Per variable in ``env``: the .env file when it set it, else the environment."""
    dotenv_path = home / ".env"
    dotenv = Source(str(dotenv_path), "dotenv", str(dotenv_path))
    environ = Source("the environment", "environ")
    block = Source("the tencentdb_offload: block of %s" % config_path, "block", str(config_path))
    from_file = set(read_dotenv(dotenv_path))
    return ({k: dotenv if k in from_file else environ for k in env}, environ, block, dotenv)


def source_of(suffix: str, env: Mapping[str, str], home: Path, config_path: Path,
              block: Optional[Mapping[str, Any]]) -> Source:
    """Where ``suffix`` is set now; the .env file when it is set nowhere (where the README
    puts settings)."""
    by_var, _environ, block_src, dotenv = sources(env, home, config_path)
    var = PREFIX + suffix
    if var in env:
        return by_var[var]
    if block and in_block(block, SPEC[suffix][0]):
        return block_src
    return dotenv


def suggest(name: str, known: List[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else ""


def _percent(suffix: str, raw: Any) -> Optional[float]:
    """``45``, ``45%`` or ``0,45`` (a decimal comma) for a fraction setting: what the user
    meant (0.45), else None."""
    if suffix not in FRACTIONS or not isinstance(raw, (str, int, float)):
        return None
    text = str(raw).strip().rstrip("%").strip()
    comma = text.count(",") == 1 and "." not in text
    try:
        value = float(text.replace(",", ".") if comma else text)
    except ValueError:
        return None
    return value / 100 if 1 < value < 100 else value if comma and 0 < value < 1 else None


def _reason(suffix: str, raw: Any, exc: Exception) -> str:
    """The parser's own words; Python's for a number that is not one get plain ones."""
    text = str(exc)
    if not text.startswith(("invalid literal", "could not convert")):
        reason = text
    elif isinstance(getattr(Settings(), SPEC[suffix][0]), int):
        reason = "must be a whole number"
    else:
        reason = "must be a number"
    guess = _percent(suffix, raw)
    url = _url_guess(raw) if suffix == "GATEWAY_URL" else ""
    return reason + (" — did you mean %g?" % guess if guess is not None else
                     " — did you mean %s?" % url if url else "")


def _url_guess(raw: Any) -> str:
    """``127.0.0.1:18777`` meant ``http://127.0.0.1:18777``: the user's host and port kept."""
    text = str(raw).strip() if isinstance(raw, str) else ""
    if not text or "://" in text:
        return ""
    guess = "http://" + text
    return guess if not load_settings({PREFIX + "GATEWAY_URL": guess})[1] else ""


CREDENTIAL_PLACEHOLDERS = {"API_KEY": "YOUR_KEY", "INSTANCE_ID": "YOUR_INSTANCE"}


def _good_value(suffix: str, raw: Any, env: Mapping[str, str]) -> str:
    guess = _percent(suffix, raw)
    if guess is not None:
        return "%g" % guess
    if suffix == "GATEWAY_URL" and _url_guess(raw):
        return _url_guess(raw)
    if suffix in CREDENTIAL_PLACEHOLDERS:   # the user's own, never the default placeholder
        return CREDENTIAL_PLACEHOLDERS[suffix]
    default = getattr(Settings(), SPEC[suffix][0])
    if suffix == "STORE_DIR":          # the default is "" = under HERMES_HOME: name it
        return str(Settings().resolved_store_dir(env))
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default) if default != "" else "off"


def _warning_fix(warning: str, settings: Settings, env: Mapping[str, str], home: Path,
                 config_path: Path, block: Optional[Mapping[str, Any]]) -> str:
    """The command that fixes what ``load_settings`` warned of, where one value does."""
    for suffix, value in (("COMPACT_RATIO", "%g" % round(settings.threshold * 2 / 3, 2)),
                          # a relative store directory, anchored where Hermes keeps its files
                          ("STORE_DIR", str(home / Path(settings.store_dir).expanduser()))):
        if PREFIX + suffix in warning or SPEC[suffix][0] + "=" in warning:
            return source_of(suffix, env, home, config_path, block).set_command(suffix, value)
    return "see README.md, Settings"


def _not_applied(var: str, lost: bool) -> str:
    """A misspelt name whose right spelling is set nowhere: the value meant is not in effect."""
    if not lost:
        return ""
    default = getattr(Settings(), SPEC[var[len(PREFIX):]][0])
    shown = (str(default).lower() if isinstance(default, bool)      # as one writes it in .env
             else "$HERMES_HOME/tencentdb-offload" if default == "" else default)
    return "; its value is not applied (%s is the default %s)" % (var, shown)


def check_dotenv(c: Any, path: Path) -> None:
    """A .env that exists but cannot be read: its settings are not applied (as for config.yaml,
    the fix is for its cause)."""
    errors: List[str] = []
    read_dotenv(path, errors)
    for error in errors:
        quoted = shlex.quote(str(path))
        fix = ("chmod u+r %s   # as its owner: Hermes runs as you" % quoted
               if "Permission denied" in error else
               "mv %s %s   # then write your settings into a file %s" % (
                   quoted, shlex.quote("%s.moved" % path), quoted)
               if path.is_dir() else "fix or remove %s" % quoted)
        c.add("settings", "fail", "%s: the settings in it are not applied" % error, fix)


def misnamed(env: Mapping[str, str], block: Any, home: Path, config_path: Path
             ) -> List[Tuple[str, str, str]]:
    """(status, message, fix) for each name that is no setting's, with the one it is close
    to: doctor's lines, and status's warnings (one check, both commands)."""
    by_var, environ, block_src, _dotenv = sources(env, home, config_path)
    block = dict(block) if isinstance(block, Mapping) else {}
    out: List[Tuple[str, str, str]] = []
    known_vars = sorted(PREFIX + k for k in SPEC)
    # (a name in lower case is another variable: the plugin never reads it)
    for var in sorted(k for k in env if k.upper().startswith(PREFIX) and k not in known_vars):
        src = by_var.get(var, environ)
        near = suggest(var[len(PREFIX):].upper(), sorted(SPEC))     # the shared prefix matches anything
        near = PREFIX + near if near else ""
        lost = near and near not in env and SPEC[near[len(PREFIX):]][0] not in block
        out.append(("fail" if lost else "warn", "%s in %s is not a setting of this plugin%s%s"
                    % (var, src.label, " — did you mean %s?" % near if near else "", _not_applied(near, lost)),
                    src.rename_command(var, near) if near else "see README.md, Settings"))
    known_keys = sorted(attr for attr, _ in SPEC.values())
    for key in sorted(str(k) for k in block if k not in known_keys):
        # THRESHOLD or TENCENTDB_OFFLOAD_THRESHOLD (the .env name) is threshold to the eye
        name = key.lower()
        near = suggest(name[len(PREFIX):] if name.startswith(PREFIX.lower()) else name, known_keys)
        var = next((PREFIX + s for s, (a, _p) in SPEC.items() if a == near), "")
        lost = near and near not in block and var not in env
        out.append(("fail" if lost else "warn", "%s in %s is not a setting of this plugin%s%s"
                    % (key, block_src.label, " — did you mean %s?" % near if near else "", _not_applied(var, lost)),
                    block_src.rename_command(key, near) if near else "see README.md, Settings"))
    return out


def check_settings(c: Any, env: Mapping[str, str], home: Path, config_path: Path,
                   block: Optional[Mapping[str, Any]],
                   window: Optional[int] = None) -> Tuple[Settings, Dict[str, str]]:
    """Adds the settings lines to ``c``; returns the settings and {suffix: why invalid}."""
    by_var, environ, block_src, _dotenv = sources(env, home, config_path)
    raw_block = block           # a list there: load_settings says none of it is applied
    block = dict(block) if isinstance(block, Mapping) else {}
    bad: Dict[str, str] = {}
    check_dotenv(c, home / ".env")
    for suffix, (attr, parse) in SPEC.items():
        var = PREFIX + suffix
        if var in env:
            raw, src = env[var], by_var.get(var, environ)
        elif in_block(block, attr):
            raw, src = block[attr], block_src
        else:
            continue
        try:
            parse(setting_text(raw))
        except (TypeError, ValueError) as exc:
            bad[suffix] = _reason(suffix, raw, exc)
            shown = shown_value(suffix, raw)
            c.add("settings", "fail", "%s=%s in %s %s" % (var if src.kind != "block" else attr, shown,
                                                         src.label, bad[suffix]),
                  src.set_command(suffix, _good_value(suffix, raw, env)))
    for status, message, fix in misnamed(env, block, home, config_path):
        c.add("settings", status, message, fix)
    settings, warnings = load_settings(env, raw_block)
    flagged = [PREFIX + s for s in bad] + [SPEC[s][0] for s in bad]
    for w in warnings:          # what single values cannot show (e.g. ratio above threshold)
        if not any(name in w for name in flagged):
            c.add("settings", "fail", w, _warning_fix(w, settings, env, home, config_path, block))
    if not any(i["status"] == "fail" for i in c.items if i["name"] == "settings" and
               "not a setting" not in i["message"]):
        trigger = known_trigger(settings.resolved_store_dir(env), settings, window)   # its window, or the configured one
        # beside a misspelt name flagged above, "all ... valid" would contradict that line
        flagged_name = any(i["name"] == "settings" for i in c.items)
        c.add("settings", "pass", "%s: %s, %s; %s"
              % ("the settings in effect are valid" if flagged_name else "all settings valid",
                 trigger_text(settings, trigger), landing_text(settings, trigger), settings.describe_gateway()))
    if not settings.enabled:    # changed where it is set: an export loses to $HERMES_HOME/.env
        src = source_of("ENABLED", env, home, config_path, block)
        c.add("settings", "warn", "TENCENTDB_OFFLOAD_ENABLED is false (in %s): the engine passes "
              "messages through" % src.label, src.set_command("ENABLED", "true"))
    return settings, bad
