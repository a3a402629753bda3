"""The Grafana dashboard of the operator chart (charts/express-operator/dashboards/express-fleet.json).

Rendered by the real Helm engine: an opt-in ConfigMap labelled for the Grafana sidecar whose data
is the file as it is. And checked against the real thing: every query of the dashboard (panels
and template variables) is parsed by a PromQL parser nobody here wrote (promql-parser), each
metric it names must be one of the operator's own (`express_operator_*`) and must have samples in
the `/metrics` of a real `express-operator run` against `kubesim serve`, driven (a failed pod
create, a tenant, a bounce, a hand-over) until every family the dashboard reads has samples:
prometheus-client prints nothing at all, not even `# TYPE`, for a labelled family without one."""

import json
import os
import re
import urllib.error
import urllib.request

import promql_parser
import pytest

from conftest import ROOT, eventually, free_port, start_operator, stop_process, tenant_yaml
from test_kubectl import install
from test_operator_chart import CHART, find, render

OPERATOR = os.environ.get("EXPRESS_OPERATOR_BIN", str(ROOT / "target" / "debug" / "express-operator"))
DASHBOARD = CHART / "dashboards" / "express-fleet.json"
OWN = "express_operator_"
# Grafana's variables, as Grafana substitutes them before Prometheus parses a query.
GRAFANA_DURATIONS = ("$__rate_interval", "$__interval", "$__range")
RANGE_COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}


# --- The dashboard's queries ---------------------------------------------------------------

def panels(container):
    for panel in container.get("panels", []):
        yield panel
        yield from panels(panel)  # a collapsed row keeps its panels inside it


def queries(dashboard):
    """(where, PromQL, label) for every query: each panel target's `expr`, and each query
    variable's selector (`label_values(SELECTOR, LABEL)`, with the LABEL it reads)."""
    found = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            assert target.get("expr"), f"panel {panel['title']!r}: a target without a PromQL expr"
            found.append((f"panel {panel['title']!r}", target["expr"], None))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        match = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*", query)
        assert match, f"variable {variable['name']}: {query!r} is not label_values(SELECTOR, LABEL)"
        found.append((f"variable {variable['name']!r}", match.group(1), match.group(2)))
    return found


def substituted(expr):
    """The query as Prometheus receives it: durations for Grafana's interval variables, a
    match-all regex for the dashboard's own (`$ring`, `${namespace}`)."""
    for variable in GRAFANA_DURATIONS:
        expr = expr.replace(variable, "5m")
    expr = re.sub(r"\$\{\w+\}|\$\w+", ".*", expr)
    assert "$" not in expr, expr
    return expr


def selectors(expr):
    """Every vector selector of the parsed query: (metric name, label names its matchers use,
    whether the metric is read by a function that needs a counter, e.g. rate)."""
    def vector_selectors(node):
        found = []

        def visit(child):
            if isinstance(child, promql_parser.VectorSelector):
                found.append(child)

        promql_parser.walk(node, visit)
        return found

    tree = promql_parser.parse(substituted(expr))
    under_rate = set()

    def visit_calls(node):
        if isinstance(node, promql_parser.Call) and node.func.name in RANGE_COUNTER_FUNCTIONS:
            for argument in node.args:
                under_rate.update(s.name for s in vector_selectors(argument))

    promql_parser.walk(tree, visit_calls)
    return [(s.name, {m.name for m in s.matchers.matchers} - {"__name__"}, s.name in under_rate)
            for s in vector_selectors(tree)]


def dashboard_metrics(dashboard):
    """{metric: [(where, labels its matchers use, read by rate and the like)]}, with each
    query's own checks: it parses, every selector names a metric, and that metric is the
    operator's (no other exporter's, no recording rule's)."""
    metrics = {}
    for where, expr, label in queries(dashboard):
        try:
            found = selectors(expr)
        except ValueError as error:
            raise AssertionError(f"{where}: PromQL does not parse: {error}\n{expr}") from error
        assert found, f"{where}: no metric in {expr!r}"
        for name, labels, in_rate in found:
            assert name, f"{where}: a selector without a metric name in {expr!r}"
            assert name.startswith(OWN), f"{where}: {name} is not one of the operator's metrics"
            metrics.setdefault(name, []).append((where, labels | ({label} if label else set()), in_rate))
        # The parser and a plain reading of the text agree on the names (nothing skipped).
        assert set(re.findall(rf"\b{OWN}[a-z_]+", expr)) == {n for n, _, _ in found}, expr
    return metrics


def test_every_query_parses_and_reads_only_the_operators_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "express-fleet" and dashboard["schemaVersion"] >= 39
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"ring", "namespace"} <= set(variables)
    for panel in panels(dashboard):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert len(dashboard_metrics(dashboard)) >= 15


# --- The chart's ConfigMap -----------------------------------------------------------------

