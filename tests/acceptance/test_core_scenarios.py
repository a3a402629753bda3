"""The core scenarios on both substrates (DESIGN section 17): kubesim, and Kubernetes' own control
plane (etcd, kube-apiserver with RBAC and default admission, kube-controller-manager,
kube-scheduler, kwok running the pods by the same kubesim.dev/* behaviours). The operator binary
runs as the operator chart's ServiceAccount on the real one. Tenants are delivered as users
deliver them: the tenant chart rendered by the Helm engine and applied with kubectl 1.37, nodes
patched one at a time; the order is read from a pod watch of the Python client, and every
assertion reads what the API shows. Where the substrates disagree, the test asserts what the
real server does."""

import json
import os
import signal
import subprocess
import time

import pytest
import yaml

from conftest import KUBECTL_EXPRESS, OPERATOR, PodCreations, eventually, start_operator, stop_process, tenant_yaml
from test_helm import render, tenant_values

# DESIGN section 3: a full upgrade runs fe1, fe2, be, fe3, fe4.
UPGRADE_ORDER = ["fe1", "fe2", "be", "fe3", "fe4"]
NODES = ["be", "fe1", "fe2", "fe3", "fe4"]


@pytest.fixture
def operator(cluster, tmp_path):
    process = start_operator(cluster, tmp_path / "operator.log", leader_elect=False)
    yield process
    stop_process(process)
    print(f"--- operator log\n{(tmp_path / 'operator.log').read_text()[-6000:]}")


def pods(cluster, namespace):
    return {p["metadata"]["name"]: p for p in cluster.kubectl_json("get", "pods", "-n", namespace)["items"]
            if not p["metadata"].get("deletionTimestamp")}


def ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def all_ready_on(cluster, namespace, names, version):
    found = pods(cluster, namespace)
    return all(n in found and ready(found[n])
               and found[n]["metadata"].get("annotations", {}).get("express.dev/express-version") == version
               for n in names)


def status(cluster, namespace, name):
    return cluster.kubectl_json("get", "expresscluster", name, "-n", namespace).get("status", {})


def rollout_state(cluster, namespace, name):
    return status(cluster, namespace, name).get("rollout", {}).get("state")


def events(cluster, namespace):
    return cluster.kubectl_json("get", "events.v1.events.k8s.io", "-n", namespace)["items"]


def acme(namespace, version, pod_annotations=None, **values):
    """The chart's tenant "acme" of the namespace, on `version`, its pods annotated with
    `pod_annotations` (kubesim.dev/* behaviours)."""
    if pod_annotations:
        template = {"metadata": {"annotations": pod_annotations}}
        values["podTemplate"] = {"Backend": template, "Frontend": template}
    return render(tenant_values(frontends=4, version=version, rollout={"settleSeconds": 2}, **values),
                  namespace=namespace)


def acme_names():
    return [f"acme-{n}" for n in NODES]


def provision_acme(cluster, namespace, version="express-e689.154", **values):
    created = PodCreations(cluster.kubeconfig, namespace, "acme-")
    cluster.kubectl("apply", "-f", "-", input=acme(namespace, version, **values))
    eventually(lambda: all_ready_on(cluster, namespace, acme_names(), version), timeout=90, what="provisioned")
    return created.stop()


def test_provisioned_in_order_then_a_chart_upgrade_applied_with_kubectl_follows_the_design_order(
        cluster, operator):
    namespace = cluster.namespace()
    provisioned = provision_acme(cluster, namespace)
    assert provisioned[0] == "be" and sorted(provisioned) == sorted(NODES), provisioned
    upgraded = PodCreations(cluster.kubeconfig, namespace, "acme-")
    cluster.kubectl("apply", "-f", "-", input=acme(namespace, "express-e689.155"))
    eventually(lambda: all_ready_on(cluster, namespace, acme_names(), "express-e689.155"), timeout=120,
               what="upgraded")
    assert upgraded.stop() == UPGRADE_ORDER
    settled = next(c for c in status(cluster, namespace, "acme")["conditions"] if c["type"] == "DesiredStateSettled")
    assert settled["status"] == "True"
    assert status(cluster, namespace, "acme")["phase"] == "Healthy"


