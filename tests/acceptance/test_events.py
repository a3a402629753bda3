"""Events the real operator publishes (through events.k8s.io/v1, with kube's Recorder) are what
`kubectl get events` and `kubectl describe` show: kubesim stores events once and serves both
APIs, as the API server does."""

import re

from conftest import ROOT, eventually
from test_settle import operator  # noqa: F401 (fixture)

NAMESPACE = "tenant-acme"


def test_kubectl_shows_the_operators_events(sim, operator):  # noqa: F811
    sim.kubectl("apply", "-f", str(ROOT / "examples" / "acme"))

    def provisioning_events():
        out = sim.kubectl("get", "events", "-n", NAMESPACE).stdout
        return out if "Provisioning" in out and "acme-fe2" in out else None

    table = eventually(provisioning_events, timeout=30, what="Provisioning events in kubectl get events")
    assert re.search(r"Normal\s+Provisioning\s+.*acme-fe2", table), table

    listed = sim.kubectl_json("get", "events", "-n", NAMESPACE,
                              "--field-selector", "involvedObject.name=acme-fe2,involvedObject.kind=Frontend")
    assert listed["items"], listed
    for event in listed["items"]:
        assert event["apiVersion"] == "v1" and event["involvedObject"]["name"] == "acme-fe2"
        assert event["source"]["component"] == "express-operator"
        assert event["count"] >= 1 and event["lastTimestamp"]

    # The same objects through the newer API.
    newer = sim.kubectl_json("get", "events.v1.events.k8s.io", "-n", NAMESPACE,
                             "--field-selector", "regarding.name=acme-fe2")
    assert sorted(e["metadata"]["name"] for e in newer["items"]) == sorted(
        e["metadata"]["name"] for e in listed["items"])
    assert all(e["note"] and e["reportingController"] == "express-operator" for e in newer["items"])

    described = sim.kubectl("describe", "frontend", "acme-fe2", "-n", NAMESPACE).stdout
    events_section = described.split("Events:", 1)[1]
    assert "<none>" not in events_section, described
    assert re.search(r"Normal\s+Provisioning\s+\S+\s+express-operator\s+created pod acme-fe2", events_section), events_section
