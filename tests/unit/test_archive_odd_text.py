"""Odd text a model or tool produces (lone surrogates in a session id, a tool name, a call id;
arguments nested far deeper than json's recursion limit) never stops a batch being archived:
the hook's result, and the batch a compaction archives in a restarted process. Real store."""

from __future__ import annotations

from tencentdb_offload.context.departures import Departed, Departures
from tencentdb_offload.hooks import HookHandlers

from helpers import count_archived, make_engine

ODD = "chat\udc80one"


def nested(levels: int):
    value = [1]
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_session_id_with_a_lone_surrogate_is_archived(tmp_path):
    rt, eng = make_engine(tmp_path, session=ODD)
    HookHandlers(rt).post_tool_call(tool_name="read_file", args={}, result="r", session_id=ODD,
                                    tool_call_id="c1")
    rt.flush_writes()
    key = rt.registry.for_session_id(ODD).key
    assert count_archived(rt.store, key) == 1 and not rt.writer.last_error


def test_one_odd_departure_does_not_drop_the_batch(tmp_path):
    rt, eng = make_engine(tmp_path)              # a restarted process: no result seen by a hook
    items = [Departed("tool_result", "fine %d" % i, "c%d" % i, "read_file", "tool", {"p": i})
             for i in range(5)]
    items.append(Departed("tool_result", "odd", "call\ud800", "read\udcff_file", "tool",
                          {"deep": nested(5000)}))
    state = eng.current_state()
    rt.archive_departures(state, Departures(items, {d.tool_call_id for d in items}, set(), 6))
    rt.flush_writes()
    assert count_archived(rt.store, state.key) == 6
    assert rt.store.read_page(state.key, "call\ud800") is not None
