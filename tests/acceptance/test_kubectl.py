"""kubesim through kubectl 1.37 with default flags."""

import json
import re
import subprocess

from conftest import KUBECTL, ROOT, eventually, start_sim, stop_sim

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-acme}\n"
POD = """apiVersion: v1
kind: Pod
metadata: {name: web, namespace: tenant-acme, labels: {app: web}}
spec:
  containers: [{name: express, image: "express:v1"}]
"""


def install(sim):
    sim.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    for crd in ("expressclusters", "backends", "frontends", "operatorreleases"):
        sim.kubectl("wait", "--for=condition=Established", f"crd/{crd}.express.dev", "--timeout=10s")
    sim.kubectl("apply", "-f", "-", input=NAMESPACE)


def test_crds_and_custom_objects_client_and_server_side(sim):
    install(sim)
    out = sim.kubectl("apply", "-f", str(ROOT / "examples" / "acme")).stdout
    assert "frontend.express.dev/acme-fe4 created" in out
    # Applying again changes nothing.
    assert "unchanged" in sim.kubectl("apply", "-f", str(ROOT / "examples" / "acme")).stdout
    out = sim.kubectl("apply", "--server-side", "-f", str(ROOT / "examples" / "acme" / "cluster.yaml")).stdout
    assert "serverside-applied" in out

    table = sim.kubectl("get", "express", "-n", "tenant-acme").stdout
    assert re.search(r"^NAME\s+CLUSTER\s+PHASE\s+READY\s+REVISION\s+DESIRED\s+AGE", table, re.M), table
    assert re.search(r"^frontend.express.dev/acme-fe3\s+acme\s+.*\s\d+s$", table, re.M), table
    assert "expresscluster.express.dev/acme" in table

    as_yaml = sim.kubectl("get", "fe", "acme-fe1", "-n", "tenant-acme", "-o", "yaml").stdout
    assert "clusterName: acme" in as_yaml
    as_json = sim.kubectl_json("get", "backend", "acme-be", "-n", "tenant-acme")
    assert as_json["kind"] == "Backend" and as_json["metadata"]["generation"] == 1


def test_builtin_objects_patch_label_annotate(sim):
    install(sim)
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: tenant-acme}\ndata: {a: '1'}\n"
    assert "created" in sim.kubectl("apply", "-f", "-", input=config_map).stdout
    assert "serverside-applied" in sim.kubectl("apply", "--server-side", "-f", "-", input=config_map).stdout
    sim.kubectl("patch", "configmap", "c1", "-n", "tenant-acme", "--type", "merge", "-p", '{"data":{"b":"2"}}')
    sim.kubectl("patch", "configmap", "c1", "-n", "tenant-acme", "--type", "json", "-p", '[{"op":"add","path":"/data/c","value":"3"}]')
    failed = sim.kubectl("patch", "configmap", "c1", "-n", "tenant-acme", "--type", "json",
                         "-p", '[{"op":"test","path":"/data/a","value":"9"},{"op":"remove","path":"/data/a"}]', check=False)
    assert failed.returncode != 0
    sim.kubectl("label", "configmap", "c1", "-n", "tenant-acme", "team=sre")
    sim.kubectl("annotate", "configmap", "c1", "-n", "tenant-acme", "note=hello")
    cm = sim.kubectl_json("get", "configmap", "c1", "-n", "tenant-acme")
    assert cm["data"] == {"a": "1", "b": "2", "c": "3"}
    assert cm["metadata"]["labels"]["team"] == "sre"
    assert cm["metadata"]["annotations"]["note"] == "hello"
    assert "generation" not in cm["metadata"]

    # Another field manager taking a field over conflicts unless forced.
    taken = config_map.replace("a: '1'", "a: 'other'")
    conflict = sim.kubectl("apply", "--server-side", "--field-manager", "intruder", "-f", "-", input=taken, check=False)
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower(), conflict.stderr
    sim.kubectl("apply", "--server-side", "--field-manager", "intruder", "--force-conflicts", "-f", "-", input=taken)
    assert sim.kubectl_json("get", "configmap", "c1", "-n", "tenant-acme")["data"]["a"] == "other"


