"""DESIGN section 3, rule 8, through the paths users take: the tenant chart rendered by the real
Helm engine, applied with kubectl 1.37 (which writes one object at a time), reconciled by the
real `express-operator run` binary against `kubesim serve`. The order is read from a pod watch
of the Python kubernetes client."""

import json
import time

import pytest

from conftest import PodCreations, eventually, start_operator, stop_process
from test_helm import render, tenant_values
from test_kubectl import install

NAMESPACE = "tenant-acme"
NODES = ["be", "fe1", "fe2", "fe3", "fe4"]


@pytest.fixture
def operator(sim, tmp_path):
    install(sim)
    process = start_operator(sim, tmp_path / "operator.log", leader_elect=False)
    yield process
    stop_process(process)


def values(version):
    return tenant_values(frontends=4, version=version, rollout={"settleSeconds": 2})


def all_ready_on(sim, version):
    pods = sim.kubectl_json("get", "pods", "-n", NAMESPACE)["items"]
    ready = [
        p for p in pods
        if p["metadata"].get("annotations", {}).get("express.dev/express-version") == version
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))
        and not p["metadata"].get("deletionTimestamp")
    ]
    return len(ready) == len(NODES)


def documents(rendered):
    return [d for d in rendered.split("\n---\n") if "kind:" in d]


def provision(sim):
    sim.kubectl("apply", "-f", "-", input=render(values("express-e689.154")))
    eventually(lambda: all_ready_on(sim, "express-e689.154"), timeout=60, what="provisioned")


@pytest.mark.parametrize("delivery", ["one-apply", "reverse-documents"])
def test_chart_upgrade_applied_with_kubectl_follows_the_design_order(sim, operator, delivery):
    provision(sim)
    rendered = render(values("express-e689.155"))
    for document in documents(rendered):
        assert "express.dev/rollout-id" in document, document
    created = PodCreations(sim.kubeconfig, NAMESPACE, "acme-")
    try:
        if delivery == "one-apply":
            # One multi-document apply: kubectl writes the objects one by one, in file order.
            sim.kubectl("apply", "-f", "-", input=rendered)
        else:
            # Each object on its own, the nodes in reverse order and the ExpressCluster last,
            # with gaps: the shape of a slow, reordered sync.
            for document in reversed(documents(rendered)):
                sim.kubectl("apply", "-f", "-", input=document)
                time.sleep(0.4)
        eventually(lambda: all_ready_on(sim, "express-e689.155"), timeout=60, what="upgraded")
    finally:
        created.stop()
    assert created.names == ["fe1", "fe2", "be", "fe3", "fe4"]
    cluster = sim.kubectl_json("get", "expresscluster", "acme", "-n", NAMESPACE)
    settled = next(c for c in cluster["status"]["conditions"] if c["type"] == "DesiredStateSettled")
    assert settled["status"] == "True"


def test_a_node_written_alone_with_a_new_rollout_id_holds_the_rollout(sim, operator):
    provision(sim)
    rendered = render(values("express-e689.155"))
    fe3 = next(d for d in documents(rendered) if "name: acme-fe3" in d)
    created = PodCreations(sim.kubeconfig, NAMESPACE, "acme-")
    try:
        sim.kubectl("apply", "-f", "-", input=fe3)

        def waiting():
            status = sim.kubectl_json("get", "expresscluster", "acme", "-n", NAMESPACE).get("status", {})
            return next((c for c in status.get("conditions", [])
                         if c["type"] == "DesiredStateSettled" and c["reason"] == "RolloutIdMismatch"), None)

        condition = eventually(waiting, timeout=20, what="the barrier reported")
        assert "acme-fe3" in condition["message"], condition
        time.sleep(1.5)
        assert created.names == []
        events = sim.kubectl_json("get", "events.v1.events.k8s.io", "-n", NAMESPACE)["items"]
        assert any(e.get("reason") == "Settling" for e in events), json.dumps(events)[:2000]
    finally:
        created.stop()
