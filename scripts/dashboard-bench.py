#!/usr/bin/env python3
"""How fast `kubectl express dashboard` is with a whole fleet loaded (issue 26): time to first
byte of its pages and JSON, and the latency of its live updates (server-sent events).

    .venv/bin/python scripts/dashboard-bench.py [--tenants 1000] [--frontends 7] [--trials 10]

Runs `kubesim serve`, `express-operator run` and `kubectl-express dashboard`, each in its own
process, on loopback. The tenants (one namespace, one ExpressCluster, one Backend and
`--frontends` Frontends each) are created through kubesim's API before the operator starts;
the script waits until every tenant is Healthy, then starts the dashboard (`-A`) and measures:

- the time from launching the dashboard to its URL line (its watches have listed once);
- time to first byte (and to the last byte) of `GET /` (the fleet page, every tenant a row),
  `GET /api/tenants`, the same with a filter no tenant matches (the fleet's view is built but
  no row is sent: what building the view costs), a tenant page and its JSON, `--requests`
  times each;
- update latency: the fleet page's stream (`/api/stream`) stays open; each trial opens one
  tenant's stream, pauses that tenant with a merge patch of `spec.paused` and then resumes it,
  and times the event that shows the new phase on each stream, from the patch's answer and from
  the operator's status write (seen on the script's own watch of ExpressClusters);
- the dashboard's RSS (`/proc/PID/status`) and CPU time (`/proc/PID/stat`) per phase;
- then (unless `--no-rollout`) the same trials while a fleet-wide upgrade is under way.

Needs the release binaries (`cargo build --release -p kubesim -p express-operator -p
kubectl-express`) and kubectl in the virtualenv (`bash scripts/test.sh` installs it). Not part
of the tests."""

import argparse
import concurrent.futures
import http.client
import json
import os
import pathlib
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parents[1]
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or "kubectl"
GROUP = "/apis/express.dev/v1alpha1"
CLUSTER = "shop"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def now():
    return time.perf_counter()


# ---- figures ----

