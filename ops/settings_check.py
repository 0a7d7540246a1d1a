"""Doctor's settings check: every value with the file it came from, misspelt names with a
suggestion, and a fix the user can paste."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..hermes.host import Host
from ..settings.config import PREFIX, SPEC, Settings, in_block, load_settings, setting_text, shown_value
from ..settings.thresholds import landing_text, trigger_text
from .env import read_dotenv
from .settings_source import misnamed, source_of, sources
from .status import known_trigger

FRACTIONS = ("THRESHOLD", "COMPACT_RATIO")


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


def check_settings(c: Any, env: Mapping[str, str], home: Path, config_path: Path,
                   block: Optional[Mapping[str, Any]], window: Optional[int] = None,
                   host: Optional[Host] = None) -> Tuple[Settings, Dict[str, str]]:
    """Adds the settings lines to ``c``; returns the settings and {suffix: why invalid}.
    ``host``: what the Hermes the settings are for does (None: not known)."""
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
                 trigger_text(settings, trigger, host), landing_text(settings, trigger, host),
                 settings.describe_gateway()))
    if not settings.enabled:    # changed where it is set: an export loses to $HERMES_HOME/.env
        src = source_of("ENABLED", env, home, config_path, block)
        c.add("settings", "warn", "TENCENTDB_OFFLOAD_ENABLED is false (in %s): the engine passes "
              "messages through" % src.label, src.set_command("ENABLED", "true"))
    return settings, bad