def dashboard_config_maps(objects):
    return [o for o in find(objects, "ConfigMap") if o["metadata"]["name"] == "express-operator-dashboard"]


def test_no_dashboard_config_map_by_default():
    objects, _ = render()
    assert dashboard_config_maps(objects) == []


def test_the_enabled_dashboard_is_a_config_map_for_the_grafana_sidecar():
    objects, _ = render({"grafana": {"dashboard": {"enabled": True}}})
    [config_map] = dashboard_config_maps(objects)
    assert config_map["metadata"]["namespace"] == "express-system"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["labels"]["app.kubernetes.io/name"] == "express-operator"
    assert "annotations" not in config_map["metadata"]
    assert list(config_map["data"]) == ["express-fleet.json"]
    # The file as it is, byte for byte, and JSON.
    assert config_map["data"]["express-fleet.json"] == DASHBOARD.read_text()
    assert json.loads(config_map["data"]["express-fleet.json"])["uid"] == "express-fleet"


def test_the_sidecar_label_namespace_and_folder_are_values():
    objects, _ = render({"grafana": {"dashboard": {
        "enabled": True, "label": "example.com/dashboard", "labelValue": "express",
        "namespace": "monitoring", "labels": {"team": "sre"},
        "annotations": {"grafana_folder": "Express"}}}})
    [config_map] = dashboard_config_maps(objects)
    metadata = config_map["metadata"]
    assert metadata["namespace"] == "monitoring"
    assert metadata["labels"]["example.com/dashboard"] == "express"
    assert "grafana_dashboard" not in metadata["labels"]
    assert metadata["labels"]["team"] == "sre"
    assert metadata["annotations"] == {"grafana_folder": "Express"}


