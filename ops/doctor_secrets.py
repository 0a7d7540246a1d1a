"""doctor's check of what masks secrets before they leave for the Gateway (issue: a Gateway
runs its own LLM over what it receives, maybe a third party's, and keeps it in its store).

With a Gateway in use and ``REDACT`` on: which redactor masks (Hermes' own, with its
compressor's strict options, or the plugin's patterns outside Hermes). ``REDACT`` off: a
warning, tool output goes as it is. Local-only: nothing leaves, nothing to say but that.
"""

from __future__ import annotations

from typing import Callable, Dict, List

from ..context import redact
from ..settings.config import PREFIX, Settings

NAME, PASS, WARN = "secrets", "pass", "warn"


def secret_checks(settings: Settings, set_command: Callable[[str, str], str]) -> List[Dict[str, str]]:
    at_rest = ("; the local archive masks them too (REDACT_ARCHIVE)" if settings.redact_archive
               else "; the local archive keeps the originals (recall returns what the model saw)")
    if not settings.gateway_enabled:
        return [{"name": NAME, "status": PASS, "message": "nothing is sent: no Gateway" + at_rest,
                 "fix": ""}]
    if not settings.redact:
        return [{"name": NAME, "status": WARN, "fix": set_command("REDACT", "true"),
                 "message": "%sREDACT is off: tool results, call arguments and prompts go to the "
                            "Gateway (and its LLM) with any secret in them unmasked" % PREFIX}]
    return [{"name": NAME, "status": PASS, "fix": "",
             "message": "secrets are masked before they leave for the Gateway, by %s%s"
                        % (redact.source(), at_rest)}]
