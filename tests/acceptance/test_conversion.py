"""The API's next version on Kubernetes' own API server (DESIGN section 18): the CRDs of a build
that serves `v1beta1` beside `v1alpha1` (`express-operator crd --serve-v1beta1`), the operator
serving the conversion webhook on loopback as the chart's ServiceAccount, keeping its own
certificate authority and writing it into the CRDs' `caBundle`. A tenant written at `v1alpha1`
reads at `v1beta1` through kubectl and the Python client; a node written at `v1beta1` reads back
at `v1alpha1` and is provisioned by the operator, which reads `v1alpha1` only.

Who serves the webhook during a release, as the endpoint slice controller sees it, is here too
(on the real server only: kubesim runs no endpoint slice controller).

The tenant's reads and writes run on both substrates with the same assertions: kubesim calls the
CRD's conversion webhook as the API server does (its failure included), so the same requests get
the same answers."""

import base64
import json
import subprocess

import pytest

from conftest import OPERATOR, eventually, free_port, start_operator, stop_process, tenant_yaml

NS = "tenant-conv"


def ca_bundle(cluster):
    crd = cluster.kubectl_json("get", "crd", "backends.express.dev")
    encoded = crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle", "")
    return base64.b64decode(encoded).decode() if encoded else ""


@pytest.mark.parametrize("substrate", ["kubesim", "real"])
def test_a_tenant_reads_and_writes_at_both_versions_through_the_operators_webhook(dedicated_cluster, tmp_path):
    cluster = dedicated_cluster
    port = free_port()
    crds = tmp_path / "crds"
    subprocess.run([OPERATOR, "crd", "--serve-v1beta1", "--webhook-url", f"https://127.0.0.1:{port}/convert",
                    "--output-dir", str(crds)], check=True, timeout=30)
    cluster.kubectl("apply", "--server-side", "-f", str(crds))
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    cluster.kubectl("create", "namespace", "express-system", check=False)
    operator = start_operator(cluster, tmp_path / "operator.log", "--conversion-webhook-addr", f"127.0.0.1:{port}",
                              "--conversion-webhook-name", "127.0.0.1", leader_elect=False)
    try:
        # The operator made its authority and wrote it into every versioned CRD.
        bundle = eventually(lambda: ca_bundle(cluster), timeout=30, what="the caBundle written")
        assert bundle.count("BEGIN CERTIFICATE") == 1, bundle
        secret = cluster.kubectl_json("get", "secret", "express-operator-webhook", "-n", "express-system")
        assert sorted(secret["data"]) == ["ca.crt", "ca.key"]

        # A tenant as the chart writes it at v1alpha1, the tenant repeated on the Backend.
        documents = [json.loads(d) for d in tenant_yaml(NS, frontends=1).split("\n---\n")]
        documents[2]["spec"]["clusterConfig"].update({"tenantID": 7, "tenantName": "acme"})
        cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in documents))

        def healthy():
            status = cluster.kubectl_json("get", "expressclusters.v1alpha1.express.dev", "shop", "-n", NS).get("status", {})
            return status.get("phase") == "Healthy"

        eventually(healthy, timeout=90, what="the tenant provisioned")

        beta = cluster.kubectl_json("get", "backends.v1beta1.express.dev", "shop-be", "-n", NS)
        assert beta["apiVersion"] == "express.dev/v1beta1"
        assert beta["spec"]["cluster"] == "shop" and "clusterConfig" not in beta["spec"], beta["spec"]
        assert json.loads(beta["metadata"]["annotations"]["express.dev/v1alpha1-cluster-config"]) == \
            {"tenantID": 7, "tenantName": "acme"}
        assert beta["status"]["phase"] == "Ready"
        alpha = cluster.kubectl_json("get", "backends.v1alpha1.express.dev", "shop-be", "-n", NS)
        assert alpha["spec"]["clusterConfig"] == {"clusterName": "shop", "tenantID": 7, "tenantName": "acme"}
        assert "express.dev/v1alpha1-cluster-config" not in alpha["metadata"].get("annotations", {})
        cluster_beta = cluster.kubectl_json("get", "expressclusters.v1beta1.express.dev", "shop", "-n", NS)
        assert cluster_beta["spec"]["defaults"]["frontend"] == {"version": "v1"}, cluster_beta["spec"]
        assert "ordering" in cluster_beta["spec"] and "dependencies" not in cluster_beta["spec"]

        # A node written at v1beta1 is stored at v1alpha1, read back as written, and provisioned
        # by the operator, which reads v1alpha1 only.
        written = {"apiVersion": "express.dev/v1beta1", "kind": "Frontend",
                   "metadata": {"name": "shop-fe2", "namespace": NS},
                   "spec": {"cluster": "shop", "up": True, "version": "v1",
                            "ordering": {"provisioning": [{"node": "shop-be", "kind": "Backend",
                                                           "condition": {"type": "Ready"}}]}}}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(written))
        as_alpha = cluster.kubectl_json("get", "frontends.v1alpha1.express.dev", "shop-fe2", "-n", NS)
        assert as_alpha["spec"]["clusterConfig"] == {"clusterName": "shop"}
        assert as_alpha["spec"]["expressVersion"] == "v1"
        assert as_alpha["spec"]["deploymentDependencies"]["provisioningPrerequisites"] == \
            [{"expressNode": "shop-be", "kind": "Backend", "podConditionType": "Ready"}]
        read_back = cluster.kubectl_json("get", "frontends.v1beta1.express.dev", "shop-fe2", "-n", NS)
        # As written, with what the v1beta1 schema defaults (the API server's defaulting).
        assert read_back["spec"] == {**written["spec"], "ordering": {**written["spec"]["ordering"], "disabled": False}}
        eventually(lambda: cluster.kubectl_json("get", "frontends.v1beta1.express.dev", "shop-fe2", "-n", NS)
                   .get("status", {}).get("phase") == "Ready", timeout=60, what="the v1beta1 node provisioned")

        # The Python client reads either version; kubectl's default is the newest.
        from kubernetes import client, config

        custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
        listed = custom.list_namespaced_custom_object("express.dev", "v1beta1", NS, "frontends")
        assert sorted(i["spec"]["cluster"] for i in listed["items"]) == ["shop", "shop"]
        listed = custom.list_namespaced_custom_object("express.dev", "v1alpha1", NS, "frontends")
        assert sorted(i["spec"]["clusterConfig"]["clusterName"] for i in listed["items"]) == ["shop", "shop"]
        default = cluster.kubectl_json("get", "frontends", "-n", NS)
        assert {i["apiVersion"] for i in default["items"]} == {"express.dev/v1beta1"}

        # A runbook's patch with v1alpha1's field names, through kubectl's plain `frontend`
        # (v1beta1 now): refused, naming the field to write, instead of pruned and lost.
        runbook = cluster.kubectl("patch", "frontend", "shop-fe2", "-n", NS, "--type", "merge",
                                  "-p", '{"spec":{"expressVersion":"v2"}}', check=False)
        assert runbook.returncode == 1, runbook.stdout
        assert "spec.expressVersion is v1alpha1's name" in runbook.stderr, runbook.stderr
        assert "spec.version" in runbook.stderr and "frontends.v1alpha1.express.dev" in runbook.stderr
        prerequisite = {"spec": {"ordering": {"upgrade": [{"node": "shop-be", "podConditionType": "Ready"}]}}}
        refused = cluster.kubectl("patch", "frontend", "shop-fe2", "-n", NS, "--type", "merge",
                                  "-p", json.dumps(prerequisite), check=False)
        assert refused.returncode == 1 and "where it is condition.type" in refused.stderr, refused.stderr
        cluster_patch = cluster.kubectl("patch", "expresscluster", "shop", "-n", NS, "--type", "merge",
                                        "-p", '{"spec":{"defaults":{"frontend":{"expressVersion":"v2"}}}}',
                                        check=False)
        assert cluster_patch.returncode == 1, cluster_patch.stdout
        assert "spec.defaults.frontend.version" in cluster_patch.stderr, cluster_patch.stderr
        unchanged = cluster.kubectl_json("get", "frontends.v1alpha1.express.dev", "shop-fe2", "-n", NS)
        assert unchanged["spec"]["expressVersion"] == "v1", unchanged["spec"]
        assert unchanged["metadata"]["generation"] == as_alpha["metadata"]["generation"]

        # The tenant chart rendered at either version writes the same tenant: applied side by
        # side and read back at v1alpha1, the same specs (a v1beta1 node does not repeat the
        # tenant, which is the ExpressCluster's) and the same rollout-id.
        tenant_chart_renders_the_same_tenant_at_both_versions(cluster)

        # With its webhook gone, a read that needs a conversion fails as the API server says it,
        # and one at the storage version still reads.
        stop_process(operator)
        failed = cluster.kubectl("get", "backends.v1beta1.express.dev", "shop-be", "-n", NS, "-o", "json",
                                 check=False)
        assert failed.returncode == 1, failed.stdout
        assert "conversion webhook for express.dev/v1alpha1, Kind=Backend failed" in failed.stderr, failed.stderr
        assert cluster.kubectl_json("get", "backends.v1alpha1.express.dev", "shop-be", "-n", NS)["spec"]
    finally:
        stop_process(operator)
        print((tmp_path / "operator.log").read_text()[-6000:])


