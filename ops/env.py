"""What the operator commands share: the environment Hermes would give the plugin
(process env + ``$HERMES_HOME/.env``), config.yaml (``hermes/config``), settings,
``CliError`` (read-only SQLite is ``archive.readonly``), the ``--store``/``--json`` options."""

from __future__ import annotations

import argparse
import os
import re
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..settings.config import PREFIX, Settings, in_block, load_settings
from ..hermes.config import ConfigFile, hermes_home, read_config


PROG = "python3 <plugin dir>"
MIN_WINDOW = 64_000          # Hermes refuses a smaller context window


class CliError(Exception):
    """A failure the user can act on; printed as one line, exit status 1."""


# --- environment and .env (stdlib only) ------------------------------------

def read_dotenv(path: Path, errors: Optional[List[str]] = None,
                environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``KEY=VALUE`` lines of a .env file, read as Hermes' python-dotenv reads them (a BOM,
    ``export``, quotes, comments after a value) and expanded as every supported Hermes loads it
    (``_expand``). ``environ``: the environment Hermes starts in (default: this process's).
    A file that exists but cannot be read is appended to ``errors`` (no file is not an error:
    Hermes needs none)."""
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        if errors is not None:
            errors.append("%s cannot be read (%s)" % (path, exc.strerror or exc))
        return {}
    environ = os.environ if environ is None else environ
    out: Dict[str, Optional[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[7:].lstrip()
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq:
            if _BARE.fullmatch(re.sub(r"\s+#.*", "", key)):
                out[key] = None         # python-dotenv: a name with no value, "" to ${NAME}
            continue
        if not key or key.startswith("#"):
            continue
        value = _dotenv_value(value.strip())
        if value is not None:
            out[key] = _expand(value, out, environ)
    return {k: v for k, v in out.items() if v is not None}


# python-dotenv's variables (dotenv/variables.py): only ``${NAME}`` and ``${NAME:-default}``;
# ``$NAME`` stays as written, in any quotes (single quotes too: the parser keeps no quoting)
_VARIABLE = re.compile(r"\$\{(?P<name>[^\}:]*)(?::-(?P<default>[^\}]*))?\}")
_BARE = re.compile(r"[^=#\s]+")


def _expand(value: str, above: Mapping[str, Optional[str]], environ: Mapping[str, str]) -> str:
    """``value`` with each variable replaced as Hermes loads ``$HERMES_HOME/.env`` (python-dotenv
    with override, every supported release): a name set above in the file first, then the
    environment Hermes started in, else the default (or ""). A name that is set, even to "", never takes the default."""
    def one(found: "re.Match[str]") -> str:
        name, default = found.group("name"), found.group("default")
        if name in above:
            got = above[name]
        else:
            got = environ.get(name, default if default is not None else "")
        return got if got is not None else ""
    return _VARIABLE.sub(one, value)


_QUOTED = {q: re.compile(r"%s((?:\\.|[^%s\\])*)%s\s*(?:#.*)?$" % (q, q, q)) for q in "'\""}
_ESCAPES = {"'": {"'": "'", "\\": "\\"},
            '"': {'"': '"', "'": "'", "\\": "\\", "n": "\n", "t": "\t", "r": "\r",
                  "a": "\a", "b": "\b", "f": "\f", "v": "\v"}}


def _dotenv_value(text: str) -> Optional[str]:
    """A value as python-dotenv reads it: quoted (escapes decoded, a comment may follow the
    closing quote), else up to a `` #`` comment; None for a quote never closed (it skips the
    line)."""
    quote = text[:1]
    if quote not in _QUOTED:
        return re.sub(r"\s+#.*", "", text).rstrip()
    found = _QUOTED[quote].match(text)
    if not found:
        return None
    table = _ESCAPES[quote]
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), found.group(1))


def effective_env(base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment Hermes would give the plugin: ``$HERMES_HOME/.env`` wins (override)."""
    env = dict(os.environ if base is None else base)
    env.update(read_dotenv(hermes_home(env) / ".env", environ=env))
    return env


def resolve_settings(overrides: Optional[Mapping[str, str]] = None
                     ) -> Tuple[Dict[str, str], ConfigFile, Settings, List[str]]:
    """(env, config.yaml, settings, warnings) as the plugin would see them in Hermes."""
    env = effective_env()
    env.update(overrides or {})
    config = read_config(hermes_home(env))
    settings, warnings = load_settings(env, config.block())
    return env, config, settings, warnings


# --- Hermes' compression: block ---------------------------------------------------------

