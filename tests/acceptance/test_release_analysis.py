"""The judge reads the operator's vital signs (DESIGN section 16) from a real Prometheus
(Debian's, as the alert tests): `kubesim serve`, ring default (the trusted build) and ring canary
(the same build, or one run with `--fault`), both scraped every second, a few tenants applied
with kubectl (one pinned to default, so that default still drives a tenant and is the
baseline), and a steady trickle of changes to every tenant so that both rings reconcile. Each
release moves every movable tenant to the canary with `spec.analysis`; what is asserted is
what the API shows: the release's phase, `status.analysis`, its rollback reason, the tenants'
rings, and the plugin's table.

One set-up serves every case: the canary is restarted with the fault of the case. The verdicts
themselves are table- and property-tested in crates/express-planner/src/analysis/tests.rs."""

import json
import threading

import pytest

from conftest import eventually, free_port, start_operator, start_sim, stop_process, stop_sim, tenant_yaml
from test_kubectl import install
from test_prometheus import Prometheus, scrape
from test_release import RELEASED_BY, kx
from test_rings import RING_LABEL

TENANTS = ["team-a", "team-b", "team-c", "team-d"]
PINNED = "team-a"


class Traffic:
    """Annotates every ExpressCluster once a second, so that both rings keep reconciling."""

    def __init__(self, sim):
        self.sim, self.stop, self.count = sim, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(1.0):
            self.count += 1
            self.sim.kubectl("annotate", "--overwrite", "expressclusters", "--all", "-A",
                             f"example.dev/traffic={self.count}", check=False)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)


class Dc:
    def __init__(self, directory):
        self.directory, self.operators, self.prometheus, self.traffic = directory, {}, None, None
        self.sim = start_sim(directory)
        self.ports = {ring: free_port() for ring in ("default", "canary")}
        self.lives = 0

    def start(self, ring, *flags):
        self.lives += 1
        self.operators[ring] = start_operator(
            self.sim, self.directory / f"operator-{ring}-{self.lives}.log", "--ring", ring, *flags,
            pod_name=f"{ring}-{self.lives}", metrics_addr=f"127.0.0.1:{self.ports[ring]}")
        eventually(lambda: scrape(f"http://127.0.0.1:{self.ports[ring]}/metrics"), timeout=30, what=f"{ring} serving")

    @classmethod
    def ready(cls, directory):
        """Both rings running, the tenants home on default (one pinned), Prometheus scraping
        both rings, the trickle of changes flowing."""
        d = cls(directory)
        try:
            install(d.sim)
            d.sim.kubectl("create", "namespace", "express-system")
            d.start("default")
            d.start("canary")
            documents = [tenant_yaml(ns, cluster_labels={RING_LABEL: "default"} if ns == PINNED else None)
                         for ns in TENANTS]
            d.sim.kubectl("apply", "-f", "-", input="\n---\n".join(documents))
            d.home()
            d.prometheus = Prometheus(directory, [f"127.0.0.1:{p}" for p in d.ports.values()], {"groups": []})
            d.traffic = Traffic(d.sim)
        except BaseException:
            d.close()
            raise
        return d

    def close(self):
        if self.traffic:
            self.traffic.close()
        for process in self.operators.values():
            stop_process(process)
        if self.prometheus:
            self.prometheus.stop()
        stop_sim(self.sim)
        for log in sorted(self.directory.glob("operator-*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")

    def restart_canary(self, *flags):
        """The canary's build replaced, and leading its ring before anything is asked of it: the
        stopped process does not give its Lease back, so the new one leads only once the Lease
        expires (15 s). A release started before that spent its adoption deadline waiting for a
        leader, and a build was once rolled back for adopting too late, not for its fault."""
        stop_process(self.operators.pop("canary"))
        self.start("canary", *flags)
        identity = f"canary-{self.lives}"

        def leading():
            lease = self.sim.kubectl_json("get", "lease", "express-operator-canary", "-n", "express-system")
            return lease["spec"].get("holderIdentity") == identity

        eventually(leading, timeout=45, what=f"{identity} holding ring canary's Lease")

    def release(self, name, window=30, bake=30):
        body = {"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                "metadata": {"name": name, "namespace": "express-system"},
                "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}],
                         "intervalSeconds": 4, "bakeSeconds": bake, "failureLimit": 1,
                         "adoptionDeadlineSeconds": 30,
                         "analysis": {"prometheus": {"address": self.prometheus.url}, "windowSeconds": window}}}
        self.sim.kubectl("apply", "-f", "-", input=json.dumps(body))

    def status(self, name):
        return self.sim.kubectl_json("get", "operatorrelease", name, "-n", "express-system").get("status", {})

    def home(self):
        """Every tenant driven by default again, none carrying a release's mark."""
        def settled():
            items = self.sim.kubectl_json("get", "expressclusters", "-A")["items"]
            return len(items) == len(TENANTS) and all(
                (c.get("status", {}).get("operator") or {}).get("ring") == "default"
                and not c["status"]["operator"].get("adopting") and "released" not in c["status"]["operator"]
                and c.get("status", {}).get("phase") == "Healthy" for c in items)
        eventually(settled, timeout=90, what="every tenant home on ring default")


