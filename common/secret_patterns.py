"""The plugin's own secret patterns: the mask used where Hermes' redactor is not importable.

A small set, written after the kinds Hermes' ``agent.redact`` masks and in its style (a token
under 18 characters becomes ``***``, a longer one keeps its first 6 and last 4 characters), so
a text reads the same whichever redactor masked it: cloud keys (``AKIA…``), the large
providers' API tokens (``sk-…``, ``ghp_…``, ``xox…-``, ``AIza…``, ``hf_…`` …), private-key
blocks (also one cut before its END line), JWTs, passwords in URLs, ``Authorization``
headers, and ``.env``-style lines whose name says secret (``AWS_SECRET_ACCESS_KEY=…``,
``db_password = …``, ``"api_key": "…"``). Every pattern needs a literal prefix or a secret
word, so code, hashes, UUIDs and paths pass unchanged. Masking is idempotent: a masked text
masked again is the same text.
"""

from __future__ import annotations

import re

_PREFIXES = (
    r"sk-[A-Za-z0-9_-](?:\.?[A-Za-z0-9_-]){9,}",    # OpenAI, Anthropic (sk-ant-), DeepSeek …
    r"sk_(?:live|test)_[A-Za-z0-9]{10,}", r"rk_live_[A-Za-z0-9]{10,}",    # Stripe
    r"gh[pousr]_[A-Za-z0-9]{10,}", r"github_pat_[A-Za-z0-9_]{10,}",     # GitHub
    r"glpat-[A-Za-z0-9_-]{10,}",                                       # GitLab
    r"xox[baprs]-[A-Za-z0-9-]{10,}", r"xapp-\d+-[A-Za-z0-9-]{10,}",     # Slack
    r"AIza[A-Za-z0-9_-]{30,}",                                          # Google
    r"AKIA[A-Z0-9]{16}", r"ASIA[A-Z0-9]{16}",                           # AWS key ids
    r"hf_[A-Za-z0-9]{10,}", r"r8_[A-Za-z0-9]{10,}", r"gsk_[A-Za-z0-9]{10,}",
    r"xai-[A-Za-z0-9]{30,}", r"pplx-[A-Za-z0-9]{10,}", r"npm_[A-Za-z0-9]{10,}",
    r"pypi-[A-Za-z0-9_-]{10,}", r"SG\.[A-Za-z0-9_-]{10,}", r"dop_v1_[A-Za-z0-9]{10,}",
)
_PREFIX_RE = re.compile(r"(?<![A-Za-z0-9_-])(?:%s)(?![A-Za-z0-9_-])" % "|".join(_PREFIXES))
_PRIVATE_KEY_RE = re.compile(
    r"-----BEGIN[A-Z ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z ]{0,40} PRIVATE KEY(?: BLOCK)?-----|.*\Z)", re.S)
_JWT_RE = re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]{8,})?")
_URL_USERINFO_RE = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{1,20}://)([^/\s:@'\"]{1,200}):"
                              r"([^/\s@'\"]{1,400})@")
_AUTH_HEADER_RE = re.compile(r"\b(Authorization\s*:\s*(?:Bearer|Basic|Token)\s+)(\S+)", re.I)
_SECRET_WORD = r"(?:API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH)"
_ENV_UPPER_RE = re.compile(r"(?<![A-Za-z0-9_])([A-Z0-9_]{0,50}%s[A-Z0-9_]{0,50})(\s*=\s*)(['\"]?)([^\s'\"]+)\3"
                           % _SECRET_WORD)
_ENV_LOWER_RE = re.compile(     # a namespaced name (``db_password``, ``app.secret``), ``=`` only
    r"(?<![A-Za-z0-9_.-])((?:[a-z0-9]+[_.])+(?:api_?key|key|secret|token|password|passwd|pass|pw|"
    r"credentials?|auth)(?:[_.][a-z0-9]+)*)(\s*=\s*)(['\"]?)([^\s'\"&,;]+)\3", re.I)
_JSON_FIELD_RE = re.compile(
    r"(\"(?:[A-Za-z0-9_.-]*[_.-])?(?:api_?key|apikey|access_?key|secret|secret_?key|token|"
    r"access_?token|refresh_?token|password|passwd|credentials?|auth_?token|private_?key)\"\s*:\s*\")"
    r"([^\"\\]{1,2000})(\")", re.I)
_NOT_A_VALUE = re.compile(r"^(?:\*\*\*|[A-Za-z0-9_-]{0,6}\.\.\.[A-Za-z0-9_-]{0,4}|\$\{?\w+\}?|"
                          r"<[^>]*>|null|none|true|false|os\.(?:getenv|environ).*|process\.env.*)$",
                          re.I)
_STRING_PREFIXES = frozenset(("f", "r", "b", "u", "rb", "br", "fr", "rf"))
_KEYWORD = re.compile(r"BEGIN|eyJ|://|authoriz|key|token|secret|pass|pwd|credential|auth|"
                      r"sk-|sk_|rk_|gh[pousr]_|github_pat|glpat|xox|xapp|AIza|AKIA|ASIA|hf_|r8_|gsk_|"
                      r"xai-|pplx-|npm_|pypi-|SG\.|dop_v1", re.I)


def mask_token(token: str) -> str:
    """Hermes' mask: short tokens wholly, long ones keep 6 + 4 characters."""
    return "***" if len(token) < 18 else "%s...%s" % (token[:6], token[-4:])


def _value(raw: str) -> str:
    """A value's mask, or the value itself when it names no secret (a placeholder, a lookup,
    an already masked one)."""
    return raw if _NOT_A_VALUE.match(raw) else mask_token(raw)


def redact(text: str) -> str:
    """``text`` with every secret of the kinds above masked; unchanged when it holds none."""
    if not text or not _KEYWORD.search(text):
        return text
    text = _PRIVATE_KEY_RE.sub("[REDACTED PRIVATE KEY]", text)
    text = _PREFIX_RE.sub(lambda m: mask_token(m.group(0)), text)
    text = _JWT_RE.sub(lambda m: mask_token(m.group(0)), text)
    text = _URL_USERINFO_RE.sub(lambda m: "%s%s:%s@" % (m.group(1), m.group(2),
                                                        _value(m.group(3))), text)
    text = _AUTH_HEADER_RE.sub(lambda m: m.group(1) + _value(m.group(2)), text)
    text = _JSON_FIELD_RE.sub(lambda m: m.group(1) + _value(m.group(2)) + m.group(3), text)
    text = _ENV_UPPER_RE.sub(_assignment, text)
    return _ENV_LOWER_RE.sub(_assignment, text)


def _assignment(m: "re.Match[str]") -> str:
    name, sep, quote, value = m.group(1), m.group(2), m.group(3), m.group(4)
    after = m.string[m.end():m.end() + 1]
    if name.upper().endswith(("KEYBOARD", "KEYS", "TOKENS", "PASSAGE", "PASSED")) or \
            value.startswith(("***", "[REDACTED")) or not quote and after and (
                after in "([{" or after in "\"'" and value.lower() in _STRING_PREFIXES):
        return m.group(0)       # (code: a call g(…), an index d[…], a string f"…")
    return "%s%s%s%s%s" % (name, sep, quote, _value(value), quote)