def test_nodes_patched_one_at_a_time_upgrade_in_the_design_order(cluster, operator):
    namespace = cluster.namespace()
    cluster.kubectl("apply", "-f", "-", input=tenant_yaml(namespace, frontends=4, version="v1",
                                                        rollout={"settleSeconds": 3}))
    shop = [f"shop-{n}" for n in NODES]
    eventually(lambda: all_ready_on(cluster, namespace, shop, "v1"), timeout=90, what="provisioned")
    created = PodCreations(cluster.kubeconfig, namespace, "shop-")
    # A person patching the nodes one by one, the last ones first.
    for node in ["fe4", "fe3", "be", "fe2", "fe1"]:
        kind = "backend" if node == "be" else "frontend"
        cluster.kubectl("patch", kind, f"shop-{node}", "-n", namespace, "--type", "merge",
                        "-p", json.dumps({"spec": {"expressVersion": "v2"}}))
        time.sleep(0.3)
    eventually(lambda: all_ready_on(cluster, namespace, shop, "v2"), timeout=120, what="upgraded")
    assert created.stop() == UPGRADE_ORDER


def test_a_crash_looping_version_fails_the_rollout_and_rolls_back(cluster, operator):
    namespace = cluster.namespace()
    provision_acme(cluster, namespace, "express-e689.154")
    cluster.kubectl("apply", "-f", "-", input=acme(
        namespace, "express-e689.155",
        pod_annotations={"kubesim.dev/behavior": "crash-loop", "kubesim.dev/startup-seconds": "0.5"}))

    def rolled_back():
        found = status(cluster, namespace, "acme")
        return (found.get("rollout", {}).get("state") == "Failed"
                and all_ready_on(cluster, namespace, acme_names(), "express-e689.154") and found)

    failed = eventually(rolled_back, timeout=120, what="failed and rolled back")
    assert failed["phase"] == "Failed"
    assert failed["rollout"]["failedNode"] == "acme-fe1"
    assert "crash-looping" in failed.get("message", ""), failed
    fe1 = cluster.kubectl_json("get", "frontend", "acme-fe1", "-n", namespace)
    assert len(fe1["status"]["invalidRevisions"]) == 1
    eventually(lambda: any(e.get("reason") == "RollingBack" for e in events(cluster, namespace)), timeout=20,
               what="a RollingBack event")


def test_pause_then_abort_and_retry(cluster, operator):
    namespace = cluster.namespace()
    provision_acme(cluster, namespace)
    cluster.kubectl("patch", "expresscluster", "acme", "-n", namespace, "--type", "merge",
                    "-p", '{"spec":{"paused":true}}')
    eventually(lambda: status(cluster, namespace, "acme").get("phase") == "Paused", timeout=30, what="paused")
    created = PodCreations(cluster.kubeconfig, namespace, "acme-")
    # The chart writes spec.paused: the delivery says the pause stays.
    cluster.kubectl("apply", "-f", "-", input=acme(namespace, "express-e689.155",
                                                   pod_annotations={"kubesim.dev/startup-seconds": "3"}, paused=True))
    time.sleep(4)
    assert created.names == [], "nothing moves while paused"

    cluster.kubectl("patch", "expresscluster", "acme", "-n", namespace, "--type", "merge",
                    "-p", '{"spec":{"paused":false}}')
    eventually(lambda: len(created.names) >= 2, timeout=60, what="two nodes changed")
    cluster.kubectl("annotate", "expresscluster", "acme", "-n", namespace, "express.dev/abort=abort-1",
                    "--overwrite")
    eventually(lambda: rollout_state(cluster, namespace, "acme") == "Aborted", timeout=30, what="aborted")
    after_abort = list(created.names)
    time.sleep(5)
    assert created.names == after_abort, "nothing starts after the abort"
    assert after_abort in (UPGRADE_ORDER[:2], UPGRADE_ORDER[:3]), after_abort

    cluster.kubectl("annotate", "expresscluster", "acme", "-n", namespace, "express.dev/retry=retry-1",
                    "--overwrite")
    eventually(lambda: all_ready_on(cluster, namespace, acme_names(), "express-e689.155"), timeout=120,
               what="resumed to the end")
    assert created.stop() == UPGRADE_ORDER
    found = status(cluster, namespace, "acme")
    assert found["requests"]["retry"] == "retry-1" and found["requests"]["abort"] == "abort-1"