def test_watch_shows_a_change(sim):
    install(sim)
    sim.kubectl("apply", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w, namespace: tenant-acme}\n")
    watcher = subprocess.Popen(
        [KUBECTL, "get", "configmap", "-n", "tenant-acme", "-w", "--output-watch-events"],
        env=sim.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        header = watcher.stdout.readline()
        assert header.split()[:2] == ["EVENT", "NAME"], header
        first = watcher.stdout.readline()
        assert first.split()[:2] == ["ADDED", "w"], first
        sim.kubectl("label", "configmap", "w", "-n", "tenant-acme", "changed=yes")
        second = watcher.stdout.readline()
        assert second.split()[:2] == ["MODIFIED", "w"], second
    finally:
        watcher.kill()


def test_pod_wait_describe_and_delete(sim):
    install(sim)
    sim.kubectl("apply", "-f", "-", input=POD)
    sim.kubectl("wait", "--for=condition=Ready", "pod/web", "-n", "tenant-acme", "--timeout=10s")
    table = sim.kubectl("get", "pods", "-n", "tenant-acme").stdout
    assert re.search(r"^web\s+Running\s+0\s", table, re.M), table
    described = sim.kubectl("describe", "pod", "web", "-n", "tenant-acme").stdout
    assert re.search(r"Status:\s+Running", described) and re.search(r"Ready\s+True", described), described
    deleted = sim.kubectl("delete", "pod", "web", "-n", "tenant-acme", "--wait=true", timeout=20)
    assert "deleted" in deleted.stdout
    assert sim.kubectl("get", "pod", "web", "-n", "tenant-acme", check=False).returncode != 0


def test_wait_times_out_on_a_never_ready_pod(sim):
    install(sim)
    never = POD.replace("labels: {app: web}}", "labels: {app: web}, annotations: {kubesim.dev/behavior: never-ready}}")
    sim.kubectl("apply", "-f", "-", input=never)
    waited = sim.kubectl("wait", "--for=condition=Ready", "pod/web", "-n", "tenant-acme", "--timeout=1s", check=False)
    assert waited.returncode != 0


def test_logs_and_previous_logs_of_a_crash_looping_pod(sim):
    install(sim)
    sim.kubectl("apply", "-f", "-", input=POD)
    sim.kubectl("wait", "--for=condition=Ready", "pod/web", "-n", "tenant-acme", "--timeout=10s")
    logs = sim.kubectl("logs", "web", "-n", "tenant-acme").stdout
    assert "started with image" in logs and "is Ready" in logs, logs
    stamped = sim.kubectl("logs", "web", "-n", "tenant-acme", "--timestamps", "--tail=1").stdout
    assert re.match(r"^20\d\d-\d\d-\d\dT[\d:.]+Z kubesim: container \S+ is Ready$", stamped.strip()), stamped

    crashing = POD.replace("name: web", "name: crashy").replace(
        "labels: {app: web}}", "labels: {app: web}, annotations: {kubesim.dev/behavior: crash-loop}}")
    sim.kubectl("apply", "-f", "-", input=crashing)

    def restarted_twice():
        pod = json.loads(sim.kubectl("get", "pod", "crashy", "-n", "tenant-acme", "-o", "json").stdout)
        statuses = pod.get("status", {}).get("containerStatuses", [])
        return statuses and statuses[0]["restartCount"] >= 2

    eventually(restarted_twice, timeout=15, what="two restarts")
    previous = sim.kubectl("logs", "crashy", "-n", "tenant-acme", "--previous").stdout
    assert previous.strip().endswith("crashed: exit code 1 (kubesim.dev/behavior: crash-loop)"), previous
    current = sim.kubectl("logs", "crashy", "-n", "tenant-acme").stdout
    assert "restarted (restart" in current, current
    missing = sim.kubectl("logs", "nope", "-n", "tenant-acme", check=False)
    assert missing.returncode != 0 and "not found" in missing.stderr, missing.stderr


def test_a_custom_resource_applied_before_its_crd_says_to_install_the_crds(sim):
    """kubectl validates a kind OpenAPI v3 does not serve against /openapi/v2, asked for in
    protobuf: kubesim answers in protobuf as the API server does, so the user sees kubectl's
    "no matches for kind ... ensure CRDs are installed first", not a protobuf parse error."""
    release = json.dumps({
        "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
        "metadata": {"name": "to-0-2-0", "namespace": "default"},
        "spec": {"fromRing": "default", "toRing": "canary"},
    })
    result = sim.kubectl("apply", "-f", "-", input=release, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'no matches for kind "OperatorRelease" in version "express.dev/v1alpha1"' in result.stderr, result.stderr
    assert "ensure CRDs are installed first" in result.stderr, result.stderr
    assert "proto:" not in result.stderr, result.stderr


def test_a_token_guards_the_server_and_kubectl_says_unauthorized(tmp_path):
    """`kubesim serve --token`: a request without the token gets the API server's 401, which
    kubectl reports as a login failure. kubectl 1.37 never sends a bearer token over plain HTTP
    (kubesim's only transport), so through kubectl every request is refused, with the kubeconfig
    kubesim wrote too; the Python client, which does send it, is let in with that kubeconfig and
    refused with another token."""
    import kubernetes

    sim = start_sim(tmp_path, "--token", "dc-a-token")
    try:
        assert 'token: "dc-a-token"' in sim.kubeconfig.read_text()
        result = sim.kubectl("get", "namespaces", check=False)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "error: You must be logged in to the server" in result.stderr, result.stderr
        raw = sim.kubectl("get", "--raw", "/api/v1/namespaces", "-v=8", check=False)
        assert raw.returncode == 1
        assert '\\"reason\\":\\"Unauthorized\\"' in raw.stderr and '\\"code\\":401' in raw.stderr, raw.stderr

        allowed = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig))
        names = [n.metadata.name for n in kubernetes.client.CoreV1Api(allowed).list_namespace().items]
        assert "default" in names
        wrong = tmp_path / "wrong-kubeconfig"
        wrong.write_text(sim.kubeconfig.read_text().replace("dc-a-token", "not-the-token"))
        refused = kubernetes.config.new_client_from_config(config_file=str(wrong))
        try:
            kubernetes.client.CoreV1Api(refused).list_namespace()
            raise AssertionError("a wrong token was let in")
        except kubernetes.client.ApiException as error:
            assert error.status == 401
            assert json.loads(error.body) == {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
            }
    finally:
        stop_sim(sim)


