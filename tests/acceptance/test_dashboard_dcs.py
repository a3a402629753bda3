"""`kubectl express dashboard --context dc-a,dc-b,dc-c` in headless Chromium (issue 41): two
`kubesim serve` processes as two DCs, each with its own `express-operator run` and tenants (the
same namespace, team-a, in both), and a third `kubesim serve --token` whose context presents the
wrong token, all in one kubeconfig. One fleet page shows them: a DC column, a badge per DC, rows
of both DCs; a pause clicked for dc-b acts in dc-b alone (checked in each DC's API) and its
confirmation names dc-b; a token given for dc-b does nothing in dc-a; `--read-only-context`
takes a DC's buttons away; and a DC stopped mid-session greys its rows instead of dropping
them."""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from selenium.webdriver.common.by import By

from conftest import KUBECTL_EXPRESS, eventually, start_operator, start_sim, stop_process, stop_sim, tenant_yaml
from test_dashboard import browser, click_action, paused, read  # noqa: F401 (the browser fixture)
from test_fleet import write_kubeconfig
from test_kubectl import install

TENANTS = {"dc-a": ["team-a", "team-b"], "dc-b": ["team-a"]}
CONTEXTS = "dc-a,dc-b,dc-c"


class FleetDashboard:
    """A `kubectl-express dashboard` over several contexts, and the URL it printed."""

    def __init__(self, kubeconfig, directory, *flags):
        self.log = open(directory / f"dashboard{'-'.join(flags)}.log", "a")
        self.process = subprocess.Popen(
            [KUBECTL_EXPRESS, "dashboard", "--addr", "127.0.0.1:0", "-A", "--operator-namespace",
             "express-system", "--context", CONTEXTS, "--context-timeout", "3s", *flags],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)})
        line = self.process.stdout.readline()
        assert line.startswith("Express dashboard at http://"), line
        self.url = line.split(" at ", 1)[1].split()[0].rstrip("/")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()

    def post(self, path, body=None, headers=None):
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body or {}).encode(), method="POST",
            headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def get_json(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())


def healthy(sim, count):
    clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
    return len(clusters) == count and all(
        c.get("status", {}).get("phase") == "Healthy" for c in clusters)


@pytest.fixture(scope="module")
def dcs(tmp_path_factory):
    """dc-a and dc-b, each with an operator and its tenants, and dc-c refusing our token;
    yields (sims, kubeconfig, directory)."""
    directory = tmp_path_factory.mktemp("dashboard-dcs")
    sims, operators = {}, {}
    try:
        for name, namespaces in TENANTS.items():
            (directory / name).mkdir()
            sim = sims[name] = start_sim(directory / name)
            install(sim)
            sim.kubectl("create", "namespace", "express-system")
            operators[name] = start_operator(sim, directory / f"operator-{name}.log", pod_name=f"operator-{name}")
            for namespace in namespaces:
                sim.kubectl("apply", "-f", "-", input=tenant_yaml(namespace))
        (directory / "dc-c").mkdir()
        sims["dc-c"] = start_sim(directory / "dc-c", "--token", "dc-c-token")
        kubeconfig = directory / "kubeconfig.yaml"
        write_kubeconfig(kubeconfig, {"dc-a": (sims["dc-a"].url, None), "dc-b": (sims["dc-b"].url, None),
                                      "dc-c": (sims["dc-c"].url, "not-the-token")})
        for name, namespaces in TENANTS.items():
            eventually(lambda: healthy(sims[name], len(namespaces)), timeout=90, what=f"{name} healthy")
        yield sims, kubeconfig, directory
    finally:
        for process in operators.values():
            stop_process(process, signal.SIGKILL)
        for sim in sims.values():
            if sim.process.poll() is None:
                stop_sim(sim)


@pytest.fixture(scope="module")
def dashboard(dcs):
    _, kubeconfig, directory = dcs
    started = FleetDashboard(kubeconfig, directory)
    yield started
    started.stop()


def fleet_rows(browser):
    """The fleet table as the page shows it: {(context, namespace, cluster): (phase, stale)}."""
    return {(c, ns, cl): (phase, stale == "true") for c, ns, cl, phase, stale in read(
        browser, "#tenants tr[data-namespace]", "data-context", "data-namespace", "data-cluster",
        "data-phase", "data-stale")}


