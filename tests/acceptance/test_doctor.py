"""`kubectl express doctor` with every part a process of its own, as L2 meets it: `kubesim serve`,
the real `express-operator run --leader-elect` binary, tenants applied with kubectl 1.37, pods
failed through kubesim's kubelet rules over HTTP, and the operator killed with SIGKILL (a dead
process renews nothing and releases nothing). Each case checks the exit code and the JSON
verdict for the reason it set up. The in-process cases of the same verdicts are in
crates/kubectl-express/tests/e2e_doctor.rs."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import KUBECTL_EXPRESS, eventually, start_operator, stop_process, tenant_yaml
from test_kubectl import install

TEAMS = ["team-a", "team-b", "team-c"]
IDENTITY = "doctor-acceptance"
EXIT = {"healthy": 0, "tenant": 1, "deployment": 1, "infrastructure": 3}


@pytest.fixture
def fleet(sim, tmp_path):
    """Three healthy tenants driven by a leading operator process; yields (sim, operator)."""
    install(sim)
    sim.kubectl("create", "namespace", "express-system")
    operator = start_operator(sim, tmp_path / "operator.log", pod_name=IDENTITY)
    for team in TEAMS:
        # The pods carry their team, for kubelet rules that fail one namespace's pods.
        template = {"metadata": {"labels": {"team": team}}}
        sim.kubectl("apply", "-f", "-", input=tenant_yaml(team, pod_template=template, rollout={"progressDeadlineSeconds": 3}))

    def healthy():
        clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
        return len(clusters) == len(TEAMS) and all(
            c.get("status", {}).get("phase") == "Healthy"
            and c["status"].get("observedGeneration") == c["metadata"]["generation"]
            for c in clusters
        )

    eventually(healthy, timeout=60, what="three healthy tenants")
    yield sim, operator
    stop_process(operator)


def doctor(sim, *flags):
    result = subprocess.run(
        [KUBECTL_EXPRESS, "doctor", *flags],
        env={**os.environ, "KUBECONFIG": str(sim.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result


def doctor_until(sim, verdict, *flags, because=lambda report: True, timeout=45):
    """Runs `doctor -o json` until it gives `verdict` for the reason `because` checks; asserts
    the exit code of that verdict and returns the report."""
    deadline = time.time() + timeout
    while True:
        result = doctor(sim, "-o", "json", *flags)
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            report = {}
        if report.get("verdict") == verdict and because(report):
            assert result.returncode == EXIT[verdict], result.stderr
            print(doctor(sim, *flags).stdout)
            return report
        assert time.time() < deadline, (
            f"doctor never said {verdict}: exit {result.returncode}\n{result.stdout}\n{result.stderr}")
        time.sleep(0.3)


def check(report, name):
    return next(c for c in report["checks"] if c["name"] == name)


def test_healthy_then_a_killed_operator_is_a_backlog_and_then_an_expired_lease(fleet):
    sim, operator = fleet
    report = doctor_until(sim, "healthy")
    assert check(report, "operator")["status"] == "ok"
    assert IDENTITY in check(report, "operator")["summary"]

    operator.send_signal(signal.SIGKILL)
    operator.wait(timeout=10)
    for team in TEAMS:
        sim.kubectl("patch", "expresscluster", "shop", "-n", team, "--type", "merge",
                    "-p", json.dumps({"spec": {"defaults": {"frontend": {"expressVersion": "v2"}}}}))
    # Generations move and nobody observes them: a backlog, long before the Lease runs out.
    report = doctor_until(sim, "infrastructure", "--stale-after", "2s",
                          because=lambda r: "behind on 3 tenant(s)" in check(r, "keeping-up")["summary"])
    assert check(report, "keeping-up")["status"] == "fail"
    assert "in 3 namespace(s)" in check(report, "keeping-up")["summary"]
    # The Lease lasts 15 s after its last renewal; then the operator check fails, naming it.
    report = doctor_until(sim, "infrastructure",
                          because=lambda r: check(r, "operator")["status"] == "fail")
    summary = check(report, "operator")["summary"]
    assert "express-system/express-operator" in summary and "ago" in summary, summary


def test_a_crash_looping_upgrade_is_a_deployment_and_failing_pods_everywhere_are_the_infrastructure(fleet):
    sim, _operator = fleet
    template = {"metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop"}}}
    sim.kubectl("patch", "expresscluster", "shop", "-n", "team-a", "--type", "merge", "-p", json.dumps(
        {"spec": {"defaults": {"backend": {"expressVersion": "v2", "podTemplate": template},
                               "frontend": {"expressVersion": "v2", "podTemplate": template}}}}))
    report = doctor_until(sim, "deployment")
    troubled = [t for t in report["tenants"] if t["symptoms"]]
    assert [t["namespace"] for t in troubled] == ["team-a"], troubled
    assert troubled[0]["explainedByRollout"] is True


def test_pods_failing_in_every_namespace_with_no_rollout_is_the_infrastructure(fleet):
    sim, _operator = fleet
    # The fleet was created seconds ago: `--recent-rollout 1s` makes that old news, as it is
    # for tenants created days ago (timestamps have whole seconds, hence 3 s on the clock).
    time.sleep(3)
    for team in TEAMS:
        sim.control("POST", "kubelet/rules", {"labels": {"team": team}, "behavior": "crash-loop"})
    for team in TEAMS:
        sim.kubectl("delete", "pod", "shop-be", "shop-fe1", "-n", team, "--wait=false")
    report = doctor_until(sim, "infrastructure", "--recent-rollout", "1s",
                          because=lambda r: check(r, "spread")["status"] == "fail")
    summary = check(report, "spread")["summary"]
    assert "in 3 namespaces" in summary and "no rollout explaining it" in summary, summary
    assert check(report, "operator")["status"] == "ok"


def test_a_user_who_cannot_read_leases_gets_a_warning_and_still_a_verdict(fleet):
    sim, _operator = fleet
    sim.control("POST", "faults", {"verb": "get", "resource": "leases.coordination.k8s.io",
                                   "rate": 1.0, "status": 403})
    report = doctor_until(sim, "healthy")
    assert check(report, "operator")["status"] == "warn"
    access = check(report, "access")
    assert access["status"] == "warn"
    assert "Lease express-system/express-operator: forbidden" in access["summary"], access


def test_the_readmes_dev_cluster_is_healthy_for_doctor_and_rings(tmp_path):
    """`express-operator dev`, the README's main command, as a newcomer meets it: the operator
    holds ring default's Lease as the chart runs it, so doctor says healthy (exit 0) and
    `rings` exits 0 once both sample tenants are Healthy."""
    from conftest import OPERATOR
    kubeconfig = tmp_path / "dev.kubeconfig"
    dev = subprocess.Popen(
        [OPERATOR, "dev", "--startup-seconds", "0.2", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "dev.log", "w"))
    try:
        eventually(kubeconfig.exists, timeout=60, what="the dev kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

        def express(*args):
            return subprocess.run([KUBECTL_EXPRESS, *args], env=env, capture_output=True, text=True, timeout=30)

        def both_healthy():
            listed = express("list", "-A")
            return listed.returncode == 0 and sum(
                " Healthy " in f" {line} " for line in listed.stdout.splitlines()) == 2

        eventually(both_healthy, timeout=90, what="both sample tenants Healthy")
        result = express("doctor")
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("VERDICT: healthy"), result.stdout
        rings = express("rings")
        assert rings.returncode == 0, rings.stdout + rings.stderr
        assert "express-operator-dev" in rings.stdout, rings.stdout
    finally:
        stop_process(dev)


def test_an_operator_without_leader_election_warns_and_none_at_all_is_the_infrastructure(sim, tmp_path):
    """An operator run without --leader-elect holds no Lease: while its tenants are observed,
    doctor warns (naming the missing Lease) and `rings` warns, exit 0; once it is gone and
    generations move, nobody drives the ring: infrastructure, and `rings` fails."""
    install(sim)
    sim.kubectl("create", "namespace", "express-system")
    operator = start_operator(sim, tmp_path / "operator.log", leader_elect=False)
    for team in TEAMS:
        sim.kubectl("apply", "-f", "-", input=tenant_yaml(team))

    def healthy():
        clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
        return len(clusters) == len(TEAMS) and all(
            c.get("status", {}).get("phase") == "Healthy" for c in clusters)

    eventually(healthy, timeout=60, what="three healthy tenants")
    report = doctor_until(sim, "healthy")
    operator_check = check(report, "operator")
    assert operator_check["status"] == "warn", operator_check
    assert "no Lease express-system/express-operator" in operator_check["summary"], operator_check
    assert "without leader election" in operator_check["summary"], operator_check
    rings = subprocess.run([KUBECTL_EXPRESS, "rings"], env={**os.environ, "KUBECONFIG": str(sim.kubeconfig)},
                           capture_output=True, text=True, timeout=30)
    assert rings.returncode == 0, rings.stdout + rings.stderr
    assert "without leader election" in rings.stderr, rings.stderr

    stop_process(operator, signal.SIGKILL)
    for team in TEAMS:
        sim.kubectl("patch", "expresscluster", "shop", "-n", team, "--type", "merge",
                    "-p", json.dumps({"spec": {"defaults": {"frontend": {"expressVersion": "v2"}}}}))
    report = doctor_until(sim, "infrastructure", "--stale-after", "2s",
                          because=lambda r: check(r, "operator")["status"] == "fail")
    assert "no operator has led this ring" in check(report, "operator")["summary"]
    rings = subprocess.run([KUBECTL_EXPRESS, "rings"], env={**os.environ, "KUBECONFIG": str(sim.kubeconfig)},
                           capture_output=True, text=True, timeout=30)
    assert rings.returncode == 1, rings.stdout + rings.stderr
