"""Hermes' own secret redactor, called as its compressor calls it; none outside Hermes.

Hermes' built-in compressor masks everything that crosses its compaction boundary with its
``agent.redact.redact_sensitive_text``, strictly (``force=True``: even with
``security.redact_secrets`` off; ``redact_url_credentials=True``). ``host_redactor`` is that
call, made with every one of those options the installed Hermes accepts. What the plugin masks
with it, and after it, is ``context/redact.py``.
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional, Tuple

STRICT_OPTIONS = ("force", "redact_url_credentials")     # what the built-in's compressor passes


def host_redactor() -> Tuple[Optional[Callable[[str], str]], str]:
    """Hermes' redactor with its compressor's strict options, and a description; (None, why)
    when this process has none that would mask."""
    try:
        from agent import redact as host  # type: ignore
        fn = host.redact_sensitive_text
        params = inspect.signature(fn).parameters
    except Exception:   # noqa: BLE001 - not inside Hermes, or a Hermes without it
        return None, "outside Hermes: its agent.redact is not importable here"
    options = {name: True for name in STRICT_OPTIONS if name in params}
    if "force" not in options and getattr(host, "_REDACT_ENABLED", True) is False:
        # this Hermes cannot be asked to mask while the user turned its redaction off
        return None, "Hermes' redactor is off (security.redact_secrets) and has no force option"
    shown = ", ".join("%s=True" % k for k in options) or "its defaults"
    return (lambda text: fn(text, **options)), "Hermes' agent.redact.redact_sensitive_text (%s)" % shown
