"""Rows the Gateway refuses for good are said in one log line with their count, not one line per
row (issue 51 item 16: 1,500 refused rows wrote 1,500 WARNING lines)."""

import logging

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway

from helpers import env_for, wait_for
from test_refused_rows import record

ROWS = 250          # more than one batch (100 pairs): each batch is then split row by row


def test_many_refused_rows_are_one_warning_with_their_count(tmp_path, caplog):
    # rows recorded while no Gateway answers wait in the outbox for the next process
    down = plugin.build_runtime(env=env_for(tmp_path, gateway_url="http://127.0.0.1:9",
                                            api_key="k1"))
    try:
        record(down, "s1", ROWS)
    finally:
        down.close()
    caplog.set_level(logging.WARNING)
    with FakeGateway(api_key="k1") as gw:
        # a wrong path prefix: the Gateway itself answers "Not found" (its JSON), for good
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url + "/wrong-prefix",
                                              api_key="k1"))
        try:
            rt.worker.wake()
            assert wait_for(lambda: rt.store.stats().outbox_dead == ROWS, 60)
            assert wait_for(lambda: any("refused" in r.getMessage() for r in caplog.records), 10)
        finally:
            rt.close()
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1, lines[:3]
    assert str(ROWS) in lines[0] and "404" in lines[0] and "outbox requeue" in lines[0]
