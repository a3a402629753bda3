"""The chart's alerts and Grafana dashboard against a real Prometheus scraping real operators.

`kubesim serve`, two `express-operator run --leader-elect` processes (ring default and ring
canary, each with its /metrics on a loopback port of its own) and Debian's `prometheus` (a
generated config: both targets every second with `honor_labels` and the target label
`namespace`, as the chart's ServiceMonitor has them; the chart's PrometheusRule rendered by the
Helm engine with `for:` shortened through its values; a temporary storage). The scenario:
a failed pod create (a reconcile error), tenants on both rings, a bounce, an upgrade, a tenant
moved between rings, a rollout that fails (crash-looping pods), an OperatorRelease pending, then
ring canary's operator stopped. Prometheus' HTTP API then has to show: every query of the dashboard and every
expression of the rules parses and has data over the scenario; the alerts for the failed
cluster and for the stopped ring firing; every family's type and help in its metadata. Each
operator's classic text passes `promtool check metrics`.

Each operator runs with a tight API budget (--kube-qps 10 --kube-burst 2) so that the
throttling panels have something to show."""

import json
import math
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import promql_parser
import pytest
import yaml

from conftest import eventually, free_port, start_operator, start_sim, stop_process, stop_sim, tenant_yaml
from test_grafana_dashboard import DASHBOARD, panels
from test_kubectl import install
from test_operator_chart import find, render
from test_rings import RING_LABEL, move, settled_on, upgrade

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
JOB = "express-operator-metrics"
# Grafana's interval variables as the test substitutes them: every window reaches back over the
# whole scenario (a few minutes).
GRAFANA_DURATIONS = {"$__rate_interval": "5m", "$__interval": "5m", "$__range": "15m"}
# The `for:` of the alerts this scenario makes fire, shortened through the chart's values.
SHORT_FOR = {"ExpressOperatorNoLeader": "10s", "ExpressClusterHalted": "5s"}
COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
# Expressions (as queried) that may legitimately have no data over this scenario, each with its
# reason. None so far: the scenario makes every figure, and an alert's absent() is checked
# through its argument (figures()).
NO_DATA_EXPECTED = {}


