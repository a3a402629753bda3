"""The releases on the dashboard (DESIGN sections 11, 12 and 14), pressed in headless Chromium:
three `kubesim serve` DCs, each with the trusted build (`--ring default`) and the build under
test (`--ring canary`) as real operator processes, and one `kubectl-express dashboard` over the
three contexts. An OperatorRelease of one DC is paused, resumed, promoted and aborted from its
page; a FleetRelease driven by the real `kubectl express fleet-release run` is approved, paused,
resumed and aborted with rollback from its page. Each action goes through the page's
confirmation, and what is asserted is what the API then shows.

The pages' view models are table-tested in crates/kubectl-express/src/dashboard/model/."""

import json
import time

import pytest
from selenium.webdriver.common.by import By

from conftest import eventually
from test_dashboard import browser, click_action, read, screenshot, text_of  # noqa: F401 (the browser fixture)
from test_dashboard_dcs import FleetDashboard
from test_fleet_release import fleet  # noqa: F401 (the three DCs with both rings)
from test_notifications import Receiver
from test_release import apply_release, status

CONTEXTS = "dc-a,dc-b,dc-c"


@pytest.fixture(scope="module")
def dashboard(fleet):  # noqa: F811
    # Its watches fill by streaming lists (kubesim answers as 1.37): that path end to end, while
    # the other dashboard tests take the default paged lists.
    started = FleetDashboard(fleet.kubeconfig, fleet.directory, "--doctor-interval", "2", "--streaming-lists")
    yield started
    started.stop()


def confirm(browser, path_suffix):
    """Presses the button whose action ends with `path_suffix`, confirms, and returns the
    confirmation's text and the answer the page showed."""
    dialog = click_action(browser, path_suffix)
    text = browser.find_element(By.ID, "confirm-text").text
    browser.find_element(By.ID, "confirm-ok").click()
    eventually(lambda: dialog.get_attribute("open") is None, what="the dialog to close")
    result = browser.find_element(By.ID, "result")
    eventually(lambda: "pending" not in (result.get_attribute("class") or "") and result.text,
               what=f"the answer to {path_suffix}")
    return text, result.text, result.get_attribute("class")


def shown(browser, selector, attribute):
    return [value for (value,) in read(browser, selector, attribute)]


