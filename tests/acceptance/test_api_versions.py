"""A new API version released ring by ring (DESIGN section 18), on Kubernetes' own control plane
and on kubesim (which calls the same conversion webhook, as the API server does): a DC created at v1alpha1, ring default running the build before v1beta1 (an operator that knows
v1alpha1 only), ring canary the build that introduces it (`run --serve-v1beta1`, serving the
conversion webhook). An OperatorRelease to the canary lists v1beta1 in the DC's CRDs, and the
canary's leader serves it; storage stays at v1alpha1 while ring default's build does not know
v1beta1, so rolling the release back leaves every object readable by that build. Once ring default runs the new build too, storage moves to v1beta1, every stored object
is rewritten there (the migration's own count), and `status.storedVersions` is trimmed. At every
step kubectl and the Python client read the objects at both versions, and write one at each; from
the moment v1beta1 is served until storedVersions is trimmed, a reader never stops reading at both
versions while the webhook's certificate authority is replaced every 40 s or so (a dev build's
`--webhook-rotation-in-minutes`), and no read may fail. A build that cannot read the new storage
version then refuses to lead, and says so.

The decisions are table- and property-tested in crates/express-planner/tests/api_versions.rs."""

import base64
import collections
import json
import os
import subprocess
import threading
import time

import pytest
import yaml

from conftest import KUBECTL_EXPRESS, OPERATOR, eventually, start_operator, start_sim, stop_process, stop_sim, tenant_yaml
from conftest import free_port
from test_release import apply_release, kx, status

TENANTS = ["team-a", "team-b"]
NODE_CRDS = ("backends.express.dev", "frontends.express.dev", "expressclusters.express.dev")


def versions(cluster, crd):
    """(name, served, storage) of each version the CRD lists, and its storedVersions."""
    document = cluster.kubectl_json("get", "crd", crd)
    listed = sorted((v["name"], v["served"], v["storage"]) for v in document["spec"]["versions"])
    return listed, document.get("status", {}).get("storedVersions", [])


def lease(cluster, name):
    return cluster.kubectl_json("get", "lease", name, "-n", "express-system")


def migration(cluster, crd):
    annotations = cluster.kubectl_json("get", "crd", crd)["metadata"].get("annotations", {})
    return json.loads(annotations.get("express.dev/storage-migration", "null"))


def reads_at_both_versions(cluster, expected_backends):
    """Every Backend, read at each version by kubectl and by the Python client."""
    from kubernetes import client, config

    alpha = cluster.kubectl_json("get", "backends.v1alpha1.express.dev", "-A")["items"]
    assert sorted(b["spec"]["clusterConfig"]["clusterName"] for b in alpha) == expected_backends
    custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    beta = custom.list_cluster_custom_object("express.dev", "v1beta1", "backends")["items"]
    assert sorted(b["spec"]["cluster"] for b in beta) == expected_backends
    assert all(b["apiVersion"] == "express.dev/v1beta1" for b in beta)


def writes_at_both_versions(cluster, namespace, suffix):
    """A Frontend written at each version (kubectl at v1beta1, the Python client at v1alpha1),
    each read back at the other."""
    from kubernetes import client, config

    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "express.dev/v1beta1", "kind": "Frontend",
        "metadata": {"name": f"shop-beta-{suffix}", "namespace": namespace},
        "spec": {"cluster": "shop", "up": False, "version": "v1"}}))
    custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    custom.create_namespaced_custom_object("express.dev", "v1alpha1", namespace, "frontends", {
        "apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
        "metadata": {"name": f"shop-alpha-{suffix}"},
        "spec": {"clusterConfig": {"clusterName": "shop"}, "up": False, "expressVersion": "v1"}})
    as_alpha = cluster.kubectl_json("get", "frontends.v1alpha1.express.dev", f"shop-beta-{suffix}", "-n", namespace)
    assert as_alpha["spec"]["clusterConfig"] == {"clusterName": "shop"} and as_alpha["spec"]["expressVersion"] == "v1"
    as_beta = cluster.kubectl_json("get", "frontends.v1beta1.express.dev", f"shop-alpha-{suffix}", "-n", namespace)
    assert as_beta["spec"]["cluster"] == "shop" and as_beta["spec"]["version"] == "v1"


