"""A failure of the plugin's own code on a background path reaches ``status`` and the log, once
per distinct error (issue 51 item 15).

A compaction prepared ahead that failed in the plugin was thrown away (``except: continue``) and
the user read "not ready within 0.5 s"; a failed turn-start check (0.22's preflight, which then
stops compacting at turn starts) and a failed read of reused call ids were logged at DEBUG. Each
is now a recent error in ``status`` and one WARNING with its traceback, however often it recurs.
"""

import logging
import threading

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.compaction.ahead import Aim
from tencentdb_offload.context.tokens import TokenMemo
from tencentdb_offload.runtime.process import Runtime
from tencentdb_offload.settings.config import load_settings

from helpers import conversation, env_for, make_engine, wait_for
from test_idle_compaction import TTL, Clock, answered, between_triggers

BUG = "a bug of ours"


class FailingRuntime(Runtime):
    """Its Gateway compaction fails in the plugin's own code, before anything is sent."""

    def gateway_attempt(self, *args, **kwargs):
        raise ValueError(BUG)


def failing_runtime(tmp_path, gw, **settings):
    env = env_for(tmp_path, gateway_url=gw.url, api_key="k1", **settings)
    return FailingRuntime(*load_settings(env), env)


def warnings_with_traceback(caplog, text):
    return [r for r in caplog.records
            if r.levelno >= logging.WARNING and text in r.getMessage() and r.exc_info]


def test_a_prepared_compaction_failing_in_the_plugin_is_said_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    with FakeGateway(api_key="k1") as gw:
        rt = failing_runtime(tmp_path, gw)
        try:
            conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
            for i in range(3):
                eng = plugin.open_session(rt, "conv-%d" % i, 64_000, model="m")
                eng.prune_tool_results_only(list(conv),
                                            current_tokens=int(eng.threshold_tokens * 0.9))
            assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 30)
            said = [e for e in rt.status()["recent_errors"] if BUG in e]
            assert len(said) == 1, rt.status()["recent_errors"]
            assert len(warnings_with_traceback(caplog, BUG)) == 1
            got = rt.ahead.take(eng.current_state(), list(conv), 0.0)
            assert got is not None and BUG in got.error      # why, not "not ready"
        finally:
            rt.close()


def test_an_idle_compaction_says_why_its_prepared_result_failed(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        rt = failing_runtime(tmp_path, gw, CACHE_TTL_S=str(TTL))
        clock = Clock()
        rt.now, rt.monotonic = (lambda: clock.wall), (lambda: clock.mono)
        try:
            eng = plugin.open_session(rt, "s1", 64_000, model="m")
            conv = between_triggers(eng)
            answered(eng, conv)
            clock.pause(TTL + 1)                    # prepared during the pause: it failed
            rt.ahead.start(eng.current_state(), list(conv), Aim.of(eng.compaction_target(), eng.context_length),
                           0, TokenMemo())
            assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 30)
            eng.compress(list(conv), current_tokens=eng.estimate_real(conv))
            record = eng.current_state().last_compaction
            assert record.reason == "idle" and BUG in record.error, record
        finally:
            rt.close()


def test_a_failing_turn_start_check_is_said_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    rt, eng = make_engine(tmp_path)
    try:
        def broken(_messages):
            raise RuntimeError(BUG)
        eng.estimate_real = broken
        conv = conversation(3, 100)
        assert not any(eng.should_compress_preflight(conv) for _ in range(5))
        assert len([e for e in rt.errors if BUG in e]) == 1
        assert len(warnings_with_traceback(caplog, BUG)) == 1
    finally:
        rt.close()


def test_a_failing_read_of_reused_ids_is_said_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    rt, eng = make_engine(tmp_path)
    try:
        def broken(*_args):
            raise RuntimeError(BUG)
        rt.store.reused_ids = broken
        conv = [{"role": "system", "content": "sys"}] + conversation(30, 3000)
        for _ in range(2):
            out = eng.compress(list(conv), current_tokens=60_000)
            assert out != conv
        assert len([e for e in rt.errors if BUG in e]) == 1
        assert len(warnings_with_traceback(caplog, BUG)) == 1
    finally:
        rt.close()


def test_a_booking_after_a_pause_that_fails_is_said(tmp_path):
    rt, _eng = make_engine(tmp_path)
    try:
        done = threading.Event()

        def broken():
            done.set()
            raise RuntimeError(BUG)
        rt.ahead.after_pause.book("s1", 0.0, (), broken)
        assert done.wait(30)
        assert wait_for(lambda: any(BUG in e for e in rt.errors), 30), list(rt.errors)
    finally:
        rt.close()
