"""The chart's PrometheusRule under promtool (Debian's `prometheus` package, installed by
scripts/test.sh): rendered by the real Helm engine, with the default values and with the
per-tenant families off, its `spec` is checked (`promtool check rules`) and unit-tested
(`promtool test rules`) with charts/express-operator/tests/alerts*-test.yaml: for every alert a
case that fires after its `for:` with exact labels and annotations, and cases that must not.
Whether each expression meets the metrics a real operator exposes: test_prometheus.py."""

import re
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT
from test_operator_chart import CHART, find, render

PROMTOOL = shutil.which("promtool")
TESTS = CHART / "tests"
FLEET_TESTS = TESTS / "alerts-test.yaml"
PER_TENANT_TESTS = TESTS / "alerts-per-tenant-test.yaml"
RUNBOOK = "docs/doctor.md#runbook-an-alert-fired"


def promtool(*args, cwd):
    assert PROMTOOL, "promtool is missing: scripts/test.sh installs Debian's prometheus package"
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def rule_spec(values=None):
    """The PrometheusRule's spec as the chart renders it with `values` (rules on)."""
    merged = {**(values or {})}
    metrics = {**merged.get("metrics", {})}
    metrics["prometheusRule"] = {"enabled": True, **metrics.get("prometheusRule", {})}
    merged["metrics"] = metrics
    objects, _ = render(merged)
    [rule] = find(objects, "PrometheusRule")
    return rule["spec"]


def alerts(spec):
    return {r["alert"]: r for group in spec["groups"] for r in group["rules"]}


def write_rules(directory, spec):
    (directory / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return directory / "rules.yaml"


RENDERS = {
    "defaults": ({}, [FLEET_TESTS, PER_TENANT_TESTS]),
    "per-tenant families off": ({"metrics": {"perTenant": False}}, [FLEET_TESTS]),
}


@pytest.mark.parametrize("name", RENDERS)
def test_promtool_checks_and_unit_tests_the_rendered_rules(name, tmp_path):
    values, test_files = RENDERS[name]
    write_rules(tmp_path, rule_spec(values))
    checked = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for test_file in test_files:
        # Each file names its rules `rules.yaml`, beside it.
        shutil.copy(test_file, tmp_path / test_file.name)
        tested = promtool("test", "rules", test_file.name, cwd=tmp_path)
        assert tested.returncode == 0, f"{test_file.name}:\n{tested.stdout}{tested.stderr}"
        assert "SUCCESS" in tested.stdout


def test_the_unit_tests_fail_on_a_wrong_threshold(tmp_path):
    # The same tests against the rules with one threshold moved: promtool says so, naming it.
    spec = rule_spec()
    alerts(spec)["ExpressOperatorBacklog"]["expr"] = alerts(spec)["ExpressOperatorBacklog"]["expr"].replace(
        "> 120", "> 180")
    write_rules(tmp_path, spec)
    shutil.copy(FLEET_TESTS, tmp_path / FLEET_TESTS.name)
    tested = promtool("test", "rules", FLEET_TESTS.name, cwd=tmp_path)
    assert tested.returncode != 0
    assert "alertname: ExpressOperatorBacklog" in tested.stdout + tested.stderr, tested.stdout


def test_every_alert_has_a_case_that_fires_with_its_labels_and_one_that_does_not():
    cases = {}
    for test_file in (FLEET_TESTS, PER_TENANT_TESTS):
        for group in yaml.safe_load(test_file.read_text())["tests"]:
            for case in group["alert_rule_test"]:
                cases.setdefault(case["alertname"], []).append(case["exp_alerts"])
    rules = alerts(rule_spec())
    assert set(cases) == set(rules), "a test case per alert, and no case for an alert that is gone"
    for name, rule in rules.items():
        fired = [alert for expected in cases[name] for alert in expected]
        assert fired, f"{name}: no case where it fires"
        assert [] in cases[name], f"{name}: no case where it must not fire"
        for alert in fired:
            labels, annotations = alert["exp_labels"], alert["exp_annotations"]
            assert labels["severity"] == rule["labels"]["severity"], name
            assert labels.get("namespace"), f"{name}: fires without a namespace"
            # Every alert about an operator names its ring; the fleet-wide spread and the
            # release-wide absence are not one ring's.
            if name not in {"ExpressFleetSpread", "ExpressOperatorDown"}:
                assert labels.get("ring"), f"{name}: fires without a ring"
            assert set(annotations) == set(rule["annotations"]), name
            assert annotations["runbook_url"] == RUNBOOK, name
            for text in annotations.values():
                assert "  " not in text and "{{" not in text, f"{name}: {text!r} has an empty or raw field"


def doctor_anchors():
    """The anchors GitHub gives docs/doctor.md's headings."""
    headings = re.findall(r"^#+ (.+)$", (ROOT / "docs" / "doctor.md").read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_runbook_link_names_a_heading_of_doctor_md_and_takes_a_base_url():
    assert RUNBOOK.split("#")[1] in doctor_anchors()
    for rule in alerts(rule_spec()).values():
        assert rule["annotations"]["runbook_url"] == RUNBOOK
    based = rule_spec({"metrics": {"prometheusRule": {"runbookBaseURL": "https://docs.example/express/"}}})
    for rule in alerts(based).values():
        assert rule["annotations"]["runbook_url"] == f"https://docs.example/express/{RUNBOOK}"


def test_each_for_is_a_value():
    defaults = alerts(rule_spec())
    assert {name: rule["for"] for name, rule in defaults.items()} == {
        "ExpressRolloutFailed": "0s", "ExpressClusterHalted": "15m", "ExpressOperatorReconcileErrors": "15m",
        "ExpressOperatorBacklog": "5m", "ExpressFleetSpread": "10m", "ExpressOperatorNoLeader": "5m",
        "ExpressOperatorDown": "5m", "ExpressOperatorReleaseRolledBack": "0s",
        "ExpressOperatorReleaseInconclusive": "15m"}
    shortened = alerts(rule_spec({"metrics": {"prometheusRule": {"for": {"ExpressOperatorNoLeader": "10s"}}}}))
    assert shortened["ExpressOperatorNoLeader"]["for"] == "10s"
    assert shortened["ExpressOperatorBacklog"]["for"] == "5m", "the other alerts keep their default"
    with pytest.raises(Exception):
        rule_spec({"metrics": {"prometheusRule": {"for": {"ExpressOperatorNoLeader": "soon"}}}})
    with pytest.raises(Exception):
        rule_spec({"metrics": {"prometheusRule": {"for": {"ExpressNoSuchAlert": "1m"}}}})


def test_without_per_tenant_families_no_alert_reads_one_and_the_operator_is_told():
    off = rule_spec({"metrics": {"perTenant": False}})
    assert set(alerts(off)) == set(alerts(rule_spec())) - {"ExpressClusterHalted"}
    for name, rule in alerts(off).items():
        assert "express_operator_nodes" not in rule["expr"], name
    args = lambda objects: find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--per-tenant-metrics=false" in args(render({"metrics": {"perTenant": False}})[0])
    assert not any(a.startswith("--per-tenant-metrics") for a in args(render()[0]))
