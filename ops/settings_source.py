"""Where each setting's value came from (.env, the environment, the config.yaml block), the
command that changes it there (one quoted shell word per name, value and path), and the names
that are no setting's: doctor's lines and status's warnings, one check for both."""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..settings.config import PREFIX, SECRETS, SPEC, Settings, in_block, setting_text, shown_value
from .env import read_dotenv


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


def _not_applied(var: str, lost: bool) -> str:
    """A misspelt name whose right spelling is set nowhere: the value meant is not in effect."""
    if not lost:
        return ""
    default = getattr(Settings(), SPEC[var[len(PREFIX):]][0])
    shown = (str(default).lower() if isinstance(default, bool)      # as one writes it in .env
             else "$HERMES_HOME/tencentdb-offload" if default == "" else default)
    return "; its value is not applied (%s is the default %s)" % (var, shown)


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


def _text(raw: Any) -> Optional[str]:
    """A value as the setting's parser reads it, to compare two sources; None if unreadable."""
    try:
        return setting_text(raw).strip()
    except (TypeError, ValueError):
        return None


SHELL_ENV = "the shell's environment"


def overridden(shell: Mapping[str, str], home: Path, config_path: Path, block: Any
               ) -> List[Tuple[str, str, str]]:
    """(setting, message, fix) for each setting two places set to different values, naming
    the one in effect and the ones it overrides. Every Hermes this plugin supports loads
    ``$HERMES_HOME/.env`` over the shell's environment (``load_hermes_dotenv``, override on),
    and the plugin reads the environment before the ``tencentdb_offload:`` block: .env, then
    the shell, then the block. ``shell``: the environment this command was started with (before .env)."""
    dotenv = read_dotenv(home / ".env", environ=shell)
    block = dict(block) if isinstance(block, Mapping) else {}
    out: List[Tuple[str, str, str]] = []
    for suffix, (attr, _parse) in SPEC.items():
        var = PREFIX + suffix
        found = [(label, raw) for label, present, raw in (
            (str(home / ".env"), var in dotenv, dotenv.get(var)),
            (SHELL_ENV, var in shell, shell.get(var)),
            ("the tencentdb_offload: block of %s" % config_path, in_block(block, attr), block.get(attr)),
        ) if present]
        if len(found) < 2 or len({_text(raw) for _label, raw in found}) < 2:
            continue
        (winner, value), losers = found[0], found[1:]
        lost = " and ".join("%s in %s" % ("another value" if suffix in SECRETS else shown_value(suffix, raw),
                                           label) for label, raw in losers if _text(raw) != _text(value))
        if not lost:
            continue
        message = ("%s: %s from %s, which overrides %s (as Hermes does: .env over the shell, "
                   "the environment over config.yaml)"
                   % (var, "(hidden)" if suffix in SECRETS else shown_value(suffix, value), winner, lost))
        shell_lost = found[0][0] != SHELL_ENV and var in shell and _text(shell[var]) != _text(value)
        fix = ("unset %s   # the shell's value has no effect; change it in %s to change the setting"
               % (var, shlex.quote(str(home / ".env"))) if shell_lost
               else "remove %s from the tencentdb_offload: block of %s (the environment's value applies)"
               % (attr, shlex.quote(str(config_path))))
        out.append((suffix, message, fix))
    return out
