"""The tenant chart rendered by the real Helm engine (helm-python-sdk) from values shaped like
the ones tenant repositories contain, applied with kubectl, and planned by kubectl-express from
the same rendering."""

import json
import subprocess

import helm_python as helm
import pytest
import yaml

from conftest import KUBECTL_EXPRESS, ROOT
from test_kubectl import install

# A tenant's values file as teams have it today (only the names changed).
LEGACY_VALUES = """
instance: varsamisktest
namespace: tenant-123634-prod
instanceId: 123634
dc: den
provisioning: False
nodes:
  be:  {up: true}
  fe1: {up: true, expressVersion: express-e689.154}   # per-node override
  fe2: {up: true}
  fe3: {up: true}
  fe4: {up: true}
disableDependencies: false
expressVersion:  {Backend: express-e689.151, Frontend: express-e689.151}
configChangeset: {Backend: 867fc47c2326a5b00893b3b0f3d2d7c66b634579, Frontend: 867fc47c2326a5b00893b3b0f3d2d7c66b634579}
"""


def tenant_values(frontends=4, version="express-e689.154", down=(), **extra):
    """Values in the chart's shape for the acme tenant of namespace tenant-acme."""
    nodes = {"be": {"up": "be" not in down}}
    nodes.update({f"fe{i}": {"up": f"fe{i}" not in down} for i in range(1, frontends + 1)})
    return {"instance": "acme", "instanceId": 123634, "nodes": nodes,
            "expressVersion": {"Backend": version, "Frontend": version}, **extra}


def chart():
    return helm.Chart.load(str(ROOT / "charts" / "express-tenant"))


def render_all(values, namespace="tenant-acme"):
    return chart().render(values, name="acme", namespace=namespace)


def render(values, namespace="tenant-acme"):
    manifests = render_all(values, namespace)
    return "\n---\n".join(manifests[k] for k in sorted(manifests) if not k.endswith("NOTES.txt"))


def objects(rendered):
    return [d for d in yaml.safe_load_all(rendered) if d]


def by_name(rendered):
    return {o["metadata"]["name"]: o for o in objects(rendered)}