def percentile(values, p):
    """Nearest rank: the smallest value with at least p% of the values at or below it."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def spread_ms(values):
    if not values:
        return "(none)"
    ms = [v * 1000 for v in values]
    return (f"p50 {percentile(ms, 50):.1f} ms, p95 {percentile(ms, 95):.1f} ms, "
            f"max {max(ms):.1f} ms (n={len(ms)})")


def proc_status_kib(pid, field):
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    """utime + stime of a process, seconds."""
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


# ---- kubesim's API, plain HTTP on loopback ----

class Kube:
    """JSON requests to kubesim, one keep-alive connection per thread."""

    def __init__(self, server):
        url = urllib.parse.urlsplit(server)
        assert url.scheme == "http" and url.hostname in ("127.0.0.1", "localhost"), server
        self.host, self.port = "127.0.0.1", url.port
        self.local = threading.local()

    def connection(self):
        if getattr(self.local, "connection", None) is None:
            self.local.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        return self.local.connection

    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        for attempt in range(3):
            connection = self.connection()
            try:
                headers = {"Accept": "application/json"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    headers["Content-Type"] = content_type
                connection.request(method, path, body=data, headers=headers)
                response = connection.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt == 2:
                    raise
                continue
            if response.status not in ok:
                raise RuntimeError(f"{method} {path}: {response.status} {payload[:300]!r}")
            return json.loads(payload) if payload else None
        raise AssertionError("unreachable")

    def create(self, path, body):
        return self.request("POST", path, body)

    def merge_patch(self, path, body):
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")


def tenant_objects(namespace, frontends):
    ec = {"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
          "metadata": {"name": CLUSTER, "namespace": namespace},
          "spec": {"rollout": {"settleSeconds": 0},
                   "defaults": {"backend": {"expressVersion": "v1"},
                                "frontend": {"expressVersion": "v1"}}}}
    nodes = [("backends", {"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
                           "metadata": {"name": f"{CLUSTER}-be", "namespace": namespace},
                           "spec": {"clusterConfig": {"clusterName": CLUSTER}, "up": True}})]
    nodes += [("frontends", {"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
                             "metadata": {"name": f"{CLUSTER}-fe{i}", "namespace": namespace},
                             "spec": {"clusterConfig": {"clusterName": CLUSTER}, "up": True}})
              for i in range(1, frontends + 1)]
    return ec, nodes


def create_tenant(kube, namespace, frontends):
    kube.create("/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    ec, nodes = tenant_objects(namespace, frontends)
    kube.create(f"{GROUP}/namespaces/{namespace}/expressclusters", ec)
    for plural, node in nodes:
        kube.create(f"{GROUP}/namespaces/{namespace}/{plural}", node)


def cluster_path(namespace):
    return f"{GROUP}/namespaces/{namespace}/expressclusters/{CLUSTER}"


# ---- watching ExpressClusters: when the operator wrote each phase ----

class PhaseWatch(threading.Thread):
    """The script's own watch of every ExpressCluster: when each tenant's status.phase changed,
    as kubesim delivered it (the operator's write, give or take the fan-out)."""

    def __init__(self, kube, resource_version):
        super().__init__(daemon=True)
        self.connection = http.client.HTTPConnection(kube.host, kube.port, timeout=120)
        self.connection.request(
            "GET", f"{GROUP}/expressclusters?watch=true&timeoutSeconds=7200"
                   f"&resourceVersion={resource_version}")
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.status
        self.changes = {}  # namespace -> [(time, phase)]
        self.condition = threading.Condition()
        self.closed = False

    def run(self):
        try:
            while not self.closed:
                line = self.response.readline()
                if not line:
                    break
                arrived = now()
                event = json.loads(line)
                obj = event.get("object", {})
                namespace = obj.get("metadata", {}).get("namespace")
                phase = (obj.get("status") or {}).get("phase")
                with self.condition:
                    seen = self.changes.setdefault(namespace, [])
                    if not seen or seen[-1][1] != phase:
                        seen.append((arrived, phase))
                    self.condition.notify_all()
        except Exception:  # noqa: BLE001 - closing the socket under a read ends it any way
            pass
        finally:
            self.closed = True
            with self.condition:
                self.condition.notify_all()

    def wait(self, namespace, after, wanted, timeout):
        """When the namespace's phase first satisfied `wanted` after `after`."""
        deadline = time.monotonic() + timeout
        with self.condition:
            while True:
                for arrived, phase in self.changes.get(namespace, []):
                    if arrived >= after and wanted(phase):
                        return arrived
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    raise TimeoutError(f"{namespace}: the phase never changed as expected")
                self.condition.wait(remaining)

    def close(self):
        self.closed = True
        close_socket(self.connection)


def close_socket(connection):
    try:
        if connection.sock is not None:
            connection.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    connection.close()


# ---- the dashboard's HTTP ----

def timed_get(port, path, timeout=120):
    """GET over a fresh connection: (seconds to the first byte, seconds to the last, status,
    body bytes). The clock starts before connecting."""
    started = now()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Accept: */*\r\nConnection: close\r\n\r\n".encode())
        first = sock.recv(1 << 16)
        first_byte = now() - started
        chunks = [first]
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        last_byte = now() - started
    response = b"".join(chunks)
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        body = dechunk(body)
    return first_byte, last_byte, status, body


def dechunk(body):
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return b"".join(out)


class EventStream(threading.Thread):
    """One server-sent-events stream of the dashboard, read in a thread: every event goes to
    `events` as (arrival time, event name, data bytes), timed when its blank line arrives."""

    def __init__(self, port, path):
        super().__init__(daemon=True)
        self.path = path
        self.opened = now()
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.connection.request("GET", path, headers={"Accept": "text/event-stream"})
        self.response = self.connection.getresponse()
        assert self.response.status == 200, (path, self.response.status)
        self.events = queue.Queue()
        self.count = 0
        self.bytes = 0
        self.closed = False

    def run(self):
        name, data = None, []
        try:
            while not self.closed:
                line = self.response.readline()
                if not line:
                    break
                line = line.rstrip(b"\r\n")
                if not line:
                    if data:
                        payload = b"\n".join(data)
                        self.count += 1
                        self.bytes += len(payload)
                        self.events.put((now(), name or "message", payload))
                    name, data = None, []
                elif line.startswith(b":"):
                    continue  # keep-alive comment
                else:
                    field, _, value = line.partition(b":")
                    value = value[1:] if value.startswith(b" ") else value
                    if field == b"event":
                        name = value.decode()
                    elif field == b"data":
                        data.append(value)
        except Exception:  # noqa: BLE001 - closing the socket under a read ends it any way
            pass
        finally:
            self.closed = True
            self.events.put((now(), "closed", b""))

    def next(self, timeout):
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.path}: no event in {timeout} s") from None

    def drain(self):
        while True:
            try:
                self.events.get_nowait()
            except queue.Empty:
                return

    def wait(self, after, matches, timeout):
        """The arrival time of the first event after `after` whose parts satisfy `matches`."""
        deadline = time.monotonic() + timeout
        while True:
            arrived, name, data = self.next(max(0.01, deadline - time.monotonic()))
            if name == "closed":
                raise RuntimeError(f"{self.path}: the stream closed")
            if arrived >= after and name == "update" and matches(json.loads(data)):
                return arrived

    def close(self):
        self.closed = True
        close_socket(self.connection)


def row_phase(parts, namespace):
    """The phase the fleet page's row of a tenant shows in an update (None: not in it)."""
    match = re.search(rf'data-namespace="{re.escape(namespace)}" data-cluster="{CLUSTER}" '
                      rf'data-phase="([^"]*)"', parts.get("tenants", ""))
    return match.group(1) if match else None


def summary_phase(parts):
    match = re.search(r'data-phase="([^"]*)"', parts.get("summary", ""))
    return match.group(1) if match else None


# ---- the processes ----

class Bench:
    def __init__(self, args):
        self.args = args
        self.bin_dir = ROOT / "target" / args.profile
        for name in ("kubesim", "express-operator", "kubectl-express"):
            if not (self.bin_dir / name).exists():
                sys.exit(f"{self.bin_dir / name} is missing: build it first "
                         f"(cargo build --release -p kubesim -p express-operator -p kubectl-express)")
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
        self.kubeconfig = self.work / "kubeconfig"
        self.processes = []
        self.dashboard = None
        self.logs = []

    def env(self):
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "RUST_LOG": "warn"}

    def spawn(self, argv, name, stdout=None):
        log = open(self.work / f"{name}.log", "w")
        self.logs.append(log)
        process = subprocess.Popen([str(a) for a in argv], stdout=stdout or log,
                                   stderr=subprocess.STDOUT if stdout is None else log,
                                   env=self.env(), start_new_session=True)
        self.processes.append(process)
        return process

    def kubectl(self, *args):
        return subprocess.run([KUBECTL, *args], capture_output=True, text=True, check=True,
                              env=self.env(), timeout=120).stdout

    def close(self):
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

    # -- the fleet --

    def start_kubesim(self):
        self.spawn([self.bin_dir / "kubesim", "serve", "--addr", "127.0.0.1:0",
                    "--kubeconfig", self.kubeconfig,
                    "--startup-seconds", self.args.startup_seconds,
                    "--terminate-seconds", self.args.startup_seconds], "kubesim")
        deadline = time.monotonic() + 20
        while not self.kubeconfig.exists() or "server:" not in self.kubeconfig.read_text():
            assert time.monotonic() < deadline, "kubesim did not start"
            time.sleep(0.05)
        server = re.search(r"server:\s*(\S+)", self.kubeconfig.read_text()).group(1)
        self.kube = Kube(server)
        self.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
        self.kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "express-system"}})

    def create_tenants(self):
        names = [f"tenant-{i:05d}" for i in range(self.args.tenants)]
        started = now()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for future in [pool.submit(create_tenant, self.kube, n, self.args.frontends)
                           for n in names]:
                future.result(timeout=600)
        self.namespaces = names
        return now() - started

    def start_operator(self):
        self.operator = self.spawn(
            [self.bin_dir / "express-operator", "run", "--metrics-addr", "127.0.0.1:0",
             "--operator-namespace", "express-system", "--kube-qps", "5000",
             "--kube-burst", "5000", "--concurrency", "64"], "operator")

    def phases(self):
        items = self.kube.request("GET", f"{GROUP}/expressclusters")["items"]
        return {c["metadata"]["namespace"]: (c.get("status") or {}).get("phase") for c in items}

    def wait_healthy(self, timeout):
        started = now()
        while True:
            phases = self.phases()
            healthy = sum(1 for p in phases.values() if p == "Healthy")
            if healthy == self.args.tenants:
                return now() - started
            if now() - started > timeout:
                raise TimeoutError(f"only {healthy} of {self.args.tenants} tenants Healthy")
            if self.operator.poll() is not None:
                raise RuntimeError("the operator exited")
            time.sleep(1)

    # -- the dashboard --

    def start_dashboard(self):
        started = now()
        self.dashboard = self.spawn(
            [self.bin_dir / "kubectl-express", "dashboard", "--addr", "127.0.0.1:0", "-A",
             "--operator-namespace", "express-system", "--kubeconfig", self.kubeconfig],
            "dashboard", stdout=subprocess.PIPE)
        lines = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.dashboard.stdout.readline()),
                         daemon=True).start()
        try:
            line = lines.get(timeout=120).decode()
        except queue.Empty:
            raise TimeoutError("the dashboard printed no URL in 120 s") from None
        ready = now() - started
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, f"unexpected first line: {line!r}"
        self.port = int(match.group(1))
        return ready

    def cpu(self):
        return cpu_seconds(self.dashboard.pid)

    def rss_mib(self):
        return proc_status_kib(self.dashboard.pid, "VmRSS:") / 1024

    def hwm_mib(self):
        return proc_status_kib(self.dashboard.pid, "VmHWM:") / 1024

    # -- measurements --

    def ttfb(self, path, requests):
        first, last, size = [], [], 0
        for _ in range(requests):
            first_byte, last_byte, status, body = timed_get(self.port, path)
            assert status == 200, (path, status, body[:200])
            first.append(first_byte)
            last.append(last_byte)
            size = len(body)
        return first, last, size

    def trials(self, fleet, count, offset, timeout):
        """`count` tenants, each paused then resumed; latencies per stream."""
        out = {"write→fleet": [], "status→fleet": [], "write→tenant": [], "status→tenant": [],
               "write→status": []}
        step = max(1, self.args.tenants // max(1, count))
        for k in range(count):
            namespace = self.namespaces[(offset + k * step) % self.args.tenants]
            tenant = EventStream(self.port, f"/api/tenants/{namespace}/{CLUSTER}/stream")
            tenant.start()
            try:
                first = tenant.next(timeout)
                assert first[1] == "update", first[1]
                for paused in (True, False):
                    if paused:
                        wanted = lambda phase: phase == "Paused"  # noqa: E731
                    else:
                        wanted = lambda phase: phase not in (None, "Paused")  # noqa: E731
                    fleet.drain()
                    tenant.drain()
                    before = now()
                    self.kube.merge_patch(cluster_path(namespace), {"spec": {"paused": paused}})
                    written = now()
                    status = self.watch.wait(namespace, before, wanted, timeout)
                    on_fleet = fleet.wait(before, lambda parts: wanted(row_phase(parts, namespace)),
                                          timeout)
                    on_tenant = tenant.wait(before, lambda parts: wanted(summary_phase(parts)),
                                            timeout)
                    out["write→status"].append(status - written)
                    out["write→fleet"].append(on_fleet - written)
                    out["status→fleet"].append(on_fleet - status)
                    out["write→tenant"].append(on_tenant - written)
                    out["status→tenant"].append(on_tenant - status)
            finally:
                tenant.close()
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--frontends", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20, help="GETs per page (default 20)")
    parser.add_argument("--trials", type=int, default=10,
                        help="tenants paused and resumed, at rest and again during the rollout")
    parser.add_argument("--idle-seconds", type=float, default=30,
                        help="the dashboard's CPU at rest is measured over this long")
    parser.add_argument("--startup-seconds", type=float, default=0.05,
                        help="seconds a simulated pod takes to start (and to terminate)")
    parser.add_argument("--no-rollout", action="store_true",
                        help="skip the trials during a fleet-wide upgrade")
    parser.add_argument("--timeout", type=float, default=1800, help="per phase, seconds")
    parser.add_argument("--profile", default="release", choices=["release", "debug"])
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    bench = Bench(args)
    failed = True
    rows = []  # (measure, figure)
    try:
        bench.start_kubesim()
        created = bench.create_tenants()
        print(f"created {args.tenants} tenants in {created:.1f} s", flush=True)
        bench.start_operator()
        provisioned = bench.wait_healthy(args.timeout)
        pods = args.tenants * (args.frontends + 1)
        print(f"{args.tenants} tenants Healthy ({pods} pods) {provisioned:.1f} s after the "
              f"operator started", flush=True)
        listing = bench.kube.request("GET", f"{GROUP}/expressclusters")
        bench.watch = PhaseWatch(bench.kube, listing["metadata"]["resourceVersion"])
        bench.watch.start()

        ready = bench.start_dashboard()
        rows.append(("launch to URL printed (watches listed)", f"{ready:.2f} s"))
        rows.append(("RSS after start", f"{bench.rss_mib():.1f} MiB"))
        print(f"dashboard on port {bench.port}, ready in {ready:.2f} s", flush=True)
        time.sleep(2)  # the doctor's first run

        sample = bench.namespaces[args.tenants // 2]
        cpu0 = bench.cpu()
        wall0 = now()
        for label, path in [("GET / (fleet page)", "/"),
                            ("GET /api/tenants", "/api/tenants"),
                            ("GET /api/tenants?q=(no match)", "/api/tenants?q=matches-no-tenant"),
                            ("GET /tenants/NS/shop (tenant page)", f"/tenants/{sample}/{CLUSTER}"),
                            ("GET /api/tenants/NS/shop", f"/api/tenants/{sample}/{CLUSTER}")]:
            first, last, size = bench.ttfb(path, args.requests)
            rows.append((f"{label}: first byte", spread_ms(first)))
            rows.append((f"{label}: last byte; size",
                         f"p50 {percentile(last, 50) * 1000:.1f} ms; {size / 1024:.1f} KiB"))
            print(f"{label}: first byte {spread_ms(first)}; {size} bytes", flush=True)
        cpu_gets = bench.cpu() - cpu0
        gets = 5 * args.requests
        rows.append(("CPU per GET (mean of the five kinds)",
                     f"{cpu_gets / gets * 1000:.1f} ms ({cpu_gets:.2f} s for {gets} GETs in "
                     f"{now() - wall0:.1f} s)"))

        fleet = EventStream(bench.port, "/api/stream")
        fleet.start()
        arrived, name, data = fleet.next(args.timeout)
        assert name == "update", name
        rows.append(("fleet stream: first event after connecting; its size",
                     f"{(arrived - fleet.opened) * 1000:.1f} ms; {len(data) / 1024:.1f} KiB"))

        count0, cpu0, wall0 = fleet.count, bench.cpu(), now()
        time.sleep(args.idle_seconds)
        idle_events, idle_cpu = fleet.count - count0, bench.cpu() - cpu0
        rows.append((f"at rest, fleet stream open ({args.idle_seconds:.0f} s)",
                     f"{idle_events} events; CPU {idle_cpu / (now() - wall0) * 100:.1f}% of a core"))

        count0, bytes0, cpu0, wall0 = fleet.count, fleet.bytes, bench.cpu(), now()
        at_rest = bench.trials(fleet, args.trials, 0, 120)
        cpu_trials, wall_trials = bench.cpu() - cpu0, now() - wall0
        for key in ("write→status", "status→fleet", "write→fleet", "status→tenant", "write→tenant"):
            rows.append((f"at rest: {key}", spread_ms(at_rest[key])))
        events = fleet.count - count0
        rows.append(("at rest: fleet stream during the trials",
                     f"{events} events, {(fleet.bytes - bytes0) / max(1, events) / 1024:.1f} KiB "
                     f"each; CPU {cpu_trials / wall_trials * 100:.1f}% of a core"))
        rows.append(("RSS after the trials at rest", f"{bench.rss_mib():.1f} MiB"))
        print("at rest: " + "; ".join(f"{k} {spread_ms(v)}" for k, v in at_rest.items()),
              flush=True)

        if not args.no_rollout:
            names = bench.namespaces
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda n: bench.kube.merge_patch(cluster_path(n), {"spec": {
                    "defaults": {"backend": {"expressVersion": "v2"},
                                 "frontend": {"expressVersion": "v2"}}}}), names))
            deadline = now() + 120
            while True:  # until the operator has taken up most of the fleet
                started = sum(1 for p in bench.phases().values() if p != "Healthy")
                if started >= args.tenants // 2 or now() > deadline:
                    break
                time.sleep(0.5)
            count0, bytes0, cpu0, wall0 = fleet.count, fleet.bytes, bench.cpu(), now()
            first, last, size = bench.ttfb("/", max(5, args.requests // 4))
            rows.append(("rollout: GET / first byte", spread_ms(first)))
            during = bench.trials(fleet, args.trials, args.tenants // (2 * max(1, args.trials)),
                                  300)
            cpu_roll, wall_roll = bench.cpu() - cpu0, now() - wall0
            still = sum(1 for p in bench.phases().values() if p != "Healthy")
            for key in ("write→status", "status→fleet", "write→fleet", "status→tenant",
                        "write→tenant"):
                rows.append((f"rollout: {key}", spread_ms(during[key])))
            events = fleet.count - count0
            rows.append(("rollout: fleet stream",
                         f"{events} events in {wall_roll:.0f} s "
                         f"({(fleet.bytes - bytes0) / max(1, wall_roll) / 1024:.0f} KiB/s); CPU "
                         f"{cpu_roll / wall_roll * 100:.1f}% of a core; tenants not Healthy: "
                         f"{started} at the start, {still} at the end"))
            print("rollout: " + "; ".join(f"{k} {spread_ms(v)}" for k, v in during.items()),
                  flush=True)
        fleet.close()
        rows.append(("RSS at the end; peak", f"{bench.rss_mib():.1f} MiB; {bench.hwm_mib():.1f} MiB"))
        rows.append(("CPU time over the whole run", f"{bench.cpu():.1f} s"))
        failed = False
    finally:
        if getattr(bench, "watch", None):
            bench.watch.close()
        bench.close()
        if failed:
            for log in sorted(bench.work.glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-15:]
                print(f"--- {log.name} (last lines)\n" + "\n".join(tail), file=sys.stderr)
        shutil.rmtree(bench.work, ignore_errors=True)

    print()
    print(f"{args.tenants} tenants x {args.frontends + 1} nodes, {args.profile} build, "
          f"{args.requests} GETs per page, {args.trials} tenants paused and resumed per phase")
    width = max(len(m) for m, _ in rows)
    for measure, figure in rows:
        print(f"  {measure:<{width}}  {figure}")


if __name__ == "__main__":
    main()