# Keys Hermes applies around any context engine (when and how long it calls it); read from
# every tested release's wheel. ``enabled: false`` stops every automatic call.
HOST_COMPRESSION_KEYS = frozenset((
    "enabled", "in_place", "max_attempts", "progress_notices", "checkpoint_required",
    "context_timeout_seconds", "context_total_ceiling_seconds", "hygiene_hard_message_limit",
    "hygiene_timeout_seconds", "hygiene_total_ceiling_seconds", "hygiene_failure_cooldown_seconds",
    "hygiene_max_turn_hold_seconds"))
# Built-in compressor keys the plugin replaces with its own setting (the rest: no equivalent)
REPLACED_BY = {"threshold": "THRESHOLD", "model_thresholds": "THRESHOLD",
               "target_ratio": "COMPACT_RATIO", "threshold_tokens": "MAX_CONTEXT_TOKENS",
               "protect_first_n": "KEEP_FIRST"}


# What a Hermes that writes its DEFAULT_CONFIG into config.yaml writes there: a key still at
# its default is the host's, not the user's choice, and is not worth a warning
HOST_WRITTEN_DEFAULTS = {"threshold": 0.5, "target_ratio": 0.2, "protect_last_n": 20,
                         "protect_first_n": 3, "abort_on_summary_failure": False,
                         "codex_gpt55_autoraise": True, "codex_gpt55_autoraise_notice": True,
                         "codex_app_server_auto": "native"}


def compression_findings(config: ConfigFile) -> Tuple[bool, List[str]]:
    """(Hermes' compression switched off?, ``compression.*`` keys set that this plugin does
    not honour — each with the setting that does the job, if any)."""
    block = config.get("compression")
    if not isinstance(block, Mapping):
        return False, []
    ignored = []
    chosen = [str(k) for k in block if str(k) not in HOST_COMPRESSION_KEYS
              and not (str(k) in HOST_WRITTEN_DEFAULTS and block[k] == HOST_WRITTEN_DEFAULTS[str(k)])]
    for key in sorted(chosen)[:40]:
        instead = REPLACED_BY.get(key)
        ignored.append("compression.%s (use TENCENTDB_OFFLOAD_%s)" % (key, instead) if instead
                       else "compression.%s" % key)
    return block.get("enabled") is False, ignored


def value_origin(flag: Optional[float], suffix: str, env: Dict[str, str], config: ConfigFile,
                 warnings: List[str]) -> str:
    """Where a demo/replay value came from; a setting that was invalid did not give it (the
    default did)."""
    if flag is not None:
        return "--" + ("ratio" if suffix == "COMPACT_RATIO" else "threshold")
    names = (PREFIX + suffix + "=", "tencentdb_offload.%s=" % suffix.lower())
    if any(w.startswith(names) and " is invalid " in w for w in warnings):
        return "default"
    if PREFIX + suffix in env:
        return PREFIX + suffix
    if in_block(config.block(), suffix.lower()):
        return "tencentdb_offload.%s in %s" % (suffix.lower(), config.path)
    return "default"


def ignored_proxy(url: str, env: Mapping[str, str]) -> str:
    """The proxy variable the environment sets for ``url`` (``HTTPS_PROXY`` …, unless
    ``NO_PROXY`` exempts its host), or "": the plugin connects to the Gateway directly, so a
    Gateway reachable only through that proxy is unreachable, and doctor says why."""
    parts = urllib.parse.urlsplit(url)
    for name in (parts.scheme + "_proxy", "all_proxy"):
        for key in (name, name.upper()):
            if env.get(key, "").strip():
                no = env.get("no_proxy", env.get("NO_PROXY", ""))
                exempt = urllib.request.proxy_bypass_environment(parts.hostname or "", {"no": no})
                return "" if exempt else key
    return ""


def shared_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """``--store`` and ``--json``; SUPPRESS keeps a value given before the action from being
    reset by the action's parser when it is not repeated there."""
    parser.add_argument("--store", metavar="DIR", default=default,
                        help="store directory (default: the configured one)")
    parser.add_argument("--json", action="store_true", default=default, help="print as JSON")


def int_at_least(lowest: int, why: str, highest: Optional[int] = None):
    """An argparse type: an integer of at least ``lowest`` (``why`` says what else) and at
    most ``highest``: out of range is exit 2 naming the option, as documented."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not an integer" % text)
        if value < lowest:
            raise argparse.ArgumentTypeError("%d is below %d%s" % (value, lowest, why))
        if highest is not None and value > highest:
            raise argparse.ArgumentTypeError("%d is too many (at most %d)" % (value, highest))
        return value
    return parse
