"""The API travels with the build (DESIGN section 15), through real processes: `kubesim serve`,
two `express-operator run --leader-elect` rings (default and canary), CRDs and tenants applied
with kubectl 1.37, OperatorReleases applied with kubectl. The DC's CRDs are an older or looser
edit of this build's; what is asserted is what the API shows: the CRDs, the release's status and
conditions, the rings' Leases, events, and the plugin's doctor.

The decision itself (apply, leave, refuse) is table-tested in crates/crd-compat; the release's
gate in crates/express-planner/tests/release.rs."""

import json

import pytest
import yaml

from conftest import ROOT, eventually, tenant_yaml
from test_release import RELEASED_BY, apply_release, kx, release_events, status
from test_rings import RING_LABEL, Operators

TENANTS = ["team-a", "team-b", "team-c"]
NODE_CRDS = ("frontends.express.dev", "backends.express.dev")
API_BEHIND = "express.dev/api-behind"


def crd_documents(edit):
    """This build's CRDs (deploy/crds), each passed through `edit(name, document)`."""
    documents = []
    for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        edit(document["metadata"]["name"], document)
        documents.append(document)
    return documents


def schema(document):
    return document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def without_recovery(name, document):
    """The node CRDs of a build before `status.change.recovery` existed."""
    if name in NODE_CRDS:
        del schema(document)["properties"]["status"]["properties"]["change"]["properties"]["recovery"]


def unbounded_cluster_name(name, document):
    """An ExpressCluster CRD without this build's bound on `spec.clusterName`."""
    if name == "expressclusters.express.dev":
        del schema(document)["properties"]["spec"]["properties"]["clusterName"]["maxLength"]


def crd(sim, name):
    return sim.kubectl_json("get", "crd", name)


def has_recovery(document):
    change = schema(document)["properties"]["status"]["properties"]["change"]
    return "recovery" in change["properties"]


def lease_annotations(sim, ring):
    name = "express-operator" if ring == "default" else f"express-operator-{ring}"
    return sim.kubectl_json("get", "lease", name, "-n", "express-system")["metadata"].get("annotations", {})


def condition(sim, release, type_):
    for c in status(sim, release).get("conditions", []):
        if c["type"] == type_:
            return c
    return None


def moved(sim):
    items = sim.kubectl_json("get", "expressclusters", "-A")["items"]
    return [c["metadata"]["namespace"] for c in items if RELEASED_BY in c["metadata"].get("annotations", {})]


@pytest.fixture
def dc(dedicated_cluster, tmp_path):
    """A DC whose CRDs are `edit`ed, both rings running, three tenants healthy on default."""
    sim = dedicated_cluster
    operators = Operators(sim, tmp_path)

    def start(edit, extra=""):
        sim.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in crd_documents(edit)))
        for name in ("expressclusters", "backends", "frontends", "operatorreleases"):
            sim.kubectl("wait", "--for=condition=Established", f"crd/{name}.express.dev", "--timeout=10s")
        sim.kubectl("create", "namespace", "express-system")
        operators.start("default")
        operators.start("canary")
        documents = [tenant_yaml(ns) for ns in TENANTS]
        sim.kubectl("apply", "-f", "-", input="\n---\n".join(documents) + extra)

        def healthy():
            items = sim.kubectl_json("get", "expressclusters", "-A")["items"]
            mine = [c for c in items if c["metadata"]["namespace"] in TENANTS]
            return len(mine) == len(TENANTS) and all(c.get("status", {}).get("phase") == "Healthy" for c in mine)

        eventually(healthy, timeout=60, what="every tenant healthy on ring default")
        return sim

    yield start
    operators.close()
    for log in sorted(tmp_path.glob("operator-*.log")):
        print(f"--- {log.name}\n{log.read_text()[-5000:]}")


