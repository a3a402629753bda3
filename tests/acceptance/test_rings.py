"""Operator rings (DESIGN section 11) with every part a process of its own: `kubesim serve`, two
real `express-operator run --leader-elect` processes (`--ring default` and `--ring canary`),
tenants applied and moved with kubectl 1.37 (the ring is one label), operators stopped with
SIGTERM or killed with SIGKILL. What is asserted is what the API shows: pods, the deletes
kubesim served (in order), the owner in `status.operator`, events, and `kubectl express rings`.

The pure rule and every interleaving of label flips with steps are model-checked in
crates/express-planner/tests/ownership.rs; these tests are the hand-over through real clients."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import KUBECTL_EXPRESS, eventually, start_operator, stop_process, tenant_yaml
from test_kubectl import install

RING_LABEL = "express.dev/operator-ring"
# DESIGN section 3: a full upgrade runs fe1, fe2, be, fe3.
UPGRADE_ORDER = ["shop-fe1", "shop-fe2", "shop-be", "shop-fe3"]


class Operators:
    """The operator processes of a test, by ring; logs kept for a failure's report."""

    def __init__(self, sim, tmp_path, flags=None):
        """`flags`: more flags for a ring's operator, by ring, at every start."""
        self.sim, self.tmp_path, self.running, self.lives = sim, tmp_path, {}, 0
        self.flags = flags or {}

    def start(self, ring):
        self.lives += 1
        # On the real control plane each ring runs as a ServiceAccount of its own with the
        # chart's rules, so that a test can take one ring's permissions away.
        self.running[ring] = start_operator(
            self.sim, self.tmp_path / f"operator-{ring}-{self.lives}.log", "--ring", ring,
            *self.flags.get(ring, ()), pod_name=f"{ring}-{self.lives}",
            account="express-operator" if ring == "default" else f"express-operator-{ring}")

    def stop(self, ring, how=signal.SIGTERM):
        stop_process(self.running.pop(ring), how)

    def close(self):
        for ring in list(self.running):
            self.stop(ring)


@pytest.fixture
def rings(sim, tmp_path):
    install(sim)
    sim.kubectl("create", "namespace", "express-system")
    operators = Operators(sim, tmp_path)
    operators.start("default")
    operators.start("canary")
    yield sim, operators
    operators.close()
    for log in sorted(tmp_path.glob("operator-*.log")):
        print(f"--- {log.name}\n{log.read_text()[-4000:]}")


def cluster(sim, namespace):
    return sim.kubectl_json("get", "expresscluster", "shop", "-n", namespace)


def owner(sim, namespace):
    return cluster(sim, namespace).get("status", {}).get("operator", {})


def pods(sim, namespace):
    return {p["metadata"]["name"]: p for p in sim.kubectl_json("get", "pods", "-n", namespace)["items"]}


def settled_on(sim, namespace, version, ring):
    """Healthy, every node's pod on `version`, and `ring` the unreleased owner."""
    c = cluster(sim, namespace)
    status = c.get("status", {})
    running = pods(sim, namespace)
    return (
        status.get("phase") == "Healthy"
        and status.get("observedGeneration") == c["metadata"]["generation"]
        and status.get("operator", {}).get("ring") == ring
        and "released" not in status.get("operator", {})
        and not status.get("operator", {}).get("adopting")
        and len(running) == 4
        and all(p["metadata"].get("annotations", {}).get("express.dev/express-version") == version
                for p in running.values())
    )


def pod_deletes(sim, namespace):
    """Pod deletes kubesim served in the namespace, in order, refused ones left out."""
    return [d["name"] for d in sim.control("GET", "deletes")
            if d["resource"] == "pods" and d["namespace"] == namespace and d["status"] < 300]


def upgrade(sim, namespace, version):
    sim.kubectl("patch", "expresscluster", "shop", "-n", namespace, "--type", "merge", "-p", json.dumps(
        {"spec": {"defaults": {"backend": {"expressVersion": version},
                               "frontend": {"expressVersion": version}}}}))


def move(sim, namespace, ring):
    sim.kubectl("label", "expresscluster", "shop", "-n", namespace, f"{RING_LABEL}={ring}", "--overwrite")


def events(sim, namespace, reason):
    return [e for e in sim.kubectl_json("get", "events", "-n", namespace)["items"]
            if e.get("reason") == reason]


def pod_rings(sim, namespace):
    """The ring label of each of the namespace's pods (each ring's operator watches only its own)."""
    return {name: p["metadata"].get("labels", {}).get(RING_LABEL) for name, p in pods(sim, namespace).items()}


def assert_replaced_once_in_order(sim, namespace):
    assert pod_deletes(sim, namespace) == UPGRADE_ORDER, "every node replaced exactly once, in order"


def provision(sim, namespace, ring=None):
    # Pods slow enough to move the tenant mid-rollout.
    template = {"metadata": {"annotations": {"kubesim.dev/startup-seconds": "1.5"}}}
    labels = {RING_LABEL: ring} if ring else {}
    sim.kubectl("apply", "-f", "-", input=tenant_yaml(namespace, frontends=3, pod_template=template, cluster_labels=labels))
    eventually(lambda: settled_on(sim, namespace, "v1", ring or "default"), timeout=60,
               what=f"{namespace} provisioned by ring {ring or 'default'}")