def operator_pod(name, ring):
    """An operator pod as the chart's Deployment of `ring` makes it (the labels its Service
    selects on, the `webhook` port); kwok runs it, the test runs its process."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "express-system",
                         "labels": {"app.kubernetes.io/part-of": "express-operator",
                                    "app.kubernetes.io/instance": "express",
                                    "express.dev/operator-ring": ring}},
            "spec": {"containers": [{"name": "express-operator", "image": "express-operator",
                                     "ports": [{"name": "webhook", "containerPort": 9443}]}]}}


def webhook_endpoints(cluster):
    """The pods the endpoint slice controller put behind the chart's webhook Service."""
    slices = cluster.kubectl_json("get", "endpointslices", "-n", "express-system",
                                  "-l", "kubernetes.io/service-name=express-operator-webhook")["items"]
    return sorted(e["targetRef"]["name"] for s in slices for e in s.get("endpoints") or [])


@pytest.mark.parametrize("substrate", ["real"])
def test_only_the_build_that_knows_every_listed_version_is_behind_the_webhook_service(dedicated_cluster, tmp_path):
    """Two builds in one DC, as during a release: the canary ring's knows v1beta1, the default
    ring's (pretending to be the build before it) knows v1alpha1 only. Each pod labels itself;
    Kubernetes' endpoint slice controller then puts only the canary's pod behind the chart's
    Service once the CRDs list v1beta1."""
    from test_operator_chart import find, render

    cluster = dedicated_cluster
    cluster.install_crds()
    cluster.kubectl("create", "namespace", "express-system", check=False)
    objects, _ = render({"conversionWebhook": {"enabled": True}, "rings": [{"name": "default"}, {"name": "canary"}]})
    [service] = find(objects, "Service", "express-operator-webhook")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(service))
    for name, ring in (("express-operator-old", "default"), ("express-operator-new", "canary")):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(operator_pod(name, ring)))
    processes = []
    try:
        for name, known in (("express-operator-old", ["--known-api-versions", "v1alpha1"]),
                            ("express-operator-new", [])):
            processes.append(start_operator(
                cluster, tmp_path / f"{name}.log", "--conversion-webhook-addr", f"127.0.0.1:{free_port()}",
                "--conversion-webhook-name", "127.0.0.1", *known, pod_name=name, leader_elect=False))

        # The CRDs list v1alpha1 only: both builds know it, both serve.
        eventually(lambda: webhook_endpoints(cluster) == ["express-operator-new", "express-operator-old"],
                   timeout=60, what="both pods behind the Service")
        old = cluster.kubectl_json("get", "pod", "express-operator-old", "-n", "express-system")["metadata"]
        assert old["annotations"]["express.dev/api-versions"] == "v1alpha1"

        # A build that serves v1beta1 applies its CRDs: the older build leaves the Service.
        crds = tmp_path / "crds"
        subprocess.run([OPERATOR, "crd", "--serve-v1beta1", "--webhook-url", "https://127.0.0.1:1/convert",
                        "--output-dir", str(crds)], check=True, timeout=30)
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
        eventually(lambda: webhook_endpoints(cluster) == ["express-operator-new"], timeout=90,
                   what="only the build that knows v1beta1 behind the Service")
        labels = cluster.kubectl_json("get", "pod", "express-operator-old", "-n", "express-system")["metadata"]["labels"]
        assert "express.dev/conversion" not in labels, labels
        new = cluster.kubectl_json("get", "pod", "express-operator-new", "-n", "express-system")["metadata"]
        assert new["labels"]["express.dev/conversion"] == "serving"
        assert new["annotations"]["express.dev/api-versions"] == "v1alpha1,v1beta1"
    finally:
        for process in processes:
            stop_process(process)
        for name in ("express-operator-old", "express-operator-new"):
            print(name, (tmp_path / f"{name}.log").read_text()[-3000:])


