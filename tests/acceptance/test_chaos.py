"""A control plane failing the way production ones do (DESIGN sections 17 and 19): Kubernetes'
own control plane of the test's own, highly available (two API servers behind a front, each with
a watch cache of its own, compacting etcd every 5 s), two operator replicas with the chart's
RBAC, and fleet-wide upgrades during which, overlapping, the second API server answers 2 s late,
the first is killed and restarted (every client then lands on the late one), every connection is
cut, etcd is killed and restarted, the second API server is killed and restarted, and the leading
replica is killed (another takes its place).

Asserted from the API through a pod recorder that survives the same faults, never from the
operator's logs: every node is replaced once per change and only after its prerequisites were
Ready at the new version; no tenant has more nodes in flight than its `maxConcurrent`; every
tenant converges within a bound after the last fault; no replica exits on its own.

The short form (every suite run) is three tenants, one upgrade, each fault once. The full form is
`scripts/chaos.sh --tenants N --minutes M`: upgrades one after the other while the faults go
round for M minutes. The faults are `scripts/real-cluster.sh restart|cut|lag DIR ...`."""

import itertools
import json
import os
import signal
import threading
import time

import pytest

import real_cluster
from conftest import eventually, start_operator, stop_process, tenant_yaml

TENANTS = int(os.environ.get("EXPRESS_CHAOS_TENANTS", "3"))
# 0: each fault once, during one upgrade.
FAULT_SECONDS = int(os.environ.get("EXPRESS_CHAOS_FAULT_SECONDS", "0"))
# How long the fleet may take to converge after the last fault.
SETTLE_SECONDS = int(os.environ.get("EXPRESS_CHAOS_SETTLE_SECONDS", "240"))

NODES = ["be", "fe1", "fe2", "fe3", "fe4"]
# DESIGN section 3: a full upgrade runs fe1, fe2, be, fe3, fe4, each node after the one before.
DEFAULT_PREREQUISITES = {"fe1": [], "fe2": ["fe1"], "be": ["fe2"], "fe3": ["be"], "fe4": ["fe3"]}
UPGRADE_ORDER = ["fe1", "fe2", "be", "fe3", "fe4"]


def shape(index):
    """Tenants take three shapes in turn: maxConcurrent 1; 2; and 2 with fe3 and fe4 waiting for
    fe1 only (explicit prerequisites), so that two nodes are replaced at once."""
    explicit = {"fe3": ["fe1"], "fe4": ["fe1"]} if index % 3 == 2 else {}
    return {"maxConcurrent": 1 if index % 3 == 0 else 2,
            "prerequisites": {**DEFAULT_PREREQUISITES, **explicit}, "explicit": explicit}


def tenant(namespace, index):
    documents = [json.loads(d) for d in tenant_yaml(
        namespace, frontends=4, version="v1", rollout={"maxConcurrent": shape(index)["maxConcurrent"]}).split("\n---\n")]
    for document in documents:
        node = document["metadata"]["name"].removeprefix("shop-")
        waits_for = shape(index)["explicit"].get(node)
        if waits_for:
            document["spec"]["deploymentDependencies"] = {"upgradePrerequisites": [
                {"expressNode": f"shop-{n}", "kind": "Frontend"} for n in waits_for]}
    return "\n---\n".join(json.dumps(d) for d in documents)


