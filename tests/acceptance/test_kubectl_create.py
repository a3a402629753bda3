"""kubectl 1.37's typed `create` subcommands, which send protobuf bodies, against kubesim."""

import base64

NS = "tenant-acme"


def test_create_subcommands_send_protobuf_and_are_stored_as_json(sim):
    assert "namespace/tenant-acme created" in sim.kubectl("create", "namespace", NS).stdout
    assert sim.kubectl_json("get", "namespace", NS)["status"]["phase"] == "Active"

    sim.kubectl("create", "configmap", "settings", "-n", NS, "--from-literal=a=b", "--from-literal=c=d")
    assert sim.kubectl_json("get", "configmap", "settings", "-n", NS)["data"] == {"a": "b", "c": "d"}

    sim.kubectl("create", "secret", "generic", "token", "-n", NS, "--from-literal=password=s3cret")
    secret = sim.kubectl_json("get", "secret", "token", "-n", NS)
    assert base64.b64decode(secret["data"]["password"]) == b"s3cret"
    assert secret["type"] == "Opaque"

    sim.kubectl("create", "service", "clusterip", "web", "-n", NS, "--tcp=80:8080", "--tcp=81:admin")
    spec = sim.kubectl_json("get", "service", "web", "-n", NS)["spec"]
    assert spec["type"] == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in spec["ports"]] == [(80, 8080), (81, "admin")]
    # Zeros Go writes on the wire but leaves out of its JSON must not appear.
    assert "nodePort" not in spec["ports"][0] and "healthCheckNodePort" not in spec

    sim.kubectl("create", "serviceaccount", "express-operator", "-n", NS)
    assert sim.kubectl_json("get", "serviceaccount", "express-operator", "-n", NS)["metadata"]["name"] == "express-operator"

    # A server-side dry run is decoded and checked, and stores nothing.
    dry = sim.kubectl("create", "configmap", "ghost", "-n", NS, "--from-literal=x=y", "--dry-run=server", "-o", "json")
    assert '"ghost"' in dry.stdout
    assert sim.kubectl("get", "configmap", "ghost", "-n", NS, check=False).returncode != 0

    # Creating twice gives the API server's AlreadyExists, decoded from protobuf like the first.
    again = sim.kubectl("create", "namespace", NS, check=False)
    assert again.returncode != 0 and "AlreadyExists" in again.stderr, again.stderr


def test_a_kind_kubesim_cannot_decode_is_refused_naming_it(sim):
    sim.kubectl("create", "namespace", NS)
    refused = sim.kubectl("create", "role", "reader", "-n", NS, "--verb=get", "--resource=pods", check=False)
    assert refused.returncode != 0
    assert "rbac.authorization.k8s.io/v1/Role" in refused.stderr and "application/json" in refused.stderr, refused.stderr
