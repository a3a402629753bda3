"""Notifications (DESIGN section 21) delivered as users deliver them: the operator chart's
ConfigMap rendered by the real Helm engine and applied with kubectl, the Secret made with
`kubectl create secret`, the tenant chart applied with kubectl, the operator binary as the
chart's ServiceAccount. A webhook receiver of the test's own checks every message as a receiver
would: its HMAC with Python's own hmac, its schema, each notification once. On kubesim and on a
Kubernetes control plane of the test's own (its express-system is not shared)."""

import hashlib
import hmac
import json
import math
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from conftest import KUBECTL_EXPRESS, eventually, free_port, start_operator, stop_process, tenant_yaml
from test_core_scenarios import acme, acme_names, all_ready_on, provision_acme, status
from test_operator_chart import find, render as render_operator_chart

KEY = "the receiver's signing key"


class Receiver:
    """A webhook on loopback: every body received, with whether its signature verified."""

    def __init__(self, answer=204):
        self.messages, self.arrivals = [], []
        received, arrivals = self.messages, self.arrivals

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                expected = "sha256=" + hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
                signature = self.headers.get("x-express-signature-256", "")
                received.append((json.loads(body), hmac.compare_digest(signature, expected),
                                 self.headers.get("x-express-delivery")))
                arrivals.append(time.time())
                self.send_response(answer)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def told(self, namespace=None):
        return [n for body, _, _ in self.messages for n in body["notifications"]
                if namespace is None or n["subject"].get("namespace") == namespace]

    def close(self):
        self.server.shutdown()


@pytest.mark.parametrize("substrate", ["kubesim", "real"])
def test_a_failed_rollout_reaches_a_signed_webhook_once(dedicated_cluster, tmp_path):
    cluster = dedicated_cluster
    cluster.install_crds()
    cluster.kubectl("create", "namespace", "express-system", check=False)
    receiver = Receiver()
    values = {"notifications": {
        "dc": "dc-test",
        "destinations": [{"name": "sre", "type": "webhook", "url": receiver.url,
                          "signingSecretKey": "sre-hmac", "groupSeconds": 2, "waitSeconds": 0}],
        "subscriptions": [{"destination": "sre", "triggers": ["rollout-failed", "rollout-done"]}],
    }}
    objects, _ = render_operator_chart(values)
    [config] = find(objects, "ConfigMap", "express-notifications")
    cluster.kubectl("apply", "-n", "express-system", "-f", "-", input=yaml.safe_dump(config))
    cluster.kubectl("create", "secret", "generic", "express-notifications", "-n", "express-system",
                    f"--from-literal=sre-hmac={KEY}")
    cluster.account_kubeconfig("express-operator")
    operator = start_operator(cluster, tmp_path / "operator.log", leader_elect=False)
    try:
        namespace = cluster.namespace()
        provision_acme(cluster, namespace, "express-e689.154")
        eventually(lambda: [n for n in receiver.told(namespace) if n["trigger"] == "rollout-done"],
                   timeout=30, what="the provisioning told done")
        cluster.kubectl("apply", "-f", "-", input=acme(
            namespace, "express-e689.155",
            pod_annotations={"kubesim.dev/behavior": "crash-loop", "kubesim.dev/startup-seconds": "0.5"}))
        eventually(lambda: status(cluster, namespace, "acme").get("rollout", {}).get("state") == "Failed"
                   and all_ready_on(cluster, namespace, acme_names(), "express-e689.154"),
                   timeout=120, what="failed and rolled back")
        failures = eventually(lambda: [n for n in receiver.told(namespace) if n["trigger"] == "rollout-failed"],
                              timeout=30, what="the failure told")
        # Passes every 2 s: a repeat would show by now.
        time.sleep(5)
    finally:
        stop_process(operator)
        receiver.close()
        print(f"--- operator log\n{(tmp_path / 'operator.log').read_text()[-4000:]}")

    told = receiver.told(namespace)
    assert sorted(n["trigger"] for n in told) == ["rollout-done", "rollout-failed"], told
    assert len({n["id"] for n in told}) == len(told)
    for body, verified, delivery in receiver.messages:
        assert verified, body
        assert body["schema"] == "express.dev/notifications/v1" and body["dc"] == "dc-test"
        assert body["delivery"] == delivery
    [failure] = failures
    assert failure["severity"] == "error"
    assert failure["subject"] == {"kind": "ExpressCluster", "namespace": namespace, "name": "acme"}
    facts = {f["name"]: f["value"] for f in failure["facts"]}
    assert facts["failed node"] == "acme-fe1", facts
    assert "crash" in facts["why"], facts
    assert failure["act"] == f"kubectl express retry acme -n {namespace}"
    # What was sent is in the ring's ledger, as kubectl shows it.
    ledger = json.loads(cluster.kubectl_json("get", "configmap", "express-notified-default", "-n",
                                             "express-system")["data"]["ledger.json"])
    assert len(ledger["sent"]["sre"]) == 2, ledger


