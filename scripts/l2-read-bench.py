#!/usr/bin/env python3
"""What the L2's read verbs cost the plugin on one DC (issue 53): `doctor`, `list -A`, `rings`
and the dashboard's first listing, at several fleet sizes, for one or more plugin builds on the
same fleet.

    .venv/bin/python scripts/l2-read-bench.py [--tenants 200,500,1000] [--runs 5]
        [--plugin before=PATH] [--plugin after=PATH]

For each size it runs a `kubesim serve` and an `express-operator run --leader-elect` in
processes of their own, creates the tenants through kubesim's API (one namespace, one
ExpressCluster, one Backend and `--frontends` Frontends each), waits until every tenant is
Healthy, then runs each verb `--runs` times with each plugin and reports, best and median:

- the plugin's CPU (user + system of the process, from wait4), its wall time and its peak RSS;
- the API requests it sent (kubesim's per-User-Agent counters: `kubectl-express/...`);
- for the dashboard, the CPU and RSS of `kubectl express dashboard -A` from its start to its
  first `GET /api/tenants` answering every tenant;
- and the CPU a change of one tenant costs the dashboard once it has listed (`--redraws`
  changes, each to a tenant of its own: its namespace's control ConfigMap created, pausing it,
  the operator's answer written, then one `GET /api/tenants` showing the tenant paused), against
  the same windows without a change. Its doctor runs once at start (`--doctor-interval 3600`).

`--attach KUBECONFIG` measures a fleet already up (e.g. one `--hold` kept, or a DC of
scripts/fleet-doctor-bench.py) instead of making one: `--tenants` is then its one size.

Needs the release binaries (`cargo build --release -p kubesim -p express-operator -p
kubectl-express`) and kubectl in the virtualenv. Not part of the tests."""

import argparse
import importlib.util
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fleet_doctor_bench",
                                               ROOT / "scripts" / "fleet-doctor-bench.py")
doctor_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doctor_bench)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

VERBS = {
    "doctor": ["doctor", "-o", "json"],
    "list -A": ["list", "-A", "-o", "json"],
    "rings": ["rings", "-o", "json"],
}


def plugin_requests(dc):
    """Requests the plugin sent so far (its User-Agent, `kubectl-express/VERSION`)."""
    url = f"{dc.server}/kubesim/counters/agents"
    with urllib.request.urlopen(url, timeout=30) as response:
        agents = json.loads(response.read())
    return sum(sum(calls.values()) for agent, calls in agents.items()
               if agent.startswith("kubectl-express/"))


def run_verb(plugin, argv, env):
    """CPU seconds, wall seconds, peak RSS (MiB, the process's own: see
    `fleet-doctor-bench.run_measured`) and exit code of one plugin process."""
    code, _, stderr, cpu, wall, rss = doctor_bench.run_measured([plugin, *argv], env)
    return cpu, wall, rss, code, stderr


def proc_cpu(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def proc_hwm_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def listed(process, tenants, begin):
    """The URL a dashboard process prints, once its first listing counts every tenant and its
    doctor's banner is drawn."""
    url = None
    while url is None:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the dashboard exited before printing its URL")
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        url = found.group(0) if found else None
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/tenants", timeout=60) as response:
                body = json.loads(response.read())
            if body.get("total", 0) >= tenants and body.get("doctor"):
                return url
        except OSError:
            pass
        assert time.perf_counter() - begin < 300, "the dashboard never listed every tenant"
        time.sleep(0.02)


def run_dashboard(plugin, env, tenants):
    """CPU seconds, wall seconds and peak RSS (MiB) of the dashboard until its first listing
    counts every tenant and its doctor's banner is drawn."""
    begin = time.perf_counter()
    process = subprocess.Popen([str(plugin), "dashboard", "-A", "--addr", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                               text=True)
    try:
        listed(process, tenants, begin)
        wall = time.perf_counter() - begin
        return proc_cpu(process.pid), wall, proc_hwm_mib(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=20)
        process.stdout.close()


def dashboard_cpu_per_change(plugin, env, tenants, kube, changes, first):
    """The dashboard's CPU (ms) per window with a change of one tenant and per window without,
    once it has listed every tenant: `changes` windows each, alternating; each window is a
    1.5 s wait then one `GET /api/tenants` for the tenant. Tenants `first`.. are paused through
    their namespace's control ConfigMap, and resumed (the ConfigMap deleted) at the end."""
    process = subprocess.Popen([str(plugin), "dashboard", "-A", "--addr", "127.0.0.1:0",
                                "--doctor-interval", "3600"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                               text=True)
    created = []
    try:
        url = listed(process, tenants, time.perf_counter())
        time.sleep(3)

        def window(namespace, change):
            start = proc_cpu(process.pid)
            if change:
                kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "express-control", "namespace": namespace},
                    "data": {"paused": "true", "reason": "l2-read-bench"}})
                created.append(namespace)
            time.sleep(1.5)
            with urllib.request.urlopen(f"{url}/api/tenants?q={namespace}", timeout=60) as response:
                rows = json.loads(response.read())["tenants"]
            if change:
                assert rows and rows[0]["paused"] not in ("false", "-", ""), rows[:1]
            return (proc_cpu(process.pid) - start) * 1000

        with_change, without = [], []
        for i in range(changes):
            namespace = f"tenant-{first + i:05d}"
            without.append(window(namespace, False))
            with_change.append(window(namespace, True))
        return with_change, without
    finally:
        for namespace in created:
            try:
                kube.request("DELETE",
                             f"/api/v1/namespaces/{namespace}/configmaps/express-control")
            except Exception as error:  # noqa: BLE001: a clean-up, reported
                print(f"    could not resume {namespace}: {error}", flush=True)
        process.terminate()
        process.wait(timeout=20)
        process.stdout.close()


