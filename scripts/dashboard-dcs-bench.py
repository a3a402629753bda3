#!/usr/bin/env python3
"""How fast `kubectl express dashboard --context ...` is over several DCs (issue 41): time to
first byte of the fleet page across DCs, and the latency of its live updates.

    .venv/bin/python scripts/dashboard-dcs-bench.py [--dcs 3] [--tenants 1000] [--frontends 3]

Runs, per DC, a `kubesim serve` and an `express-operator run` (each its own process), creates
`--tenants` tenants in each through kubesim's API (namespaces `dcN-t-00000`...), waits until
every tenant of every DC is Healthy, writes one kubeconfig with a context per DC, and starts
`kubectl-express dashboard --all-contexts -A` (the kubeconfig has the DCs' contexts alone). It measures:

- the time from launching the dashboard to its URL line (every DC's watches have listed once);
- time to first byte (and last byte) of `GET /` (the fleet page across DCs: counts, badges and
  the first 200 rows, unhealthy first), `GET /?page=2`, `GET /api/tenants` (the JSON of the
  same page), a tenant page of the last DC, `--requests` times each;
- update latency: the fleet page's stream (`/api/stream`, no filter) stays open; each trial
  pauses one tenant (of DC 1, 2, 3... in turn) with a merge patch of `spec.paused`, then
  resumes it, and times the first event on the stream whose table shows it (a paused tenant
  leads the page; a resumed one no longer reads Paused), from the patch's answer and from the
  operator's status write (the script's own watch of that DC's ExpressClusters);
- the dashboard's RSS and CPU time.

Binaries come from `$CARGO_TARGET_DIR/release` (default `target/release`): build them first with
`cargo build --release -p kubesim -p express-operator -p kubectl-express`. Helpers are shared
with scripts/dashboard-bench.py. Not part of the tests."""

