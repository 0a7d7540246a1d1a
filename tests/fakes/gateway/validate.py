"""Request validation with the Gateway's zod-like issue lists (400 answers)."""

from __future__ import annotations

from typing import Any

from .common import _SESSION_ID_RE


# ─── Request validation (zod-like issues) ───────────────────────────────────────

_MISSING = object()


def _type_name(v: Any) -> str:
    if v is _MISSING:
        return "undefined"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_integral(v: Any) -> bool:
    # zod .int() runs on JS numbers, so 100.0 is an integer there, 1.5 is not.
    return _is_number(v) and (isinstance(v, int) or float(v).is_integer())


def _bad_type(issues: list, path: list, expected: str, value: Any) -> None:
    received = _type_name(value)
    msg = "Required" if received == "undefined" else f"Expected {expected}, received {received}"
    issues.append({"code": "invalid_type", "expected": expected, "received": received,
                   "path": path, "message": msg})


def _check_session_id(body: dict, issues: list) -> None:
    v = body.get("session_id", _MISSING)
    if not isinstance(v, str):
        _bad_type(issues, ["session_id"], "string", v)
        return
    if len(v) < 1:
        issues.append({"code": "too_small", "minimum": 1, "type": "string", "inclusive": True,
                       "exact": False, "path": ["session_id"],
                       "message": "String must contain at least 1 character(s)"})
    if len(v) > 500:
        issues.append({"code": "too_big", "maximum": 500, "type": "string", "inclusive": True,
                       "exact": False, "path": ["session_id"],
                       "message": "sessionId must not exceed 500 characters"})
    if not _SESSION_ID_RE.fullmatch(v):
        issues.append({"code": "invalid_string", "validation": "regex", "path": ["session_id"],
                       "message": "Must only contain alphanumeric, underscore, hyphen, dot, or colon characters"})


def _check_number(issues: list, path: list, v: Any, *, integer: bool = False,
                  lo: float | None = None, hi: float | None = None) -> None:
    if not _is_number(v):
        _bad_type(issues, path, "number", v)
        return
    if integer and not _is_integral(v):
        issues.append({"code": "invalid_type", "expected": "integer", "received": "float",
                       "path": path, "message": "Expected integer, received float"})
    if lo is not None and v < lo:
        issues.append({"code": "too_small", "minimum": lo, "type": "number", "inclusive": True,
                       "exact": False, "path": path,
                       "message": f"Number must be greater than or equal to {lo}"})
    if hi is not None and v > hi:
        issues.append({"code": "too_big", "maximum": hi, "type": "number", "inclusive": True,
                       "exact": False, "path": path,
                       "message": f"Number must be less than or equal to {hi}"})


def validate_ingest(body: Any) -> list:
    if not isinstance(body, dict):
        issues: list = []
        _bad_type(issues, [], "object", body)
        return issues
    issues = []
    _check_session_id(body, issues)
    pairs = body.get("tool_pairs", _MISSING)
    if pairs is not _MISSING and not isinstance(pairs, list):
        _bad_type(issues, ["tool_pairs"], "array", pairs)
    for i, p in enumerate(pairs if isinstance(pairs, list) else []):
        base = ["tool_pairs", i]
        if not isinstance(p, dict):
            _bad_type(issues, base, "object", p)
            continue
        for key in ("tool_name", "tool_call_id", "timestamp"):
            if not isinstance(p.get(key, _MISSING), str):
                _bad_type(issues, base + [key], "string", p.get(key, _MISSING))
        for key in ("params", "result"):  # z.unknown(), but the key must be present (observed)
            if key not in p:
                _bad_type(issues, base + [key], "unknown", _MISSING)
        if "error" in p and not isinstance(p["error"], str):
            _bad_type(issues, base + ["error"], "string", p["error"])
        if "duration_ms" in p and not _is_number(p["duration_ms"]):
            _bad_type(issues, base + ["duration_ms"], "number", p["duration_ms"])
    prompt = body.get("prompt", _MISSING)
    if prompt is not _MISSING:
        if not isinstance(prompt, str):
            _bad_type(issues, ["prompt"], "string", prompt)
        elif not prompt.strip():
            issues.append({"code": "too_small", "minimum": 1, "type": "string", "inclusive": True,
                           "exact": False, "path": ["prompt"],
                           "message": "prompt must not be empty or whitespace-only"})
    for i, r in enumerate(_optional_array(issues, body, "recent_messages")):
        base = ["recent_messages", i]
        if not isinstance(r, dict):
            _bad_type(issues, base, "object", r)
            continue
        if r.get("role") not in ("user", "assistant"):
            issues.append({"code": "invalid_enum_value", "options": ["user", "assistant"],
                           "received": r.get("role"), "path": base + ["role"],
                           "message": "Invalid enum value. Expected 'user' | 'assistant'"})
        if not isinstance(r.get("content", _MISSING), str):
            _bad_type(issues, base + ["content"], "string", r.get("content", _MISSING))
    if not issues:
        has_pairs = isinstance(pairs, list) and len(pairs) > 0
        has_prompt = isinstance(prompt, str) and bool(prompt.strip())
        if not (has_pairs or has_prompt):
            issues.append({"code": "custom", "path": [],
                           "message": "Either tool_pairs must be non-empty or prompt must be provided"})
    return issues


def validate_compact(body: Any) -> list:
    issues: list = []
    if not isinstance(body, dict):
        _bad_type(issues, [], "object", body)
        return issues
    _check_session_id(body, issues)
    msgs = body.get("messages", _MISSING)
    if not isinstance(msgs, list):
        _bad_type(issues, ["messages"], "array", msgs)
    else:
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                _bad_type(issues, ["messages", i], "object", m)
            elif not (isinstance(m.get("role"), str) and m["role"]):
                issues.append({"code": "custom", "path": ["messages", i],
                               "message": "Each message must have a non-empty 'role' field"})
    _check_number(issues, ["ratio"], body.get("ratio", _MISSING), lo=0, hi=2)
    _check_number(issues, ["context_window"], body.get("context_window", _MISSING), integer=True, lo=1)
    _check_number(issues, ["total_tokens"], body.get("total_tokens", _MISSING), integer=True, lo=0)
    for i, v in enumerate(_optional_array(issues, body, "message_tokens")):
        if not _is_number(v):
            _bad_type(issues, ["message_tokens", i], "number", v)
    return issues


def _optional_array(issues: list, body: dict, key: str) -> list:
    """The items of an optional array field ([] when absent; a non-array is an issue)."""
    value = body.get(key, _MISSING)
    if value is _MISSING:
        return []
    if not isinstance(value, list):
        _bad_type(issues, [key], "array", value)
        return []
    return value


def validate_query_mmd(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    issues: list = []
    _check_session_id(body, issues)
    limit = body.get("limit", _MISSING)
    if limit is not _MISSING:
        _check_number(issues, ["limit"], limit, integer=True, lo=1)
    return not issues
