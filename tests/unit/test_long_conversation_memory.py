"""A conversation of months (the messaging gateway's): what the process keeps of its tool-call
ids stays bounded, and status still counts every one."""

from tencentdb_offload.common.seen_ids import IDS_KEPT
from tencentdb_offload.context import departures
from tencentdb_offload.hooks import HookHandlers

from helpers import make_engine

CALLS = IDS_KEPT + 2_000


def test_tool_call_ids_kept_are_bounded_and_all_counted(tmp_path):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    for i in range(CALLS):
        hooks.post_tool_call(tool_name="read_file", args={"path": "/f"}, result="out %d" % i,
                             session_id="s1", tool_call_id="call_%d" % i)
    state = eng.current_state()
    assert len(state.result_hashes) <= IDS_KEPT and len(state.processed_ids) <= IDS_KEPT
    assert eng.get_status()["tool_results"]["recorded"] == CALLS
    newest = "call_%d" % (CALLS - 1)
    assert newest in state.processed_ids
    assert not state.claim_result(newest, next(iter(state.result_hashes[newest])))  # still a repeat
    gone = departures.Departures(items=[], left_ids={"old_%d" % i for i in range(CALLS)},
                                 summarised_ids=set(), count=CALLS)
    rt.archive_departures(state, gone)
    assert len(state.deleted_ids) <= IDS_KEPT
    assert eng.get_status()["tool_results"]["removed_from_context"] == CALLS
    rt.close()