def badges(browser):
    return dict(read(browser, "#badges li[data-context]", "data-context", "data-status"))


def test_one_fleet_page_shows_every_dc_with_its_column_and_badge(dcs, dashboard, browser):
    browser.get(dashboard.url + "/")
    headers = [text.strip() for (text,) in read(browser, "table.tenants thead th", "text")]
    assert headers[:3] == ["Namespace", "DC", "Cluster"], headers
    want = {("dc-a", "team-a", "shop"), ("dc-a", "team-b", "shop"), ("dc-b", "team-a", "shop")}
    eventually(lambda: set(fleet_rows(browser)) == want, timeout=30, what="the rows of both DCs")
    assert all(phase == "Healthy" and not stale for phase, stale in fleet_rows(browser).values())
    # The DC column says the same as the row's DC.
    cells = read(browser, "#tenants tr[data-context] td.dc", "text")
    assert sorted(c for (c,) in cells) == ["dc-a", "dc-a", "dc-b"]
    # A badge per DC: the doctor's verdict where it can read, why not where it cannot.
    eventually(lambda: badges(browser) == {"dc-a": "healthy", "dc-b": "healthy", "dc-c": "forbidden"},
               timeout=60, what="the badges")
    dc_c = read(browser, '#badges li[data-context="dc-c"] .dc-text', "text")
    assert dc_c == [["Unauthorized"]], dc_c
    # The counts lead: tenants by DC.
    by_dc = read(browser, '#counts [data-count="context"] a', "text")
    assert [t for (t,) in by_dc] == ["dc-a", "dc-b", "dc-c"]
    # The same in the JSON API.
    view = dashboard.get_json("/api/tenants")
    assert {(t["context"], t["namespace"], t["cluster"]) for t in view["tenants"]} == want
    assert {b["context"]: b["status"] for b in view["badges"]}["dc-c"] == "forbidden"
    # Filtered by DC.
    browser.get(dashboard.url + "/?context=dc-b")
    assert set(fleet_rows(browser)) == {("dc-b", "team-a", "shop")}
    # A tenant links to its page in its own DC.
    links = read(browser, "#tenants tr[data-context] a", "href")
    assert links[0][0].endswith("/dcs/dc-b/tenants/team-a/shop"), links


def test_a_pause_in_dc_b_acts_in_dc_b_only_and_says_so(dcs, dashboard, browser):
    sims, _, _ = dcs
    browser.get(dashboard.url + "/dcs/dc-b/tenants/team-a/shop")
    dialog = click_action(browser, "/api/dcs/dc-b/tenants/team-a/shop/actions/pause")
    text = browser.find_element(By.ID, "confirm-text").text
    assert text.startswith("dc-b / team-a / shop: Pause Express cluster shop"), text
    # The button's token is bound to dc-b, team-a/shop, pause: it does nothing in dc-a, nor as
    # another action.
    token = read(browser, 'button.action[data-url$="/dcs/dc-b/tenants/team-a/shop/actions/pause"][data-body*="cluster"]',
                 "data-token")[0][0]
    status, answer = dashboard.post("/api/dcs/dc-a/tenants/team-a/shop/actions/pause", {"scope": "cluster"},
                                    headers={"X-Express-Token": token})
    assert status == 403 and "wrong token" in answer["error"], answer
    status, answer = dashboard.post("/api/dcs/dc-b/tenants/team-a/shop/actions/abort", {},
                                    headers={"X-Express-Token": token})
    assert status == 403, answer
    # The single-DC URLs are not this dashboard's.
    status, answer = dashboard.post("/api/tenants/team-a/shop/actions/pause", {"scope": "cluster"},
                                    headers={"X-Express-Token": token})
    assert status == 404 and "/dcs/" in answer["error"], answer
    assert not paused(sims["dc-a"], "team-a") and not paused(sims["dc-b"], "team-a")
    # Confirmed: dc-b's team-a is paused, dc-a's is not.
    browser.find_element(By.ID, "confirm-ok").click()
    eventually(lambda: paused(sims["dc-b"], "team-a"), what="spec.paused in dc-b's API")
    eventually(lambda: dialog.get_attribute("open") is None, what="the dialog to close")
    assert not paused(sims["dc-a"], "team-a")
    result = browser.find_element(By.ID, "result")
    eventually(lambda: "paused Express cluster shop in namespace team-a" in result.text, what="the result")
    # The page follows dc-b: Resume now, and it resumes dc-b.
    eventually(lambda: read(browser, 'button.action[data-url$="/dcs/dc-b/tenants/team-a/shop/actions/resume"][data-body*="cluster"]',
                            "data-url"), timeout=20, what="a Resume button")
    dialog = click_action(browser, "/dcs/dc-b/tenants/team-a/shop/actions/resume")
    assert "dc-b / team-a / shop" in browser.find_element(By.ID, "confirm-text").text
    browser.find_element(By.ID, "confirm-ok").click()
    eventually(lambda: not paused(sims["dc-b"], "team-a"), what="resumed in dc-b's API")
    # dc-c cannot be read: its page would have no buttons, and the server refuses its actions.
    status, answer = dashboard.post("/api/dcs/dc-c/tenants/team-a/shop/actions/pause", {"scope": "cluster"},
                                    headers={"X-Express-Token": token})
    assert status == 403 and "cannot be read" in answer["error"] and "Unauthorized" in answer["error"], answer