def recorded(cluster, step):
    """The DC's newest release says `step` in `status.apiVersions` (its leader looks every 30 s)."""
    eventually(lambda: status(cluster, "to-canary").get("apiVersions", {}).get("step") == step, timeout=75,
               what=f"the release's status.apiVersions saying {step!r}")


class Conversions(threading.Thread):
    """Reads every Frontend at both versions twice a second (one of the two is converted by the
    webhook at every step) and notes each certificate authority the CRD's `caBundle` holds, until
    stopped: the webhook's authority rotates meanwhile (`--webhook-rotation-in-minutes`)."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster, self.stopped = cluster, threading.Event()
        self.failures, self.authorities, self.most_in_bundle = [], set(), 0
        # Successful reads counted by the bundle the CRD held right after them: reads on both sides
        # of a rotation are what show it had no gap (a count of reads alone depends on the
        # machine's speed, not on the rotation).
        self.reads_by_bundle = collections.Counter()

    def run(self):
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(self.cluster.kubeconfig))
        custom, crds = client.CustomObjectsApi(api), client.ApiextensionsV1Api(api)
        while not self.stopped.wait(0.5):
            succeeded = 0
            for version in ("v1alpha1", "v1beta1"):
                try:
                    custom.list_cluster_custom_object("express.dev", version, "frontends")
                    succeeded += 1
                except Exception as error:  # every failure is the finding, whatever its kind
                    self.failures.append(f"{time.strftime('%H:%M:%S')} {version}: {str(error)[:300]}")
            try:
                bundle = base64.b64decode(crds.read_custom_resource_definition("frontends.express.dev")
                                          .spec.conversion.webhook.client_config.ca_bundle).decode()
            except Exception:
                continue
            certificates = [c for c in bundle.split("-----END CERTIFICATE-----") if "BEGIN" in c]
            self.reads_by_bundle[frozenset(c.strip() for c in certificates)] += succeeded
            self.authorities.update(c.strip() for c in certificates)
            self.most_in_bundle = max(self.most_in_bundle, len(certificates))

    def stop(self):
        self.stopped.set()
        if self.ident is not None:
            self.join(timeout=30)


@pytest.mark.parametrize("substrate", ["kubesim", "real"])
def test_a_version_is_served_at_the_release_stored_after_the_last_ring_migrated_and_trimmed(dedicated_cluster, tmp_path):
    cluster = dedicated_cluster
    cluster.install_crds()
    cluster.kubectl("create", "namespace", "express-system")
    webhook_port = free_port()
    url = f"https://127.0.0.1:{webhook_port}/convert"
    running, lives = {}, [0]
    conversions = Conversions(cluster)

    def start(ring, build):
        lives[0] += 1
        flags = ["--ring", ring]
        if build == "old":
            flags += ["--known-api-versions", "v1alpha1"]
        else:
            # Each ring's pod serves the webhook; the CRDs name the canary's (by URL: no Service
            # routes to a process on loopback).
            port = webhook_port if ring == "canary" else free_port()
            flags += ["--conversion-webhook-addr", f"127.0.0.1:{port}", "--conversion-webhook-name", "127.0.0.1",
                      "--serve-v1beta1", "--conversion-webhook-url", url, "--webhook-rotation-in-minutes"]
        running[ring] = start_operator(
            cluster, tmp_path / f"operator-{ring}-{lives[0]}.log", *flags, pod_name=f"{ring}-{lives[0]}",
            account="express-operator" if ring == "default" else f"express-operator-{ring}")

    try:
        start("default", "old")
        start("canary", "new")
        cluster.kubectl("apply", "-f", "-", input="\n---\n".join(tenant_yaml(ns, frontends=1) for ns in TENANTS))

        def healthy():
            items = cluster.kubectl_json("get", "expressclusters.v1alpha1.express.dev", "-A")["items"]
            return sorted(c["metadata"]["namespace"] for c in items if c.get("status", {}).get("phase") == "Healthy") \
                == TENANTS

        eventually(healthy, timeout=90, what="the tenants healthy on ring default")
        assert versions(cluster, "backends.express.dev") == ([("v1alpha1", True, True)], ["v1alpha1"])

        # The release: the canary's build lists v1beta1, then serves it (the webhook is its own).
        apply_release(cluster, "to-canary", version="0.1.0", waves=[{"percent": 100}])
        eventually(lambda: status(cluster, "to-canary").get("phase") == "Succeeded", timeout=120,
                   what="the release succeeded")
        for crd in NODE_CRDS:
            eventually(lambda crd=crd: versions(cluster, crd)[0] == [("v1alpha1", True, True), ("v1beta1", True, False)],
                       timeout=60, what=f"{crd} serving v1beta1, storing v1alpha1")
        # From here on, reads at both versions never stop, while the webhook's authority is
        # replaced every 40 s or so.
        conversions.start()
        reads_at_both_versions(cluster, ["shop"] * len(TENANTS))
        writes_at_both_versions(cluster, TENANTS[0], "mid")
        shown = kx(cluster, "release", "to-canary").stdout
        assert "API versions: v1beta1: served" in shown, shown
        assert "for people: once v1beta1 is served, kubectl's plain" in shown, shown
        recorded(cluster, "v1beta1: served")
        # Said before it was served, on the release, when its CRDs listed v1beta1.
        listed = [e for e in cluster.kubectl_json("get", "events", "-n", "express-system")["items"]
                  if e.get("reason") == "APIVersionListed"]
        assert listed and "expressVersion is version" in listed[0].get("note", listed[0].get("message", "")), listed
        # The build's own check agrees: its CRDs suit this DC, read with every ring's Lease.
        context = yaml.safe_load(cluster.kubeconfig.read_text())["current-context"]
        checked = subprocess.run([OPERATOR, "crd", "check", "--context", context, "--kubeconfig",
                                  str(cluster.kubeconfig), "--serve-v1beta1", "--webhook-url", url],
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr

        # A rollback mid-way: every tenant goes back to ring default, whose build knows v1alpha1
        # only. Everything is still stored at v1alpha1 (written at either version), so that
        # build reads and drives it all.
        done = kx(cluster, "release", "abort", "to-canary")
        assert done.returncode == 0, done.stderr
        eventually(lambda: status(cluster, "to-canary").get("phase") == "RolledBack", timeout=60,
                   what="the release rolled back")

        def driven_by_default():
            items = cluster.kubectl_json("get", "expressclusters.v1alpha1.express.dev", "-A")["items"]
            mine = [c for c in items if c["metadata"]["namespace"] in TENANTS]
            return len(mine) == len(TENANTS) and all(
                c.get("status", {}).get("phase") == "Healthy"
                and c["status"].get("observedGeneration") == c["metadata"]["generation"]
                and c["status"].get("operator", {}).get("ring") == "default"
                and "released" not in c["status"].get("operator", {}) for c in mine)

        eventually(driven_by_default, timeout=120, what="every tenant driven by the build before v1beta1 again")
        reads_at_both_versions(cluster, ["shop"] * len(TENANTS))
        assert versions(cluster, "backends.express.dev") == \
            ([("v1alpha1", True, True), ("v1beta1", True, False)], ["v1alpha1"]), "a rollback leaves the CRDs"
        # Ring default's build does not know v1beta1: storage stays, whatever the canary's says.
        waited = eventually(lambda: [line for line in (tmp_path / "operator-canary-2.log").read_text().splitlines()
                                     if "an API version step waits" in line and "rings whose build" in line],
                            timeout=60, what="the canary's leader waiting for ring default")
        assert "default" in waited[-1], waited[-1]
        assert versions(cluster, "backends.express.dev")[1] == ["v1alpha1"]

        # Ring default runs the new build too: storage moves, the objects are rewritten, and
        # storedVersions is trimmed.
        stop_process(running.pop("default"))
        start("default", "new")
        for crd in NODE_CRDS:
            eventually(lambda crd=crd: versions(cluster, crd) == ([("v1alpha1", True, False), ("v1beta1", True, True)],
                                                                  ["v1beta1"]),
                       timeout=120, what=f"{crd} stored at v1beta1 and trimmed")
        backends = cluster.kubectl_json("get", "backends.v1alpha1.express.dev", "-A")["items"]
        record = migration(cluster, "backends.express.dev")
        assert record["to"] == "v1beta1" and record["complete"], record
        assert record["rewritten"] == record["total"] == len(backends), record
        frontends = cluster.kubectl_json("get", "frontends.v1alpha1.express.dev", "-A")["items"]
        assert migration(cluster, "frontends.express.dev")["rewritten"] == len(frontends)
        reads_at_both_versions(cluster, ["shop"] * len(TENANTS))
        writes_at_both_versions(cluster, TENANTS[1], "after")
        shown = kx(cluster, "release", "to-canary").stdout
        assert "API versions: v1beta1: trimmed" in shown, shown
        recorded(cluster, "v1beta1: trimmed")
        reasons = {e.get("reason") for e in cluster.kubectl_json("get", "events", "-n", "express-system")["items"]}
        assert {"APIVersionServed", "StorageVersionMoved", "StoredObjectsMigrated", "StoredVersionsTrimmed"} <= reasons, \
            reasons
        # The tenants never noticed, and no conversion failed while the authority rotated.
        assert healthy()
        conversions.stop()
        assert not conversions.failures, conversions.failures[:5]
        # Reads succeeded under at least two of the bundles the rotation wrote (a few each).
        bundles_read_under = [n for n in conversions.reads_by_bundle.values() if n >= 4]
        assert len(bundles_read_under) >= 2 and len(conversions.authorities) >= 2 and conversions.most_in_bundle == 2, \
            (list(conversions.reads_by_bundle.values()), len(conversions.authorities),
             conversions.most_in_bundle)

        # Ring default rolled back to the build before v1beta1: it cannot read what is stored
        # now, so it refuses to lead, and says so on the ring's Lease, in an event and in doctor.
        stop_process(running.pop("default"))
        start("default", "old")
        refused = eventually(lambda: lease(cluster, "express-operator")["metadata"].get("annotations", {})
                             .get("express.dev/cannot-read-api"), timeout=60, what="the refusal on the Lease")
        assert "refuses to lead ring default" in refused and "stored at v1beta1" in refused, refused
        eventually(lambda: [e for e in cluster.kubectl_json("get", "events", "-n", "express-system")["items"]
                            if e.get("reason") == "CannotReadStoredAPI" and e["type"] == "Warning"],
                   timeout=30, what="the CannotReadStoredAPI event")
        holder = lease(cluster, "express-operator")["spec"].get("holderIdentity")
        assert holder != f"default-{lives[0]}", "the build that cannot read took the Lease"
        doctor = kx(cluster, "doctor").stdout
        assert "refuses to lead ring default" in doctor, doctor
    finally:
        conversions.stop()
        for process in running.values():
            stop_process(process)
        for log in sorted(tmp_path.glob("operator-*.log")):
            print(f"--- {log.name}\n{log.read_text()[-5000:]}")


def test_a_fleet_release_lists_and_serves_a_version_dc_by_dc(tmp_path):
    """The build that introduces v1beta1 released through a FleetRelease over two DCs (kubesim
    serves each): dc-a's stage lists and serves v1beta1 in dc-a only; dc-b's CRDs are untouched
    while its stage waits at an approval gate, and serve v1beta1 once it has run. Storage stays
    at v1alpha1 in both, since ring default's build knows v1alpha1 only; both versions read in
    both DCs throughout."""
    from test_fleet import write_kubeconfig
    from test_fleet_release import healthy_on_default
    from test_rings import Operators

    dcs, sims, groups = ["dc-a", "dc-b"], {}, {}
    kubeconfig = tmp_path / "kubeconfig.yaml"

    def fleet(*args, timeout=180):
        result = subprocess.run([KUBECTL_EXPRESS, "fleet-release", *args], capture_output=True, text=True,
                                timeout=timeout, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
        print(f"$ kubectl express fleet-release {' '.join(args)}  (exit {result.returncode})\n"
              f"{result.stdout}{result.stderr}")
        return result

    try:
        for dc in dcs:
            (tmp_path / dc).mkdir()
            sim = sims[dc] = start_sim(tmp_path / dc)
            sim.install_crds()
            sim.kubectl("create", "namespace", "express-system")
            port = free_port()
            new_build = ["--conversion-webhook-addr", f"127.0.0.1:{port}", "--conversion-webhook-name", "127.0.0.1",
                         "--serve-v1beta1", "--conversion-webhook-url", f"https://127.0.0.1:{port}/convert"]
            groups[dc] = Operators(sim, tmp_path / dc, flags={"default": ["--known-api-versions", "v1alpha1"],
                                                              "canary": new_build})
            groups[dc].start("default")
            groups[dc].start("canary")
            sim.kubectl("apply", "-f", "-", input="\n---\n".join(tenant_yaml(ns, frontends=1) for ns in TENANTS))
        write_kubeconfig(kubeconfig, {dc: (sims[dc].url, None) for dc in dcs})
        for dc in dcs:
            eventually(lambda dc=dc: healthy_on_default(sims[dc]), timeout=90, what=f"{dc} healthy on ring default")

        plan = tmp_path / "plan.yaml"
        plan.write_text(json.dumps({
            "apiVersion": "express.dev/v1alpha1", "kind": "FleetRelease",
            "metadata": {"name": "beta", "namespace": "express-system"},
            "spec": {"fromRing": "default", "toRing": "canary",
                     "release": {"waves": [{"percent": 100}], "bakeSeconds": 2, "intervalSeconds": 1,
                                 "failureLimit": 1, "adoptionDeadlineSeconds": 30},
                     "stages": [{"name": "first", "contexts": ["dc-a"]},
                                {"name": "second", "contexts": ["dc-b"], "approval": True}],
                     "soakSeconds": 2, "stageDeadlineSeconds": 300}}))
        gated = fleet("run", "-f", str(plan), "--timeout", "150s")
        assert gated.returncode == 5, "stopped at the gate before dc-b"
        for crd in NODE_CRDS:
            eventually(lambda crd=crd: versions(sims["dc-a"], crd)[0] == [("v1alpha1", True, True), ("v1beta1", True, False)],
                       timeout=60, what=f"dc-a's {crd} serving v1beta1, storing v1alpha1")
            assert versions(sims["dc-b"], crd) == ([("v1alpha1", True, True)], ["v1alpha1"]), f"dc-b's {crd} untouched"
        assert not sims["dc-b"].kubectl_json("get", "operatorreleases", "-n", "express-system")["items"]
        reads_at_both_versions(sims["dc-a"], ["shop"] * len(TENANTS))
        writes_at_both_versions(sims["dc-a"], TENANTS[0], "dc-a")

        assert fleet("approve", "beta").returncode == 0
        assert fleet("run", "beta", "--timeout", "150s").returncode == 0
        for dc in dcs:
            for crd in NODE_CRDS:
                eventually(lambda dc=dc, crd=crd: versions(sims[dc], crd) ==
                           ([("v1alpha1", True, True), ("v1beta1", True, False)], ["v1alpha1"]),
                           timeout=60, what=f"{dc}'s {crd} serving v1beta1, still storing v1alpha1")
            reads_at_both_versions(sims[dc], ["shop"] * len(TENANTS))
        writes_at_both_versions(sims["dc-b"], TENANTS[1], "dc-b")
    finally:
        for group in groups.values():
            group.close()
        for sim in sims.values():
            stop_sim(sim)
        for log in sorted(tmp_path.glob("*/operator-*.log")):
            print(f"--- {log}\n{log.read_text()[-3000:]}")
