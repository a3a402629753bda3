"""The main job across DCs: `express-operator dev --dcs 3` (three local DCs, each a kubesim
behind its own token with two operator rings and sample tenants; one kubeconfig with a context
per DC) read by the real plugin, stopped by Ctrl-C with nothing left behind; and its demo, a
release across the three DCs through the plugin's fleet-release driver (in process: the
operator binary alone, with no plugin beside it or on the PATH, runs it), that succeeds, or with
`--fail-in dev-b` stops after dev-b rolls itself back. The demo's DCs tell a signed webhook in
the demo's process and Debian's Alertmanager: each waiting stage, rollback and end once, the
gate approved once the webhook told it."""

import collections
import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request

from conftest import KUBECTL_EXPRESS, OPERATOR


def alone(directory):
    """The operator binary copied into a folder of its own, as a fresh clone's `cargo run
    --release -p express-operator` leaves it: no plugin binary beside it or on the PATH."""
    binary = directory / "bin" / "express-operator"
    binary.parent.mkdir()
    shutil.copy2(OPERATOR, binary)
    return binary


def without_plugin():
    """The environment with no way to find a kubectl-express binary."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECTL_EXPRESS", "KUBECTL_EXPRESS_BIN")}
    env["PATH"] = "/usr/bin:/bin"
    return env


def dev(directory, *flags, **kwargs):
    return subprocess.run(
        [alone(directory), "dev", "--dcs", "3", "--startup-seconds", "0.3",
         "--kubeconfig", str(directory / "express-dev.kubeconfig"), *flags],
        capture_output=True, text=True, cwd=directory, timeout=180,
        env=without_plugin(), **kwargs)


def notified(out):
    """Each notification the demo's webhook printed (title and DC), with how many times."""
    return collections.Counter(line for line in out.splitlines() if line.startswith("notified sre from "))


def servers(kubeconfig):
    return [line.split("server:", 1)[1].strip() for line in kubeconfig.read_text().splitlines() if "server:" in line]


def left_behind(directory):
    """Processes still running that were started for this directory's kubeconfig."""
    found = subprocess.run(["pgrep", "-f", str(directory)], capture_output=True, text=True)
    return [pid for pid in found.stdout.split() if int(pid) != os.getpid()]


def answers(url):
    try:
        urllib.request.urlopen(url + "/version", timeout=2)
        return True
    except urllib.error.HTTPError:
        return True  # it answered, if only 401
    except OSError:
        return False


def test_the_demo_releases_across_three_dcs(tmp_path):
    done = dev(tmp_path, "--demo")
    print(done.stdout, done.stderr)
    assert done.returncode == 0
    out = done.stdout
    assert "3 DCs ready" in out
    for line in ["stage 0 (first) starts: dev-a", "stage 1 (rest) starts: dev-b, dev-c",
                 "soak of stage 0: Ok", "succeeded: every stage released and soaked",
                 "demo: the release across DCs succeeded"]:
        assert line in out, line
    assert out.index("stage 0 (first) passed its soak") < out.index("stage 1 (rest) starts")
    assert "dev-c: Succeeded (release Succeeded wave 2" in out
    # Told once each: the gate (then approved, as the SRE would), every DC's release, the end.
    told = notified(out)
    assert told["notified sre from dev-a: [warning] FleetRelease to-canary: stage 2 of 2 (rest) waits for approval"] == 1, told
    assert out.index("waits for approval\n") < out.index("demo: approving")
    for dc in ["dev-a", "dev-b", "dev-c"]:
        assert told[f"notified sre from {dc}: [info] OperatorRelease to-canary succeeded: canary leads its tenants"] == 1, told
    assert told["notified sre from dev-a: [info] FleetRelease to-canary succeeded in every DC"] == 1, told
    assert "AGAIN" not in out
    assert "0 of them more than once, 0 unsigned" in out
    assert 'alertmanager: firing 1 alert(s) {"alertname":"ExpressFleetReleaseWaitingApproval","dc":"dev-a"}' in out
    assert 'alertmanager: resolved 1 alert(s) {"alertname":"ExpressFleetReleaseWaitingApproval","dc":"dev-a"}' in out
    assert left_behind(tmp_path) == []
    assert not any(answers(url) for url in servers(tmp_path / "express-dev.kubeconfig"))


def test_the_demo_with_a_build_that_cannot_write_in_dev_b_stops_there(tmp_path):
    failed = dev(tmp_path, "--demo", "--fail-in", "dev-b")
    print(failed.stdout, failed.stderr)
    assert failed.returncode == 1
    out = failed.stdout
    assert "dev-b: the canary build cannot write" in out
    assert "failed: dev-b: its release rolled back; no later stage starts" in out
    assert "dev-b: RolledBack" in out
    assert "dev-c: OperatorRelease" not in out, "the plan stopped before dev-c"
    assert "the failing DC went home" in failed.stderr
    told = notified(out)
    assert told["notified sre from dev-b: [error] OperatorRelease to-canary rolled back: tenants return to default"] == 1, told
    assert told["notified sre from dev-a: [error] FleetRelease to-canary: DC dev-b rolled back"] == 1, told
    assert told["notified sre from dev-a: [error] FleetRelease to-canary failed: no later stage starts"] == 1, told
    assert not [line for line in told if "waits for approval" in line or "from dev-c" in line], told
    assert "AGAIN" not in out and "0 of them more than once, 0 unsigned" in out
    assert 'alertmanager: firing 1 alert(s) {"alertname":"ExpressFleetReleaseFailed","dc":"dev-a"}' in out
    assert left_behind(tmp_path) == []


def test_the_dcs_serve_the_plugin_until_ctrl_c_and_leave_nothing_behind(tmp_path):
    process = subprocess.Popen(
        [OPERATOR, "dev", "--dcs", "3", "--startup-seconds", "0.3",
         "--kubeconfig", str(tmp_path / "express-dev.kubeconfig")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "Ctrl-C stops everything" in line:
            break
    text = "".join(lines)
    assert "kubectl express doctor --all-contexts" in text and "fleet-release run -f" in text, text
    kubeconfig = tmp_path / "express-dev.kubeconfig"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    listed = subprocess.run([KUBECTL_EXPRESS, "list", "-A", "--all-contexts", "-o", "json"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    contexts = json.loads(listed.stdout)["contexts"]
    assert [c["context"] for c in contexts] == ["dev-a", "dev-b", "dev-c"]
    assert all(len(c["clusters"]) == 3 for c in contexts)
    # Each DC answers its own token only.
    assert len(set(servers(kubeconfig))) == 3
    plan = subprocess.run([KUBECTL_EXPRESS, "fleet-release", "plan", "-f",
                           str(tmp_path / "express-dev.fleet-release.yaml")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert plan.returncode == 0 and "stage 1 (rest): release dev-b, dev-c" in plan.stdout, plan.stdout
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert not any(answers(url) for url in servers(kubeconfig))
    assert left_behind(tmp_path) == []
