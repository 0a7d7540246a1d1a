"""0.22 may call compress() again on the same engine while a stalled call still runs, and
cancels the stalled one through ``_compression_cancelled_check``: both calls return valid
lists, and only the attempt that was not cancelled publishes anything durable."""

from __future__ import annotations

import threading
import time

from fakes.gateway import FakeGateway
from tencentdb_offload.context import messages

from helpers import conversation, make_engine


def test_two_compress_calls_at_once_one_cancelled(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.latency_s = 1.0                 # every Gateway answer takes a second: a stall
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k1")
        conv = [{"role": "system", "content": "sys"}] + conversation(30, 6000)
        cancel_first = threading.Event()
        results = {}

        def call(name):
            results[name] = eng.compress(list(conv), current_tokens=60_000)

        eng._compression_cancelled_check = cancel_first.is_set     # the host, attempt 1
        first = threading.Thread(target=call, args=("first",))
        first.start()
        time.sleep(0.3)          # attempt 1 is inside compress() (its check captured at entry)
        eng._compression_cancelled_check = lambda: False             # attempt 2 replaces it
        second = threading.Thread(target=call, args=("second",))
        second.start()
        cancel_first.set()                                           # the host gave up on 1
        first.join(30)
        second.join(30)
        assert results["first"] == conv, "a cancelled attempt hands back what it got"
        assert results["second"] != conv and messages.validation_errors(results["second"]) == []
        rt.flush_writes()
        assert len(rt.store.events("compaction")) == 1 and eng.compression_count == 1
        assert eng.get_status()["session_stats"]["compactions"] == 1
        rt.close()