def summary(values, unit, scale=1.0):
    values = sorted(v * scale for v in values)
    return f"best {values[0]:.2f} {unit}, median {statistics.median(values):.2f} {unit}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", default="200,500,1000", help="fleet sizes, comma-separated")
    parser.add_argument("--frontends", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--startup-seconds", default="0.05")
    parser.add_argument("--profile", default="release")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for Healthy")
    parser.add_argument("--plugin", action="append", default=[], metavar="NAME=PATH",
                        help="a plugin build to measure (default: this tree's)")
    parser.add_argument("--no-dashboard", action="store_true",
                        help="the verbs alone (--measure verbs)")
    parser.add_argument("--measure", default="verbs,first-listing,redraw",
                        help="what to measure, comma-separated: verbs (doctor, list -A, rings), "
                             "first-listing (the dashboard's), redraw (the dashboard's)")
    parser.add_argument("--redraws", type=int, default=20,
                        help="changes of one tenant each the dashboard's redraw is measured over "
                             "(0: none)")
    parser.add_argument("--attach", metavar="KUBECONFIG",
                        help="measure the fleet this kubeconfig's context serves, already up")
    parser.add_argument("--hold", action="store_true",
                        help="keep the fleet of the last size up once measured (until interrupted), "
                             "printing its kubeconfig, e.g. to profile the plugin against it")
    args = parser.parse_args()
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    bin_dir = target / args.profile
    plugins = [tuple(p.split("=", 1)) for p in args.plugin] or [("this", bin_dir / "kubectl-express")]
    for name in ("kubesim", "express-operator"):
        if not (bin_dir / name).exists():
            sys.exit(f"{bin_dir / name} is missing: build it first")
    for _, path in plugins:
        if not pathlib.Path(path).exists():
            sys.exit(f"{path} is missing: build it first")
    sizes = [int(n) for n in args.tenants.split(",")]
    measures = {"verbs"} if args.no_dashboard else set(args.measure.split(","))
    if args.attach and len(sizes) != 1:
        sys.exit("--attach measures one fleet: give its size alone to --tenants")
    for size in sizes:
        work = pathlib.Path(tempfile.mkdtemp(prefix="l2-read-bench-"))
        processes = []
        settings = argparse.Namespace(**{**vars(args), "tenants": size})
        dc = doctor_bench.Dc("dc-a", work, bin_dir, settings, processes)
        try:
            if args.attach:
                dc.attach(pathlib.Path(args.attach))
                print(f"## {size} tenants x {args.frontends + 1} nodes: {dc.healthy()} Healthy "
                      f"(attached)", flush=True)
            else:
                started = time.monotonic()
                dc.start()
                dc.start_operator()
                dc.create_tenants()
                while dc.healthy() < size:
                    assert time.monotonic() - started < args.timeout, "not every tenant Healthy"
                    assert dc.operator.poll() is None, "the operator exited"
                    time.sleep(2)
                print(f"## {size} tenants x {args.frontends + 1} nodes: Healthy "
                      f"{time.monotonic() - started:.0f} s after the start", flush=True)
            env = dc.env()
            for name, plugin in plugins:
                for verb, argv in VERBS.items() if "verbs" in measures else []:
                    cpus, walls, rsss, requests = [], [], [], []
                    for _ in range(args.runs):
                        before = plugin_requests(dc)
                        cpu, wall, rss, code, stderr = run_verb(plugin, argv, env)
                        requests.append(plugin_requests(dc) - before)
                        if code != 0:
                            print(f"    {name} {verb}: exit {code}: {stderr.strip()[:300]}")
                        cpus.append(cpu)
                        walls.append(wall)
                        rsss.append(rss)
                    print(f"{name:>8} {verb:<9} CPU {summary(cpus, 's')} "
                          f"({min(cpus) / size * 1000:.3f} ms/tenant); wall "
                          f"{summary(walls, 's')}; peak RSS {summary(rsss, 'MiB')}; "
                          f"requests {max(requests)}", flush=True)
                if "first-listing" in measures:
                    cpus, walls, rsss = [], [], []
                    for _ in range(args.runs):
                        cpu, wall, rss = run_dashboard(plugin, env, size)
                        cpus.append(cpu)
                        walls.append(wall)
                        rsss.append(rss)
                    print(f"{name:>8} dashboard first listing: CPU {summary(cpus, 's')} "
                          f"({min(cpus) / size * 1000:.3f} ms/tenant); wall "
                          f"{summary(walls, 's')}; peak RSS {summary(rsss, 'MiB')}", flush=True)
                if "redraw" in measures and args.redraws:
                    changed, idle = dashboard_cpu_per_change(
                        plugin, env, size, dc.kube, args.redraws,
                        first=(plugins.index((name, plugin)) + 1) * args.redraws)
                    print(f"{name:>8} dashboard, a change of one tenant redrawn: CPU "
                          f"{statistics.mean(changed):.1f} ms a window with a change (median "
                          f"{statistics.median(changed):.1f}), {statistics.mean(idle):.1f} ms "
                          f"a window without (median {statistics.median(idle):.1f}); "
                          f"{args.redraws} each", flush=True)
            if args.hold and size == sizes[-1]:
                print(f"holding the fleet: KUBECONFIG={dc.kubeconfig}", flush=True)
                while dc.operator.poll() is None:
                    time.sleep(5)
        finally:
            doctor_bench.stop(processes)


if __name__ == "__main__":
    main()
