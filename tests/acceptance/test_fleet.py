"""One fleet across data centres (issue 41) with every part a process of its own: three
`kubesim serve` processes as three DCs, an `express-operator run --leader-elect` in each, tenants
applied with kubectl 1.37, and a fourth `kubesim serve --token` whose context presents the wrong
token. The kubeconfig is split over two files merged through KUBECONFIG; `kubectl express` reads
them with `--all-contexts`. The Rust end-to-end test (crates/kubectl-express/tests/e2e_fleet.rs)
covers the same with more cases; this one is the real processes, a DC killed with SIGKILL."""

import json
import os
import signal
import subprocess

import pytest

from conftest import (KUBECTL_EXPRESS, eventually, start_operator, start_sim, stop_process,
                      stop_sim, tenant_yaml)
from test_kubectl import install

TENANTS = {"dc-a": ["team-a", "team-b"], "dc-b": ["team-a"], "dc-c": ["team-c"]}


@pytest.fixture
def fleet(tmp_path):
    sims, operators = {}, {}
    try:
        for name, namespaces in TENANTS.items():
            directory = tmp_path / name
            directory.mkdir()
            sim = sims[name] = start_sim(directory)
            install(sim)
            sim.kubectl("create", "namespace", "express-system")
            operators[name] = start_operator(sim, tmp_path / f"operator-{name}.log",
                                             pod_name=f"operator-{name}")
            for namespace in namespaces:
                sim.kubectl("apply", "-f", "-", input=tenant_yaml(namespace))
        (tmp_path / "dc-d").mkdir()
        sims["dc-d"] = start_sim(tmp_path / "dc-d", "--token", "dc-d-token")
        one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
        write_kubeconfig(one, {n: (sims[n].url, None) for n in ("dc-a", "dc-b")})
        write_kubeconfig(two, {"dc-c": (sims["dc-c"].url, None),
                               "dc-d": (sims["dc-d"].url, "not-the-token")})
        yield sims, operators, f"{one}:{two}"
    finally:
        for process in operators.values():
            stop_process(process, signal.SIGKILL)
        for sim in sims.values():
            if sim.process.poll() is None:
                stop_sim(sim)
        for log in sorted(tmp_path.glob("operator-*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")


def write_kubeconfig(path, contexts):
    lines = ["apiVersion: v1", "kind: Config", "clusters:"]
    lines += [f"- {{name: {n}, cluster: {{server: '{url}'}}}}" for n, (url, _) in contexts.items()]
    lines += ["users:"] + [
        f"- {{name: user-{n}, user: {{{'token: ' + token if token else ''}}}}}"
        for n, (_, token) in contexts.items()]
    lines += ["contexts:"] + [
        f"- {{name: {n}, context: {{cluster: {n}, user: user-{n}}}}}" for n in contexts]
    lines += [f"current-context: {next(iter(contexts))}"]
    path.write_text("\n".join(lines) + "\n")


def plugin(kubeconfig, *args):
    return subprocess.run([KUBECTL_EXPRESS, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KUBECONFIG": kubeconfig})


def doctor(kubeconfig, *args):
    result = plugin(kubeconfig, "doctor", "-o", "json", "--context-timeout", "5s", *args)
    report = json.loads(result.stdout)
    return result.returncode, report, {c["context"]: c for c in report["contexts"]}


def test_three_dcs_as_one_fleet_a_dc_killed_and_one_stopped(fleet):
    sims, operators, kubeconfig = fleet
    reachable = ["--all-contexts", "--context", "^dc-d"]

    # Every tenant Healthy in its own DC, as list shows it with a CONTEXT column.
    def listed():
        result = plugin(kubeconfig, "list", "-A", *reachable)
        rows = [line.split()[:4] for line in result.stdout.splitlines()[1:]]
        return result if all(r[3] == "Healthy" for r in rows) and len(rows) == 4 else None
    result = eventually(listed, timeout=60, what="every tenant Healthy")
    assert result.returncode == 0, result.stderr
    assert [line.split()[:2] for line in result.stdout.splitlines()[1:]] == [
        ["dc-a", "team-a"], ["dc-a", "team-b"], ["dc-b", "team-a"], ["dc-c", "team-c"]]

    # Refused credentials: Unauthorized, named for dc-d; the others healthy; exit 4.
    code, report, by_context = eventually(
        lambda: (lambda r: r if all(r[2][c]["verdict"] == "healthy" for c in TENANTS) else None)(
            doctor(kubeconfig, "--all-contexts")),
        timeout=60, what="doctor healthy in every reachable DC")
    assert code == 4, report
    assert (by_context["dc-d"]["status"], by_context["dc-d"]["error"]) == ("forbidden", "Unauthorized")
    assert report["verdict"] == "unknown"

    # dc-b's operator killed: infrastructure in dc-b, once its Lease has lapsed (15 s).
    stop_process(operators.pop("dc-b"), signal.SIGKILL)
    code, report, by_context = eventually(
        lambda: (lambda r: r if r[1]["verdict"] == "infrastructure" else None)(
            doctor(kubeconfig, *reachable)),
        timeout=60, what="infrastructure in dc-b")
    assert code == 3, report
    assert report["headline"] == "infrastructure in dc-b", report
    assert [by_context[c]["verdict"] for c in TENANTS] == ["healthy", "infrastructure", "healthy"]
    text = plugin(kubeconfig, "doctor", *reachable).stdout
    print(text)
    assert text.startswith("FLEET VERDICT: infrastructure in dc-b\n"), text

    # dc-c's kubesim stopped: unreachable, named; dc-b at infrastructure keeps exit 3, and
    # --require-all makes it 4.
    stop_process(operators.pop("dc-c"), signal.SIGKILL)
    stop_sim(sims["dc-c"])
    code, report, by_context = doctor(kubeconfig, *reachable)
    assert code == 3, report
    assert by_context["dc-c"]["status"] == "unreachable" and by_context["dc-c"]["verdict"] == "unknown"
    assert "not read: dc-c" in report["reason"], report["reason"]
    code, _, _ = doctor(kubeconfig, *reachable, "--require-all")
    assert code == 4
    result = plugin(kubeconfig, "list", "-A", "--context", "dc-a,dc-c")
    assert result.returncode == 4
    assert "context dc-c: unreachable" in result.stdout, result.stdout
