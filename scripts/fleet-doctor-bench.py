#!/usr/bin/env python3
"""How long `kubectl express doctor --all-contexts` takes over several DCs (issue 41), against one
DC alone.

    .venv/bin/python scripts/fleet-doctor-bench.py [--dcs 3] [--tenants 1000] [--runs 10]

Runs, per DC, a `kubesim serve` and an `express-operator run --leader-elect` in processes of
their own, creates `--tenants` tenants in each through kubesim's API (one namespace, one
ExpressCluster, one Backend and `--frontends` Frontends each, as scripts/dashboard-bench.py
does), and waits until every tenant of every DC is Healthy. The kubeconfig is split over two
files merged through KUBECONFIG (dc-a in the first, the others in the second), as the end-to-end
test does. Then it times, `--runs` times each, the wall time of the plugin process for:

- `doctor --context dc-a` (one DC, the single-context verb as before the fleet flags);
- `doctor --context /^dc-a$/` (one DC through the fleet path: what reading by context adds);
- `doctor --all-contexts` (every DC, `--max-parallel 8`);
- `doctor --all-contexts --max-parallel 1` (every DC one after another);

the plugin's own CPU time (user + system), its peak RSS, and the per-context `elapsedMs` the
JSON reports, for each `--plugin` given (this tree's by default). A run that does not give exit
0 and `healthy` is printed with the contexts it could not read (`timeout after 10s` on a loaded
machine). `--hold` keeps the DCs up afterwards, for scripts/l2-read-bench.py `--attach`.
Needs the release binaries (`cargo build --release -p kubesim -p express-operator -p
kubectl-express`) and kubectl in the virtualenv. Not part of the tests."""

import argparse
import concurrent.futures
import importlib.util
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("dashboard_bench", ROOT / "scripts" / "dashboard-bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def run_measured(argv, env):
    """Runs `argv` to its end: its exit code, standard output and error, CPU seconds (user +
    system), wall seconds and peak RSS in MiB. The peak is the process's own high-water mark
    (VmHWM, read every 2 ms while it runs), not wait4's ru_maxrss, which Linux starts at the
    RSS of the process that forked it (this script's, hundreds of MiB after it read a fleet)."""
    begin = time.perf_counter()
    process = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    peak = [0.0]

    def follow():
        path = pathlib.Path(f"/proc/{process.pid}/status")
        while process.returncode is None:
            try:
                for line in path.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]) / 1024)
            except (OSError, ValueError):
                return
            time.sleep(0.002)

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    out = concurrent.futures.ThreadPoolExecutor(2)
    stdout, stderr = out.submit(process.stdout.read), out.submit(process.stderr.read)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - begin
    watcher.join()
    result = (process.returncode, stdout.result().decode(errors="replace"),
              stderr.result().decode(errors="replace"), usage.ru_utime + usage.ru_stime, wall,
              peak[0])
    out.shutdown()
    process.stdout.close()
    process.stderr.close()
    return result


class Dc:
    """One DC: its kubesim and its operator."""

    def __init__(self, name, work, bin_dir, args, processes):
        self.name, self.work, self.bin_dir, self.args = name, work, bin_dir, args
        self.processes = processes
        self.kubeconfig = work / f"{name}.kubesim.kubeconfig"

    def env(self):
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "RUST_LOG": "warn"}

    def spawn(self, argv, what):
        log = open(self.work / f"{self.name}-{what}.log", "w")
        process = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                   env=self.env(), start_new_session=True)
        self.processes.append((process, log))
        return process

    def attach(self, kubeconfig):
        """Measures a DC already up: the kubesim `kubeconfig` names (no operator started)."""
        self.kubeconfig = kubeconfig
        self.server = re.search(r"server:\s*'?([^'\s]+)", kubeconfig.read_text()).group(1)
        self.kube = bench.Kube(self.server)

    def start(self):
        self.spawn([self.bin_dir / "kubesim", "serve", "--addr", "127.0.0.1:0",
                    "--kubeconfig", self.kubeconfig,
                    "--startup-seconds", self.args.startup_seconds,
                    "--terminate-seconds", self.args.startup_seconds], "kubesim")
        deadline = time.monotonic() + 20
        while not self.kubeconfig.exists() or "server:" not in self.kubeconfig.read_text():
            assert time.monotonic() < deadline, f"{self.name}: kubesim did not start"
            time.sleep(0.05)
        self.server = re.search(r"server:\s*(\S+)", self.kubeconfig.read_text()).group(1)
        self.kube = bench.Kube(self.server)
        subprocess.run([bench.KUBECTL, "apply", "-f", str(ROOT / "deploy" / "crds")],
                       capture_output=True, check=True, env=self.env(), timeout=120)
        self.kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "express-system"}})

    def create_tenants(self):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for future in [pool.submit(bench.create_tenant, self.kube, f"tenant-{i:05d}",
                                       self.args.frontends)
                           for i in range(self.args.tenants)]:
                future.result(timeout=600)

    def start_operator(self):
        self.operator = self.spawn(
            [self.bin_dir / "express-operator", "run", "--leader-elect",
             "--metrics-addr", "127.0.0.1:0", "--operator-namespace", "express-system",
             "--kube-qps", "5000", "--kube-burst", "5000", "--concurrency", "64"], "operator")

    def healthy(self):
        items = self.kube.request("GET", f"{bench.GROUP}/expressclusters")["items"]
        return sum(1 for c in items if (c.get("status") or {}).get("phase") == "Healthy")