def get(url, accept=None, timeout=5):
    """(status, Content-Type, body) of a GET, or None when nothing answers."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type"), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type"), error.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


class Prometheus:
    def __init__(self, directory, targets, rules, url=None):
        assert PROMETHEUS, "prometheus is missing: scripts/test.sh installs Debian's prometheus package"
        (directory / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [{
                "job_name": JOB,
                "honor_labels": True,
                "static_configs": [{"targets": targets, "labels": {"namespace": "express-system"}}],
            }],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = url or f"http://127.0.0.1:{free_port()}"
        self.log = directory / "prometheus.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [PROMETHEUS, f"--config.file={directory / 'prometheus.yml'}",
                 f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address={self.url.removeprefix('http://')}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT)
        eventually(lambda: self.process.poll() is None and (get(f"{self.url}/-/ready") or [0])[0] == 200,
                   timeout=30, what=f"prometheus ready\n{self.log.read_text()}")

    def api(self, path, **params):
        status, _, body = get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}", timeout=30)
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "success", f"{path} {params}: {body}"
        return answer["data"]

    def query_range(self, expr, start, end):
        return self.api("query_range", query=expr, start=start, end=end, step="1s")

    def stop(self):
        stop_process(self.process)


def alerts(prometheus):
    return prometheus.api("alerts")["alerts"]


def firing(prometheus, name, **labels):
    return [a for a in alerts(prometheus) if a["labels"].get("alertname") == name and a["state"] == "firing"
            and all(a["labels"].get(k) == v for k, v in labels.items())]


def scrape(url, accept=None):
    answer = get(url, accept)
    return answer if answer and answer[0] == 200 else None


def has_data(result):
    """Whether a query_range answer has a series with at least one number (not NaN)."""
    return any(not math.isnan(float(value)) for series in result for _, value in series["values"])


class Scenario:
    """What the module's tests read: Prometheus, the scenario's time span, the operators'
    scrapes (taken before ring canary's stopped) and the logs for a failure's report."""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    directory = tmp_path_factory.mktemp("prometheus")
    sim = start_sim(directory)
    operators, prometheus, state = {}, None, Scenario()
    try:
        install(sim)
        sim.kubectl("create", "namespace", "express-system")
        ports = {ring: free_port() for ring in ("default", "canary")}
        for ring, port in ports.items():
            operators[ring] = start_operator(
                sim, directory / f"operator-{ring}.log", "--ring", ring, "--kube-qps", "10", "--kube-burst", "2",
                pod_name=f"{ring}-1", metrics_addr=f"127.0.0.1:{port}")
        state.urls = {ring: f"http://127.0.0.1:{port}/metrics" for ring, port in ports.items()}
        for url in state.urls.values():
            eventually(lambda: scrape(url), timeout=30, what=f"{url}")
        objects, _ = render({"metrics": {"prometheusRule": {"enabled": True, "for": SHORT_FOR}}})
        [rule] = find(objects, "PrometheusRule")
        state.rules = rule["spec"]
        state.start = time.time()
        prometheus = Prometheus(directory, [u.split("/")[2] for u in state.urls.values()], state.rules)
        state.prometheus = prometheus
        eventually(lambda: len([t for t in prometheus.api("targets")["activeTargets"] if t["health"] == "up"]) == 2,
                   timeout=30, what="both operators scraped")

        # A reconcile error: every pod create fails for a while.
        sim.control("POST", "faults", {"verb": "create", "resource": "pods", "rate": 1.0, "status": 500})
        sim.kubectl("apply", "-f", "-", input=tenant_yaml("team-a", frontends=3))
        eventually(lambda: "express_operator_reconcile_errors_total{" in scrape(state.urls["default"])[2],
                   timeout=30, what="a reconcile error counted")
        sim.control("DELETE", "faults")
        eventually(lambda: settled_on(sim, "team-a", "v1", "default"), timeout=60, what="team-a provisioned")
        sim.kubectl("apply", "-f", "-", input=tenant_yaml("team-b", frontends=3, cluster_labels={RING_LABEL: "canary"}))
        eventually(lambda: settled_on(sim, "team-b", "v1", "canary"), timeout=60, what="team-b provisioned")
        # A bounce on ring canary.
        sim.kubectl("annotate", "frontend", "shop-fe1", "-n", "team-b", "express.dev/bounce=prometheus-1")
        eventually(lambda: sim.kubectl_json("get", "frontend", "shop-fe1", "-n", "team-b")
                   .get("status", {}).get("bounce", {}).get("phase") == "Succeeded", timeout=60, what="the bounce")
        # An upgrade, then the tenant moved to ring canary.
        upgrade(sim, "team-a", "v2")
        eventually(lambda: settled_on(sim, "team-a", "v2", "default"), timeout=60, what="team-a upgraded")
        move(sim, "team-a", "canary")
        eventually(lambda: settled_on(sim, "team-a", "v2", "canary"), timeout=60, what="team-a moved")
        # A rollout that fails: team-c's new pods crash-loop.
        sim.kubectl("apply", "-f", "-", input=tenant_yaml("team-c", frontends=1))
        eventually(lambda: settled_on_nodes(sim, "team-c", "v1", 2), timeout=60, what="team-c provisioned")
        sim.kubectl("patch", "expresscluster", "shop", "-n", "team-c", "--type", "merge", "-p", json.dumps(
            {"spec": {"defaults": {"frontend": {"expressVersion": "v2", "podTemplate": {
                "metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop"}}}}}}}))
        eventually(lambda: sample(scrape(state.urls["default"])[2], "express_operator_rollout_failures_total") >= 1,
                   timeout=60, what="the rollout failure counted")
        eventually(lambda: firing(prometheus, "ExpressClusterHalted"), timeout=60,
                   what="ExpressClusterHalted firing")
        # An OperatorRelease ring default judges: pending on a build ring canary does not
        # report, so that it moves nothing here, yet every release series is published.
        sim.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
             "metadata": {"name": "to-canary", "namespace": "express-system"},
             "spec": {"fromRing": "default", "toRing": "canary", "version": "9.9.9", "waves": [{"percent": 100}]}}))
        eventually(lambda: 'express_operator_release_phase{release="to-canary",phase="Pending"} 1'
                   in scrape(state.urls["default"])[2], timeout=30, what="the release's series")
        # Every operator's exposition, both formats, while both run (and after a fleet tick).
        time.sleep(2)
        state.scrapes = {ring: {"text": scrape(url), "openmetrics": scrape(url, OPENMETRICS_ACCEPT)}
                         for ring, url in state.urls.items()}
        # Ring canary's operator stops; its two tenants wait.
        stop_process(operators.pop("canary"))
        state.stopped = time.time()
        eventually(lambda: firing(prometheus, "ExpressOperatorNoLeader", ring="canary"), timeout=90,
                   what="ExpressOperatorNoLeader firing for ring canary")
        state.end = time.time()
        yield state
    finally:
        if prometheus:
            prometheus.stop()
        for process in operators.values():
            stop_process(process)
        stop_sim(sim)
        for log in sorted(directory.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")


# Prometheus 2.x's scrape Accept header.
OPENMETRICS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                      "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def settled_on_nodes(sim, namespace, version, nodes):
    c = sim.kubectl_json("get", "expresscluster", "shop", "-n", namespace)
    status = c.get("status", {})
    pods = sim.kubectl_json("get", "pods", "-n", namespace)["items"]
    return (status.get("phase") == "Healthy" and status.get("observedGeneration") == c["metadata"]["generation"]
            and len(pods) == nodes
            and all(p["metadata"].get("annotations", {}).get("express.dev/express-version") == version for p in pods))


def sample(text, series):
    for line in text.splitlines():
        if line.startswith(series + " ") or line.startswith(series + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# --- The expressions --------------------------------------------------------------------------

def substituted(expr):
    for variable, duration in GRAFANA_DURATIONS.items():
        expr = expr.replace(variable, duration)
    return re.sub(r"\$\{\w+\}|\$\w+", ".*", expr)


def figures(node):
    """The parts of an alert's expression that must have data whether or not it fires: each
    side of `and`/`or`/`unless`, the left of a filtering comparison, the argument of absent()."""
    if isinstance(node, promql_parser.ParenExpr):
        return figures(node.expr)
    if isinstance(node, promql_parser.BinaryExpr):
        op = str(node.op)
        if op in {"and", "or", "unless"}:
            return figures(node.lhs) + figures(node.rhs)
        returns_bool = node.modifier is not None and getattr(node.modifier, "return_bool", False)
        if op in COMPARISONS and not returns_bool:
            return figures(node.lhs)
    if isinstance(node, promql_parser.Call) and node.func.name == "absent":
        return [node.args[0]]
    return [node]


def dashboard_queries():
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target.get("legendFormat", ""), target["expr"])
            for panel in panels(dashboard) for target in panel.get("targets", [])]


def test_every_dashboard_query_shows_data_over_the_scenario(scenario):
    empty = []
    for title, legend, expr in dashboard_queries():
        query = substituted(expr)
        promql_parser.parse(query)  # parses
        if query in NO_DATA_EXPECTED:
            continue
        if not has_data(scenario.prometheus.query_range(query, scenario.start, scenario.end)["result"]):
            empty.append(f"panel {title!r} ({legend}): {query}")
    assert empty == [], "panels that show no data:\n" + "\n".join(empty)


def test_every_template_variable_lists_values(scenario):
    dashboard = json.loads(DASHBOARD.read_text())
    found = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]).groups()
        found[variable["name"]] = set(scenario.prometheus.api(
            f"label/{label}/values", **{"match[]": selector, "start": scenario.start, "end": scenario.end}))
    assert {"default", "canary"} <= found["ring"], found
    assert {"team-a", "team-b", "team-c"} <= found["namespace"], found


def test_every_alert_expression_meets_the_operators_metrics(scenario):
    empty = []
    for group in scenario.rules["groups"]:
        for rule in group["rules"]:
            tree = promql_parser.parse(rule["expr"])
            for part in figures(tree):
                query = str(part)
                if query in NO_DATA_EXPECTED:
                    continue
                result = scenario.prometheus.query_range(query, scenario.start, scenario.end)["result"]
                if not has_data(result):
                    empty.append(f"{rule['alert']}: {query}")
    assert empty == [], "alert expressions without data:\n" + "\n".join(empty)


def test_the_alerts_fire_for_the_stopped_ring_and_the_failed_cluster(scenario):
    prometheus = scenario.prometheus
    [no_leader] = firing(prometheus, "ExpressOperatorNoLeader")
    assert no_leader["labels"] == {"alertname": "ExpressOperatorNoLeader", "namespace": "express-system",
                                   "ring": "canary", "severity": "critical"}
    assert no_leader["annotations"]["summary"] == (
        "No Express operator instance of ring canary holds its Lease: none of the ring's tenants is reconciled")
    assert float(no_leader["value"]) == 2, "ring canary's two tenants, counted by ring default's operator"
    halted = firing(prometheus, "ExpressClusterHalted")
    assert [a["labels"] for a in halted] == [{"alertname": "ExpressClusterHalted", "namespace": "team-c",
                                              "cluster": "shop", "ring": "default", "severity": "warning"}]
    assert halted[0]["annotations"]["summary"] == "Express cluster team-c/shop (ring default) has failed nodes"
    # RolloutFailed fires from the failure on (`for: 0s`), for ten minutes.
    assert firing(prometheus, "ExpressRolloutFailed", ring="default", namespace="express-system")
    # Ring default runs: no operator is down, no other ring is without a leader.
    assert not firing(prometheus, "ExpressOperatorDown")
    assert not firing(prometheus, "ExpressOperatorNoLeader", ring="default")


def families(text):
    """{family: (type, help)} from an exposition's # TYPE and # HELP lines."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    return {name: (kind, helps.get(name)) for name, kind in types.items()}


def test_each_operator_says_what_format_it_serves_and_promtool_accepts_its_text(scenario):
    for ring, scrapes in scenario.scrapes.items():
        _, content_type, text = scrapes["text"]
        assert content_type == "text/plain; version=0.0.4; charset=utf-8", ring
        _, content_type, openmetrics = scrapes["openmetrics"]
        assert content_type == "application/openmetrics-text; version=1.0.0; charset=utf-8", ring
        assert openmetrics.endswith("# EOF\n")
        checked = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True,
                                 timeout=30)
        assert checked.returncode == 0, f"ring {ring}:\n{checked.stdout}{checked.stderr}"
        # The same families either way: a counter `x` in OpenMetrics is `x_total` in the text.
        om, classic = families(openmetrics), families(text)
        assert {(n + "_total" if k == "counter" else n) for n, (k, _) in om.items()} == set(classic), ring