def start_and_wait_for_first_step(sim, namespace):
    """Starts an upgrade and returns once its first node was replaced (a step is in flight)."""
    upgrade(sim, namespace, "v2")
    eventually(lambda: len(pod_deletes(sim, namespace)) >= 1, timeout=30, what="the first node replaced")


def rings_verb(sim, *flags):
    return subprocess.run([KUBECTL_EXPRESS, "rings", *flags],
                          env={**os.environ, "KUBECONFIG": str(sim.kubeconfig)},
                          capture_output=True, text=True, timeout=30)


def test_each_ring_drives_only_its_tenants(rings):
    sim, operators = rings
    provision(sim, "team-a")
    provision(sim, "team-b", ring="canary")
    assert owner(sim, "team-a")["ring"] == "default"
    assert owner(sim, "team-b")["ring"] == "canary"
    assert owner(sim, "team-b")["version"]
    # Each ring's operator caches only the pods stamped with its ring (default: none).
    assert set(pod_rings(sim, "team-a").values()) == {None}
    assert set(pod_rings(sim, "team-b").values()) == {"canary"}
    canary_pods = {name: p["metadata"]["uid"] for name, p in pods(sim, "team-b").items()}

    # With the canary operator stopped, an upgrade of every tenant changes no canary pod.
    operators.stop("canary")
    upgrade(sim, "team-a", "v2")
    upgrade(sim, "team-b", "v2")
    eventually(lambda: settled_on(sim, "team-a", "v2", "default"), timeout=60, what="team-a upgraded")
    time.sleep(2)
    assert {name: p["metadata"]["uid"] for name, p in pods(sim, "team-b").items()} == canary_pods
    assert pod_deletes(sim, "team-b") == []
    assert owner(sim, "team-b")["ring"] == "canary"

    # A ring with no operator: `rings` says so, naming the tenant, and exits 1 (once the stopped
    # operator's Lease has lapsed, if it did not release it on the way out).
    result = eventually(lambda: (r := rings_verb(sim)).returncode == 1 and r, timeout=30,
                        what="rings to find ring canary without a live operator")
    assert "team-b/shop" in result.stdout + result.stderr, result.stdout + result.stderr
    # And `doctor` checks every ring's leader, not only default's (it reads renewal times in
    # whole seconds, so it may agree a second later).
    def read_operator_check():
        doctor = subprocess.run([KUBECTL_EXPRESS, "doctor", "-o", "json"],
                                env={**os.environ, "KUBECONFIG": str(sim.kubeconfig)},
                                capture_output=True, text=True, timeout=30)
        return next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "operator")
    operator_check = eventually(lambda: (c := read_operator_check()).get("status") == "fail" and c,
                                timeout=10, what="doctor to find ring canary without a leader")
    assert any("ring canary" in e and "express-operator-canary" in e
               for e in operator_check["evidence"]), operator_check
    assert any("ring default: leading" in e for e in operator_check["evidence"]), operator_check

    # Its operator back, the tenant moves on.
    operators.start("canary")
    eventually(lambda: settled_on(sim, "team-b", "v2", "canary"), timeout=60, what="team-b upgraded")
    assert rings_verb(sim).returncode == 0


def test_a_tenant_moved_mid_rollout_completes_each_step_once_in_order(rings):
    sim, _operators = rings
    provision(sim, "team-a")
    start_and_wait_for_first_step(sim, "team-a")
    move(sim, "team-a", "canary")
    eventually(lambda: settled_on(sim, "team-a", "v2", "canary"), timeout=60, what="the move and the upgrade")
    assert_replaced_once_in_order(sim, "team-a")
    assert set(pod_rings(sim, "team-a").values()) == {"canary"}, "the adopter restamped every pod"
    assert events(sim, "team-a", "Released"), "the old owner says it let go"
    adopted = events(sim, "team-a", "Adopted")
    assert adopted and "from ring default" in adopted[-1]["message"], adopted


def test_the_label_flipped_several_times_during_one_rollout(rings):
    sim, _operators = rings
    provision(sim, "team-a")
    start_and_wait_for_first_step(sim, "team-a")
    for ring in ["canary", "default", "canary", "default", "canary"]:
        move(sim, "team-a", ring)
        time.sleep(0.4)
    eventually(lambda: settled_on(sim, "team-a", "v2", "canary"), timeout=60, what="the rollout after the flips")
    assert_replaced_once_in_order(sim, "team-a")


def test_the_old_owner_killed_after_the_flip_and_the_new_one_after_adopting(rings):
    sim, operators = rings
    provision(sim, "team-a")
    start_and_wait_for_first_step(sim, "team-a")
    move(sim, "team-a", "canary")
    operators.stop("default", signal.SIGKILL)
    # A dead ring releases nothing: canary takes over once default's Lease has lapsed.
    eventually(lambda: owner(sim, "team-a").get("ring") == "canary", timeout=40, what="canary adopts")
    operators.stop("canary", signal.SIGKILL)
    operators.start("canary")
    eventually(lambda: settled_on(sim, "team-a", "v2", "canary"), timeout=60, what="a new canary operator finishes")
    assert_replaced_once_in_order(sim, "team-a")
    # Killed within milliseconds of the flip, default may or may not have released first;
    # either way canary adopted it, once or (after its own kill) again.
    assert events(sim, "team-a", "Adopted")
