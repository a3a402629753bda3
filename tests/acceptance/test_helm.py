"""Manifests rendered by the real Helm engine (helm-python-sdk), applied with kubectl, and
planned by kubectl-express from the same rendering."""

import json
import subprocess

import helm_python as helm
import pytest

from conftest import KUBECTL_EXPRESS, ROOT
from test_kubectl import install


def render(values, namespace="tenant-acme"):
    chart = helm.Chart.load(str(ROOT / "charts" / "express-tenant"))
    manifests = chart.render(values, name="acme", namespace=namespace)
    return "\n---\n".join(manifests[k] for k in sorted(manifests))


@pytest.mark.parametrize("explicit", [False, True])
def test_rendered_tenant_applies_and_plans_in_the_default_order(sim, tmp_path, explicit):
    install(sim)
    rendered = render({"frontends": 4, "dependencies": {"explicit": explicit}})
    out = sim.kubectl("apply", "-f", "-", input=rendered).stdout
    assert "backend.express.dev/acme-be created" in out
    assert "frontend.express.dev/acme-fe4 created" in out
    applied = sim.kubectl_json("get", "frontends", "-n", "tenant-acme")
    assert [f["metadata"]["name"] for f in applied["items"]] == [f"acme-fe{i}" for i in range(1, 5)]
    if explicit:
        fe3 = next(f for f in applied["items"] if f["metadata"]["name"] == "acme-fe3")
        assert fe3["spec"]["deploymentDependencies"]["upgradePrerequisites"][0]["expressNode"] == "acme-be"

    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(rendered)
    plan = json.loads(subprocess.run([KUBECTL_EXPRESS, "plan", "--offline", "-f", str(manifest), "-o", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    steps = [(s["node"], s["action"]) for s in plan["clusters"][0]["steps"]]
    assert steps == [("acme-be", "Provision")] + [(f"acme-fe{i}", "Provision") for i in range(1, 5)]


def test_down_nodes_render_as_up_false(sim):
    install(sim)
    sim.kubectl("apply", "-f", "-", input=render({"frontends": 3, "down": ["fe2"]}))
    fe2 = sim.kubectl_json("get", "frontend", "acme-fe2", "-n", "tenant-acme")
    assert fe2["spec"]["up"] is False
