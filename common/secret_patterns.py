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

# (literal prefix, the token's pattern from it): each runs only where its literal occurs, and a
# pattern that starts with a literal is found by a fast scan (an alternation is tried at every
# character: 27 ms on 100 KB)
_PREFIXES = (
    ("sk-", r"sk-[A-Za-z0-9_-](?:\.?[A-Za-z0-9_-]){9,}"),   # OpenAI, Anthropic (sk-ant-), DeepSeek …
    ("sk_", r"sk_(?:live|test)_[A-Za-z0-9]{10,}"), ("rk_live_", r"rk_live_[A-Za-z0-9]{10,}"),
    ("gh", r"gh[pousr]_[A-Za-z0-9]{10,}"), ("github_pat_", r"github_pat_[A-Za-z0-9_]{10,}"),
    ("glpat-", r"glpat-[A-Za-z0-9_-]{10,}"),                                  # GitLab
    ("xox", r"xox[baprs]-[A-Za-z0-9-]{10,}"), ("xapp-", r"xapp-\d+-[A-Za-z0-9-]{10,}"),   # Slack
    ("AIza", r"AIza[A-Za-z0-9_-]{30,}"),                                      # Google
    ("AKIA", r"AKIA[A-Z0-9]{16}"), ("ASIA", r"ASIA[A-Z0-9]{16}"),             # AWS key ids
    ("hf_", r"hf_[A-Za-z0-9]{10,}"), ("r8_", r"r8_[A-Za-z0-9]{10,}"), ("gsk_", r"gsk_[A-Za-z0-9]{10,}"),
    ("xai-", r"xai-[A-Za-z0-9]{30,}"), ("pplx-", r"pplx-[A-Za-z0-9]{10,}"), ("npm_", r"npm_[A-Za-z0-9]{10,}"),
    ("pypi-", r"pypi-[A-Za-z0-9_-]{10,}"), ("SG.", r"SG\.[A-Za-z0-9_-]{10,}"),
    ("dop_v1_", r"dop_v1_[A-Za-z0-9]{10,}"),
)
_PREFIX_RES = tuple((lit, re.compile(pat + r"(?![A-Za-z0-9_-])")) for lit, pat in _PREFIXES)
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_-]")
_PRIVATE_KEY_RE = re.compile(
    r"-----BEGIN[A-Z ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z ]{0,40} PRIVATE KEY(?: BLOCK)?-----|.*\Z)", re.S)
_JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]{8,})?")
_URL_USERINFO_RE = re.compile(r"://([^/\s:@'\"]{1,200}):([^/\s@'\"]{1,400})@")
# the passes below run on the lines holding a secret word only (``_secret_lines``)
_WORDS = ("key", "token", "secret", "pass", "pwd", "credential", "auth")
LONG_LINE = 4_000           # a longer line is read in windows around each word
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


_SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:api_?key|apikey|secret|secret_?key|client_?secret|token|access_?token|"
    r"refresh_?token|id_?token|auth_?token|password|passwd|pwd|credentials?|private_?key|"
    r"access_?key)$", re.I)


def secret_name(name: str) -> bool:
    """A field name that says its value is a secret (``password``, ``GITHUB_TOKEN``, ``apiKey``)."""
    return bool(_SECRET_NAME.search(name))


def mask_value(value: str) -> str:
    """A secret-named field's value masked (a placeholder or a lookup stays as it is)."""
    return _value(value)


def mask_token(token: str) -> str:
    """Hermes' mask: short tokens wholly, long ones keep 6 + 4 characters."""
    return "***" if len(token) < 18 else "%s...%s" % (token[:6], token[-4:])


def _value(raw: str) -> str:
    """A value's mask, or the value itself when it names no secret (a placeholder, a lookup,
    an already masked one)."""
    return raw if _NOT_A_VALUE.match(raw) else mask_token(raw)


def redact(text: str) -> str:
    """``text`` with every secret of the kinds above masked; unchanged when it holds none."""
    if not text:
        return text
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY_RE.sub("[REDACTED PRIVATE KEY]", text)
    for literal, pattern in _PREFIX_RES:
        if literal in text:
            text = pattern.sub(lambda m: _token(m, m.group(0)), text)
    if "eyJ" in text:
        text = _JWT_RE.sub(lambda m: _token(m, mask_token(m.group(0))), text)
    if "://" in text:
        text = _URL_USERINFO_RE.sub(lambda m: "://%s:%s@" % (m.group(1), _value(m.group(2))), text)
    return _per_line(text)


def _token(m: "re.Match[str]", masked: str) -> str:
    """A token's mask, unless it continues a longer word (``ask-…``, ``…xAKIA…``)."""
    if m.start() and _TOKEN_CHAR.match(m.string, m.start() - 1):
        return m.group(0)
    return mask_token(m.group(0)) if masked == m.group(0) else masked


def _per_line(text: str) -> str:
    """The assignment passes, on the lines (or windows of a long line) holding a secret word:
    run over the whole of a large text they cost ~80 ms per 100 KB."""
    spans = _secret_spans(text)
    if not spans:
        return text
    out, at = [], 0
    for start, end in spans:
        out += [text[at:start], _assignments(text[start:end])]
        at = end
    out.append(text[at:])
    return "".join(out)


def _secret_spans(text: str):
    low = text.lower()
    found = []
    for word in _WORDS:
        i = low.find(word)
        while i >= 0:
            start, end = text.rfind("\n", 0, i) + 1, text.find("\n", i)
            end = len(text) if end < 0 else end
            if end - start > LONG_LINE:
                start, end = max(start, i - 200), min(end, i + 2_200)
            found.append((start, end))
            i = low.find(word, end)
    found.sort()
    merged = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _assignments(line: str) -> str:
    if "uthorization" in line or "UTHORIZATION" in line:
        line = _AUTH_HEADER_RE.sub(lambda m: m.group(1) + _value(m.group(2)), line)
    if '"' in line and ":" in line:
        line = _JSON_FIELD_RE.sub(lambda m: m.group(1) + _value(m.group(2)) + m.group(3), line)
    if "=" in line:
        line = _ENV_UPPER_RE.sub(_assignment, line)
        line = _ENV_LOWER_RE.sub(_assignment, line)
    return line


def _assignment(m: "re.Match[str]") -> str:
    name, sep, quote, value = m.group(1), m.group(2), m.group(3), m.group(4)
    after = m.string[m.end():m.end() + 1]
    if name.upper().endswith(("KEYBOARD", "KEYS", "TOKENS", "PASSAGE", "PASSED")) or \
            value.startswith(("***", "[REDACTED")) or not quote and after and (
                after in "([{" or after in "\"'" and value.lower() in _STRING_PREFIXES):
        return m.group(0)       # (code: a call g(…), an index d[…], a string f"…")
    return "%s%s%s%s%s" % (name, sep, quote, _value(value), quote)

