"""`kubectl express dashboard` in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`) driven through WebDriver by selenium, against `kubesim serve` and against
Kubernetes' own control plane, the real `express-operator run` binary and three tenants applied
with kubectl 1.37. What the pages show
is checked against what the API shows; actions are clicked through their confirmation and
checked in the API.

Screenshots of the fleet page and of a tenant page mid-rollout are saved in the test's
temporary directory; with UPDATE_SCREENSHOTS=1 they also replace the ones in docs/ (do that
when the UI changes)."""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import KUBECTL_EXPRESS, ROOT, eventually, start_operator, start_sim, stop_process, stop_sim, tenant_yaml
from test_kubectl import install

TEAMS = ["team-a", "team-b", "team-c"]
# DESIGN section 3: the upgrade order of be, fe1, fe2, fe3.
UPGRADE_EDGES = {("shop-fe1", "shop-fe2"), ("shop-fe2", "shop-be"), ("shop-be", "shop-fe3")}
NODES = {"shop-be", "shop-fe1", "shop-fe2", "shop-fe3"}
# Pods slow enough to see phases change.
SLOW_PODS = {"metadata": {"annotations": {"kubesim.dev/startup-seconds": "1.5"}}}


class Dashboard:
    """A `kubectl-express dashboard` process and the URL it printed."""

    def __init__(self, sim, directory, *flags, addr="127.0.0.1:0"):
        self.log = open(directory / f"dashboard{'-'.join(flags)}.log", "a")
        self.process = subprocess.Popen(
            [KUBECTL_EXPRESS, "dashboard", "--addr", addr, "-A",
             "--operator-namespace", "express-system", "--kubeconfig", str(sim.kubeconfig), *flags],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        line = self.process.stdout.readline()
        assert line.startswith("Express dashboard at http://"), line
        self.url = line.split(" at ", 1)[1].split()[0].rstrip("/")
        self.host = self.url.removeprefix("http://")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()

    def post(self, path, body=None, headers=None):
        """POSTs as a script outside the page would; returns (status, answer)."""
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


def healthy(sim):
    """Every tenant Healthy with its four nodes Ready (the counts too: a tenant's objects arrive
    one at a time, and a cluster was once Healthy before its nodes came)."""
    clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
    return len(clusters) == len(TEAMS) and all(
        c.get("status", {}).get("phase") == "Healthy"
        and c["status"].get("observedGeneration") == c["metadata"]["generation"]
        and (c["status"].get("nodes") or {}).get("ready") == len(NODES)
        for c in clusters
    )


@pytest.fixture(scope="module", params=["kubesim", "real"])
def world(request, tmp_path_factory):
    """The substrate (kubesim, or a real control plane of this module's own), the operator and
    three healthy tenants; yields (sim, directory)."""
    directory = tmp_path_factory.mktemp("dashboard")
    if request.param == "real":
        import real_cluster

        sim = real_cluster.up(directory / "real")
        request.addfinalizer(lambda: real_cluster.down(sim))
    else:
        sim = start_sim(directory)
        request.addfinalizer(lambda: stop_sim(sim))
    install(sim)
    sim.kubectl("create", "namespace", "express-system")
    operator = start_operator(sim, directory / "operator.log", pod_name="dashboard-acceptance")
    for team in TEAMS:
        sim.kubectl("apply", "-f", "-", input=tenant_yaml(team, frontends=3, pod_template=SLOW_PODS))
    eventually(lambda: healthy(sim), timeout=90, what="three healthy tenants")
    yield sim, directory
    stop_process(operator)


@pytest.fixture(scope="module")
def dashboard(world):
    sim, directory = world
    started = Dashboard(sim, directory)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser():
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1500,1000"):
        options.add_argument(argument)
    chromium = shutil.which("chromium")
    if chromium:
        options.binary_location = chromium
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    yield driver
    driver.quit()


def screenshot(browser, directory, name):
    path = directory / name
    browser.save_screenshot(str(path))
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        shutil.copy(path, ROOT / "docs" / "screenshots" / name)


def read(browser, selector, *attributes):
    """The attributes (or "text") of every element matching `selector`, read in one script:
    the live updates replace elements, so a handle held across two calls can go stale."""
    return browser.execute_script(
        """const [selector, attributes] = arguments;
           return [...document.querySelectorAll(selector)].map(e =>
             attributes.map(a => a === "text" ? e.textContent : e.getAttribute(a)));""",
        selector, list(attributes))


def text_of(browser, selector):
    """The text `selector`'s element shows (as a person reads it), or "" while the page has none:
    read in one script, because a live update can replace the element between finding it and
    asking for its text."""
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", selector)


def rows(browser):
    """The fleet table as the page shows it: {(namespace, cluster): phase}."""
    return {(ns, cluster): phase for ns, cluster, phase in
            read(browser, "#tenants tr[data-namespace]", "data-namespace", "data-cluster", "data-phase")}


def node_phases(browser):
    """The node table as the page shows it: {node: phase}."""
    return dict(read(browser, "#nodes tr[data-node]", "data-node", "data-phase"))


def test_the_fleet_page_lists_the_three_tenants_with_their_phases(world, dashboard, browser):
    sim, directory = world
    browser.get(dashboard.url + "/")
    shown = eventually(lambda: rows(browser) if len(rows(browser)) == 3 else None, what="three rows")
    assert shown == {(team, "shop"): "Healthy" for team in TEAMS}
    # The same data in the JSON API, and the progress the API's node statuses give.
    tenants = dashboard.get_json("/api/tenants")["tenants"]
    assert {(t["namespace"], t["cluster"], t["phase"]) for t in tenants} == {(t, "shop", "Healthy") for t in TEAMS}
    assert all(t["upToDate"] == 4 and t["up"] == 4 and t["versions"] == ["v1"] for t in tenants)
    assert "4/4" in read(browser, '#tenants tr[data-namespace="team-a"] .progress', "text")[0][0]
    # The doctor's banner arrives over the live updates once its first run is done.
    eventually(lambda: read(browser, "#banner [data-verdict]", "data-verdict"), timeout=30, what="doctor banner")
    # Filtering by text keeps one tenant.
    browser.get(dashboard.url + "/?q=team-b")
    assert set(rows(browser)) == {("team-b", "shop")}
    browser.get(dashboard.url + "/")
    eventually(lambda: len(rows(browser)) == 3, what="three rows again")


def test_the_tenant_page_draws_a_box_per_node_and_the_upgrade_order(dashboard, browser):
    browser.get(dashboard.url + "/tenants/team-a/shop")
    boxes = read(browser, "#upgrade-graph g.node", "data-node", "data-rank")
    assert {node for node, _ in boxes} == NODES
    assert len(read(browser, "#upgrade-graph g.node rect", "x")) == 4
    edges = {tuple(e) for e in read(browser, "#upgrade-graph g.edge", "data-from", "data-to")}
    assert edges == UPGRADE_EDGES
    # Ranks left to right in upgrade order.
    rank = {node: int(r) for node, r in boxes}
    assert sorted(rank, key=rank.get) == ["shop-fe1", "shop-fe2", "shop-be", "shop-fe3"]
    assert node_phases(browser) == {node: "Ready" for node in NODES}
    # The API serves the same graph.
    tenant = dashboard.get_json("/api/tenants/team-a/shop")
    assert {(e["from"], e["to"]) for e in tenant["upgradeGraph"]["edges"]} == UPGRADE_EDGES


def api_phases(sim):
    """Every tenant's phase and every node's, as the API holds them now."""
    clusters = sim.kubectl_json("get", "expressclusters", "-A")["items"]
    nodes = sim.kubectl_json("get", "backends,frontends", "-A")["items"]
    return ({(c["metadata"]["namespace"], c["metadata"]["name"]): c.get("status", {}).get("phase") for c in clusters},
            {(n["metadata"]["namespace"], n["metadata"]["name"]): n.get("status", {}).get("phase") for n in nodes})


def first_page_phases(started):
    """The same, as a dashboard's first answers show them."""
    tenants = {(t["namespace"], t["cluster"]): t["phase"] for t in started.get_json("/api/tenants")["tenants"]}
    nodes = {}
    for namespace, cluster in tenants:
        for node in started.get_json(f"/api/tenants/{namespace}/{cluster}")["nodes"]:
            nodes[(namespace, node["name"])] = node["phase"]
    return tenants, nodes


def test_a_dashboard_started_right_after_a_change_shows_no_state_older_than_its_start(world):
    """Issue 69: a dashboard's first page once showed tenants and nodes in phases the API had
    left before the dashboard started. Each round changes a tenant (paused, then resumed), waits
    until the API shows the change settled, starts a dashboard and reads its first answers: they
    must be what the API held before it started. The API read again after it must not have
    moved either: with nothing asked of it, a status that moves back is the operator's fault,
    not the dashboard's."""
    sim, directory = world
    for round_ in range(6):
        team = TEAMS[round_ % len(TEAMS)]
        pausing = round_ < len(TEAMS)
        sim.kubectl("patch", "expresscluster", "shop", "-n", team, "--type", "merge",
                    "-p", json.dumps({"spec": {"paused": pausing}}))
        settled = "Paused" if pausing else "Healthy"

        def reached():
            cluster = sim.kubectl_json("get", "expresscluster", "shop", "-n", team)
            status = cluster.get("status", {})
            return status.get("phase") == settled and status.get("observedGeneration") == cluster["metadata"]["generation"]

        eventually(reached, timeout=30, what=f"{team} {settled} in the API")
        before = api_phases(sim)
        started = Dashboard(sim, directory, "--read-only")
        try:
            shown = first_page_phases(started)
        finally:
            started.stop()
        after = api_phases(sim)
        assert after == before, f"round {round_}: the API moved with nothing asked of it: {before} then {after}"
        assert shown == before, f"round {round_}: the dashboard's first page {shown}, the API before it started {before}"


def test_an_upgrade_started_with_kubectl_shows_live_without_a_reload(world, dashboard, browser):
    sim, directory = world
    browser.get(dashboard.url + "/tenants/team-a/shop")
    browser.execute_script("window.sameDocument = 'yes'")
    eventually(lambda: node_phases(browser) == {node: "Ready" for node in NODES}, what="all Ready")
    patch = {"spec": {"defaults": {"backend": {"expressVersion": "v2"}, "frontend": {"expressVersion": "v2"}}}}
    sim.kubectl("patch", "expresscluster", "shop", "-n", "team-a", "--type", "merge", "-p", json.dumps(patch))

    # Every phase each node shows on the page, sampled as the rollout goes.
    seen = {node: set() for node in NODES}
    shot = False
    deadline = time.time() + 90
    while time.time() < deadline:
        phases = node_phases(browser)
        for node, phase in phases.items():
            seen[node].add(phase)
        if not shot and phases.get("shop-be") == "Upgrading":
            # Mid-rollout: fe1 and fe2 done, the backend changing, fe3 waiting for it.
            screenshot(browser, directory, "dashboard-tenant.png")
            shot = True
        versions = dashboard.get_json("/api/tenants/team-a/shop")["summary"]["versions"]
        if versions == ["v2"] and set(phases.values()) == {"Ready"}:
            break
        time.sleep(0.1)
    assert shot, f"the backend was not seen Upgrading on the page: {seen}"
    assert all("Upgrading" in phases for phases in seen.values()), seen
    eventually(lambda: node_phases(browser) == {node: "Ready" for node in NODES}, timeout=30, what="all Ready on v2")
    # No reload happened: the page's own state is still there, and updates arrived.
    assert browser.execute_script("return window.sameDocument") == "yes"
    assert int(browser.execute_script("return document.body.dataset.updates || '0'")) > 0
    # The history shows the four upgrades, newest first.
    history = [node for (node,) in read(browser, "#history tr[data-node]", "data-node")]
    assert history == ["shop-fe3", "shop-be", "shop-fe2", "shop-fe1"]
    # The operator's events about the tenant are listed.
    assert read(browser, "#events tbody tr", "text")

    # The fleet mid-rollout: another tenant's upgrade, seen from the fleet page.
    sim.kubectl("patch", "expresscluster", "shop", "-n", "team-c", "--type", "merge", "-p", json.dumps(patch))
    browser.get(dashboard.url + "/")
    eventually(lambda: rows(browser).get(("team-c", "shop")) == "Progressing", timeout=30, what="team-c Progressing")
    screenshot(browser, directory, "dashboard-fleet.png")
    eventually(lambda: rows(browser).get(("team-c", "shop")) == "Healthy", timeout=60, what="team-c Healthy again")


def click_action(browser, path_suffix):
    # Clicked in one script: a live update may replace the button between finding and clicking.
    clicked = browser.execute_script(
        "const b = document.querySelector(arguments[0]); if (b) { b.click(); } return !!b;",
        f'button.action[data-url$="{path_suffix}"]')
    assert clicked, f"no button for {path_suffix}"
    dialog = browser.find_element(By.ID, "confirm")
    eventually(lambda: dialog.get_attribute("open") is not None, what="the confirmation")
    return dialog


def paused(sim, namespace):
    return sim.kubectl_json("get", "expresscluster", "shop", "-n", namespace)["spec"].get("paused", False)


def test_pause_through_the_button_and_its_confirmation(world, dashboard, browser):
    sim, _ = world
    browser.get(dashboard.url + "/tenants/team-b/shop")
    # Cancelled: nothing written.
    dialog = click_action(browser, "/api/tenants/team-b/shop/actions/pause")
    text = browser.find_element(By.ID, "confirm-text").text
    assert "shop" in text and "team-b" in text and "no pod" in text, text
    browser.find_element(By.ID, "confirm-cancel").click()
    eventually(lambda: dialog.get_attribute("open") is None, what="the dialog to close")
    time.sleep(0.5)
    assert not paused(sim, "team-b")
    # Confirmed: the ExpressCluster is paused, and the page says what was done.
    click_action(browser, "/api/tenants/team-b/shop/actions/pause")
    browser.find_element(By.ID, "confirm-ok").click()
    eventually(lambda: paused(sim, "team-b"), what="spec.paused in the API")
    result = browser.find_element(By.ID, "result")
    eventually(lambda: "paused Express cluster shop in namespace team-b" in result.text, what="the result")
    # The operator reports it, and the page follows: the button is now Resume.
    eventually(lambda: read(browser, 'button.action[data-url$="/actions/resume"][data-body*="cluster"]', "data-url"),
               timeout=20, what="a Resume button")
    click_action(browser, "/api/tenants/team-b/shop/actions/resume")
    browser.find_element(By.ID, "confirm-ok").click()
    eventually(lambda: not paused(sim, "team-b"), what="resumed in the API")
    # Escape after an earlier confirmation confirms nothing.
    eventually(lambda: read(browser, 'button.action[data-url$="/actions/pause"][data-body*="cluster"]', "data-url"),
               timeout=20, what="a Pause button again")
    dialog = click_action(browser, "/api/tenants/team-b/shop/actions/pause")
    dialog.send_keys(Keys.ESCAPE)
    eventually(lambda: dialog.get_attribute("open") is None, what="the dialog closed by Escape")
    time.sleep(1)
    assert not paused(sim, "team-b")


def test_a_post_without_the_pages_token_is_refused(world, dashboard, browser):
    sim, _ = world
    browser.get(dashboard.url + "/tenants/team-c/shop")
    token = browser.find_element(By.CSS_SELECTOR, 'meta[name="express-token"]').get_attribute("content")
    path = "/api/tenants/team-c/shop/actions/pause"
    status, answer = dashboard.post(path)
    assert status == 403 and "token" in answer["error"]
    status, answer = dashboard.post(path, headers={"X-Express-Token": "0" * 32})
    assert status == 403
    status, answer = dashboard.post(path, headers={"X-Express-Token": token, "Origin": "http://attacker.example"})
    assert status == 403 and "origin" in answer["error"]
    status, answer = dashboard.post(path, headers={"X-Express-Token": token, "Sec-Fetch-Site": "cross-site"})
    assert status == 403
    status, answer = dashboard.post(path, headers={"X-Express-Token": token, "Host": "attacker.example"})
    assert status == 421
    assert not paused(sim, "team-c")
    # The same request with the page's token and origin goes through.
    status, answer = dashboard.post(path, {"scope": "cluster"},
                                    headers={"X-Express-Token": token, "Origin": dashboard.url})
    assert status == 200, answer
    assert paused(sim, "team-c")
    status, answer = dashboard.post("/api/tenants/team-c/shop/actions/resume", {"scope": "cluster"},
                                    headers={"X-Express-Token": token})
    assert status == 200 and not paused(sim, "team-c")
    # Bad requests say why and change nothing.
    status, answer = dashboard.post("/api/tenants/team-c/shop/actions/abort", {"scope": "namespace"},
                                    headers={"X-Express-Token": token})
    assert status == 400 and "scope" in answer["error"]
    status, answer = dashboard.post("/api/tenants/team-c/shop/actions/explode", headers={"X-Express-Token": token})
    assert status == 404 and "expected pause" in answer["error"]
    status, answer = dashboard.post("/api/tenants/team-c/nope/actions/pause", headers={"X-Express-Token": token})
    assert status == 404
    status, answer = dashboard.post("/api/tenants/team-c/shop/nodes/shop-fe1/actions/bounce", {"timeout": "soon"},
                                    headers={"X-Express-Token": token})
    assert status == 400 and "timeout" in answer["error"]


def test_read_only_shows_no_action_buttons_and_refuses_actions(world, browser):
    sim, directory = world
    read_only = Dashboard(sim, directory, "--read-only")
    try:
        browser.get(read_only.url + "/tenants/team-a/shop")
        assert browser.find_elements(By.ID, "upgrade-graph")
        assert browser.find_elements(By.CSS_SELECTOR, "button.action") == []
        assert browser.find_elements(By.CSS_SELECTOR, 'meta[name="express-token"]') == []
        status, answer = read_only.post("/api/tenants/team-a/shop/actions/pause", headers={"X-Express-Token": "x"})
        assert status == 403 and "read-only" in answer["error"]
        assert not paused(sim, "team-a")
    finally:
        read_only.stop()


def test_a_dropped_connection_is_said_and_the_page_reconnects(world, browser):
    sim, directory = world
    first = Dashboard(sim, directory)
    try:
        browser.get(first.url + "/tenants/team-a/shop")
        eventually(lambda: int(browser.execute_script("return document.body.dataset.updates || '0'")) > 0,
                   what="the first live update")
        assert browser.execute_script("return document.getElementById('connection').hidden")
    finally:
        first.stop()
    eventually(lambda: not browser.execute_script("return document.getElementById('connection').hidden"),
               what="the page saying the connection is lost")
    assert "offline" in browser.execute_script("return document.body.className")
    # The same address again: the page reconnects by itself, sees another process and
    # reloads (its token was the old process's), and updates flow.
    browser.execute_script("window.sameDocument = 'yes'")
    second = Dashboard(sim, directory, addr=first.host)
    try:
        eventually(lambda: browser.execute_script("return window.sameDocument") is None,
                   timeout=15, what="the page reloaded from the new process")
        eventually(lambda: browser.execute_script("return document.getElementById('connection').hidden"),
                   timeout=15, what="the page connected")
        eventually(lambda: int(browser.execute_script("return document.body.dataset.updates || '0'")) > 0,
                   what="an update after reconnecting")
        assert browser.execute_script("return window.location.pathname") == "/tenants/team-a/shop"
        # Its actions work again: the page holds the new process's token.
        token = browser.find_element(By.CSS_SELECTOR, 'meta[name="express-token"]').get_attribute("content")
        status, _ = second.post("/api/tenants/team-a/shop/actions/resume", {"scope": "cluster"},
                                headers={"X-Express-Token": token})
        assert status == 200
    finally:
        second.stop()


def release_paused(sim, name):
    return sim.kubectl_json("get", "operatorrelease", name, "-n", "express-system")["spec"].get("paused", False)


def test_a_release_shows_on_the_fleet_page_and_pauses_through_its_confirmation(world, dashboard, browser):
    sim, _ = world
    # Pending: no operator of ring canary runs here, so it moves nothing.
    sim.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
         "metadata": {"name": "to-canary", "namespace": "express-system"},
         "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}]}}))
    browser.get(dashboard.url + "/")
    # The doctor's read (every 15 s) brings it.
    # Its phase sits inside its cell (a badge in the cell, not the cell as a badge).
    eventually(lambda: read(browser, '#releases tr[data-release="to-canary"] td.phase-cell', "text") == [["Pending"]],
               timeout=45, what="the release on the fleet page")
    assert browser.execute_script(
        "return getComputedStyle(document.querySelector("
        "'#releases tr[data-release=\"to-canary\"] td.phase-cell')).display") == "table-cell"
    # Its name links to its page, which says what happens next.
    href = read(browser, '#releases tr[data-release="to-canary"] td a', "href")[0][0]
    assert href.endswith("/releases/to-canary"), href
    page = urllib.request.urlopen(dashboard.url + "/api/releases/to-canary", timeout=10)
    assert "waits for ring canary's build" in json.loads(page.read())["next"]
    dialog = click_action(browser, "/api/releases/to-canary/actions/pause")
    text = browser.find_element(By.ID, "confirm-text").text
    assert "OperatorRelease to-canary" in text and "ring default to ring canary" in text and "Nothing moves" in text, text
    browser.find_element(By.ID, "confirm-ok").click()
    eventually(lambda: release_paused(sim, "to-canary"), what="spec.paused in the API")
    result = browser.find_element(By.ID, "result")
    eventually(lambda: "operatorrelease/to-canary paused" in result.text, what="the result")
    eventually(lambda: dialog.get_attribute("open") is None, what="the dialog to close")
    # The operator reports it, and the page follows: the button is now Resume.
    eventually(lambda: read(browser, 'button.action[data-url$="/api/releases/to-canary/actions/resume"]', "data-url"),
               timeout=45, what="a Resume button for the release")
    sim.kubectl("delete", "operatorrelease", "to-canary", "-n", "express-system")