def stop(processes):
    """Stops the processes started (kubesims, operators), last first, and closes their logs."""
    for process, _ in reversed(processes):
        if process.poll() is None:
            process.terminate()
    for process, log in reversed(processes):
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()


def kubeconfig_file(path, dcs, current):
    lines = ["apiVersion: v1", "kind: Config", "clusters:"]
    lines += [f"- {{name: {d.name}, cluster: {{server: '{d.server}'}}}}" for d in dcs]
    lines += ["users:"] + [f"- {{name: user-{d.name}, user: {{}}}}" for d in dcs]
    lines += ["contexts:"] + [
        f"- {{name: {d.name}, context: {{cluster: {d.name}, user: user-{d.name}}}}}" for d in dcs]
    lines += [f"current-context: {current}"]
    path.write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dcs", type=int, default=3)
    parser.add_argument("--tenants", type=int, default=1000, help="tenants per DC")
    parser.add_argument("--frontends", type=int, default=7)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--startup-seconds", default="0.05")
    parser.add_argument("--profile", default="release")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for Healthy")
    parser.add_argument("--plugin", action="append", default=[], metavar="NAME=PATH",
                        help="a plugin build to measure (default: this tree's)")
    parser.add_argument("--only-all-contexts", action="store_true",
                        help="measure `doctor --all-contexts` alone")
    parser.add_argument("--hold", action="store_true",
                        help="keep the DCs up once measured (until interrupted), printing their "
                             "kubeconfigs, e.g. to measure other builds against them")
    parser.add_argument("--attach", metavar="DIR",
                        help="measure the DCs a --hold run keeps up (its folder, printed)")
    args = parser.parse_args()
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    bin_dir = target / args.profile
    for name in ("kubesim", "express-operator", "kubectl-express"):
        if not (bin_dir / name).exists():
            sys.exit(f"{bin_dir / name} is missing: build it first")
    work = pathlib.Path(tempfile.mkdtemp(prefix="fleet-doctor-bench-"))
    processes = []
    names = [f"dc-{chr(ord('a') + i)}" for i in range(args.dcs)]
    if args.attach:
        work = pathlib.Path(args.attach)
    dcs = [Dc(name, work, bin_dir, args, processes) for name in names]
    try:
        started = time.monotonic()
        for dc in dcs if args.attach else []:
            dc.attach(work / f"{dc.name}.kubesim.kubeconfig")
        for dc in [] if args.attach else dcs:
            dc.start()
            dc.create_tenants()
            dc.start_operator()
        print(f"{args.dcs} DCs x {args.tenants} tenants created in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        started = time.monotonic()
        while True:
            counts = [dc.healthy() for dc in dcs]
            if all(c == args.tenants for c in counts):
                break
            assert time.monotonic() - started < args.timeout, f"Healthy: {counts}"
            for dc in [] if args.attach else dcs:
                assert dc.operator.poll() is None, f"{dc.name}: the operator exited"
            time.sleep(2)
        print(f"every tenant Healthy {time.monotonic() - started:.1f} s later", flush=True)

        one, two = work / "one.yaml", work / "two.yaml"
        kubeconfig_file(one, dcs[:1], "dc-a")
        kubeconfig_file(two, dcs[1:], dcs[-1].name)
        env = {**os.environ, "KUBECONFIG": f"{one}:{two}"}
        plugins = ([tuple(p.split("=", 1)) for p in args.plugin]
                   or [("this", bin_dir / "kubectl-express")])
        cases = [
            ("one DC, single-context verb", ["--context", "dc-a"]),
            ("one DC, fleet path", ["--context", "/^dc-a$/"]),
            (f"{args.dcs} DCs, --all-contexts", ["--all-contexts"]),
            (f"{args.dcs} DCs, --all-contexts --max-parallel 1",
             ["--all-contexts", "--max-parallel", "1"]),
        ]
        if args.only_all_contexts:
            cases = [case for case in cases if case[1] == ["--all-contexts"]]
        for (name, plugin), (what, flags) in itertools.product(plugins, cases):
            walls, cpus, rsss, elapsed = [], [], [], {}
            for _ in range(args.runs):
                code, stdout, _, cpu, wall, rss = run_measured(
                    [plugin, "doctor", "-o", "json", *flags], env)
                result = argparse.Namespace(returncode=code)
                walls.append(wall)
                cpus.append(cpu)
                rsss.append(rss)
                report = json.loads(stdout)
                if result.returncode != 0 or report["verdict"] != "healthy":
                    unread = {e["context"]: e["error"] for e in report.get("contexts", [])
                              if e["status"] != "ok"}
                    print(f"    a run of {what}: exit {result.returncode}, "
                          f"{report['verdict']}, not read: {unread}", flush=True)
                for entry in report.get("contexts", []):
                    elapsed.setdefault(entry["context"], []).append(entry["elapsedMs"] / 1000)
            print(f"{name}: {what}: wall {bench.spread_ms(walls)}; the plugin's CPU "
                  f"{bench.spread_ms(cpus)}; peak RSS {min(rsss):.0f} to {max(rsss):.0f} MiB",
                  flush=True)
            for context, values in elapsed.items():
                print(f"    {context} elapsedMs: {bench.spread_ms(values)}", flush=True)
        if args.hold and not args.attach:
            print(f"holding the DCs: --attach {work}", flush=True)
            while all(dc.operator.poll() is None for dc in dcs):
                time.sleep(5)
    finally:
        stop(processes)


if __name__ == "__main__":
    main()
