#!/usr/bin/env python3
"""A 100 % OperatorRelease over a fleet (DESIGN section 12): `kubesim serve`, two operator
processes (`--ring default`, `--ring canary`, leader election on), TENANTS tenants applied with
kubectl as multi-document YAML and provisioned by `default`; then one release moves every tenant
to `canary` in a single wave. It prints the time from apply to Succeeded, the API writes per
tenant moved (all clients: both operators' label, status, claim and restamp writes, counted by
kubesim per User-Agent), and the largest number of hand-overs in flight, read from the tenants'
labels and owners, polled back to back.

    .venv/bin/python scripts/release-bench.py [--tenants 1000] [--frontends 1] [--max-hand-overs 20]
        [--profile release]

Needs the binaries of the profile built (`cargo build --release -p kubesim -p express-operator`)
and kubectl in the virtualenv (`bash scripts/test.sh` installs it). Not part of the tests."""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or "kubectl"
RING_LABEL = "express.dev/operator-ring"


def tenant(namespace, frontends):
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
         "metadata": {"name": "shop", "namespace": namespace},
         "spec": {"rollout": {"settleSeconds": 0},
                  "defaults": {"backend": {"expressVersion": "v1"}, "frontend": {"expressVersion": "v1"}}}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
         "metadata": {"name": "shop-be", "namespace": namespace},
         "spec": {"clusterConfig": {"clusterName": "shop"}, "up": True}},
    ] + [{"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
          "metadata": {"name": f"shop-fe{i}", "namespace": namespace},
          "spec": {"clusterConfig": {"clusterName": "shop"}, "up": True}} for i in range(1, frontends + 1)]


class Sim:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work, self.processes = bin_dir, work, []
        self.kubeconfig = work / "kubeconfig"
        self.spawn([bin_dir / "kubesim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig", str(self.kubeconfig),
                    "--startup-seconds", "0.05", "--terminate-seconds", "0.05"], "kubesim")
        deadline = time.time() + 20
        while not self.kubeconfig.exists() or not self.kubeconfig.read_text().strip():
            assert time.time() < deadline, "kubesim did not start"
            time.sleep(0.05)
        self.url = next(line.split("server:", 1)[1].strip() for line in self.kubeconfig.read_text().splitlines()
                        if "server:" in line)
        self.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
        self.kubectl("create", "namespace", "express-system")

    def spawn(self, argv, name):
        log = open(self.work / f"{name}.log", "w")
        process = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "POD_NAME": name,
                                        "RUST_LOG": "warn"})
        self.processes.append(process)
        return process

    def operator(self, ring):
        return self.spawn([self.bin_dir / "express-operator", "run", "--leader-elect", "--ring", ring,
                           "--metrics-addr", "127.0.0.1:0", "--operator-namespace", "express-system"],
                          f"operator-{ring}")

    def kubectl(self, *args, stdin=None):
        return subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, check=True,
                              env={**os.environ, "KUBECONFIG": str(self.kubeconfig)}, timeout=600).stdout

    def clusters(self):
        return json.loads(self.kubectl("get", "expressclusters", "-A", "-o", "json"))["items"]

    def writes(self):
        """Writes of every client so far (kubesim's per-agent counters)."""
        with urllib.request.urlopen(f"{self.url}/kubesim/counters/agents", timeout=30) as response:
            agents = json.loads(response.read())
        return sum(count for calls in agents.values() for call, count in calls.items()
                   if call.split(" ")[0] in ("create", "update", "patch", "delete", "deletecollection"))

    def close(self):
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def owner(cluster):
    operator = cluster.get("status", {}).get("operator", {})
    if "released" in operator or operator.get("adopting"):
        return None
    return operator.get("ring")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--frontends", type=int, default=1)
    parser.add_argument("--max-hand-overs", type=int, default=20)
    parser.add_argument("--profile", default="release")
    args = parser.parse_args()
    bin_dir = ROOT / "target" / args.profile
    work = pathlib.Path(tempfile.mkdtemp(prefix="release-bench-"))
    sim = Sim(bin_dir, work)
    try:
        sim.operator("default")
        sim.operator("canary")
        documents = [d for i in range(args.tenants) for d in tenant(f"t{i:05}", args.frontends)]
        for start in range(0, len(documents), 2000):
            sim.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in documents[start:start + 2000]))
        deadline = time.time() + 1800
        while True:
            clusters = sim.clusters()
            if len(clusters) == args.tenants and all(
                    c.get("status", {}).get("phase") == "Healthy" and owner(c) == "default" for c in clusters):
                break
            assert time.time() < deadline, "the fleet was not provisioned in 30 minutes"
            time.sleep(2)
        print(f"provisioned {args.tenants} tenants x {args.frontends + 1} nodes", flush=True)

        writes_before = sim.writes()
        release = {"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                   "metadata": {"name": "bench", "namespace": "express-system"},
                   "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}],
                            "bakeSeconds": 1, "intervalSeconds": 1, "adoptionDeadlineSeconds": 600,
                            "maxHandOvers": args.max_hand_overs}}
        started = time.time()
        sim.kubectl("apply", "-f", "-", stdin=json.dumps(release))
        most_in_flight = 0
        while True:
            clusters = sim.clusters()
            in_flight = sum(1 for c in clusters if c["metadata"].get("labels", {}).get(RING_LABEL) == "canary"
                            and owner(c) != "canary")
            most_in_flight = max(most_in_flight, in_flight)
            status = json.loads(sim.kubectl("get", "operatorrelease", "bench", "-n", "express-system",
                                            "-o", "json")).get("status", {})
            if status.get("phase") == "Succeeded":
                break
            assert status.get("phase") != "RolledBack", status
            assert time.time() - started < 1800, f"not done in 30 minutes: {status}"
            time.sleep(0.1)
        elapsed = time.time() - started
        moved = status["movedTenants"]
        writes = sim.writes() - writes_before
        print(json.dumps({
            "tenants": args.tenants, "nodesPerTenant": args.frontends + 1, "maxHandOvers": args.max_hand_overs,
            "seconds": round(elapsed, 1), "tenantsMoved": moved,
            "writesPerTenantMoved": round(writes / max(moved, 1), 2),
            "mostHandOversInFlight": most_in_flight,
        }, indent=2))
    finally:
        sim.close()
        print(f"logs in {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