def test_an_operator_release_is_paused_resumed_promoted_and_aborted_from_its_page(fleet, dashboard, browser):  # noqa: F811
    sim = fleet.sims["dc-c"]
    name = "canary-c"
    # Notifications to a webhook of the test's: the page lists what they told about the release.
    receiver = Receiver()
    sim.kubectl("apply", "-n", "express-system", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "express-notifications"},
        "data": {"notifications.yaml": json.dumps({
            "dc": "dc-c",
            "destinations": [{"name": "sre", "type": "webhook", "url": receiver.url, "waitSeconds": 0,
                              "groupSeconds": 1}],
            "subscriptions": [{"destination": "sre", "triggers": ["release-promoted", "release-rolled-back"]}]})}}))
    apply_release(sim, name, waves=[{"tenants": 1}, {"percent": 100}], bakeSeconds=3600, failureLimit=3)
    eventually(lambda: status(sim, name).get("adoptedTenants") == 1, timeout=60, what="the first wave adopted")

    # From the fleet page: the release's row links to its page, its phase inside its cell.
    browser.get(dashboard.url + "/")
    eventually(lambda: read(browser, f'#releases tr[data-release="{name}"] a', "href"), what="the release's row")
    row_cells = read(browser, f'#releases tr[data-release="{name}"] td.phase-cell span.phase', "data-phase")
    assert row_cells and row_cells[0][0] in ("Progressing", "Pending"), row_cells
    browser.get(dashboard.url + f"/dcs/dc-c/releases/{name}")

    # Where it stands in words, the strip, and the chart once the doctor has read both rings twice.
    eventually(lambda: (shown(browser, "#release-waves li.wave", "data-state") or [""])[0].startswith("baking"),
               what="wave 1 baking")
    eventually(lambda: int((shown(browser, "#release-charts svg.chart", "data-points") or ["0"])[0]) >= 3,
               timeout=30, what="three readings on the chart")
    summary = text_of(browser, "#release-summary")
    assert "Next: wave 1 bakes" in summary and "then wave 2 moves" in summary, summary
    assert shown(browser, "#release-charts svg.chart", "data-signal")[0] == "unhealthy tenants (%)"
    screenshot(browser, fleet.directory, "dashboard-release.png")

    # Pause: the confirmation names the DC; the API shows spec.paused and the phase.
    text, answer, kind = confirm(browser, f"/api/dcs/dc-c/releases/{name}/actions/pause")
    assert text.startswith(f"dc-c / {name}: Pause") and kind == "result ok", (text, answer, kind)
    assert sim.kubectl_json("get", "operatorrelease", name, "-n", "express-system")["spec"]["paused"] is True
    eventually(lambda: status(sim, name).get("phase") == "Paused", what="Paused")
    eventually(lambda: shown(browser, "#release-summary span.phase", "data-phase") == ["Paused"],
               what="the page following the release")

    # Resume: the button the page now shows.
    confirm(browser, f"/api/dcs/dc-c/releases/{name}/actions/resume")
    eventually(lambda: status(sim, name).get("phase") == "Progressing", what="Progressing again")
    assert sim.kubectl_json("get", "operatorrelease", name, "-n", "express-system")["spec"]["paused"] is False

    # Promote: wave 1's bake ends now, wave 2 moves.
    _, answer, kind = confirm(browser, f"/api/dcs/dc-c/releases/{name}/actions/promote")
    assert kind == "result ok", answer
    eventually(lambda: status(sim, name).get("wave") == 1, timeout=30, what="wave 2")
    eventually(lambda: shown(browser, "#release-waves li.wave", "data-state")[0] == "promoted",
               what="wave 1 promoted on the page")

    # Abort: every moved tenant goes back.
    text, answer, kind = confirm(browser, f"/api/dcs/dc-c/releases/{name}/actions/abort")
    assert "goes back to ring default" in text and kind == "result ok", (text, answer)
    eventually(lambda: status(sim, name).get("phase") == "RolledBack", timeout=60, what="RolledBack")
    eventually(lambda: fleet.on_ring("dc-c", "default"), timeout=90, what="dc-c back on ring default")
    eventually(lambda: shown(browser, "#release-summary span.phase", "data-phase") == ["RolledBack"],
               what="the page saying so")
    assert not read(browser, "#release-summary button.action", "data-url"), "a rolled-back release takes no action"

    # What the notifications told, to whom: the webhook's messages, as the page lists them.
    eventually(lambda: len(receiver.told()) >= 2, timeout=60, what="the promotion and the rollback told")
    assert sorted(n["trigger"] for n in receiver.told()) == ["release-promoted", "release-rolled-back"]

    def listed():
        # The live updates bring the list (the page's stream renders the same parts).
        lines = [text for (text,) in read(browser, "ul.notifications li", "text")]
        return lines if any("release-rolled-back" in line for line in lines) else None

    lines = eventually(listed, timeout=30, what="the page listing the notifications")
    assert any(line.startswith(f"sre: OperatorRelease {name}: wave 1 of 2 promoted by a person") for line in lines), lines
    assert any(line.startswith(f"sre: OperatorRelease {name} rolled back") for line in lines), lines
    receiver.close()


def copies(fleet, name, key):
    """Each DC's copy's annotation `key` (None where absent)."""
    return {dc: fleet.copy(dc, name)["metadata"].get("annotations", {}).get(key) for dc in fleet.sims}