def test_the_chart_renders_notifications_only_with_a_destination_and_refuses_an_unknown_type():
    objects, _ = render_operator_chart()
    assert not find(objects, "ConfigMap", "express-notifications")
    objects, _ = render_operator_chart({"notifications": {
        "destinations": [{"name": "chat", "type": "slack", "urlSecretKey": "chat-url"}],
        "subscriptions": [{"destination": "chat", "triggers": ["release-rolled-back"], "namespaces": ["team-a"]}],
    }})
    [config] = find(objects, "ConfigMap", "express-notifications")
    parsed = yaml.safe_load(config["data"]["notifications.yaml"])
    assert parsed == {"maxAgeSeconds": 21600,
                      "destinations": [{"name": "chat", "type": "slack", "urlSecretKey": "chat-url"}],
                      "subscriptions": [{"destination": "chat", "triggers": ["release-rolled-back"],
                                         "namespaces": ["team-a"]}]}
    with pytest.raises(Exception):
        render_operator_chart({"notifications": {"destinations": [{"name": "p", "type": "pagerduty",
                                                                   "url": "https://p.example"}]}})
    with pytest.raises(Exception):
        render_operator_chart({"notifications": {"subscriptions": [{"destination": "x",
                                                                    "triggers": ["rollout-exploded"]}]}})


ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class Alertmanager:
    """Prometheus' Alertmanager (Debian's prometheus-alertmanager) on loopback, grouping by
    alertname and DC, sending what it groups (and resolves) to `receiver`'s webhook."""

    def __init__(self, directory, receiver):
        assert ALERTMANAGER, "scripts/test.sh installs Debian's prometheus-alertmanager"
        config = {
            "route": {"receiver": "test", "group_by": ["alertname", "dc"], "group_wait": "1s",
                      "group_interval": "2s", "repeat_interval": "1h"},
            "receivers": [{"name": "test", "webhook_configs": [
                {"url": receiver.url, "send_resolved": True}]}],
        }
        (directory / "alertmanager.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = open(directory / "alertmanager.log", "w")
        self.process = subprocess.Popen(
            [ALERTMANAGER, f"--config.file={directory / 'alertmanager.yml'}",
             f"--storage.path={directory / 'alertmanager-data'}",
             f"--web.listen-address={self.url.removeprefix('http://')}", "--cluster.listen-address="],
            stdout=self.log, stderr=subprocess.STDOUT)
        eventually(self.ready, timeout=20, what="Alertmanager ready")

    def ready(self):
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def alerts(self):
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as response:
            return json.loads(response.read())

    def close(self):
        stop_process(self.process)
        self.log.close()


def crash(cluster, namespace):
    cluster.kubectl("apply", "-f", "-", input=acme(
        namespace, "express-e689.155",
        pod_annotations={"kubesim.dev/behavior": "crash-loop", "kubesim.dev/startup-seconds": "0.5"}))


@pytest.mark.parametrize("substrate", ["kubesim", "real"])
def test_alertmanager_groups_our_alerts_and_resolves_them_when_the_failures_clear(dedicated_cluster, tmp_path):
    sim = dedicated_cluster
    sim.install_crds()
    sim.kubectl("create", "namespace", "express-system", check=False)
    receiver = Receiver()
    alertmanager = Alertmanager(tmp_path, receiver)
    values = {"notifications": {
        "dc": "dc-test",
        "destinations": [{"name": "am", "type": "alertmanager", "url": alertmanager.url, "waitSeconds": 0}],
        "subscriptions": [{"destination": "am", "triggers": ["rollout-failed"]}],
    }}
    objects, _ = render_operator_chart(values)
    [config] = find(objects, "ConfigMap", "express-notifications")
    sim.kubectl("apply", "-n", "express-system", "-f", "-", input=yaml.safe_dump(config))
    operator = start_operator(sim, tmp_path / "operator.log", leader_elect=False)
    try:
        namespaces = [sim.namespace(), sim.namespace()]
        for namespace in namespaces:
            provision_acme(sim, namespace, "express-e689.154")
        for namespace in namespaces:
            crash(sim, namespace)

        def grouped_firing():
            for body, _, _ in receiver.messages:
                if body.get("status") == "firing" and len(body.get("alerts", [])) == 2:
                    return body
            return None

        # Two tenants failing: Alertmanager groups their alerts into one notification.
        firing = eventually(grouped_firing, timeout=120, what="one grouped firing notification of both tenants")
        assert firing["groupLabels"] == {"alertname": "ExpressTenantRolloutFailed", "dc": "dc-test"}, firing
        assert sorted(a["labels"]["namespace"] for a in firing["alerts"]) == sorted(namespaces)
        for alert in firing["alerts"]:
            assert alert["labels"]["severity"] == "error" and alert["labels"]["name"] == "acme"
            assert alert["annotations"]["command"].startswith("kubectl express retry acme -n ")
            assert "failed node: acme-fe1" in alert["annotations"]["description"]
        active = [a for a in alertmanager.alerts() if a["labels"]["alertname"] == "ExpressTenantRolloutFailed"]
        assert len(active) == 2 and all(a["status"]["state"] == "active" for a in active), active

        # A good version and a retry: the failures clear, the operator resolves their alerts.
        for namespace in namespaces:
            sim.kubectl("apply", "-f", "-", input=acme(namespace, "express-e689.156"))
            sim.kubectl("annotate", "expresscluster", "acme", "-n", namespace, "express.dev/retry=r1", "--overwrite")
        for namespace in namespaces:
            eventually(lambda: all_ready_on(sim, namespace, acme_names(), "express-e689.156"), timeout=120,
                       what="the fixed version rolled out")

        def resolved():
            # Alertmanager tells a resolved alert in the group's next notification: in a "firing" one while
            # the other alert still fires, and drops it from the group once told; so both resolved alerts
            # arrive together or in two notifications, depending on when each failure cleared.
            return {a["labels"]["namespace"] for body, _, _ in receiver.messages
                    for a in body.get("alerts", []) if a.get("status") == "resolved"}

        eventually(lambda: resolved() == set(namespaces), timeout=60, what="both alerts resolved through Alertmanager")
        assert not [a for a in alertmanager.alerts() if a["labels"]["alertname"] == "ExpressTenantRolloutFailed"
                    and a["status"]["state"] == "active"]
    finally:
        stop_process(operator)
        alertmanager.close()
        receiver.close()
        print(f"--- operator log\n{(tmp_path / 'operator.log').read_text()[-4000:]}")


def test_a_destination_that_keeps_refusing_is_named_by_doctor(sim, tmp_path):
    sim.install_crds()
    sim.kubectl("create", "namespace", "express-system")
    receiver = Receiver(answer=503)
    objects, _ = render_operator_chart({"notifications": {"destinations": [
        {"name": "sre", "type": "webhook", "url": receiver.url, "waitSeconds": 0}],
        "subscriptions": [{"destination": "sre"}]}})
    [config] = find(objects, "ConfigMap", "express-notifications")
    sim.kubectl("apply", "-n", "express-system", "-f", "-", input=yaml.safe_dump(config))
    operator = start_operator(sim, tmp_path / "operator.log", leader_elect=False)
    try:
        provision_acme(sim, sim.namespace(), "express-e689.154")

        def doctor_names_it():
            report = subprocess.run([KUBECTL_EXPRESS, "doctor"], env={**sim.env, "KUBECONFIG": str(sim.kubeconfig)},
                                    capture_output=True, text=True, timeout=30)
            return report.stdout if "NotificationsFailing" in report.stdout else None

        # Refused at once, after 5 s and after 10 more: the third makes it failing.
        shown = eventually(doctor_names_it, timeout=60, what="doctor naming the failing destination")
        assert "express-system" in shown, shown
        events = sim.kubectl_json("get", "events.v1.events.k8s.io", "-n", "express-system")["items"]
        [failing] = [e for e in events if e.get("reason") == "NotificationsFailing"]
        assert failing["regarding"]["name"] == "express-notifications"
        assert "destination sre failed 3 deliveries in a row" in failing["note"], failing
        assert "answered 503" in failing["note"]
        ledger = json.loads(sim.kubectl_json("get", "configmap", "express-notified-default", "-n",
                                             "express-system")["data"]["ledger.json"])
        assert ledger["health"]["sre"]["failures"] >= 3 and "sre" not in ledger.get("sent", {}), ledger
    finally:
        stop_process(operator)
        receiver.close()


# The flood: how many tenants fail at once, and the destination's group window. The suite's form
# is small and quick; `scripts/notify-flood.sh` runs 1,000 at the chart's default of 60 s.
FLOOD_TENANTS = int(os.environ.get("EXPRESS_FLOOD_TENANTS", "40"))
FLOOD_GROUP_SECONDS = int(os.environ.get("EXPRESS_FLOOD_GROUP_SECONDS", "15"))


def test_a_flood_of_failing_tenants_is_one_message_a_group_window_not_one_each(sim, tmp_path):
    """DESIGN section 21: many tenants failing at once reach a destination as one message at once
    and one grouped message per window after, each failure told exactly once. Every tenant is
    applied, then broken, in one multi-document `kubectl apply`, as a pipeline would."""
    sim.install_crds()
    sim.kubectl("create", "namespace", "express-system")
    receiver = Receiver()
    values = {"notifications": {
        "dc": "dc-test",
        "destinations": [{"name": "sre", "type": "webhook", "url": receiver.url, "signingSecretKey": "sre-hmac",
                          "groupSeconds": FLOOD_GROUP_SECONDS, "waitSeconds": 0}],
        "subscriptions": [{"destination": "sre", "triggers": ["rollout-failed"]}],
    }}
    objects, _ = render_operator_chart(values)
    [config] = find(objects, "ConfigMap", "express-notifications")
    sim.kubectl("apply", "-n", "express-system", "-f", "-", input=yaml.safe_dump(config))
    sim.kubectl("create", "secret", "generic", "express-notifications", "-n", "express-system",
                f"--from-literal=sre-hmac={KEY}")
    operator = start_operator(sim, tmp_path / "operator.log", leader_elect=False)
    namespaces = [f"flood-{i:04}" for i in range(FLOOD_TENANTS)]
    crashing = {"metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop",
                                             "kubesim.dev/startup-seconds": "0.5"}}}

    def healthy():
        clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
        return sum(c.get("status", {}).get("phase") == "Healthy" for c in clusters) == len(namespaces)

    def failures():
        return [n for n in receiver.told() if n["trigger"] == "rollout-failed"]

    try:
        sim.kubectl("apply", "-f", "-", timeout=300,
                    input="\n---\n".join(tenant_yaml(ns, version="v1") for ns in namespaces))
        eventually(healthy, timeout=60 + FLOOD_TENANTS, what="every tenant provisioned")
        broken_at = time.time()
        sim.kubectl("apply", "-f", "-", timeout=300,
                    input="\n---\n".join(tenant_yaml(ns, version="v2", pod_template=crashing) for ns in namespaces))
        eventually(lambda: len({n["subject"]["namespace"] for n in failures()}) == len(namespaces),
                   timeout=120 + FLOOD_TENANTS, what="every tenant's failure told")
        # A repeat, or one more message for these failures, would arrive within another window.
        time.sleep(FLOOD_GROUP_SECONDS + 5)
    finally:
        stop_process(operator)
        receiver.close()
        print(f"--- operator log\n{(tmp_path / 'operator.log').read_text()[-3000:]}")

    told = failures()
    assert len(told) == len(namespaces) and len({n["id"] for n in told}) == len(told), \
        f"{len(told)} told for {len(namespaces)} failures"
    messages = [(at, body) for at, (body, verified, _) in zip(receiver.arrivals, receiver.messages)]
    assert all(verified for _, verified, _ in receiver.messages)
    span = messages[-1][0] - messages[0][0]
    gaps = [later[0] - earlier[0] for earlier, later in zip(messages, messages[1:])]
    print(f"flood: {len(namespaces)} failures in {len(messages)} messages over {span:.0f} s "
          f"(the first {messages[0][0] - broken_at:.0f} s after the break), gaps {[round(g) for g in gaps]} s, "
          f"sizes {[len(body['notifications']) for _, body in messages]}")
    # One message at once, then at most one per window: never closer than the window (a second
    # of slack for the receiver's clock), never more than the span allows.
    assert all(gap >= FLOOD_GROUP_SECONDS - 1 for gap in gaps), gaps
    assert len(messages) <= 1 + math.ceil(span / FLOOD_GROUP_SECONDS), len(messages)
    grouped = [body for _, body in messages if body["grouped"]]
    assert grouped and all(len(body["notifications"]) > 1 for body in grouped), messages
    for body in grouped:
        count = len(body["notifications"])
        assert body["summary"] == f"{count} notifications from dc-test: {count} rollout-failed", body["summary"]
