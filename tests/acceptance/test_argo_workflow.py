"""The shipped Argo Workflow for a release across DCs (deploy/argo-workflows), checked against
Argo Workflows' published schema as the `hera` package carries it (pydantic models generated from
Argo's JSON schema): every field must be one the schema defines, of its type, and a typo must not
pass. The retry expression must retry exactly the driver's exit codes 4 and 5."""

import copy

import pytest
import yaml
from hera.workflows.models import WorkflowTemplate

from conftest import ROOT

TEMPLATE = ROOT / "deploy" / "argo-workflows" / "fleet-release.yaml"


def unknown_fields(given, parsed, path=""):
    """The fields of `given` the schema's model dropped (it ignores what it does not define)."""
    found = []
    if isinstance(given, dict):
        for key, value in given.items():
            if key not in parsed:
                found.append(f"{path}/{key}")
            else:
                found += unknown_fields(value, parsed[key], f"{path}/{key}")
    elif isinstance(given, list):
        for i, (a, b) in enumerate(zip(given, parsed)):
            found += unknown_fields(a, b, f"{path}[{i}]")
    return found


def check(document):
    model = WorkflowTemplate.model_validate(document)
    return unknown_fields(document, model.model_dump(by_alias=True, exclude_none=True, mode="json"))


def test_the_workflow_template_is_valid_against_argo_s_schema():
    document = yaml.safe_load(TEMPLATE.read_text())
    assert check(document) == []
    # The check has teeth: a misspelt field, and a field of the wrong type.
    typo = copy.deepcopy(document)
    typo["spec"]["templates"][0]["retryStratgy"] = typo["spec"]["templates"][0].pop("retryStrategy")
    assert check(typo) == ["/spec/templates[0]/retryStratgy"]
    wrong = copy.deepcopy(document)
    wrong["spec"]["templates"][0]["container"]["args"] = {"not": "a list"}
    with pytest.raises(Exception):
        check(wrong)


def argo_retry(expression, exit_code):
    """Argo's expression, evaluated for one exit code (the grammar used here: `||`, `==`,
    `asInt(lastRetry.exitCode)`)."""
    python = expression.replace("asInt(lastRetry.exitCode)", str(exit_code)).replace("||", " or ")
    assert set(python) <= set("0123456789=or "), python
    return eval(python)  # noqa: S307 - digits, == and `or` only, checked above


def test_the_step_retries_on_4_and_5_and_ends_on_every_other_code():
    document = yaml.safe_load(TEMPLATE.read_text())
    (step,) = document["spec"]["templates"]
    retry = step["retryStrategy"]
    assert retry["retryPolicy"] == "Always"
    assert [code for code in range(0, 7) if argo_retry(retry["expression"], code)] == [4, 5]
    # It runs the driver from a plan file, with the kubeconfig naming every DC.
    args = step["container"]["args"]
    assert args[:4] == ["fleet-release", "run", "-f", "/plan/plan.yaml"]
    assert "--timeout" in args and "--kubeconfig" in args
    assert step["container"]["securityContext"]["runAsUser"] == 65532
