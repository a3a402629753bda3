"""The CRDs' CEL rules (`x-kubernetes-validations`) are evaluated by kubesim as the API server
evaluates them, and refused writes read as they do against one: through kubectl 1.37 the
rule's message on the node's path, through the Python client a 422 whose causes carry the
message and the field. The rules are the OperatorRelease's own (deploy/crds). Every test runs on
both substrates: what the real API server answers is what kubesim must answer."""

import json

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException


def release(namespace, name="r", **spec):
    body = {"fromRing": "default", "toRing": "canary", "waves": [{"tenants": 1}, {"percent": 100}], **spec}
    return {"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


@pytest.fixture
def crds(cluster):
    return cluster, cluster.namespace("releases")


def test_kubectl_apply_of_equal_rings_is_refused_with_the_rules_message(crds):
    sim, namespace = crds
    refused = sim.kubectl("apply", "-f", "-", input=json.dumps(release(namespace, toRing="default")), check=False)
    assert refused.returncode != 0
    assert ('The OperatorRelease "r" is invalid: spec: Invalid value: fromRing and toRing must differ'
            in refused.stderr), refused.stderr
    assert sim.kubectl("get", "operatorrelease", "r", "-n", namespace, check=False).returncode != 0, "nothing stored"

    # A valid release is stored; an update breaking the rule is refused and changes nothing.
    sim.kubectl("apply", "-f", "-", input=json.dumps(release(namespace)))
    refused = sim.kubectl("apply", "-f", "-", input=json.dumps(release(namespace, toRing="default")), check=False)
    assert refused.returncode != 0 and "fromRing and toRing must differ" in refused.stderr, refused.stderr
    assert sim.kubectl_json("get", "operatorrelease", "r", "-n", namespace)["spec"]["toRing"] == "canary"


def test_a_wave_with_tenants_and_percent_is_refused_with_its_message(crds):
    sim, namespace = crds
    body = release(namespace, waves=[{"tenants": 2, "percent": 50}, {"percent": 100}])
    refused = sim.kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode != 0
    assert ('spec.waves[0]: Invalid value: a wave gives exactly one of tenants and percent'
            in refused.stderr), refused.stderr

    last = release(namespace, waves=[{"tenants": 2}])
    refused = sim.kubectl("apply", "-f", "-", input=json.dumps(last), check=False)
    assert refused.returncode != 0 and "the last wave must be percent: 100" in refused.stderr, refused.stderr


def test_the_python_client_gets_a_422_whose_causes_carry_message_and_field(crds):
    sim, namespace = crds
    api = client.CustomObjectsApi(config.new_client_from_config(config_file=str(sim.kubeconfig)))
    body = release(namespace, toRing="default", waves=[{"tenants": 1, "percent": 10}, {"percent": 100}])
    with pytest.raises(ApiException) as refused:
        api.create_namespaced_custom_object("express.dev", "v1alpha1", namespace, "operatorreleases", body)
    assert refused.value.status == 422
    status = json.loads(refused.value.body)
    assert status["reason"] == "Invalid"
    causes = {(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]}
    assert causes == {
        ("spec", "FieldValueInvalid", 'Invalid value: fromRing and toRing must differ'),
        ("spec.waves[0]", "FieldValueInvalid",
         'Invalid value: a wave gives exactly one of tenants and percent'),
    }, causes
    created = api.create_namespaced_custom_object("express.dev", "v1alpha1", namespace, "operatorreleases", release(namespace))
    assert created["spec"]["toRing"] == "canary"