def test_prometheus_metadata_has_every_familys_type_and_help(scenario):
    metadata = scenario.prometheus.api("metadata")
    problems = []
    for ring, scrapes in scenario.scrapes.items():
        for name, (kind, help_text) in families(scrapes["openmetrics"][2]).items():
            entries = metadata.get(name, [])
            if not any(e["type"] == kind and e["help"] == help_text for e in entries):
                problems.append(f"ring {ring}: {name} is {kind} ({help_text!r}) but Prometheus has {entries}")
    assert problems == [], "\n".join(problems)


# Where the scenario ends (ring canary stopped with its two tenants team-a and team-b; ring
# default leading with team-c, whose rollout failed), what some panels must say: by the legend's
# labels, or a single number for a stat.
EXPECTED_AT_THE_END = {
    "Tenants": 3,
    "Rings without a leader": 1,
    "Tenants per ring": {("canary",): 2, ("default",): 1},
    "Leader per ring": {("canary",): 0, ("default",): 1},
    "Failed nodes": 1,
}


def instant(prometheus, expr, at):
    return prometheus.api("query", query=expr, time=at)["result"]


def test_the_fleet_panels_say_what_the_scenario_left(scenario):
    wrong = []
    for title, legend, expr in dashboard_queries():
        if title not in EXPECTED_AT_THE_END:
            continue
        expected = EXPECTED_AT_THE_END[title]
        result = instant(scenario.prometheus, substituted(expr), scenario.end)
        if isinstance(expected, dict):
            labels = re.findall(r"\{\{(\w+)\}\}", legend)
            got = {tuple(r["metric"].get(l, "") for l in labels): float(r["value"][1]) for r in result}
        else:
            got = sum(float(r["value"][1]) for r in result)
        if got != expected:
            wrong.append(f"panel {title!r}: {got}, expected {expected}\n  {expr}")
    assert wrong == [], "\n".join(wrong)


