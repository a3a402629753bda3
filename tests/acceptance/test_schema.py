"""Custom resources are held to their CRD's schema, through kubectl 1.37 with its default
flags: wrong types are refused with the field named, unknown fields are refused under kubectl's
default strict validation (and pruned when validation is off), defaults are filled."""

import json

from test_kubectl import install

NS = "tenant-acme"


def frontend(name="acme-fe1", **spec):
    body = {"clusterConfig": {"clusterName": "acme", "tenantID": 1, "tenantName": "acme"}, **spec}
    return json.dumps({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
                       "metadata": {"name": name, "namespace": NS}, "spec": body})


def test_a_wrong_type_is_refused_naming_the_field(sim):
    install(sim)
    refused = sim.kubectl("apply", "-f", "-", input=frontend(up="yes"), check=False)
    assert refused.returncode != 0
    assert 'spec.up: Invalid value: "string": spec.up in body must be of type boolean: "string"' in refused.stderr, refused.stderr
    assert sim.kubectl("get", "frontend", "acme-fe1", "-n", NS, check=False).returncode != 0, "nothing stored"

    many = sim.kubectl("apply", "-f", "-", check=False, input=frontend(
        up=1, deploymentDependencies={"provisioningPrerequisites": [{"expressNode": "", "kind": "Middle"}]}))
    assert many.returncode != 0
    for words in ("spec.up: Invalid value", "spec.deploymentDependencies.provisioningPrerequisites[0].expressNode: Invalid value", 'Unsupported value: "Middle"'):
        assert words in many.stderr, many.stderr


def test_unknown_fields_strict_by_default_pruned_without_validation(sim):
    install(sim)
    strict = sim.kubectl("apply", "-f", "-", input=frontend(tpyo=1), check=False)
    assert strict.returncode != 0
    assert 'unknown field "spec.tpyo"' in strict.stderr, strict.stderr

    warned = sim.kubectl("apply", "--validate=warn", "-f", "-", input=frontend(tpyo=1))
    assert 'unknown field "spec.tpyo"' in warned.stderr, warned.stderr
    assert "tpyo" not in sim.kubectl_json("get", "frontend", "acme-fe1", "-n", NS)["spec"]

    sim.kubectl("apply", "--validate=false", "-f", "-", input=frontend(name="acme-fe2", tpyo=1))
    stored = sim.kubectl_json("get", "frontend", "acme-fe2", "-n", NS)
    assert "tpyo" not in stored["spec"], "pruned"

    # Server-side apply is held to the same rules.
    ssa = sim.kubectl("apply", "--server-side", "-f", "-", input=frontend(name="acme-fe3", tpyo=1), check=False)
    assert ssa.returncode != 0 and 'unknown field "spec.tpyo"' in ssa.stderr, ssa.stderr


def test_schema_defaults_are_filled_and_status_is_validated(sim):
    install(sim)
    sim.kubectl("apply", "-f", "-", input=frontend())
    assert sim.kubectl("get", "frontend", "acme-fe1", "-n", NS, "-o", "jsonpath={.spec.up}").stdout == "true"

    refused = sim.kubectl("patch", "frontend", "acme-fe1", "-n", NS, "--subresource=status", "--type=merge",
                          "-p", '{"status": {"phase": "Dancing"}}', check=False)
    assert refused.returncode != 0
    assert 'status.phase: Unsupported value: "Dancing"' in refused.stderr, refused.stderr
    sim.kubectl("patch", "frontend", "acme-fe1", "-n", NS, "--subresource=status", "--type=merge",
                "-p", '{"status": {"phase": "Ready"}}')
    assert sim.kubectl_json("get", "frontend", "acme-fe1", "-n", NS)["status"]["phase"] == "Ready"