def test_a_tenant_values_file_renders_unchanged_and_applies(sim, tmp_path):
    install(sim)
    rendered = render(yaml.safe_load(LEGACY_VALUES))
    found = by_name(rendered)
    assert sorted(found) == ["varsamisktest", "varsamisktest-be"] + [f"varsamisktest-fe{i}" for i in range(1, 5)]
    cluster = found["varsamisktest"]
    assert cluster["kind"] == "ExpressCluster"
    assert cluster["metadata"]["namespace"] == "tenant-123634-prod"
    assert cluster["spec"]["tenantID"] == 123634
    assert cluster["spec"]["dependencies"]["disabled"] is False
    assert cluster["spec"]["defaults"]["frontend"]["expressVersion"] == "express-e689.151"
    assert cluster["spec"]["defaults"]["backend"]["configChangeset"] == "867fc47c2326a5b00893b3b0f3d2d7c66b634579"
    assert found["varsamisktest-be"]["kind"] == "Backend"
    assert found["varsamisktest-fe1"]["spec"]["expressVersion"] == "express-e689.154"
    assert "expressVersion" not in found["varsamisktest-fe2"]["spec"]
    for o in found.values():
        assert o["metadata"]["labels"]["express.dev/dc"] == "den"
        assert o["metadata"]["annotations"]["express.dev/rollout-id"]
        assert "deploymentDependencies" not in o.get("spec", {}), "ordering belongs to the operator"
        if o["kind"] != "ExpressCluster":
            assert o["spec"]["clusterConfig"]["clusterName"] == "varsamisktest"
    sim.kubectl("create", "namespace", "tenant-123634-prod")
    out = sim.kubectl("apply", "-f", "-", input=rendered).stdout
    assert "frontend.express.dev/varsamisktest-fe4 created" in out

    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(rendered)
    plan = json.loads(subprocess.run([KUBECTL_EXPRESS, "plan", "--offline", "-f", str(manifest), "-o", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    steps = [(s["node"], s["action"]) for s in plan["clusters"][0]["steps"]]
    assert steps == [("varsamisktest-be", "Provision")] + [(f"varsamisktest-fe{i}", "Provision") for i in range(1, 5)]


def test_per_node_overrides_and_explicit_prerequisites(sim):
    values = tenant_values(frontends=3, down=("fe2",), disableDependencies=True)
    values["nodes"]["fe1"].update({"deploymentRevision": "pinned-7", "podTemplate": {"metadata": {"labels": {"team": "a"}}},
                                   "configChangeset": "cs-9"})
    values["nodes"]["fe3"].update({"provisioningDependency": "be", "upgradeDependency": ["fe1", "be"]})
    found = by_name(render(values))
    fe1, fe2, fe3 = (found[f"acme-fe{i}"] for i in (1, 2, 3))
    assert fe1["metadata"]["labels"]["express.dev/deployment-revision"] == "pinned-7"
    assert fe1["spec"]["podTemplate"] == {"metadata": {"labels": {"team": "a"}}}
    assert fe1["spec"]["configChangeset"] == "cs-9"
    assert fe2["spec"]["up"] is False
    deps = fe3["spec"]["deploymentDependencies"]
    assert [(p["expressNode"], p["kind"]) for p in deps["provisioningPrerequisites"]] == [("acme-be", "Backend")]
    assert [(p["expressNode"], p["kind"]) for p in deps["upgradePrerequisites"]] == [
        ("acme-fe1", "Frontend"), ("acme-be", "Backend")]
    assert found["acme"]["spec"]["dependencies"]["disabled"] is True
    install(sim)
    sim.kubectl("apply", "-f", "-", input=render(values))


def test_legacy_all_node_config_renders_explicit_prerequisites_and_the_notes_say_it_is_not_needed():
    values = tenant_values(frontends=2, allNodeConfig={"fe1": {"provisioningDependency": "be"},
                                                       "fe2": {"upgradeDependency": "fe1"}})
    manifests = render_all(values)
    found = by_name("\n---\n".join(v for k, v in manifests.items() if not k.endswith("NOTES.txt")))
    assert found["acme-fe1"]["spec"]["deploymentDependencies"]["provisioningPrerequisites"][0]["expressNode"] == "acme-be"
    assert found["acme-fe2"]["spec"]["deploymentDependencies"]["upgradePrerequisites"][0]["expressNode"] == "acme-fe1"
    notes = next(v for k, v in manifests.items() if k.endswith("NOTES.txt"))
    assert "allNodeConfig" in notes and "no longer" in notes
    plain = next(v for k, v in render_all(tenant_values(frontends=2)).items() if k.endswith("NOTES.txt"))
    assert "allNodeConfig" not in plain


@pytest.mark.parametrize("nodes, expected", [
    ({"be": {"up": True}, "fe01": {"up": True}}, "/nodes"),            # misspelt node key
    ({"be": {"up": True}, "db": {"up": True}}, "/nodes"),              # neither be nor feN
    ({"be": {"up": "yes"}}, "/nodes/be/up"),                           # not a boolean
    ({"be": {"up": True, "expresVersion": "x"}}, "/nodes/be"),          # misspelt override
])
def test_the_schema_rejects_bad_node_values_with_helms_message(nodes, expected):
    values = tenant_values()
    values["nodes"] = nodes
    with pytest.raises(Exception) as error:
        render_all(values)
    message = str(error.value)
    assert "values don't meet the specifications of the schema" in message
    assert f"at '{expected}" in message, message


def test_every_object_carries_the_same_rollout_id_and_a_change_gives_a_new_one():
    first = objects(render(tenant_values()))
    ids = {o["metadata"]["annotations"]["express.dev/rollout-id"] for o in first}
    assert len(ids) == 1
    second = objects(render(tenant_values(version="express-e689.155")))
    assert {o["metadata"]["annotations"]["express.dev/rollout-id"] for o in second}.isdisjoint(ids)
    pinned = objects(render(tenant_values(rolloutId="git-abc123")))
    assert {o["metadata"]["annotations"]["express.dev/rollout-id"] for o in pinned} == {"git-abc123"}


def test_the_argo_cd_application_example_renders_its_tenant():
    app = yaml.safe_load((ROOT / "deploy" / "argocd" / "application.yaml").read_text())
    source = app["spec"]["source"]
    chart_dir = ROOT / source["path"]
    assert chart_dir == ROOT / "charts" / "express-tenant"
    values = {}
    for values_file in source["helm"]["valueFiles"]:
        values.update(yaml.safe_load((chart_dir / values_file).resolve().read_text()))
    rendered = objects(render(values, namespace=app["spec"]["destination"]["namespace"]))
    assert {o["kind"] for o in rendered} == {"ExpressCluster", "Backend", "Frontend"}
    assert all(o["metadata"]["namespace"] == app["spec"]["destination"]["namespace"] for o in rendered)


def test_lint_is_clean_with_a_tenant_values_file():
    values = yaml.safe_load((ROOT / "examples" / "tenant-values.yaml").read_text())
    report = helm.lint(str(ROOT / "charts" / "express-tenant"), values, strict=True)
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def test_the_operator_ring_is_one_value_on_the_express_cluster_and_not_a_delivery():
    plain = objects(render(tenant_values()))
    moved = objects(render(tenant_values(operatorRing="canary")))
    ring = {o["kind"]: o["metadata"]["labels"].get("express.dev/operator-ring") for o in moved}
    assert ring == {"ExpressCluster": "canary", "Backend": None, "Frontend": None}
    assert all("express.dev/operator-ring" not in o["metadata"]["labels"] for o in plain)
    # Moving a tenant is not a delivery: the rollout-id stays.
    assert {o["metadata"]["annotations"]["express.dev/rollout-id"] for o in moved} == \
        {o["metadata"]["annotations"]["express.dev/rollout-id"] for o in plain}
    with pytest.raises(Exception):
        render(tenant_values(operatorRing="Canary"))