def test_without_per_tenant_metrics_no_series_names_a_tenant(sim, tmp_path):
    # `--per-tenant-metrics=false` (chart value metrics.perTenant=false): the fleet-level
    # families the alerts read are all there, and no series carries a tenant's namespace.
    install(sim)
    sim.kubectl("create", "namespace", "express-system")
    url = f"http://127.0.0.1:{free_port()}/metrics"
    process = start_operator(sim, tmp_path / "operator.log", "--per-tenant-metrics=false",
                             pod_name="fleet-only", metrics_addr=url.split("/")[2])
    try:
        sim.kubectl("apply", "-f", "-", input=tenant_yaml("team-a"))
        eventually(lambda: settled_on_nodes(sim, "team-a", "v1", 2), timeout=60, what="team-a provisioned")
        text = eventually(lambda: (s := scrape(url)) and "express_operator_ring_tenants{" in s[2] and s[2],
                          timeout=30, what="the fleet figures")
        assert "express_operator_nodes" not in text
        assert "team-a" not in text
        for family in ("express_operator_leader{", "express_operator_build_info{", "express_operator_tenants{",
                       "express_operator_unhealthy_tenants{", "express_operator_rollout_failures_total ",
                       "express_operator_oldest_unobserved_generation_seconds "):
            assert family in text, family
    finally:
        stop_process(process)