def test_a_fleet_release_is_approved_paused_resumed_and_rolled_back_from_its_page(fleet, dashboard, browser):  # noqa: F811
    name = "to-canary-ui"
    # The driver stops at the gate (exit 5): approve and resume are acted on by the next run.
    gate = fleet.kx("fleet-release", "run", "-f", fleet.plan_file(name, approval=True, soak=3), "--timeout", "150s")
    assert gate.returncode == 5 and fleet.phase("dc-a", name) == "WaitingApproval", gate.stdout

    # The fleet page links the plan to its page.
    browser.get(dashboard.url + "/")
    eventually(lambda: read(browser, f'#fleet-releases a[href="/fleet-releases/{name}"]', "href"),
               timeout=30, what="the link to the plan's page")
    # Its one line: what a person should look at first.
    eventually(lambda: any("stage 2 (rest: dc-b, dc-c) waits for approval" in text for (text,) in read(
        browser, f'#fleet-releases [data-fleet-release="{name}"] .attention', "text")),
        timeout=30, what="the plan's line on the fleet page")
    screenshot(browser, fleet.directory, "dashboard-dcs-release.png")
    browser.get(dashboard.url + f"/fleet-releases/{name}")
    attention = eventually(lambda: text_of(browser, "#attention"), what="the plan's page")
    assert "stage 2 (rest: dc-b, dc-c) waits for approval" in attention, attention
    states = dict(read(browser, "#fleet-release-pipeline li.dc-card", "data-context", "data-state"))
    assert states == {"dc-a": "Succeeded", "dc-b": "Waiting", "dc-c": "Waiting"}, states
    cards = shown(browser, "#fleet-release-pipeline li.dc-card.attention", "data-context")
    assert cards == ["dc-b", "dc-c"], cards
    screenshot(browser, fleet.directory, "dashboard-fleet-release.png")

    # A dashboard that may not act in dc-c offers approve (written where it can), never pause or
    # abort: they take the plan's step, which would write dc-c into every copy as unreadable.
    partial = FleetDashboard(fleet.kubeconfig, fleet.directory, "--read-only-context", "dc-c")
    try:
        browser.get(partial.url + f"/fleet-releases/{name}")
        offered = sorted(url.rsplit("/", 1)[1] for (url,) in read(browser, "#fleet-release-summary button.action", "data-url"))
        assert offered == ["approve"], offered
        assert "does not act in dc-c" in text_of(browser, "#fleet-release-summary")
        assert read(browser, "#fleet-release-pipeline li.dc-card[data-context=dc-c] .muted", "text") == [["no actions here"]]
    finally:
        partial.stop()
    browser.get(dashboard.url + f"/fleet-releases/{name}")

    # A button's token is its own: another action's token is refused, nothing written.
    pause_token = read(browser, 'button.action[data-url$="/actions/pause"]', "data-token")[0][0]
    refused, _ = dashboard.post(f"/api/fleet-releases/{name}/actions/abort-rollback",
                                headers={"X-Express-Token": pause_token})
    assert refused == 403
    assert fleet.phase("dc-a", name) == "WaitingApproval"

    # Approve: the confirmation names the stage and every DC it writes in; the request is on
    # every copy, and the next run starts the stage.
    text, answer, kind = confirm(browser, f"/api/fleet-releases/{name}/actions/approve")
    assert "Approve stage 2 (rest)" in text and "written in dc-a, dc-b, dc-c" in text, text
    assert kind == "result ok" and "approve requested" in answer, answer
    assert all(copies(fleet, name, "express.dev/approve").values())
    driver = fleet.driver("run", name, "--timeout", "150s")
    try:
        eventually(lambda: fleet.release_phase("dc-b", name) is not None, timeout=60, what="stage rest started")

        # Pause: taken at once, in every copy, and the running driver stops (exit 5).
        _, answer, kind = confirm(browser, f"/api/fleet-releases/{name}/actions/pause")
        assert kind == "result ok" and "Paused" in answer, answer
        assert {dc: fleet.phase(dc, name) for dc in fleet.sims} == dict.fromkeys(fleet.sims, "Paused")
        assert driver.wait(timeout=60) == 5
        for dc in ["dc-b", "dc-c"]:
            released = [r for r in fleet.releases(dc) if r["metadata"]["name"] == name]
            assert all(r["spec"].get("paused") for r in released), released
        eventually(lambda: shown(browser, "#fleet-release-summary span.phase", "data-phase") == ["Paused"],
                   what="the page following the plan")
    finally:
        if driver.poll() is None:
            driver.terminate()
            driver.wait(timeout=10)

    # Resume: written on every copy; the next run acts on it.
    _, answer, kind = confirm(browser, f"/api/fleet-releases/{name}/actions/resume")
    assert kind == "result ok" and "resume requested" in answer, answer
    assert all(copies(fleet, name, "express.dev/resume").values())
    driver = fleet.driver("run", name, "--timeout", "150s")
    try:
        eventually(lambda: fleet.phase("dc-a", name) not in ("Paused", None), timeout=60, what="resumed")

        # Abort with rollback: taken at once; every DC released goes back.
        text, answer, kind = confirm(browser, f"/api/fleet-releases/{name}/actions/abort-rollback")
        assert "roll back every DC already released" in text and kind == "result ok", (text, answer)
        eventually(lambda: fleet.phase("dc-a", name) == "RolledBack", timeout=60, what="RolledBack")
        for dc in fleet.sims:
            eventually(lambda: fleet.on_ring(dc, "default"), timeout=120, what=f"{dc} back on ring default")
        eventually(lambda: shown(browser, "#fleet-release-summary span.phase", "data-phase") == ["RolledBack"],
                   what="the page saying so")
        time.sleep(0.5)
        assert not read(browser, "#fleet-release-summary button.action", "data-url")
    finally:
        if driver.poll() is None:
            driver.terminate()
            driver.wait(timeout=10)