def widgets_crd(*served):
    """A CRD of widgets listing v1 (stored) and v2, each served as `served` says."""
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    versions = [{"name": name, "served": name in served, "storage": name == "v1", "schema": schema}
                for name in ("v1", "v2")]
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {"group": "example.dev", "scope": "Namespaced", "versions": versions,
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}},
    })


def test_a_server_on_a_port_an_earlier_one_used_is_discovered_afresh(tmp_path):
    """The suite's servers take loopback ports earlier servers held; kubectl keys its discovery
    cache by host and port. A server serving v1 and v2 of widgets leaves kubectl preferring v2
    on that port; the next server there serves v1 only, and a widget written at v1 (which the
    cache lists, so kubectl does not look again) must still read. (With one cache
    for every server this read asked for v2 and got NotFound, as a CI run once did for
    ExpressClusters at v1beta1.)"""
    (tmp_path / "first-dir").mkdir()
    first = start_sim(tmp_path / "first-dir")
    try:
        first.kubectl("apply", "-f", "-", input=widgets_crd("v1", "v2"))
        first.kubectl("wait", "--for=condition=Established", "crd/widgets.example.dev", "--timeout=10s")
        assert "widgets" in first.kubectl("api-resources", "--api-group", "example.dev").stdout
        assert first.kubectl("get", "widgets").returncode == 0
    finally:
        stop_sim(first)
    port = first.url.rsplit(":", 1)[1]
    (tmp_path / "second-dir").mkdir()
    second = start_sim(tmp_path / "second-dir", addr=f"127.0.0.1:{port}")
    try:
        assert second.url == first.url
        second.kubectl("apply", "-f", "-", input=widgets_crd("v1"))
        second.kubectl("wait", "--for=condition=Established", "crd/widgets.example.dev", "--timeout=10s")
        second.kubectl("apply", "-f", "-",
                       input="apiVersion: example.dev/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\n")
        widget = second.kubectl_json("get", "widget", "w")
        assert widget["apiVersion"] == "example.dev/v1", widget
    finally:
        stop_sim(second)