class PodRecorder:
    """What happened to every pod of the watched namespaces, by the revisions at which the API
    server recorded it: its creation, the first time it showed Ready, the start of its deletion.
    It goes on through the API servers' restarts and cut connections: a watch that ends or fails
    resumes from the last revision it saw, and one refused as too old (410) lists again. What a
    list after a 410 tells is later than when it happened, so those figures are marked as such
    and the checks that would need them are skipped (and counted)."""

    def __init__(self, kubeconfig, namespaces):
        from kubernetes import client, config

        self.api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        self.namespaces = set(namespaces)
        self.pods, self.relists, self.stopped = {}, 0, False
        # When (wall clock) each change was seen: how soon the fleet moved again after a fault.
        self.moves = []
        listed = self.api.list_pod_for_all_namespaces(label_selector="express.dev/cluster")
        for pod in listed.items:
            self.observe(pod, None, int(listed.metadata.resource_version), listed=True)
        self.revision = listed.metadata.resource_version
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def observe(self, pod, event, revision, listed=False):
        meta = pod.metadata
        if meta.namespace not in self.namespaces:
            return
        record = self.pods.get(meta.uid)
        if record is None:
            record = self.pods[meta.uid] = {
                "namespace": meta.namespace, "node": meta.name.removeprefix("shop-"),
                "version": (meta.annotations or {}).get("express.dev/express-version"),
                "created": revision, "ready": None, "going": None, "late": set()}
            if listed:
                record["late"].add("created")
        ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
        if ready and record["ready"] is None:
            record["ready"] = revision
            if listed:
                record["late"].add("ready")
        if (meta.deletion_timestamp or event == "DELETED") and record["going"] is None:
            record["going"] = revision
            if listed:
                record["late"].add("going")

    def relist(self):
        listed = self.api.list_pod_for_all_namespaces(label_selector="express.dev/cluster")
        revision = int(listed.metadata.resource_version)
        present = set()
        for pod in listed.items:
            present.add(pod.metadata.uid)
            self.observe(pod, None, revision, listed=True)
        for uid, record in self.pods.items():
            if uid not in present and record["going"] is None:
                record["going"] = revision
                record["late"].add("going")
        self.revision = listed.metadata.resource_version
        self.relists += 1

    def run(self):
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        while not self.stopped:
            try:
                stream = watch.Watch().stream(self.api.list_pod_for_all_namespaces,
                                              label_selector="express.dev/cluster",
                                              resource_version=self.revision, timeout_seconds=30,
                                              _request_timeout=40)
                for event in stream:
                    if event["type"] == "ERROR":
                        self._retry(self.relist)
                        break
                    pod = event["object"]
                    self.revision = pod.metadata.resource_version
                    self.observe(pod, event["type"], int(self.revision))
                    self.moves.append(time.time())
            except ApiException as error:
                if self.stopped:
                    return
                if error.status == 410:
                    self._retry(self.relist)
                else:
                    time.sleep(0.5)
            except Exception:  # the API server away: the next watch resumes from the revision
                if self.stopped:
                    return
                time.sleep(0.5)

    def _retry(self, action):
        while not self.stopped:
            try:
                return action()
            except Exception:
                time.sleep(0.5)

    def of(self, namespace, version):
        """The pods created at `version` in `namespace`, by node."""
        found = {}
        for record in self.pods.values():
            if record["namespace"] == namespace and record["version"] == version:
                found.setdefault(record["node"], []).append(record)
        return found

    def stop(self):
        self.stopped = True


def check_upgrade(recorder, namespace, index, before, version):
    """The invariants of one tenant's change from `before` to `version`; returns how many checks
    a late figure left out."""
    created = recorder.of(namespace, version)
    replaced_once = {n: len(created.get(n, [])) for n in NODES}
    assert all(count == 1 for count in replaced_once.values()), \
        f"{namespace} {version}: each node replaced once: {replaced_once}"
    new = {n: created[n][0] for n in NODES}
    old = {record["node"]: record for record in recorder.pods.values()
           if record["namespace"] == namespace and record["version"] == before}
    skipped = 0

    def started(node):
        """When the node's replacement was decided: its old pod's deletion, else its new pod's
        creation (later, so a weaker check); None when both figures are late."""
        if old[node]["going"] is not None and "going" not in old[node]["late"]:
            return old[node]["going"]
        return None if "created" in new[node]["late"] else new[node]["created"]

    for node, prerequisites in shape(index)["prerequisites"].items():
        for prerequisite in prerequisites:
            ready = new[prerequisite]["ready"]
            if started(node) is None or "ready" in new[prerequisite]["late"]:
                skipped += 1
                continue
            assert ready is not None and started(node) > ready, \
                f"{namespace} {version}: {node} started before {prerequisite} was Ready on {version}"
    # A node is in flight from its old pod's deletion to its new pod Ready.
    flights = []
    for node in NODES:
        start, end = old[node]["going"], new[node]["ready"]
        if "going" in old[node]["late"] or "ready" in new[node]["late"] or start is None or end is None:
            skipped += 1
            continue
        flights.append((start, end))
    most = max(sum(1 for s, e in flights if s <= point < e) for point, _ in flights) if flights else 0
    assert most <= shape(index)["maxConcurrent"], f"{namespace} {version}: {most} nodes in flight at once"
    if index % 3 == 0 and not skipped:
        order = [n for n, _ in sorted(new.items(), key=lambda item: item[1]["created"])]
        assert order == UPGRADE_ORDER, f"{namespace} {version} (maxConcurrent 1): {order}"
    return skipped