def test_a_read_only_context_has_no_buttons_and_refuses_actions(dcs, browser):
    sims, kubeconfig, directory = dcs
    read_only = FleetDashboard(kubeconfig, directory, "--read-only-context", "dc-b")
    try:
        browser.get(read_only.url + "/dcs/dc-b/tenants/team-a/shop")
        assert browser.find_elements(By.ID, "upgrade-graph")
        assert browser.find_elements(By.CSS_SELECTOR, "button.action") == []
        browser.get(read_only.url + "/dcs/dc-a/tenants/team-a/shop")
        assert browser.find_elements(By.CSS_SELECTOR, "button.action")
        status, answer = read_only.post("/api/dcs/dc-b/tenants/team-a/shop/actions/pause", {"scope": "cluster"},
                                        headers={"X-Express-Token": "x"})
        assert status == 403 and "read-only" in answer["error"], answer
        assert not paused(sims["dc-b"], "team-a")
        browser.get(read_only.url + "/")
        eventually(lambda: read(browser, '#badges li[data-context="dc-b"] .no-actions', "text"),
                   timeout=20, what="dc-b's badge saying no actions")
    finally:
        read_only.stop()


def test_a_dc_stopped_mid_session_greys_its_rows(dcs, dashboard, browser):
    sims, _, _ = dcs
    browser.get(dashboard.url + "/")
    eventually(lambda: len(fleet_rows(browser)) == 3, timeout=30, what="three rows")
    browser.execute_script("window.sameDocument = 'yes'")
    stop_sim(sims["dc-b"])
    # Its row stays, stale, with when it was last seen; its badge says why; dc-a's rows live on.
    eventually(lambda: fleet_rows(browser).get(("dc-b", "team-a", "shop"), (None, False))[1],
               timeout=30, what="dc-b's row greyed")
    rows = fleet_rows(browser)
    assert not rows[("dc-a", "team-a", "shop")][1] and not rows[("dc-a", "team-b", "shop")][1], rows
    seen = read(browser, '#tenants tr[data-context="dc-b"] .seen', "text")
    assert seen and "last seen" in seen[0][0], seen
    assert badges(browser)["dc-b"] == "unreachable"
    assert browser.execute_script("return window.sameDocument") == "yes", "updated live, not reloaded"
    # And it stays so: nothing but an answer from dc-b makes it live again.
    time.sleep(4)
    assert fleet_rows(browser)[("dc-b", "team-a", "shop")][1]
    assert badges(browser)["dc-b"] == "unreachable"
    # Nothing is done where nothing can be seen.
    status, answer = dashboard.post("/api/dcs/dc-b/tenants/team-a/shop/actions/pause", {"scope": "cluster"},
                                    headers={"X-Express-Token": "x"})
    assert status == 403 and "cannot be read" in answer["error"], answer