def tenant_chart_renders_the_same_tenant_at_both_versions(cluster):
    from test_helm import render, tenant_values

    values = tenant_values(frontends=2, allNodeConfig={"fe2": {"upgradeDependency": ["be", "fe1"]}},
                           configChangeset={"Backend": "abc", "Frontend": "def"})
    read = {}
    for version in ("v1alpha1", "v1beta1"):
        namespace = f"tenant-chart-{version}"
        cluster.kubectl("create", "namespace", namespace)
        rendered = render({**values, "apiVersion": version}, namespace=namespace)
        assert f"apiVersion: express.dev/{version}" in rendered
        cluster.kubectl("apply", "-f", "-", input=rendered)
        read[version] = {
            (o["kind"], o["metadata"]["name"]): o
            for kind in ("expressclusters", "backends", "frontends")
            for o in cluster.kubectl_json("get", f"{kind}.v1alpha1.express.dev", "-n", namespace)["items"]}
    assert sorted(read["v1alpha1"]) == sorted(read["v1beta1"]) and len(read["v1alpha1"]) == 4
    for key, alpha in read["v1alpha1"].items():
        beta = read["v1beta1"][key]
        expected = json.loads(json.dumps(alpha["spec"]))
        if key[0] != "ExpressCluster":
            for field in ("tenantID", "tenantName"):
                expected["clusterConfig"].pop(field)
        assert beta["spec"] == expected, (key, beta["spec"], expected)
        assert beta["metadata"]["annotations"]["express.dev/rollout-id"] == \
            alpha["metadata"]["annotations"]["express.dev/rollout-id"]
