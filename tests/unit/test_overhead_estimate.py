"""What every request repeats (system prompt, tool schemas) is estimated from every character.

A sampled estimate of a 50 KB tool list was 7 % off and not even monotone: a request with three
more tools (the memory provider's) was estimated 900 tokens *smaller*, so the plugin compacted
later with the provider than without it (issue 20). The budget of every compaction rests on
this number."""
import json

from tencentdb_offload.context.tokens import estimate_text, overhead_tokens
from tencentdb_offload.hooks import HookHandlers

from helpers import make_engine


def _tool(i):
    """A tool whose description is prose and whose schema is punctuation-dense, in long runs,
    so that where a sample falls decides what it sees."""
    return {"type": "function", "function": {
        "name": "tool_%d" % i,
        "description": ("reads the named resource and returns its contents " * 60),
        "parameters": {"type": "object", "properties": {
            "p%d" % j: {"type": "string", "enum": ["{}", "[]", "<>", "()", "::"]}
            for j in range(40)}}}}


def _request(n):
    return {"messages": [{"role": "system", "content": "You are a careful assistant. " * 200},
                         {"role": "user", "content": "hi"}],
            "tools": [_tool(i) for i in range(n)]}


def test_each_added_tool_adds_what_it_costs(tmp_path):
    rt, _eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    seen = []
    for n in range(8, 24):
        hooks.llm_request(request=_request(n), session_id="s1")
        seen.append(rt.registry.for_session_id("s1").overhead_estimate)
    one = estimate_text(json.dumps([_tool(99)], ensure_ascii=False))
    steps = [b - a for a, b in zip(seen, seen[1:])]
    assert all(0.9 * one <= s <= 1.1 * one for s in steps), (one, steps)


def test_the_overhead_is_the_sum_of_its_parts():
    req = _request(12)
    whole = overhead_tokens(req["messages"], req["tools"])
    system = overhead_tokens(req["messages"][:1])
    tools = overhead_tokens([], req["tools"])
    assert whole == system + tools
    text = json.dumps(req["tools"], ensure_ascii=False, default=str)
    half = len(text) // 2
    parts = estimate_text(text[:half], exact=True) + estimate_text(text[half:], exact=True)
    assert abs(tools - parts) <= 2        # every character counted: additive up to rounding
