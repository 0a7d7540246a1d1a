"""Settings: read from the environment and an optional ``tencentdb_offload:`` block.

Hermes loads ``$HERMES_HOME/.env`` into ``os.environ`` before plugins register, so the environment is
the primary source; a ``tencentdb_offload:`` block in config.yaml (read with Hermes' own loader when
importable) fills in what it does not set. No value stops the plugin from loading: a bad one gives one
warning naming the variable (secrets by name only) and what is used instead. A malformed Gateway URL,
or an API key / instance id that cannot go in an HTTP header, turns the Gateway off (local compaction)
rather than silently talking to the default URL or sending a mangled credential."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .gateway_env import resolve as gateway_sources
from ..hermes.config import hermes_home
from ..memory_gateway.transport import BaseURL, header_safe, unsafe_credentials

PREFIX = "TENCENTDB_OFFLOAD_"
OFF_WORDS = {"", "off", "none", "disabled", "false", "0"}
SMALLEST_WINDOW = 4_096     # a fraction giving 0 tokens of this window is a typo
SECRETS = ("API_KEY", "INSTANCE_ID")
GATEWAY_OFF = ("GATEWAY_URL",) + SECRETS   # bad values here turn the Gateway off


@dataclass(frozen=True)
class Settings:
    gateway_url: str = "http://127.0.0.1:8420"   # "" = no Gateway (local mode)
    api_key: str = field(default="local", repr=False)
    instance_id: str = "default"
    compact_ratio: float = 0.45
    threshold: float = 0.75
    timeout_ms: int = 90_000
    ingest_timeout_ms: int = 5_000
    enabled: bool = True
    store_dir: str = ""                 # "" = $HERMES_HOME/tencentdb-offload
    retention_days: int = 30            # 0 = keep forever
    max_sessions: int = 20
    body_limit: int = 1_000_000         # bytes of JSON per Gateway request (Gateway default 1 MiB)
    trim_chars: int = 2_000             # tool results longer than this are trimmed locally
    keep_first: int = 3                 # leading messages the local compaction keeps
    canvas: bool = True                 # inject the Gateway's task canvas
    max_context_tokens: int = 0         # 0 = no cap; else compaction starts here whatever the window
    lcm_history: str = "auto"           # hermes-lcm's lcm.db searched read-only: auto | off | a path
    lcm_history_shared: bool = False    # messaging gateway: every conversation reads all of lcm.db
    cache_ttl_s: int = 300              # the provider's prompt-cache idle expiry; 0 = no idle compaction
    cache_ttl_from: str = ""            # where cache_ttl_s came from (hermes/prompt_cache.py)
    redact: bool = True                 # secrets masked in what is sent to the Gateway
    redact_archive: bool = False        # and in the local archive, at rest
    gateway_configured: bool = False    # the URL was set (env or config.yaml), not the default
    threshold_explicit: bool = False    # THRESHOLD was set (env or config.yaml): used as set
    ratio_explicit: bool = False        # COMPACT_RATIO was set (or corrected): used as set

    @property
    def gateway_enabled(self) -> bool:
        return bool(self.gateway_url) and not _url_problem(self.gateway_url) and \
            not unsafe_credentials(self.api_key, self.instance_id)

    def trigger_tokens(self, context_length: int, threshold: Optional[float] = None) -> int:
        """Where compaction starts: the threshold of the window (``threshold``: a per-model
        one from Hermes' ``compression.model_thresholds``), or the cap when it is lower."""
        ratio = int(context_length * (self.threshold if threshold is None else threshold))
        return min(ratio, self.max_context_tokens) if self.max_context_tokens else ratio

    def target_tokens(self, context_length: int, threshold: Optional[float] = None) -> int:
        """Where a compaction brings the context: the ratio of the window; under a cap that wins
        over the applying threshold (a per-model one), the same proportion of the cap."""
        ratio, applies = int(context_length * self.compact_ratio), threshold or self.threshold
        if self.max_context_tokens and self.max_context_tokens < int(context_length * applies):
            return min(ratio, int(self.max_context_tokens * self.compact_ratio / applies))
        return ratio

    def describe_gateway(self) -> str:
        """How the Gateway is set up, in words status, doctor and the host's compaction line share."""
        return gateway_text(self.gateway_url, self.gateway_configured)

    def resolved_store_dir(self, env: Mapping[str, str] = os.environ) -> Path:
        """The store directory; an unusable ``store_dir`` (or home) gives the default."""
        if self.store_dir and not _path_problem(self.store_dir):
            return Path(self.store_dir).expanduser()
        home = hermes_home(env)
        if "\0" in str(home):
            home = Path.home() / ".hermes"
        return home / "tencentdb-offload"

    def public(self) -> Dict[str, Any]:
        """Every setting, the API key redacted: safe to print or return from status."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["api_key"] = redact(self.api_key)
        out["instance_id"] = self.instance_id if header_safe(self.instance_id) else "(invalid, hidden)"
        if self.gateway_url and not _url_problem(self.gateway_url):
            out["gateway_url"] = BaseURL(self.gateway_url).display
        elif self.gateway_url:
            out["gateway_url"] = "(invalid, hidden)"
        return out


def gateway_text(url: str, configured: bool) -> str:
    """``Gateway at URL`` / ``Gateway at the default URL (not configured)`` / local only."""
    if not url:
        return "no Gateway (local compaction only)"
    if not configured:
        return "Gateway at the default URL %s (not configured)" % url
    return "Gateway at %s" % url


def unconfigured_gateway_notice(settings: Settings) -> str:
    """The line to log once per process when a Gateway answers at a URL nobody configured
    ("" when the URL was configured or there is no Gateway)."""
    if settings.gateway_configured or not settings.gateway_url:
        return ""
    return ("tencentdb-offload: a Gateway answers at the default URL %s, which is not configured: "
            "tool results and compactions now go there under the default key 'local'. If that is "
            "not your TencentDB Agent Memory Gateway, set %sGATEWAY_URL=off (local only) or your "
            "Gateway's URL in $HERMES_HOME/.env" % (settings.gateway_url, PREFIX))


_announced = set()
_announce_lock = threading.Lock()


def announce_unconfigured_gateway(settings: Settings, log: Any) -> bool:
    """Log ``unconfigured_gateway_notice`` the first time it applies in this process (call it
    when the Gateway answers); True when it logged now."""
    text = unconfigured_gateway_notice(settings)
    if not text:
        return False
    with _announce_lock:
        if settings.gateway_url in _announced:
            return False
        _announced.add(settings.gateway_url)
    log.warning("%s", text)
    return True


def redact(secret: str) -> str:
    if not secret:
        return "(empty)"
    return "(set, %d chars)" % len(secret)


# --- parsing -------------------------------------------------------------------------

def _parse_url(raw: str) -> str:
    text = raw.strip()
    if text.lower() in OFF_WORDS:
        return ""
    problem = _url_problem(text)
    if problem:
        raise ValueError(problem)
    return BaseURL(text).display      # credentials dropped (see load_settings)


def _url_problem(text: str) -> str:
    if not text.lower().startswith(("http://", "https://")):      # schemes are case-insensitive
        return "must start with http:// or https:// (or be 'off')"
    try:
        BaseURL(text)
    except ValueError as exc:
        return str(exc)
    return ""


def _header_value(raw: str) -> str:
    text = _non_empty(raw)
    if not header_safe(text):
        raise ValueError("contains characters that cannot be sent in an HTTP header "
                         "(line breaks, control or non-ASCII characters such as smart quotes)")
    return text


def _parse_bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _ranged_float(lo: float, hi: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(raw)
        if not (lo < value < hi):
            raise ValueError("must be above %g and below %g" % (lo, hi))      # both ends excluded
        return value
    return parse


def _ranged_int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ValueError("must be a whole number") from None
        if not (lo <= value <= hi):
            raise ValueError("must be between %d and %d" % (lo, hi))
        return value
    return parse


def _non_empty(raw: str) -> str:
    text = raw.strip()
    if not text:
        raise ValueError("must not be empty")
    return text


def _token_cap(raw: str) -> int:
    value = _ranged_int(0, 100_000_000)(raw)
    if 0 < value < SMALLEST_WINDOW:
        raise ValueError("must be 0 (no cap) or at least %d tokens" % SMALLEST_WINDOW)
    return value


def _path(raw: str) -> str:
    text = raw.strip()
    problem = _path_problem(text)
    if problem:
        raise ValueError(problem)
    return text


def _lcm_history(raw: str) -> str:
    """``auto`` (hermes-lcm's own path), ``off``, or the path of an lcm.db."""
    text = raw.strip()
    if text.lower() == "auto":
        return "auto"
    if text and text.lower() in OFF_WORDS:
        return "off"
    if not text:
        raise ValueError("must be auto, off or the path of hermes-lcm's lcm.db")
    return _path(text)


def _path_problem(text: str) -> str:
    if "\0" in text:
        return "contains a NUL byte"
    try:
        Path(text).expanduser()
        os.fsencode(text)
    except RuntimeError:
        return "names the home of a user that does not exist"
    except (UnicodeError, ValueError):
        return "is not a valid file name on this system"
    return ""


MAX_VALUE_CHARS = 4_096     # no setting needs more; a longer value is refused before use


def setting_text(raw: Any) -> str:
    """A config value as the text a parser reads. Only scalars, and short ones: a list or
    mapping (a YAML anchor bomb expands to billions of items when turned into text) is
    refused by its type, before anything walks it."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, float):      # nan, inf and 1e+30 are short: the parser says what is wrong
        return repr(raw)
    if isinstance(raw, int):        # a billion digits would take long to turn into text
        if abs(raw) >= 10 ** 18:
            raise ValueError("is a number far too large")
        return str(raw)
    if not isinstance(raw, str):
        raise ValueError("must be a single value, not %s" % _kind(raw))
    if len(raw) > MAX_VALUE_CHARS:
        raise ValueError("is %d characters long (at most %d)" % (len(raw), MAX_VALUE_CHARS))
    return raw


def _kind(raw: Any) -> str:
    if isinstance(raw, (list, tuple)):
        return "a list"
    if isinstance(raw, Mapping):
        return "a mapping"
    return "a %s" % type(raw).__name__


def shown_value(suffix: str, raw: Any) -> str:
    """A bad value as it may be printed: secrets never, URLs without credentials, short."""
    if suffix in SECRETS:
        return "(hidden)"
    if not isinstance(raw, (str, int, float)):          # never repr() a structure: see setting_text
        return "(%s)" % _kind(raw)
    if isinstance(raw, str) and len(raw) > 200:
        raw = raw[:200]
    text = re.sub(r"//[^/@]*@", "//***@", repr(raw))
    return text if len(text) <= 80 else text[:77] + "..."


# name (suffix after PREFIX) -> (Settings field, parser)
SPEC: Dict[str, Tuple[str, Callable[[str], Any]]] = {
    "GATEWAY_URL": ("gateway_url", _parse_url),
    "API_KEY": ("api_key", _header_value),
    "INSTANCE_ID": ("instance_id", _header_value),
    "COMPACT_RATIO": ("compact_ratio", _ranged_float(0.0, 1.0)),
    "THRESHOLD": ("threshold", _ranged_float(0.0, 1.0)),
    "TIMEOUT_MS": ("timeout_ms", _ranged_int(100, 600_000)),
    "INGEST_TIMEOUT_MS": ("ingest_timeout_ms", _ranged_int(50, 120_000)),
    "ENABLED": ("enabled", _parse_bool),
    "STORE_DIR": ("store_dir", _path),
    "RETENTION_DAYS": ("retention_days", _ranged_int(0, 36_500)),
    "MAX_SESSIONS": ("max_sessions", _ranged_int(1, 100_000)),
    "BODY_LIMIT": ("body_limit", _ranged_int(10_000, 1_073_741_824)),
    "TRIM_CHARS": ("trim_chars", _ranged_int(200, 1_000_000)),
    "KEEP_FIRST": ("keep_first", _ranged_int(0, 50)),
    "CANVAS": ("canvas", _parse_bool),
    "MAX_CONTEXT_TOKENS": ("max_context_tokens", _token_cap),
    "LCM_HISTORY": ("lcm_history", _lcm_history),
    "LCM_HISTORY_SHARED": ("lcm_history_shared", _parse_bool),
    "CACHE_TTL_S": ("cache_ttl_s", _ranged_int(0, 86_400)),
    "REDACT": ("redact", _parse_bool), "REDACT_ARCHIVE": ("redact_archive", _parse_bool),
}


def in_block(block: Mapping[str, Any], attr: str) -> bool:
    """``attr`` is set in the config.yaml block: ``store_dir:`` left empty (YAML null) is
    not, as an empty STORE_DIR means the default."""
    return (isinstance(block, Mapping) and attr in block
            and not (attr == "store_dir" and block[attr] is None))


def _mapping(block: Any, warnings: List[str]) -> Mapping[str, Any]:
    """The block's settings; a list or a bare value there is said, not silently dropped."""
    if block is not None and not isinstance(block, Mapping):
        warnings.append("the tencentdb_offload: block of config.yaml is %s, not 'name: value' "
                        "lines: none of it is applied" % _kind(block))
    return block if isinstance(block, Mapping) else {}


def load_settings(env: Mapping[str, str] = os.environ,
                  block: Any = None) -> Tuple[Settings, List[str]]:
    """Build Settings from ``env`` (wins) and a config.yaml ``block``. Never raises."""
    defaults = Settings()
    values: Dict[str, Any] = {}
    warnings: List[str] = []
    block = _mapping(block, warnings)
    # TencentDB's own variables (its memory provider's, its minimal engine's) name the same
    # Gateway: used when ours and the config block say nothing
    theirs = {k: f for k, f in gateway_sources(env).items() if f.fallback}
    for suffix, (attr, parse) in SPEC.items():
        var = PREFIX + suffix
        try:
            if var in env:
                raw, source = env[var], var
            elif in_block(block, attr):     # (a block key is the setting's name in lower case)
                raw = block[attr]
                source = "tencentdb_offload.%s" % attr
            elif suffix in theirs:
                raw, source = theirs[suffix].value, theirs[suffix].source
            else:
                continue
            values[attr] = parse(setting_text(raw))
        except Exception as exc:     # any value, any type: a warning, never a failed load
            reason = str(exc) if isinstance(exc, ValueError) else "unreadable value"
            if suffix in GATEWAY_OFF:
                values["gateway_url"] = ""
                instead = "the Gateway is off (local compaction only) until it is fixed"
            else:       # named as one writes it: the store's path, not its "" stand-in
                value = defaults.resolved_store_dir(env) if attr == "store_dir" else getattr(defaults, attr)
                instead = "using the default %s" % (str(value).lower() if isinstance(value, bool) else
                                                    value if isinstance(value, Path) else repr(value))
            warnings.append("%s=%s is invalid (%s); %s" % (source, shown_value(suffix, raw), reason[:200],
                                                         instead))
            continue
        if suffix == "GATEWAY_URL" and values[attr] and BaseURL(str(raw)).has_credentials:
            warnings.append("%s holds credentials (user:password@); they are ignored, never sent or "
                            "shown: put the key in %sAPI_KEY" % (source, PREFIX))
        if suffix == "STORE_DIR" and values[attr] and not Path(values[attr]).expanduser().is_absolute():
            warnings.append("%s=%s is a relative path: the store would land in whatever directory "
                            "Hermes is started from; use an absolute path" % (source, shown_value(suffix, raw)))
    for attr in ("threshold", "compact_ratio"):
        value = values.get(attr, getattr(defaults, attr))
        if int(value * SMALLEST_WINDOW) < 1:
            var = PREFIX + attr.upper()
            warnings.append("%s=%g is so small that a %d-token window would trigger at 0 tokens; "
                            "using the default %g" % (var, value, SMALLEST_WINDOW, getattr(defaults, attr)))
            values.pop(attr, None)              # the default, as if never set
    values["gateway_configured"] = (PREFIX + "GATEWAY_URL" in env or "gateway_url" in block
                                    or "GATEWAY_URL" in theirs)
    values["threshold_explicit"] = "threshold" in values     # read from env or config.yaml
    values["ratio_explicit"] = "compact_ratio" in values
    settings = Settings(**values)
    if settings.compact_ratio >= settings.threshold:
        fixed = round(settings.threshold * 2 / 3, 4)
        warnings.append("%sCOMPACT_RATIO=%g must be below %sTHRESHOLD=%g or every compaction "
                        "would re-trigger; using %g" % (PREFIX, settings.compact_ratio, PREFIX,
                                                        settings.threshold, fixed))
        settings = Settings(**{**values, "compact_ratio": fixed, "ratio_explicit": True})
    return settings, warnings
