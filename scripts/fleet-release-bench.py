#!/usr/bin/env python3
"""What the driver of a release across DCs costs while it soaks (DESIGN section 14): per DC,
`kubesim serve` and two operator processes (`--ring default`, `--ring canary`, leader election
on) with TENANTS tenants provisioned by `default`; one FleetRelease over stages [dc-a] then the
other DCs, soaking `--soak` seconds with a sample every `--interval` seconds. Once dc-a's stage
soaks, it measures for `--window` seconds the driver process's CPU (user + system, from /proc)
and the API requests it sends to each DC (kubesim's per-User-Agent counters, the operators'
agents left out), and prints both per DC per minute.

    .venv/bin/python scripts/fleet-release-bench.py [--dcs 3] [--tenants 50] [--interval 30]
        [--soak 600] [--window 120] [--profile release]

Needs the binaries of the profile built (`cargo build --release -p kubesim -p express-operator
-p kubectl-express`) and kubectl in the virtualenv. Not part of the tests."""

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("release_bench", ROOT / "scripts" / "release-bench.py")
release_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release_bench)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def driver_requests(sim):
    """Requests the driver sent (the plugin's User-Agent, `kubectl-express/VERSION`)."""
    with urllib.request.urlopen(f"{sim.url}/kubesim/counters/agents", timeout=30) as response:
        agents = json.loads(response.read())
    return sum(sum(calls.values()) for agent, calls in agents.items() if agent.startswith("kubectl-express/"))


def copy_phase(sim, name):
    items = json.loads(sim.kubectl("get", "fleetreleases", "-n", "express-system", "-o", "json"))["items"]
    return next((c.get("status", {}).get("phase") for c in items if c["metadata"]["name"] == name), None)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dcs", type=int, default=3)
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--interval", type=int, default=30)
    parser.add_argument("--soak", type=int, default=600)
    parser.add_argument("--window", type=int, default=120)
    parser.add_argument("--profile", default="release")
    args = parser.parse_args()
    bin_dir = ROOT / "target" / args.profile
    work = pathlib.Path(tempfile.mkdtemp(prefix="fleet-release-bench-"))
    names = [f"dc-{chr(ord('a') + i)}" for i in range(args.dcs)]
    sims = {}
    driver = None
    try:
        for name in names:
            (work / name).mkdir()
            sim = sims[name] = release_bench.Sim(bin_dir, work / name)
            sim.operator("default")
            sim.operator("canary")
            documents = [d for i in range(args.tenants) for d in release_bench.tenant(f"t{i:05}", 1)]
            sim.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in documents))
        for name, sim in sims.items():
            deadline = time.time() + 600
            while not (len(clusters := sim.clusters()) == args.tenants and all(
                    c.get("status", {}).get("phase") == "Healthy" and release_bench.owner(c) == "default"
                    for c in clusters)):
                assert time.time() < deadline, f"{name} was not provisioned in 10 minutes"
                time.sleep(1)
        kubeconfig = work / "fleet.kubeconfig"
        lines = ["apiVersion: v1", "kind: Config", "clusters:"]
        lines += [f"- {{name: {n}, cluster: {{server: '{s.url}'}}}}" for n, s in sims.items()]
        lines += ["users:"] + [f"- {{name: user-{n}, user: {{}}}}" for n in sims]
        lines += ["contexts:"] + [f"- {{name: {n}, context: {{cluster: {n}, user: user-{n}}}}}" for n in sims]
        lines += [f"current-context: {names[0]}"]
        kubeconfig.write_text("\n".join(lines) + "\n")
        plan = work / "plan.json"
        plan.write_text(json.dumps({
            "apiVersion": "express.dev/v1alpha1", "kind": "FleetRelease",
            "metadata": {"name": "bench", "namespace": "express-system"},
            "spec": {"fromRing": "default", "toRing": "canary",
                     "release": {"waves": [{"percent": 100}], "bakeSeconds": 1, "intervalSeconds": args.interval},
                     "stages": [{"name": "first", "contexts": names[:1]}, {"name": "rest", "contexts": names[1:]}],
                     "soakSeconds": args.soak}}))
        log = open(work / "driver.log", "w")
        driver = subprocess.Popen([bin_dir / "kubectl-express", "fleet-release", "run", "-f", str(plan)],
                                  stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
        deadline = time.time() + 600
        while copy_phase(sims[names[0]], "bench") != "Soaking":
            assert time.time() < deadline and driver.poll() is None, "stage first never soaked"
            time.sleep(1)
        cpu_before = cpu_seconds(driver.pid)
        requests_before = {n: driver_requests(s) for n, s in sims.items()}
        time.sleep(args.window)
        assert copy_phase(sims[names[0]], "bench") == "Soaking", "the soak ended inside the window"
        minutes = args.window / 60
        cpu = (cpu_seconds(driver.pid) - cpu_before) / minutes
        requests = {n: (driver_requests(s) - requests_before[n]) / minutes for n, s in sims.items()}
        print(f"{args.dcs} DCs x {args.tenants} tenants, a sample every {args.interval} s, "
              f"{args.window} s of soak measured")
        print(f"driver CPU: {cpu:.3f} s per minute ({cpu / args.dcs:.3f} s per DC per minute)")
        for name, count in requests.items():
            print(f"  {name}: {count:.1f} API requests per minute")
        with urllib.request.urlopen(f"{sims[names[1]].url}/kubesim/counters/agents", timeout=30) as response:
            calls = json.loads(response.read())
        for agent, counts in calls.items():
            if agent.startswith("kubectl-express/"):
                print(f"  {names[1]}, by call: {dict(sorted(counts.items()))}")
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
        for sim in sims.values():
            sim.close()


if __name__ == "__main__":
    main()