@pytest.mark.parametrize("substrate", ["kubesim", "real"])
def test_a_release_applies_its_builds_crds_before_its_first_move_and_succeeds(dc):
    sim = dc(without_recovery)
    before = {name: crd(sim, name)["metadata"]["generation"] for name in NODE_CRDS}
    assert set(before.values()) == {1}, f"a CRD created is at generation 1, as the API server has it: {before}"
    assert not has_recovery(crd(sim, "frontends.express.dev"))

    # Each ring's build runs on an API behind it, and says so: its Lease, an event, doctor.
    for ring in ("default", "canary"):
        eventually(lambda: "status.change.recovery" in lease_annotations(sim, ring).get(API_BEHIND, ""),
                   timeout=20, what=f"ring {ring}'s Lease names the missing field")
    behind = [e for e in sim.kubectl_json("get", "events", "-n", "express-system")["items"]
              if e.get("reason") == "APIBehind"]
    assert behind and all(e["type"] == "Warning" for e in behind), behind
    doctor = kx(sim, "doctor").stdout
    assert "runs on CRDs that lack fields it writes" in doctor, doctor

    apply_release(sim, "to-canary", version="0.1.0", waves=[{"percent": 100}])
    eventually(lambda: status(sim, "to-canary").get("phase") == "Succeeded", timeout=90,
               what="the release succeeded")
    released = status(sim, "to-canary")
    api = released["api"]
    print(f"status.api: {json.dumps(api, indent=2)}")
    assert api["outcome"] == "Applied" and api["build"] == "0.1.0", api
    assert api["objectsChecked"] >= len(TENANTS) * 3, api
    generations = {c["name"]: c for c in api["crds"]}
    for name in NODE_CRDS:
        assert generations[name]["before"] == before[name], generations
        assert generations[name]["after"] > before[name], generations
        assert has_recovery(crd(sim, name)), name
        assert crd(sim, name)["metadata"]["annotations"]["express.dev/applied-by-build"] == "0.1.0"
    # Before the first move: the check's time is no later than the first wave's start.
    assert api["checkedAt"] <= released["waves"][0]["startedAt"], released
    compatible = condition(sim, "to-canary", "APICompatible")
    assert (compatible["status"], compatible["reason"]) == ("True", "Applied"), compatible
    eventually(lambda: release_events(sim, "CRDsApplied"), timeout=15, what="the apply, an event on the release")
    shown = kx(sim, "release", "to-canary").stdout
    assert "API: Applied: build 0.1.0 applied its CRDs (" in shown, shown
    assert "backends.express.dev generation 1→2" in shown and "frontends.express.dev generation 1→2" in shown, shown
    assert sorted(moved(sim)) == TENANTS
    # The build that applied them no longer runs on an API behind it.
    eventually(lambda: API_BEHIND not in lease_annotations(sim, "canary"), timeout=20,
               what="ring canary caught up")


def test_a_build_whose_crds_would_break_a_stored_object_moves_nothing_and_says_why(dc):
    # An ExpressCluster the looser installed schema let in, parked on a ring nobody runs.
    stray = "\n---\n".join(json.dumps(d) for d in [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-long"}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
         "metadata": {"name": "shop", "namespace": "team-long", "labels": {RING_LABEL: "parked"}},
         "spec": {"clusterName": "x" * 70}},
    ])
    sim = dc(unbounded_cluster_name, extra="\n---\n" + stray)
    before = crd(sim, "expressclusters.express.dev")
    generation = before["metadata"]["generation"]

    apply_release(sim, "to-canary", version="0.1.0", waves=[{"percent": 100}])
    eventually(lambda: (condition(sim, "to-canary", "APICompatible") or {}).get("status") == "False",
               timeout=30, what="the release refused by the API")
    refused = condition(sim, "to-canary", "APICompatible")
    assert refused["reason"] == "Breaking", refused
    assert "team-long/shop" in refused["message"] and ".spec.clusterName" in refused["message"], refused
    assert status(sim, "to-canary")["phase"] == "Pending"
    assert status(sim, "to-canary")["message"].startswith("nothing moves: "), status(sim, "to-canary")
    # The event follows the status write that made the condition: wait for it too.
    warnings = eventually(lambda: release_events(sim, "APIBreaking"), timeout=15, what="the APIBreaking event")
    assert warnings[0]["type"] == "Warning", warnings
    doctor = kx(sim, "doctor").stdout
    assert "refused by the API" in doctor and "team-long/shop" in doctor, doctor
    # Nothing else in the DC changed: no tenant moved, the CRD as it was.
    assert moved(sim) == []
    after = crd(sim, "expressclusters.express.dev")
    assert after["metadata"]["generation"] == generation
    assert "maxLength" not in schema(after)["properties"]["spec"]["properties"]["clusterName"]

    # The stored object gone, the build checks again, applies, and the release goes on.
    sim.kubectl("delete", "expresscluster", "shop", "-n", "team-long")
    eventually(lambda: status(sim, "to-canary").get("phase") == "Succeeded", timeout=90,
               what="the release succeeded once nothing stored breaks")
    assert status(sim, "to-canary")["api"]["outcome"] == "Applied"
    assert "maxLength" in schema(crd(sim, "expressclusters.express.dev"))["properties"]["spec"]["properties"]["clusterName"]