def test_a_bounce_restarts_one_pod_on_its_revision(cluster, operator):
    namespace = cluster.namespace()
    provision_acme(cluster, namespace)
    before = pods(cluster, namespace)["acme-fe2"]["metadata"]["uid"]
    cluster.kubectl("annotate", "frontend", "acme-fe2", "-n", namespace, "express.dev/bounce=bounce-1",
                    "--overwrite")

    def succeeded():
        bounce = cluster.kubectl_json("get", "frontend", "acme-fe2", "-n", namespace).get("status", {}).get("bounce")
        return bounce if bounce and bounce.get("phase") == "Succeeded" else None

    bounce = eventually(succeeded, timeout=60, what="the bounce succeeded")
    assert bounce["requestId"] == "bounce-1"
    after = pods(cluster, namespace)["acme-fe2"]
    assert after["metadata"]["uid"] != before and ready(after)
    assert after["metadata"]["annotations"]["express.dev/express-version"] == "express-e689.154"
    # The events follow the status write the test saw first.
    eventually(lambda: {"BounceStarted", "Bouncing", "Bounced"} <= {e.get("reason") for e in events(cluster, namespace)},
               timeout=20, what="the bounce's events")


def test_a_lost_pod_is_recreated_as_a_recovery(cluster, operator):
    namespace = cluster.namespace()
    provision_acme(cluster, namespace)
    lost = pods(cluster, namespace)["acme-fe3"]["metadata"]["uid"]
    cluster.kubectl("delete", "pod", "acme-fe3", "-n", namespace, "--wait=false")

    def recreated():
        pod = pods(cluster, namespace).get("acme-fe3")
        return pod and pod["metadata"]["uid"] != lost and ready(pod)

    eventually(recreated, timeout=60, what="fe3 recreated")

    def recovering():
        return [e for e in events(cluster, namespace) if e.get("reason") == "Recovering"]

    assert "acme-fe3" in eventually(recovering, timeout=20, what="a Recovering event")[0]["note"]
    assert status(cluster, namespace, "acme").get("rollout", {}).get("state") in (None, "Complete")


def test_a_deleted_nodes_pod_goes_through_its_owner_reference(cluster, tmp_path):
    """The garbage collector, not the operator: the operator is stopped before the node goes."""
    namespace = cluster.namespace()
    process = start_operator(cluster, tmp_path / "operator.log", leader_elect=False)
    try:
        provision_acme(cluster, namespace)
    finally:
        stop_process(process)
    pod = pods(cluster, namespace)["acme-fe4"]
    assert pod["metadata"]["ownerReferences"][0]["name"] == "acme-fe4"
    cluster.kubectl("delete", "frontend", "acme-fe4", "-n", namespace)
    eventually(lambda: "acme-fe4" not in pods(cluster, namespace), timeout=60, what="the pod collected")
    assert "acme-fe3" in pods(cluster, namespace), "only the deleted node's pod goes"