@pytest.fixture(scope="module")
def dc(tmp_path_factory):
    d = Dc.ready(tmp_path_factory.mktemp("analysis"))
    try:
        yield d
    finally:
        d.close()


def signals(status):
    return {s["signal"]: s for s in (status.get("analysis") or {}).get("signals", [])}


def test_a_healthy_canary_succeeds_with_every_signal_ok_and_prometheus_stopped_holds_it(dc):
    dc.release("healthy", bake=36)
    # Mid-bake, with its first signals read: the table a person reads.
    eventually(lambda: signals(dc.status("healthy")), timeout=90, what="the first analysed sample")
    shown = kx(dc.sim, "release", "healthy").stdout
    assert "Vital signs" in shown and "apiRequestsPerReconcile" in shown and "against ring default" in shown, shown
    read = signals(dc.status("healthy"))
    assert set(read) == {"apiRequestsPerReconcile", "reconcileErrorRatio", "reconcileLatencyP95", "memoryGrowth"}
    assert all(s["verdict"] in ("Ok", "Quiet") for s in read.values()), read
    assert read["apiRequestsPerReconcile"]["verdict"] == "Ok", "both rings reconcile: the signal is measured"
    assert "canary" in read["apiRequestsPerReconcile"] and "baseline" in read["apiRequestsPerReconcile"]

    # Prometheus gone: no data holds the release (never ok, never a failure), named.
    dc.prometheus.stop()
    eventually(lambda: dc.status("healthy").get("phase") == "Inconclusive", timeout=30, what="held without data")
    last = dc.status("healthy")["lastSamples"][-1]
    assert last["verdict"] == "Inconclusive" and "no data: Prometheus" in last["reason"], last
    held = dc.status("healthy")
    # A failed sample would be named by its event (the status keeps the last five samples).
    assert held["samples"]["failed"] == 0, (held, [
        (e.get("reason"), e.get("note") or e.get("message"))
        for e in dc.sim.kubectl_json("get", "events", "-n", "express-system").get("items", [])])
    # Back (the same storage): the release goes on and succeeds.
    dc.prometheus = Prometheus(dc.directory, [f"127.0.0.1:{p}" for p in dc.ports.values()], {"groups": []},
                               url=dc.prometheus.url)
    # The bake starts again at the first sample ok after the hold, and again after any sample
    # not ok. Under the suite's four workers the release once needed over 2 minutes after
    # Prometheus was back (locally: seconds), which the samples of the time did not say, as the
    # status keeps the last five: every sample seen from here on is kept, and told if it fails.
    # The bound is for "goes on", not for how fast.
    seen = {}

    def succeeded():
        status = dc.status("healthy")
        for sample in status.get("lastSamples") or []:
            seen[sample.get("at")] = (sample.get("verdict"), (sample.get("reason") or "")[:200])
        return status.get("phase") == "Succeeded"

    try:
        eventually(succeeded, timeout=300, what="succeeded")
    except AssertionError as error:
        raise AssertionError(f"{error}; the samples since Prometheus came back: {sorted(seen.items())}") from None
    done = dc.status("healthy")
    assert done["samples"]["failed"] == 0, done
    print(kx(dc.sim, "release", "healthy").stdout)
    # Home for the next case.
    dc.sim.kubectl("delete", "operatorrelease", "healthy", "-n", "express-system")
    for ns in TENANTS:
        if ns != PINNED:
            dc.sim.kubectl("label", "expresscluster", "shop", "-n", ns, f"{RING_LABEL}-")
            dc.sim.kubectl("annotate", "expresscluster", "shop", "-n", ns, f"{RELEASED_BY}-")
    dc.home()


@pytest.mark.parametrize("fault,signal", [
    ("chatty", "apiRequestsPerReconcile"),
    ("erring", "reconcileErrorRatio"),
    ("slow", "reconcileLatencyP95"),
    ("leaky", "memoryGrowth"),
])
def test_a_misbehaving_canary_is_rolled_back_naming_its_signal(dc, fault, signal):
    dc.restart_canary("--fault", fault)
    name = f"to-{fault}"
    dc.release(name, bake=120)
    eventually(lambda: dc.status(name).get("phase") == "RolledBack", timeout=150, what=f"{fault} rolled back")
    status = dc.status(name)
    assert signal in status["rollbackReason"], status["rollbackReason"]
    worse = signals(status)[signal]
    assert worse["verdict"] == "Worse" and worse["canary"] > worse["baseline"], worse
    # The figures of every signal, for the false-alarm model's levels (docs/benchmarks.md).
    print(f"{fault}: {json.dumps(signals(status))}")
    dc.home()
    items = dc.sim.kubectl_json("get", "expressclusters", "-A")["items"]
    assert all((c["metadata"].get("labels") or {}).get(RING_LABEL) in (None, "default") for c in items)
    dc.sim.kubectl("delete", "operatorrelease", name, "-n", "express-system")
    dc.restart_canary()
