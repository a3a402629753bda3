"""One release across every DC (DESIGN section 14) with every part a process of its own: three
`kubesim serve` DCs in one kubeconfig, each with two real `express-operator run --leader-elect`
processes (`--ring default`, the trusted build, and `--ring canary`, the build under test) and a
few tenants applied with kubectl 1.37; the plan driven by the real `kubectl express
fleet-release` binary. What is asserted is what the API shows (each DC's FleetRelease copy, its
OperatorRelease, its tenants' rings) and the plugin's exit codes.

The stage machine and the DC-against-DC judge are table- and property-tested in
crates/express-planner/tests/fleet_release.rs; these tests are the plan through real clients."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import KUBECTL_EXPRESS, eventually, start_sim, stop_sim, tenant_yaml
from test_fleet import write_kubeconfig
from test_kubectl import install
from test_release_api import NODE_CRDS, crd, crd_documents, has_recovery, without_recovery
from test_rings import RING_LABEL, Operators

DCS = ["dc-a", "dc-b", "dc-c"]
TENANTS = ["team-a", "team-b"]


def plan_yaml(name, approval=False, soak=4, one_by_one=False):
    stages = [{"name": "canary-dc", "contexts": ["dc-a"]},
              {"name": "rest", "contexts": ["dc-b", "dc-c"], **({"approval": True} if approval else {})}]
    if one_by_one:
        stages = [{"name": dc, "contexts": [dc]} for dc in DCS]
    return json.dumps({
        "apiVersion": "express.dev/v1alpha1", "kind": "FleetRelease",
        "metadata": {"name": name, "namespace": "express-system"},
        "spec": {"fromRing": "default", "toRing": "canary",
                 "release": {"waves": [{"tenants": 1}, {"percent": 100}], "bakeSeconds": 2,
                             "intervalSeconds": 1, "failureLimit": 1, "adoptionDeadlineSeconds": 30},
                 "stages": stages, "soakSeconds": soak, "stageDeadlineSeconds": 300}})


class Fleet:
    def __init__(self, sims, operators, kubeconfig, directory):
        self.sims, self.operators, self.kubeconfig, self.directory = sims, operators, kubeconfig, directory

    def kx(self, *args, timeout=180, cwd=None):
        result = subprocess.run([KUBECTL_EXPRESS, *args], capture_output=True, text=True, timeout=timeout,
                                cwd=cwd, env={**os.environ, "KUBECONFIG": str(self.kubeconfig)})
        print(f"$ kubectl express {' '.join(args)}  (exit {result.returncode})\n{result.stdout}{result.stderr}")
        return result

    def driver(self, *args):
        log = open(self.directory / "driver.log", "a")
        return subprocess.Popen([KUBECTL_EXPRESS, "fleet-release", *args], stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "KUBECONFIG": str(self.kubeconfig)}, cwd=self.directory)

    def plan_file(self, name, **kwargs):
        """The plan `name` written to a file (see `plan_yaml` for the options)."""
        path = self.directory / f"{name}.yaml"
        path.write_text(plan_yaml(name, **kwargs))
        return str(path)

    def copy(self, dc, name):
        return self.sims[dc].kubectl_json("get", "fleetrelease", name, "-n", "express-system")

    def phase(self, dc, name):
        """The phase the copy in `dc` shows (None: no copy yet, or no status)."""
        copies = self.sims[dc].kubectl_json("get", "fleetreleases", "-n", "express-system")["items"]
        return next((c.get("status", {}).get("phase") for c in copies if c["metadata"]["name"] == name), None)

    def releases(self, dc):
        return self.sims[dc].kubectl_json("get", "operatorreleases", "-n", "express-system")["items"]

    def release_phase(self, dc, name):
        found = [r for r in self.releases(dc) if r["metadata"]["name"] == name]
        return found[0].get("status", {}).get("phase") if found else None

    def on_ring(self, dc, ring):
        clusters = self.sims[dc].kubectl_json("get", "expressclusters", "-A")["items"]
        return all(c.get("status", {}).get("operator", {}).get("ring") == ring
                   and not c["status"]["operator"].get("adopting") and c["status"].get("phase") == "Healthy"
                   for c in clusters) and len(clusters) == len(TENANTS)

    def status(self, name):
        result = self.kx("fleet-release", name, "-o", "json", "--context", "dc-c")
        return json.loads(result.stdout)


def healthy_on_default(sim):
    clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
    return len(clusters) == len(TENANTS) and all(
        c.get("status", {}).get("phase") == "Healthy"
        and c.get("status", {}).get("operator", {}).get("ring") == "default" for c in clusters)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fleet-release")
    sims, operators = {}, {}
    try:
        for dc in DCS:
            (directory / dc).mkdir()
            sim = sims[dc] = start_sim(directory / dc)
            install(sim)
            sim.kubectl("wait", "--for=condition=Established", "crd/fleetreleases.express.dev", "--timeout=10s")
            sim.kubectl("create", "namespace", "express-system")
            operators[dc] = Operators(sim, directory / dc)
            operators[dc].start("default")
            operators[dc].start("canary")
            sim.kubectl("apply", "-f", "-", input="\n---\n".join(tenant_yaml(ns) for ns in TENANTS))
        kubeconfig = directory / "kubeconfig.yaml"
        write_kubeconfig(kubeconfig, {dc: (sims[dc].url, None) for dc in DCS})
        for dc in DCS:
            eventually(lambda: healthy_on_default(sims[dc]), timeout=90, what=f"{dc} healthy on ring default")
        yield Fleet(sims, operators, kubeconfig, directory)
    finally:
        for group in operators.values():
            group.close()
        for sim in sims.values():
            if sim.process.poll() is None:
                stop_sim(sim)
        log = directory / "driver.log"
        if log.exists():
            print(f"--- driver.log\n{log.read_text()[-6000:]}")


def test_a_plan_over_two_stages_survives_its_driver_killed_and_can_be_undone(fleet, tmp_path):
    plan = fleet.plan_file("to-canary")
    # Refused before anything is written: an unknown context.
    bad = fleet.directory / "bad.yaml"
    bad.write_text(plan_yaml("to-nowhere").replace('"dc-c"', '"dc-x"'))
    refused = fleet.kx("fleet-release", "run", "-f", str(bad))
    assert refused.returncode == 2 and 'context "dc-x"' in refused.stderr
    assert all(not fleet.sims[dc].kubectl_json("get", "fleetreleases", "-n", "express-system")["items"] for dc in DCS)
    # What would happen, touching nothing.
    dry = fleet.kx("fleet-release", "plan", "-f", plan)
    assert dry.returncode == 0 and "stage 1 (rest): release dc-b, dc-c" in dry.stdout

    driver = fleet.driver("run", "-f", plan)
    # Killed mid-stage: dc-a's release under way or soaking.
    eventually(lambda: fleet.release_phase("dc-a", "to-canary") is not None, timeout=60, what="dc-a released")
    time.sleep(1.5)
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=10)
    # Every DC holds the plan, with its phase for any tool.
    for dc in DCS:
        assert fleet.copy(dc, "to-canary")["spec"]["stages"][1]["contexts"] == ["dc-b", "dc-c"]
    # Resumed by name, from another directory.
    resumed = fleet.kx("fleet-release", "run", "to-canary", "--timeout", "150s", cwd=str(tmp_path))
    assert resumed.returncode == 0, resumed.stdout
    for dc in DCS:
        mine = [r for r in fleet.releases(dc) if r["metadata"].get("labels", {}).get("express.dev/fleet-release") == "to-canary"]
        assert len(mine) == 1, f"{dc} released once: {mine}"
        assert mine[0]["status"]["phase"] == "Succeeded"
        assert fleet.copy(dc, "to-canary")["status"]["phase"] == "Succeeded"
        eventually(lambda: fleet.on_ring(dc, "canary"), timeout=60, what=f"{dc} on ring canary")
    status = fleet.status("to-canary")
    assert status["name"] == "to-canary" and status["phase"] == "Succeeded"
    assert {d["context"]: d["state"] for d in status["dataCenters"]} == {dc: "Succeeded" for dc in DCS}
    shown = fleet.kx("fleet-release", "to-canary")
    assert shown.returncode == 0 and "Succeeded" in shown.stdout.splitlines()[0]
    # Done, then undone: every DC home.
    undone = fleet.kx("fleet-release", "abort", "--rollback", "to-canary")
    assert undone.returncode == 0 and "RolledBack" in undone.stdout
    for dc in DCS:
        eventually(lambda: fleet.release_phase(dc, "to-canary") == "RolledBack", timeout=60, what=f"{dc} rolled back")
        eventually(lambda: fleet.on_ring(dc, "default"), timeout=90, what=f"{dc} home on ring default")
    again = fleet.kx("fleet-release", "run", "to-canary")
    assert again.returncode == 1, "a plan rolled back answers its code at once"
    # A changed plan under the same name is refused, in every DC, before anything is written.
    changed = fleet.directory / "changed.yaml"
    changed.write_text(plan_yaml("to-canary", soak=99))
    refused = fleet.kx("fleet-release", "run", "-f", str(changed))
    assert refused.returncode == 2 and "different plan" in refused.stderr


def test_an_approval_gate_a_pause_and_an_unreachable_dc(fleet):
    # dc-b's node CRDs are from before `status.change.recovery`: they change when its stage
    # starts, never before (DESIGN section 15), so the soak compares DCs on either API.
    older = fleet.sims["dc-b"]
    documents = [d for d in crd_documents(without_recovery) if d["metadata"]["name"] in NODE_CRDS]
    older.kubectl("replace", "-f", "-", input="\n---\n".join(json.dumps(d) for d in documents))
    generations = {name: crd(older, name)["metadata"]["generation"] for name in NODE_CRDS}
    assert not has_recovery(crd(older, "frontends.express.dev"))
    plan = fleet.plan_file("gated", approval=True, soak=2)
    waiting = fleet.kx("fleet-release", "run", "-f", plan, "--timeout", "120s")
    assert waiting.returncode == 5, "stopped at the gate"
    assert fleet.status("gated")["phase"] == "WaitingApproval"
    assert fleet.release_phase("dc-b", "gated") is None
    # dc-a's stage ran and soaked; dc-b's CRDs are as they were.
    assert {name: crd(older, name)["metadata"]["generation"] for name in NODE_CRDS} == generations
    assert not has_recovery(crd(older, "frontends.express.dev"))
    approved = fleet.kx("fleet-release", "approve", "gated")
    assert approved.returncode == 0
    driver = fleet.driver("run", "gated", "--timeout", "120s")
    eventually(lambda: fleet.release_phase("dc-b", "gated") is not None, timeout=60, what="stage rest started")
    # Paused with a driver running: the command pauses the releases itself; the driver exits 5.
    paused = fleet.kx("fleet-release", "pause", "gated")
    assert paused.returncode == 0 and "Paused" in paused.stdout
    assert driver.wait(timeout=60) == 5
    for dc in ["dc-b", "dc-c"]:
        released = [r for r in fleet.releases(dc) if r["metadata"]["name"] == "gated"]
        assert all(r["spec"].get("paused") for r in released), released
    resumed = fleet.kx("fleet-release", "resume", "gated")
    assert resumed.returncode == 0
    # A DC that cannot be read at the timeout: exit 4, naming it.
    fleet.sims["dc-c"].process.send_signal(signal.SIGSTOP)
    try:
        stuck = fleet.kx("fleet-release", "run", "gated", "--timeout", "8s", "--context-timeout", "2s",
                         "--context", "dc-a")
        assert stuck.returncode == 4, stuck.stdout
        assert "dc-c" in stuck.stdout + stuck.stderr
    finally:
        fleet.sims["dc-c"].process.send_signal(signal.SIGCONT)
    done = fleet.kx("fleet-release", "run", "gated", "--timeout", "150s")
    assert done.returncode == 0, done.stdout
    # dc-b's stage applied its build's CRDs before its first move.
    released = [r for r in fleet.releases("dc-b") if r["metadata"]["name"] == "gated"][0]
    assert released["status"]["api"]["outcome"] == "Applied", released["status"]
    assert has_recovery(crd(older, "frontends.express.dev"))
    # Home again for the next plan.
    assert fleet.kx("fleet-release", "abort", "--rollback", "gated").returncode == 0
    for dc in DCS:
        eventually(lambda: fleet.on_ring(dc, "default"), timeout=90, what=f"{dc} home on ring default")


def test_a_build_that_cannot_write_in_the_second_stage_stops_the_plan(fleet):
    plan = fleet.plan_file("blocked", soak=2, one_by_one=True)
    # The canary build of dc-b writes nothing: its release's own judge rolls it back.
    sim = fleet.sims["dc-b"]
    agent = next(a for a in sim.control("GET", "counters/agents") if a.endswith("(ring canary)"))

    # From its release on (it led its ring until then, as a build that breaks under load does;
    # a build that never led would hold the stage until its deadline instead).
    def stop_writes_once_released():
        eventually(lambda: fleet.release_phase("dc-b", "blocked") is not None, timeout=200,
                   what="dc-b's release")
        sim.control("POST", "write-stops", {"agent": agent, "after": 0})

    stopper = threading.Thread(target=stop_writes_once_released, daemon=True)
    stopper.start()
    try:
        failed = fleet.kx("fleet-release", "run", "-f", plan, "--timeout", "240s")
        assert failed.returncode == 1, failed.stdout
        status = fleet.status("blocked")
        assert status["phase"] == "Failed"
        states = {d["context"]: d["state"] for d in status["dataCenters"]}
        assert states["dc-b"] in ("RolledBack", "Failed"), states
        # The next stage never started.
        assert states["dc-c"] == "Waiting" and fleet.release_phase("dc-c", "blocked") is None, states
        eventually(lambda: fleet.release_phase("dc-b", "blocked") == "RolledBack", timeout=60, what="dc-b rolled back")
        # dc-a passed its soak before: it stays released until a person says otherwise.
        assert fleet.release_phase("dc-a", "blocked") == "Succeeded"
    finally:
        stopper.join(timeout=210)
        # Lifted: a stop this far off never comes.
        sim.control("POST", "write-stops", {"agent": agent, "after": 10**9})
    assert fleet.kx("fleet-release", "abort", "--rollback", "blocked").returncode == 0
    for dc in DCS:
        eventually(lambda: fleet.on_ring(dc, "default"), timeout=90, what=f"{dc} home on ring default")


def test_the_new_build_killed_in_a_released_dc_fails_its_soak_and_that_dc_goes_home(fleet):
    plan = fleet.plan_file("killed", soak=600)
    driver = fleet.driver("run", "-f", plan, "--timeout", "300s")
    eventually(lambda: fleet.phase("dc-a", "killed") == "Soaking", timeout=90, what="dc-a soaking")
    started = time.time()
    fleet.operators["dc-a"].stop("canary", signal.SIGKILL)
    try:
        assert driver.wait(timeout=240) == 1
        assert time.time() - started < 200, "failed well before the soak's 600 s"
        copy = fleet.copy("dc-b", "killed")["status"]
        assert copy["phase"] == "Failed" and "soak of stage 0" in copy["message"], copy
        assert any(s["verdict"] == "Failed" for s in copy["samples"])
        # Rolled back by its trusted ring; the next stage never started.
        eventually(lambda: fleet.release_phase("dc-a", "killed") == "RolledBack", timeout=60, what="dc-a rolled back")
        eventually(lambda: fleet.on_ring("dc-a", "default"), timeout=120, what="dc-a home on ring default")
        assert fleet.release_phase("dc-b", "killed") is None and fleet.release_phase("dc-c", "killed") is None
    finally:
        if driver.poll() is None:
            driver.kill()
        fleet.operators["dc-a"].start("canary")