def test_two_replicas_lead_through_a_lease_and_the_other_takes_over(cluster, tmp_path):
    namespace = cluster.namespace()
    cluster.kubectl("create", "namespace", "express-system", check=False)
    ring = f"failover-{namespace.rsplit('-', 1)[1]}"
    replicas = {
        name: start_operator(cluster, tmp_path / f"{name}.log", "--ring", ring, pod_name=name)
        for name in ("replica-a", "replica-b")
    }
    try:
        lease = f"express-operator-{ring}"

        def holder():
            found = cluster.kubectl("get", "lease", lease, "-n", "express-system", "-o", "json", check=False)
            return found.returncode == 0 and json.loads(found.stdout)["spec"].get("holderIdentity")

        leader = eventually(holder, timeout=30, what="a leader")
        assert leader in replicas, leader
        cluster.kubectl("apply", "-f", "-", input=tenant_yaml(namespace, frontends=2, version="v1",
                                                            cluster_labels={"express.dev/operator-ring": ring}))
        shop = ["shop-be", "shop-fe1", "shop-fe2"]
        eventually(lambda: all_ready_on(cluster, namespace, shop, "v1"), timeout=90, what="provisioned")

        # The leader dies without a word; the other replica takes the Lease once it expires.
        stop_process(replicas.pop(leader), signal.SIGKILL)
        [other] = replicas
        eventually(lambda: holder() == other, timeout=60, what="the other replica leading")
        cluster.kubectl("patch", "expresscluster", "shop", "-n", namespace, "--type", "merge",
                        "-p", '{"spec":{"defaults":{"backend":{"expressVersion":"v2"},"frontend":{"expressVersion":"v2"}}}}')
        eventually(lambda: all_ready_on(cluster, namespace, shop, "v2"), timeout=90, what="upgraded by the new leader")
    finally:
        for process in replicas.values():
            stop_process(process)
        for log in sorted(tmp_path.glob("replica-*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")


def test_the_plugin_reads_what_the_api_holds(cluster, operator, tmp_path):
    """`kubectl express` list, get, status, plan, revisions and doctor against the substrate, as an
    SRE reads a tenant: through the real binary, with exit codes."""
    namespace = cluster.namespace()
    provision_acme(cluster, namespace)
    eventually(lambda: status(cluster, namespace, "acme").get("phase") == "Healthy", timeout=30, what="healthy")

    def kx(*args):
        result = subprocess.run([KUBECTL_EXPRESS, *args], env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
                                capture_output=True, text=True, timeout=60)
        print(f"$ kubectl express {' '.join(args)}  (exit {result.returncode})\n{result.stdout}{result.stderr}")
        return result

    listed = kx("list", "-n", namespace, "-o", "json")
    assert listed.returncode == 0
    [row] = json.loads(listed.stdout)["clusters"]
    assert (row["namespace"], row["cluster"], row["phase"]) == (namespace, "acme", "Healthy")
    tree = kx("get", "acme", "-n", namespace)
    assert tree.returncode == 0
    assert [n for n in ("acme-fe1", "acme-fe2", "acme-be", "acme-fe3", "acme-fe4") if n in tree.stdout] == \
        ["acme-fe1", "acme-fe2", "acme-be", "acme-fe3", "acme-fe4"], "nodes in upgrade order"
    done = kx("status", "acme", "-n", namespace, "--watch=false")
    assert done.returncode == 0 and "Complete: all 5 up nodes Ready on their desired revision" in done.stdout
    plan = kx("plan", "acme", "-n", namespace, "-o", "json")
    assert plan.returncode == 0 and json.loads(plan.stdout)["clusters"][0]["steps"] == []
    # The delivery that is live, checked before it is applied again: nothing would restart.
    manifest = tmp_path / "acme.yaml"
    manifest.write_text(acme(namespace, "express-e689.154"))
    revisions = kx("revisions", "-f", str(manifest), "--live", "-o", "json", "--fail-on-restart")
    assert revisions.returncode == 0
    assert sorted(n["name"] for n in json.loads(revisions.stdout)["nodes"]) == sorted(acme_names())
    doctor = kx("doctor", "-o", "json")
    assert doctor.returncode in (0, 1, 3), doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["verdict"] in ("healthy", "tenant", "deployment", "infrastructure") and report["checks"]


def test_crd_check_reads_the_servers_crds_and_every_object_they_store(cluster, operator):
    """`express-operator crd check --context`: this build's CRDs against what the server has and
    stores (a tenant included), through a kubeconfig context as an SRE names it."""
    namespace = cluster.namespace()
    provision_acme(cluster, namespace)
    context = yaml.safe_load(cluster.kubeconfig.read_text())["current-context"]

    def check(*args):
        return subprocess.run([OPERATOR, "crd", "check", *args, "--kubeconfig", str(cluster.kubeconfig)],
                              capture_output=True, text=True, timeout=60)

    checked = check("--context", context)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "compatible: no breaking change" in checked.stdout, checked.stdout
    unknown = check("--context", "no-such-context")
    assert unknown.returncode == 2 and 'no context named "no-such-context"' in unknown.stderr, unknown.stderr


@pytest.mark.parametrize("cluster", ["real"], indirect=True)
def test_the_operators_requests_are_served_at_the_charts_own_priority_level(cluster, operator):
    """DESIGN section 20: the chart's FlowSchema sends the operator's ServiceAccount to the
    chart's PriorityLevelConfiguration, as the API server's own counters of API Priority and
    Fairness show once the operator has provisioned a tenant; none of its requests rejected."""
    namespace = cluster.namespace()
    provision_acme(cluster, namespace)

    def ours(line):
        return ('flow_schema="express-express-operator"' in line
                and 'priority_level="express-express-operator"' in line)

    def total(metrics, family):
        return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith(family + "{") and ours(line))

    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    assert total(metrics, "apiserver_flowcontrol_dispatched_requests_total") > 0, \
        "no request of the operator's was dispatched at its own level"
    assert total(metrics, "apiserver_flowcontrol_rejected_requests_total") == 0
    level = cluster.kubectl_json("get", "prioritylevelconfiguration", "express-express-operator")
    assert level["spec"]["limited"]["limitResponse"]["type"] == "Queue"
