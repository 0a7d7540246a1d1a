"""Message helpers ported from the Gateway: roles, blocks, tool ids, text, summaries."""

from __future__ import annotations

from typing import Any

from .common import _REF_LINE, _js_json


# ─── Message model (ports of the Gateway's helpers; OpenAI, Anthropic, pi-ai) ───

def _role(m: dict) -> Any:
    r = m.get("role")
    if r is None and isinstance(m.get("message"), dict):
        r = m["message"].get("role")
    return r if r is not None else m.get("type")


def _blocks(m: dict) -> Any:
    """``msg.type === "message" ? msg.message.content : msg.content``."""
    if m.get("type") == "message" and isinstance(m.get("message"), dict):
        return m["message"].get("content")
    return m.get("content")


def _is_mmd(m: dict) -> bool:
    return bool(m.get("_mmdContextMessage")) or bool(m.get("_mmdInjection"))


def _tool_result_id(m: dict) -> str | None:
    if m.get("tool_call_id"):
        return m["tool_call_id"]
    if m.get("tool_use_id"):
        return m["tool_use_id"]
    if m.get("type") == "message" and isinstance(m.get("message"), dict) and m["message"].get("id"):
        return m["message"]["id"]
    if m.get("role") == "user" and isinstance(m.get("content"), list):
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id"):
                return b["tool_use_id"]
    return None


def _is_tool_result(m: dict) -> bool:
    if m.get("role") == "tool" or m.get("type") == "tool_result":
        return True
    inner = m["message"].get("role") if isinstance(m.get("message"), dict) else None
    if (inner if inner is not None else m.get("type")) in ("toolResult", "tool_result"):
        return True
    if m.get("role") == "user" and isinstance(m.get("content"), list):
        return any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
    return False


def _is_tool_use_block(b: Any) -> bool:
    return isinstance(b, dict) and b.get("type") in ("tool_use", "toolCall")


def _is_assistant_with_tool_use(m: dict) -> bool:
    if _role_no_type(m) != "assistant":
        return False
    if isinstance(m.get("tool_calls"), list) and m["tool_calls"]:
        return True
    content = _blocks(m)
    return isinstance(content, list) and any(_is_tool_use_block(b) for b in content)


def _is_only_tool_use_assistant(m: dict) -> bool:
    # OpenAI assistants (string content + tool_calls) never qualify: the real fast-path gap.
    if _role_no_type(m) != "assistant":
        return False
    content = _blocks(m)
    return isinstance(content, list) and bool(content) and all(_is_tool_use_block(b) for b in content)


def _role_no_type(m: dict) -> Any:
    r = m.get("role")
    if r is None and isinstance(m.get("message"), dict):
        r = m["message"].get("role")
    return r


def _tool_use_ids(m: dict) -> list[str]:
    ids = []
    if isinstance(m.get("tool_calls"), list):
        ids += [tc["id"] for tc in m["tool_calls"] if isinstance(tc, dict) and tc.get("id")]
    content = _blocks(m)
    if isinstance(content, list):
        ids += [b["id"] for b in content if _is_tool_use_block(b) and b.get("id")]
    return ids


def _strip_tool_use_blocks(m: dict, ids: set) -> None:
    """Remove content-block tool calls with these ids (never OpenAI ``tool_calls``: real gap)."""
    content = _blocks(m)
    if isinstance(content, list):
        content[:] = [b for b in content if not (_is_tool_use_block(b) and b.get("id") in ids)]


def _text_content(m: dict) -> str:
    c = m.get("content")
    if c is None and isinstance(m.get("message"), dict):
        c = m["message"].get("content")
    if c is None:
        c = ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        out = []
        for b in c:
            if isinstance(b, str):
                out.append(b)
            elif isinstance(b, dict) and b.get("type") == "text":
                out.append(b.get("text") or "")
            elif isinstance(b, dict) and b.get("type") == "tool_result":
                v = b.get("content")
                out.append(v if isinstance(v, str) else _js_json(v if v is not None else ""))
            elif isinstance(b, dict) and b.get("type") == "tool_use":
                inp = b.get("input")
                inp = inp if isinstance(inp, str) else _js_json(inp if inp is not None else {})
                out.append(f"{b.get('name') or ''}:{inp}")
            elif isinstance(b, dict) and b.get("text") is not None:
                out.append(str(b["text"]))
            else:
                out.append(_js_json(b if b is not None else ""))
        return "".join(out)
    return _js_json(c)


def _set_text_content(m: dict, text: str) -> None:
    if m.get("type") == "message" and isinstance(m.get("message"), dict):
        m["message"]["content"] = text
    elif m.get("role") == "user" and isinstance(m.get("content"), list):
        for b in m["content"]:  # Anthropic: first tool_result block, in place
            if isinstance(b, dict) and b.get("type") == "tool_result":
                b["content"] = text
                return
        m["content"] = text
    else:
        m["content"] = text


def _is_system_reminder(m: dict) -> bool:
    c = _blocks(m) if m.get("content") is None else m.get("content")
    if isinstance(c, str):
        return c.lstrip().startswith("<system-reminder>")
    if isinstance(c, list):
        for b in c:
            if isinstance(b, str) and b.lstrip().startswith("<system-reminder>"):
                return True
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) \
                    and b["text"].lstrip().startswith("<system-reminder>"):
                return True
    return False


def _last_user_index(msgs: list) -> int:
    """Start of the protected tail. Like the real one, any non-MMD role:user counts
    (so an Anthropic tool_result message can be the "last user message")."""
    for i in range(len(msgs) - 1, -1, -1):
        if _role(msgs[i]) == "user" and not _is_mmd(msgs[i]):
            return i
    return -1


def _summary_text(entry: dict) -> str:
    parts = [f"[Offloaded Tool Result | node: {entry.get('node_id') or 'N/A'}]",
             f"Summary: {entry.get('summary')}"]
    if entry.get("result_ref"):
        parts.append(_REF_LINE.format(ref=entry["result_ref"]))
    return "\n".join(parts)


def _replace_with_summary(m: dict, entry: dict) -> None:
    text = _summary_text(entry)
    if m.get("type") == "message" and isinstance(m.get("message"), dict):
        inner = m["message"]
        inner["content"] = [{"type": "text", "text": text}] if isinstance(inner.get("content"), list) else text
    elif m.get("role") == "user" and isinstance(m.get("content"), list):
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                b["content"] = text
                break
    elif isinstance(m.get("content"), list):
        m["content"] = [{"type": "text", "text": text}]
    else:
        m["content"] = text
    m["_offloaded"] = True