def test_the_service_monitor_keeps_the_tenant_namespace_label():
    # The Prometheus Operator gives every scraped series the target's `namespace` (the
    # operator's); without honorLabels the tenant's, on express_operator_nodes, would become
    # `exported_namespace` and the dashboard's namespace views would show express-system.
    objects, _ = render({"metrics": {"serviceMonitor": {"enabled": True}}})
    [endpoint] = find(objects, "ServiceMonitor")[0]["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True


def test_the_schema_refuses_a_misspelt_dashboard_value():
    with pytest.raises(Exception) as error:
        render({"grafana": {"dashboard": {"enable": True}}})
    assert "additional properties 'enable' not allowed" in str(error.value)
    with pytest.raises(Exception):
        render({"grafana": {"dashboard": {"enabled": True, "labelValue": 1}}})


# --- Every metric the dashboard names exists -----------------------------------------------

def scrape(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None


class Exposition:
    """The text exposition: each family's type, and each series name with the label names of
    its samples."""

    def __init__(self, text):
        self.text = text
        self.types, self.samples = {}, {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split(" ", 3)
                self.types[family] = kind
            elif line and not line.startswith("#"):
                match = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s", line)
                assert match, line
                labels = set(re.findall(r'(\w+)="(?:[^"\\]|\\.)*"', match.group(2) or ""))
                self.samples.setdefault(match.group(1), set()).update(labels)

    def kind(self, series):
        """The type of the family a series belongs to: counters expose NAME_total, histograms
        NAME_bucket, NAME_sum and NAME_count (those suffixes are stripped only then)."""
        if series in self.types:
            return self.types[series]
        for suffix, kinds in (("_total", {"counter"}), ("_bucket", {"histogram"}),
                              ("_sum", {"histogram", "summary"}), ("_count", {"histogram", "summary"})):
            family = series.removesuffix(suffix)
            if series.endswith(suffix) and self.types.get(family) in kinds:
                return self.types[family]
        return None


def missing(metrics, exposition):
    """What the dashboard asks of /metrics that /metrics does not have."""
    problems = []
    for name, uses in sorted(metrics.items()):
        if name not in exposition.samples:
            problems.append(f"{name} (read by {', '.join(sorted({w for w, _, _ in uses}))}) "
                            f"has no sample in /metrics")
            continue
        for where, labels, in_rate in uses:
            unknown = labels - exposition.samples[name]
            if unknown:
                problems.append(f"{where}: {name} has no label {sorted(unknown)}")
            if in_rate and exposition.kind(name) not in {"counter", "histogram", "summary"}:
                problems.append(f"{where}: rate/increase of {name}, a {exposition.kind(name)}")
    return problems


def ring_of(sim, namespace):
    return sim.kubectl_json("get", "expresscluster", "shop", "-n", namespace).get("status", {}).get("operator", {})


@pytest.fixture
def operator_metrics(sim, tmp_path):
    """A leading `express-operator run` that has met a failed pod create, provisioned a tenant,
    bounced one of its nodes, released a second tenant to another ring and judges an
    OperatorRelease; yields its /metrics URL."""
    install(sim)
    sim.kubectl("create", "namespace", "express-system")
    url = f"http://127.0.0.1:{free_port()}/metrics"
    log_path = tmp_path / "operator.log"
    process = start_operator(sim, log_path, pod_name="dashboard", metrics_addr=url.split("/")[2])
    try:
        eventually(lambda: scrape(url), timeout=30, what="the operator's /metrics")
        # A reconcile error: every pod create fails until the fault is lifted.
        sim.control("POST", "faults", {"verb": "create", "resource": "pods", "rate": 1.0, "status": 500})
        sim.kubectl("apply", "-f", "-", input=tenant_yaml("team-a"))
        eventually(lambda: "express_operator_reconcile_errors_total{" in (scrape(url) or ""), timeout=30,
                   what="a reconcile error counted")
        sim.control("DELETE", "faults")

        def healthy():
            cluster = sim.kubectl_json("get", "expresscluster", "shop", "-n", "team-a")
            status = cluster.get("status", {})
            return status.get("phase") == "Healthy" and status.get("observedGeneration") == cluster["metadata"]["generation"]

        eventually(healthy, timeout=60, what="team-a healthy")
        # A bounce that ends.
        sim.kubectl("annotate", "frontend", "shop-fe1", "-n", "team-a", "express.dev/bounce=dashboard-1")
        eventually(lambda: sim.kubectl_json("get", "frontend", "shop-fe1", "-n", "team-a")
                   .get("status", {}).get("bounce", {}).get("phase") == "Succeeded",
                   timeout=60, what="the bounce to succeed")
        # A hand-over: a second tenant's label names another ring, this one releases it (and
        # stops reporting its nodes; team-a's stay).
        sim.kubectl("apply", "-f", "-", input=tenant_yaml("team-b"))
        eventually(lambda: 'namespace="team-b"' in (scrape(url) or ""), timeout=60, what="team-b reported")
        sim.kubectl("label", "expresscluster", "shop", "-n", "team-b", "express.dev/operator-ring=canary")
        eventually(lambda: "released" in ring_of(sim, "team-b"), timeout=30, what="the tenant released")
        eventually(lambda: 'namespace="team-b"' not in (scrape(url) or ""), timeout=30,
                   what="the released tenant's series dropped")
        # An OperatorRelease this ring judges (pending: ring canary has no leader here).
        sim.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
             "metadata": {"name": "to-canary", "namespace": "express-system"},
             "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}]}}))
        eventually(lambda: 'express_operator_release_phase{release="to-canary",phase="Pending"} 1'
                   in (scrape(url) or ""), timeout=30, what="the release's series")
        yield url
    finally:
        stop_process(process)
        print(f"--- operator.log\n{log_path.read_text()[-4000:]}")


def test_every_metric_the_dashboard_names_is_in_the_operators_metrics(operator_metrics):
    metrics = dashboard_metrics(json.loads(DASHBOARD.read_text()))
    exposition = Exposition(eventually(lambda: scrape(operator_metrics), what="a scrape"))
    problems = missing(metrics, exposition)
    assert problems == [], "\n".join(problems) + f"\n--- /metrics\n{exposition.text}"


def test_the_check_catches_a_metric_the_operator_does_not_export():
    # What the test above would say of a query naming no real metric (or a real one with a
    # label it lacks, or a gauge under rate), against a small exposition of the same shape.
    exposition = Exposition(
        "# HELP express_operator_reconciles Reconciles.\n# TYPE express_operator_reconciles counter\n"
        'express_operator_reconciles_total{result="ok"} 1\n'
        "# TYPE express_operator_queue_depth gauge\nexpress_operator_queue_depth 0\n# EOF\n")
    dashboard = {"panels": [{"title": "p", "targets": [
        {"expr": 'sum(rate(express_operator_reconciles_total{result="ok"}[$__rate_interval]))'},
        {"expr": "sum(express_operator_no_such_metric)"},
        {"expr": 'sum(express_operator_reconciles_total{ring=~"$ring"})'},
        {"expr": "rate(express_operator_queue_depth[5m])"},
    ]}], "templating": {"list": []}}
    problems = missing(dashboard_metrics(dashboard), exposition)
    assert len(problems) == 3, problems
    assert any("express_operator_no_such_metric" in p and "no sample" in p for p in problems)
    assert any("no label ['ring']" in p for p in problems)
    assert any("rate/increase of express_operator_queue_depth, a gauge" in p for p in problems)
    with pytest.raises(AssertionError, match="not one of the operator's metrics"):
        dashboard_metrics({"panels": [{"title": "p", "targets": [{"expr": "up"}]}], "templating": {"list": []}})
    with pytest.raises(AssertionError, match="does not parse"):
        dashboard_metrics({"panels": [{"title": "p", "targets": [{"expr": "sum(express_operator_leader"}]}],
                           "templating": {"list": []}})