def probe(cluster, *args):
    """A kubectl read that may meet the API server away: its JSON, or None."""
    result = cluster.kubectl(*args, "-o", "json", check=False, timeout=15)
    return json.loads(result.stdout) if result.returncode == 0 else None


def converged(cluster, namespace, version):
    pods = probe(cluster, "get", "pods", "-n", namespace)
    found = probe(cluster, "get", "expresscluster", "shop", "-n", namespace)
    if not pods or not found:
        return False
    running = {p["metadata"]["name"]: p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")}
    every_node = all(
        f"shop-{n}" in running
        and running[f"shop-{n}"]["metadata"].get("annotations", {}).get("express.dev/express-version") == version
        and any(c["type"] == "Ready" and c["status"] == "True"
                for c in running[f"shop-{n}"].get("status", {}).get("conditions", []))
        for n in NODES)
    return every_node and found.get("status", {}).get("phase") == "Healthy"


def upgrade(cluster, namespace, version):
    """The tenant's defaults moved to `version`, retried while the control plane is away."""
    patch = json.dumps({"spec": {"defaults": {"backend": {"expressVersion": version},
                                              "frontend": {"expressVersion": version}}}})

    def patched():
        result = cluster.kubectl("patch", "expresscluster", "shop", "-n", namespace, "--type", "merge", "-p", patch,
                                 check=False, timeout=15)
        return result.returncode == 0

    eventually(patched, timeout=120, what=f"{namespace} patched to {version}")


class Replicas:
    """The operator's replicas, two at a time: the leader killed by a fault is replaced by a new
    replica, as its Deployment would."""

    def __init__(self, cluster, directory):
        self.cluster, self.directory = cluster, directory
        self.running, self.killed, self.names = {}, [], (f"replica-{i}" for i in itertools.count(1))
        for _ in range(2):
            self.start()

    def start(self):
        name = next(self.names)
        self.running[name] = start_operator(self.cluster, self.directory / f"{name}.log", pod_name=name)

    def leader(self):
        lease = probe(self.cluster, "get", "lease", "express-operator", "-n", "express-system")
        return (lease or {}).get("spec", {}).get("holderIdentity")

    def kill_leader(self):
        # The API server may still be finding etcd again: the Lease as soon as it answers.
        def running_leader():
            leader = self.leader()
            return leader if leader in self.running else None

        leader = eventually(running_leader, timeout=60, what="a running replica holding the Lease")
        stop_process(self.running.pop(leader), signal.SIGKILL)
        self.killed.append(leader)
        self.start()

    def stop(self):
        for process in self.running.values():
            stop_process(process)


def faults(cluster, replicas):
    """The faults in the order they are injected, by name; each returns once done."""
    def lag_on():
        cluster.lag("kube-apiserver-2", 2000)

    def first_restarted():  # every client now lands on the late API server
        cluster.restart("kube-apiserver")

    def cut_and_wait():
        cluster.cut()
        time.sleep(4)

    def lag_off():
        cluster.lag("kube-apiserver-2", 0)

    return [("one API server 2 s late", lag_on), ("the other API server killed", first_restarted),
            ("every connection cut", cut_and_wait), ("on time again", lag_off),
            ("etcd killed", lambda: cluster.restart("etcd")),
            ("the late API server killed", lambda: cluster.restart("kube-apiserver-2")),
            ("the leader killed", replicas.kill_leader)]


@pytest.fixture
def chaotic(tmp_path):
    """A real control plane of the test's own (its API servers and etcd are killed): two API
    servers behind a front, compacting every 5 s."""
    started = real_cluster.up(tmp_path / "real", "--etcd-compaction-interval", "5s", "--apiservers", "2")
    try:
        started.install_crds()
        yield started
    finally:
        real_cluster.down(started)


def test_fleet_upgrades_through_a_failing_ha_control_plane_keep_every_tenants_order(chaotic, tmp_path):
    cluster = chaotic
    namespaces = [cluster.namespace("chaos") for _ in range(TENANTS)]
    replicas = Replicas(cluster, tmp_path)
    recorder = None
    try:
        for index, namespace in enumerate(namespaces):
            cluster.kubectl("apply", "-f", "-", input=tenant(namespace, index))
        for namespace in namespaces:
            eventually(lambda ns=namespace: converged(cluster, ns, "v1"), timeout=120 + TENANTS,
                       what=f"{namespace} provisioned")

        recorder = PodRecorder(cluster.kubeconfig, namespaces)
        versions = ["v1"]
        injected = []
        deadline = time.time() + FAULT_SECONDS

        every_fault = faults(cluster, replicas)

        def inject():
            for name, fault in itertools.cycle(every_fault):
                fault()
                injected.append((name, time.time()))
                if len(injected) >= len(every_fault) and time.time() >= deadline:
                    return
                time.sleep(2)

        # The first upgrade starts, then the faults go round while upgrades follow one another.
        versions.append("v2")
        for namespace in namespaces:
            upgrade(cluster, namespace, "v2")
        time.sleep(2)
        assert not all(converged(cluster, ns, "v2") for ns in namespaces), "the upgrade ended before the faults"
        injector = threading.Thread(target=inject, daemon=True)
        injector.start()
        while injector.is_alive():
            if all(converged(cluster, ns, versions[-1]) for ns in namespaces):
                versions.append(f"v{len(versions) + 1}")
                for namespace in namespaces:
                    upgrade(cluster, namespace, versions[-1])
            time.sleep(2)
        last_fault = time.time()
        for namespace in namespaces:
            eventually(lambda ns=namespace: converged(cluster, ns, versions[-1]),
                       timeout=max(5, SETTLE_SECONDS - (time.time() - last_fault)),
                       what=f"{namespace} on {versions[-1]} within {SETTLE_SECONDS} s of the last fault")
        settled = time.time() - last_fault
        time.sleep(1)  # the recorder's last events
        recorder.stop()

        skipped = sum(check_upgrade(recorder, namespace, index, before, version)
                      for index, namespace in enumerate(namespaces)
                      for before, version in zip(versions, versions[1:]))
        checks = len(namespaces) * (len(versions) - 1) * len(NODES)
        print(f"chaos: {len(namespaces)} tenants, {len(versions) - 1} upgrades, {len(injected)} faults, "
              f"converged {settled:.0f} s after the last; recorder: {len(recorder.pods)} pods, "
              f"{recorder.relists} lists after a 410, {skipped} of about {2 * checks} checks skipped "
              f"for a late figure; leaders killed: {replicas.killed}")
        assert skipped <= checks, f"the recorder missed too much to check: {skipped} checks skipped"
        # How soon a pod changed again after each fault ended (the recorder goes through the same
        # faults, so this is an upper bound), the worst of each kind.
        moving = {}
        for name, ended in injected:
            after = [seen - ended for seen in recorder.moves if seen >= ended]
            if after:
                moving[name] = max(moving.get(name, 0), min(after))
        print("chaos: the fleet moving again after (worst, s): "
              + ", ".join(f"{name} {delay:.1f}" for name, delay in moving.items()))
        for name, process in replicas.running.items():
            assert process.poll() is None, f"{name} exited on its own"
    finally:
        if recorder:
            recorder.stop()
        replicas.stop()
        for log in sorted(tmp_path.glob("replica-*.log")):
            print(f"--- {log.name}\n{log.read_text()[-4000:]}")
