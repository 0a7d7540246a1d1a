"""Only the Gateway's own refusal makes an outbox row dead (issue 27 item 1).

A proxy's HTML 404 while the Gateway restarts is an outage: rows wait, the breaker opens,
and everything is delivered once the Gateway is back. Rows the Gateway really refuses are
counted with their reason in the runtime's status and in doctor, and ``outbox requeue``
puts them back in line.
"""

from pathlib import Path

import tencentdb_offload as plugin
from fakes.gateway import INGEST, FakeGateway
from tencentdb_offload.hooks import HookHandlers

import helpers
from helpers import env_for, wait_for


def record(rt, session, n):
    hooks = HookHandlers(rt)
    for i in range(n):
        hooks.post_tool_call(tool_name="cat", args={"i": i}, result="line %d of the file" % i,
                             session_id=session, tool_call_id="%s-c%d" % (session, i))
    assert rt.writer.flush(10)


def test_a_proxy_404_during_a_restart_loses_nothing(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.set_fault("proxy_404", paths=(INGEST,))
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            record(rt, "s1", 10)
            rt.worker.wake()
            assert wait_for(lambda: any(r.status == 404 for r in gw.requests), 10)
            assert wait_for(lambda: not rt.client.available, 5)   # an outage, not "heard"
            assert rt.store.stats().outbox_dead == 0
            gw.clear_fault()            # the Gateway is back: the worker's probe finds it
            assert wait_for(lambda: rt.store.outbox.backlog("s1") == 0, 20)
            assert len(gw.ingested_pairs("hermes-s1")) == 10
            assert rt.store.stats().outbox_dead == 0
        finally:
            rt.close()


def run_cli(home, *args):
    return helpers.run_cli(args, env={"HERMES_HOME": str(home), "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"},
                           cwd=home.parent)


def test_rows_the_gateway_refuses_are_reported_and_can_be_requeued(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        # a wrong path prefix: the Gateway itself answers "Not found" (its JSON), for good
        wrong = env_for(tmp_path, gateway_url=gw.url + "/wrong-prefix", api_key="k1")
        rt = plugin.build_runtime(env=wrong)
        try:
            record(rt, "s1", 3)
            rt.worker.wake()
            assert wait_for(lambda: rt.store.stats().outbox_dead == 3, 10)
            refused = rt.status()["outbox_refused"]
            assert refused["rows"] == 3
            assert "404" in refused["reasons"][0]["reason"] and refused["reasons"][0]["rows"] == 3
            assert "outbox requeue" in refused["requeue"]
        finally:
            rt.close()
        home = Path(wrong["HERMES_HOME"])
        doctor = run_cli(home, "doctor")
        line = next(x for x in doctor.stdout.splitlines() if "refused for good" in x)
        assert "404" in line, doctor.stdout
        assert "outbox requeue" in doctor.stdout
        listed = run_cli(home, "outbox", "refused")
        assert listed.returncode == 0 and "3 rows" in listed.stdout, listed.stderr
        again = run_cli(home, "outbox", "requeue")
        assert again.returncode == 0 and "3 refused rows" in again.stdout, again.stderr
        # the setting fixed: the re-queued rows are delivered
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            assert rt.flush("s1", 20)
            assert len(gw.ingested_pairs("hermes-s1")) == 3
            assert rt.store.stats().outbox_dead == 0
        finally:
            rt.close()


def test_the_gateways_own_404_for_a_route_it_served_before_loses_nothing(tmp_path):
    # while a restarting Gateway has not mounted its routes yet, it answers its own JSON 404
    with FakeGateway(api_key="k1") as gw:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            record(rt, "s1", 1)
            assert rt.flush("s1", 10)               # the route has answered once
            gw.set_fault("route_404", paths=(INGEST,))
            before = len(gw.requests)
            HookHandlers(rt).post_tool_call(tool_name="cat", args={}, result="during the restart",
                                            session_id="s1", tool_call_id="late")
            assert rt.writer.flush(10)
            rt.worker.wake()
            assert wait_for(lambda: any(r.status == 404 for r in gw.requests[before:]), 10)
            assert rt.store.stats().outbox_dead == 0
            gw.clear_fault()
            assert wait_for(lambda: rt.store.outbox.backlog("s1") == 0, 20)
            assert len(gw.ingested_pairs("hermes-s1")) == 2
        finally:
            rt.close()