import argparse
import concurrent.futures
import importlib.util
import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("dashboard_bench", ROOT / "scripts" / "dashboard-bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

GROUP, CLUSTER, KUBECTL = bench.GROUP, bench.CLUSTER, bench.KUBECTL
now, spread_ms, percentile = bench.now, bench.spread_ms, bench.percentile


def row_phase(parts, namespace):
    """The phase of the tenant's row in a fleet update; None when the row is not on the page."""
    match = re.search(rf'data-namespace="{re.escape(namespace)}" data-cluster="{CLUSTER}" '
                      rf'data-phase="([^"]*)"', parts.get("tenants", ""))
    return match.group(1) if match else None


class Dcs:
    def __init__(self, args):
        self.args = args
        target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        self.bin_dir = target / "release"
        for name in ("kubesim", "express-operator", "kubectl-express"):
            if not (self.bin_dir / name).exists():
                sys.exit(f"{self.bin_dir / name} is missing: cargo build --release -p kubesim "
                         f"-p express-operator -p kubectl-express")
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="dashboard-dcs-bench-"))
        self.processes, self.logs = [], []
        self.names = [f"dc{d + 1}" for d in range(args.dcs)]
        self.kubes, self.operators, self.namespaces, self.watches = {}, {}, {}, {}

    def spawn(self, argv, name, env, stdout=None):
        log = open(self.work / f"{name}.log", "w")
        self.logs.append(log)
        process = subprocess.Popen([str(a) for a in argv], stdout=stdout or log,
                                   stderr=subprocess.STDOUT if stdout is None else log,
                                   env=env, start_new_session=True)
        self.processes.append(process)
        return process

    def env(self, kubeconfig):
        return {**os.environ, "KUBECONFIG": str(kubeconfig), "RUST_LOG": "warn"}

    def close(self):
        for watch in self.watches.values():
            watch.close()
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
        for log in self.logs:
            log.close()

    def start_dc(self, name):
        kubeconfig = self.work / f"{name}.kubeconfig"
        self.spawn([self.bin_dir / "kubesim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig",
                    kubeconfig, "--startup-seconds", self.args.startup_seconds,
                    "--terminate-seconds", self.args.startup_seconds],
                   f"kubesim-{name}", self.env(kubeconfig))
        deadline = time.monotonic() + 20
        while not kubeconfig.exists() or "server:" not in kubeconfig.read_text():
            assert time.monotonic() < deadline, "kubesim did not start"
            time.sleep(0.05)
        server = re.search(r"server:\s*(\S+)", kubeconfig.read_text()).group(1)
        kube = self.kubes[name] = bench.Kube(server)
        subprocess.run([KUBECTL, "apply", "-f", str(ROOT / "deploy" / "crds")], check=True,
                       capture_output=True, env=self.env(kubeconfig), timeout=120)
        kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "express-system"}})
        namespaces = self.namespaces[name] = [f"{name}-t-{i:05d}" for i in range(self.args.tenants)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for future in [pool.submit(bench.create_tenant, kube, n, self.args.frontends)
                           for n in namespaces]:
                future.result(timeout=900)
        self.operators[name] = self.spawn(
            [self.bin_dir / "express-operator", "run", "--metrics-addr", "127.0.0.1:0",
             "--operator-namespace", "express-system", "--kube-qps", "5000", "--kube-burst",
             "5000", "--concurrency", "64"], f"operator-{name}", self.env(kubeconfig))
        return server

    def wait_healthy(self, timeout):
        started = now()
        while True:
            healthy = {}
            for name, kube in self.kubes.items():
                items = kube.request("GET", f"{GROUP}/expressclusters")["items"]
                healthy[name] = sum(1 for c in items if (c.get("status") or {}).get("phase") == "Healthy")
            if all(n == self.args.tenants for n in healthy.values()):
                return now() - started
            if now() - started > timeout:
                raise TimeoutError(f"Healthy tenants per DC: {healthy}")
            for name, operator in self.operators.items():
                if operator.poll() is not None:
                    raise RuntimeError(f"the operator of {name} exited")
            time.sleep(2)

    def write_kubeconfig(self, servers):
        lines = ["apiVersion: v1", "kind: Config", "clusters:"]
        lines += [f"- {{name: {n}, cluster: {{server: '{servers[n]}'}}}}" for n in self.names]
        lines += ["users:"] + [f"- {{name: user-{n}, user: {{}}}}" for n in self.names]
        lines += ["contexts:"] + [f"- {{name: {n}, context: {{cluster: {n}, user: user-{n}}}}}"
                                  for n in self.names]
        lines += [f"current-context: {self.names[0]}"]
        self.kubeconfig = self.work / "kubeconfig"
        self.kubeconfig.write_text("\n".join(lines) + "\n")

    def start_dashboard(self):
        started = now()
        self.dashboard = self.spawn(
            [self.bin_dir / "kubectl-express", "dashboard", "--addr", "127.0.0.1:0", "-A",
             # Every context (one DC included: one plain --context NAME is the single-DC page).
             "--operator-namespace", "express-system", "--all-contexts"],
            "dashboard", self.env(self.kubeconfig), stdout=subprocess.PIPE)
        lines = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.dashboard.stdout.readline()),
                         daemon=True).start()
        try:
            line = lines.get(timeout=300).decode()
        except queue.Empty:
            raise TimeoutError("the dashboard printed no URL in 300 s") from None
        ready = now() - started
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, f"unexpected first line: {line!r}"
        self.port = int(match.group(1))
        return ready

    def ttfb(self, path, requests):
        first, last, size = [], [], 0
        for _ in range(requests):
            first_byte, last_byte, status, body = bench.timed_get(self.port, path)
            assert status == 200, (path, status, body[:200])
            first.append(first_byte)
            last.append(last_byte)
            size = len(body)
        return first, last, size

    def trials(self, fleet, count, timeout):
        out = {"write→status": [], "status→fleet": [], "write→fleet": []}
        for k in range(count):
            name = self.names[k % len(self.names)]
            namespaces = self.namespaces[name]
            namespace = namespaces[(k * 97 + len(namespaces) // 2) % len(namespaces)]
            for paused in (True, False):
                if paused:
                    status_wanted = lambda phase: phase == "Paused"  # noqa: E731
                    row_wanted = status_wanted
                else:
                    status_wanted = lambda phase: phase not in (None, "Paused")  # noqa: E731
                    # Resumed, the tenant leaves the head of the page (unhealthy first).
                    row_wanted = lambda phase: phase != "Paused"  # noqa: E731
                fleet.drain()
                before = now()
                self.kubes[name].merge_patch(bench.cluster_path(namespace), {"spec": {"paused": paused}})
                written = now()
                status = self.watches[name].wait(namespace, before, status_wanted, timeout)
                shown = fleet.wait(before, lambda parts: row_wanted(row_phase(parts, namespace)),
                                   timeout)
                out["write→status"].append(status - written)
                out["status→fleet"].append(shown - status)
                out["write→fleet"].append(shown - written)
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dcs", type=int, default=3)
    parser.add_argument("--tenants", type=int, default=1000, help="per DC")
    parser.add_argument("--frontends", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20, help="GETs per page (default 20)")
    parser.add_argument("--trials", type=int, default=9, help="tenants paused and resumed")
    parser.add_argument("--startup-seconds", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=1800, help="to provision, seconds")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    dcs = Dcs(args)
    failed = True
    rows = []
    try:
        started = now()
        servers = {name: dcs.start_dc(name) for name in dcs.names}
        print(f"{args.dcs} DCs x {args.tenants} tenants created in {now() - started:.1f} s", flush=True)
        provisioned = dcs.wait_healthy(args.timeout)
        print(f"every tenant Healthy {provisioned:.1f} s later", flush=True)
        for name, kube in dcs.kubes.items():
            listing = kube.request("GET", f"{GROUP}/expressclusters")
            dcs.watches[name] = bench.PhaseWatch(kube, listing["metadata"]["resourceVersion"])
            dcs.watches[name].start()
        dcs.write_kubeconfig(servers)

        ready = dcs.start_dashboard()
        rows.append(("launch to URL printed (every DC's watches listed)", f"{ready:.2f} s"))
        rows.append(("RSS after start", f"{bench.proc_status_kib(dcs.dashboard.pid, 'VmRSS:') / 1024:.1f} MiB"))
        time.sleep(3)  # the doctors' first runs
        last = dcs.names[-1]
        sample = dcs.namespaces[last][args.tenants // 2]
        for label, path in [("GET / (fleet page across DCs)", "/"),
                            ("GET /?page=2", "/?page=2"),
                            ("GET /api/tenants", "/api/tenants"),
                            (f"GET /dcs/{last}/tenants/NS/shop (tenant page)",
                             f"/dcs/{last}/tenants/{sample}/{CLUSTER}")]:
            first, last_byte, size = dcs.ttfb(path, args.requests)
            rows.append((f"{label}: first byte", spread_ms(first)))
            rows.append((f"{label}: last byte p50; size",
                         f"{percentile(last_byte, 50) * 1000:.1f} ms; {size / 1024:.1f} KiB"))
            print(f"{label}: first byte {spread_ms(first)}; {size} bytes", flush=True)

        fleet = bench.EventStream(dcs.port, "/api/stream")
        fleet.start()
        name = "hello"
        while name == "hello":  # the serving process's instance comes first
            arrived, name, data = fleet.next(120)
        assert name == "update", name
        rows.append(("fleet stream: first event after connecting; its size",
                     f"{(arrived - fleet.opened) * 1000:.1f} ms; {len(data) / 1024:.1f} KiB"))
        cpu0, wall0 = bench.cpu_seconds(dcs.dashboard.pid), now()
        out = dcs.trials(fleet, args.trials, 120)
        cpu = (bench.cpu_seconds(dcs.dashboard.pid) - cpu0) / (now() - wall0)
        for key in ("write→status", "status→fleet", "write→fleet"):
            rows.append((f"live update: {key}", spread_ms(out[key])))
        rows.append(("dashboard CPU during the trials", f"{cpu * 100:.1f}% of a core"))
        fleet.close()
        rows.append(("RSS at the end; peak",
                     f"{bench.proc_status_kib(dcs.dashboard.pid, 'VmRSS:') / 1024:.1f} MiB; "
                     f"{bench.proc_status_kib(dcs.dashboard.pid, 'VmHWM:') / 1024:.1f} MiB"))
        failed = False
    finally:
        dcs.close()
        if failed:
            for log in sorted(dcs.work.glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-15:]
                print(f"--- {log.name} (last lines)\n" + "\n".join(tail), file=sys.stderr)
        shutil.rmtree(dcs.work, ignore_errors=True)

    print()
    print(f"{args.dcs} DCs x {args.tenants} tenants x {args.frontends + 1} nodes, release build, "
          f"{args.requests} GETs per page, {args.trials} tenants paused and resumed")
    width = max(len(m) for m, _ in rows)
    for measure, figure in rows:
        print(f"  {measure:<{width}}  {figure}")


if __name__ == "__main__":
    main()
