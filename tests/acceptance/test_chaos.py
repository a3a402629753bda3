"""A control plane failing the way production ones do (DESIGN sections 17 and 19), in its short
form: Kubernetes' own control plane of the test's own, its API server compacting etcd every
5 s, two operator replicas with the chart's RBAC, and a fleet-wide upgrade of three tenants
during which the API server is killed and restarted, then etcd, then the leading replica.
Asserted from the API through a pod recorder that survives the same faults, never from the
operator's logs: every tenant converges, each node is replaced once, a tenant with
`maxConcurrent: 1` follows the design's order, and the other replica never exits on its own.
The faults are `scripts/real-cluster.sh restart DIR COMPONENT`."""

import signal
import threading
import time

import pytest

import real_cluster
from conftest import eventually, start_operator, stop_process, tenant_yaml

# DESIGN section 3: a full upgrade runs fe1, fe2, be, fe3, fe4.
UPGRADE_ORDER = ["fe1", "fe2", "be", "fe3", "fe4"]
NODES = ["be", "fe1", "fe2", "fe3", "fe4"]


class PodRecorder:
    """Every pod created in the watched namespaces, (namespace, name, uid, creation's
    resourceVersion), through the API server's restarts: a watch that ends or fails resumes from
    the last revision it saw, and one refused as too old (410) lists again and records the pods
    it had not seen."""

    def __init__(self, kubeconfig, namespaces):
        from kubernetes import client, config

        self.api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        self.namespaces = set(namespaces)
        self.created, self.seen, self.relists = [], set(), 0
        self.stopped = False
        # The pods there before are not creations: known, so that a list after a 410 skips them.
        before = self.api.list_pod_for_all_namespaces(label_selector="express.dev/cluster")
        self.seen.update(pod.metadata.uid for pod in before.items)
        self.revision = before.metadata.resource_version
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def record(self, pod):
        meta = pod.metadata
        if meta.namespace in self.namespaces and meta.uid not in self.seen:
            self.seen.add(meta.uid)
            self.created.append((meta.namespace, meta.name, meta.uid, int(meta.resource_version)))

    def relist(self):
        listed = self.api.list_pod_for_all_namespaces(label_selector="express.dev/cluster")
        for pod in listed.items:
            self.record(pod)
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
                        self.relist()
                        break
                    pod = event["object"]
                    self.revision = pod.metadata.resource_version
                    if event["type"] == "ADDED":
                        self.record(pod)
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

    def creations(self, namespace):
        """The pods created in `namespace`, node names in creation order."""
        return [name.removeprefix("shop-") for ns, name, _, _ in sorted(self.created, key=lambda c: c[3])
                if ns == namespace]

    def stop(self):
        self.stopped = True


def probe(cluster, *args):
    """A kubectl read that may meet the API server away: its JSON, or None."""
    import json

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


@pytest.fixture
def chaotic(tmp_path):
    """A real control plane of the test's own (its API server is killed), compacting every 5 s."""
    started = real_cluster.up(tmp_path / "real", "--etcd-compaction-interval", "5s")
    try:
        started.install_crds()
        yield started
    finally:
        real_cluster.down(started)


def test_a_fleet_upgrade_through_api_server_etcd_and_leader_kills_converges_in_order(chaotic, tmp_path):
    cluster = chaotic
    namespaces = [cluster.namespace("chaos") for _ in range(3)]
    replicas = {name: start_operator(cluster, tmp_path / f"{name}.log", pod_name=name)
                for name in ("replica-a", "replica-b")}
    recorder = None
    try:
        for index, namespace in enumerate(namespaces):
            cluster.kubectl("apply", "-f", "-", input=tenant_yaml(
                namespace, frontends=4, version="v1", rollout={"maxConcurrent": 2 if index == 2 else 1}))
        for namespace in namespaces:
            eventually(lambda ns=namespace: converged(cluster, ns, "v1"), timeout=120, what=f"{namespace} provisioned")

        recorder = PodRecorder(cluster.kubeconfig, namespaces)
        for namespace in namespaces:
            cluster.kubectl("patch", "expresscluster", "shop", "-n", namespace, "--type", "merge", "-p",
                            '{"spec":{"defaults":{"backend":{"expressVersion":"v2"},'
                            '"frontend":{"expressVersion":"v2"}}}}')
        # The faults, one after the other while the upgrade runs.
        time.sleep(2)
        assert not all(converged(cluster, ns, "v2") for ns in namespaces), "the upgrade ended before the faults"
        cluster.restart("kube-apiserver")
        time.sleep(2)
        cluster.restart("etcd")
        time.sleep(2)
        def holder():
            lease = probe(cluster, "get", "lease", "express-operator", "-n", "express-system")
            return (lease or {}).get("spec", {}).get("holderIdentity")

        # The API server may still be finding etcd again: the Lease as soon as it answers.
        leader = eventually(holder, timeout=60, what="the Lease readable again")
        assert leader in replicas, leader
        stop_process(replicas.pop(leader), signal.SIGKILL)
        [(survivor, process)] = replicas.items()

        for namespace in namespaces:
            eventually(lambda ns=namespace: converged(cluster, ns, "v2"), timeout=240,
                       what=f"{namespace} upgraded after the faults")
        recorder.stop()
        print(f"pod recorder: {len(recorder.created)} creations, {recorder.relists} lists after a 410")
        for index, namespace in enumerate(namespaces):
            created = recorder.creations(namespace)
            assert sorted(created) == sorted(NODES), f"{namespace}: each node replaced once: {created}"
            if index < 2:
                assert created == UPGRADE_ORDER, f"{namespace} (maxConcurrent 1): {created}"
        assert process.poll() is None, f"{survivor} exited on its own"
        assert eventually(lambda: holder() == survivor, timeout=60, what="the survivor leading"), holder()
    finally:
        if recorder:
            recorder.stop()
        for process in replicas.values():
            stop_process(process)
        for log in sorted(tmp_path.glob("replica-*.log")):
            print(f"--- {log.name}\n{log.read_text()[-4000:]}")
