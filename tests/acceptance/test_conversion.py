"""The API's next version on Kubernetes' own API server (DESIGN section 18): the CRDs of a build
that serves `v1beta1` beside `v1alpha1` (`express-operator crd --serve-v1beta1`), the operator
serving the conversion webhook on loopback as the chart's ServiceAccount, keeping its own
certificate authority and writing it into the CRDs' `caBundle`. A tenant written at `v1alpha1`
reads at `v1beta1` through kubectl and the Python client; a node written at `v1beta1` reads back
at `v1alpha1` and is provisioned by the operator, which reads `v1alpha1` only.

Only on the real server: kubesim does not call conversion webhooks yet (docs/api.md)."""

import base64
import json
import socket
import subprocess

import pytest

from conftest import OPERATOR, eventually, start_operator, stop_process, tenant_yaml

NS = "tenant-conv"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ca_bundle(cluster):
    crd = cluster.kubectl_json("get", "crd", "backends.express.dev")
    encoded = crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle", "")
    return base64.b64decode(encoded).decode() if encoded else ""


@pytest.mark.parametrize("substrate", ["real"])
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
    finally:
        stop_process(operator)
        print((tmp_path / "operator.log").read_text()[-6000:])
