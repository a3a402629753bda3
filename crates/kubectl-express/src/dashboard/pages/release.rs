//! The release pages: an OperatorRelease of one DC ([`ReleaseView`]) and a FleetRelease
//! across DCs ([`FleetReleaseView`]), each where it stands in words first, then the picture
//! (the waves as a strip and a chart per signal; the stages as a pipeline of DCs), then the
//! samples, with the actions a person may take. The parts the live updates replace are
//! [`release_parts`] and [`fleet_release_parts`].

use maud::{Markup, html};

use super::{Chrome, action, page as shell};
use crate::dashboard::chart;
use crate::dashboard::links::{
    Acting, Signer, fleet_release_api, fleet_release_binding, fleet_release_href,
};
use crate::dashboard::model::fleet_release::FleetReleaseView;
use crate::dashboard::model::release::ReleaseView;

/// The CSS class of a release's phase, either kind (the stylesheet colours them).
pub fn release_phase_class(phase: &str) -> &'static str {
    match phase {
        "Succeeded" => "ready",
        "Pending" | "Progressing" | "Soaking" => "changing",
        "WaitingApproval" | "Inconclusive" => "waiting",
        "Paused" => "paused",
        "RolledBack" | "Failed" | "Aborted" => "failed",
        _ => "unknown",
    }
}

/// A phase as a coloured badge.
pub fn phase_badge(phase: &str) -> Markup {
    html! { span class=(format!("phase {}", release_phase_class(phase))) data-phase=(phase) { (phase) } }
}

// ---- an OperatorRelease ----

pub fn release_page(chrome: &Chrome<'_>, view: &ReleaseView) -> Markup {
    let body = html! {
        h1 {
            "OperatorRelease " (view.name)
            @if !view.context.is_empty() { " " span class="namespace" { "in " (view.context) } }
        }
        p { a href="/" { "← the fleet" } }
        div id="release-summary" { (release_summary(chrome, view)) }
        div id="release-waves" { (waves(view)) }
        div id="release-charts" { (charts(view)) }
        div id="release-samples" { (samples(view)) }
    };
    let stream = format!("{}/stream", chrome.acting.release_api(&view.name));
    shell(
        chrome,
        &format!("OperatorRelease {}", view.name),
        &stream,
        body,
    )
}

pub fn release_parts(chrome: &Chrome<'_>, view: &ReleaseView) -> Vec<(&'static str, String)> {
    vec![
        (
            "release-summary",
            release_summary(chrome, view).into_string(),
        ),
        ("release-waves", waves(view).into_string()),
        ("release-charts", charts(view).into_string()),
        ("release-samples", samples(view).into_string()),
    ]
}

fn release_summary(chrome: &Chrome<'_>, view: &ReleaseView) -> Markup {
    html! {
        p class="headline" { (phase_badge(&view.phase)) " " (view.why) }
        p class="next" { strong { "Next: " } (view.next) }
        dl class="facts" {
            dt { "Rings" } dd { "ring " (view.from_ring) " → ring " (view.to_ring) }
            dt { "Tenants" } dd { (view.tenants) }
            dt { "Samples" } dd { (view.samples) }
            dt { "Compared with" } dd { (view.baseline) }
            @if !view.requests.is_empty() {
                dt { "Requests handled" } dd { (view.requests.join(", ")) }
            }
            @if !view.notifications.is_empty() {
                dt { "Notifications" }
                dd { ul.notifications { @for line in &view.notifications { li { (line) } } } }
            }
        }
        @if !chrome.read_only {
            div class="actions" {
                (release_actions(&view.name, &view.from_ring, &view.to_ring, &view.phase, chrome.acting))
            }
        }
    }
}

/// An OperatorRelease's buttons (the fleet page's row and the release page share them): pause
/// or resume, promote, promote every wave, abort; a succeeded release can only be rolled back,
/// a rolled-back one takes nothing.
pub fn release_actions(
    name: &str,
    from_ring: &str,
    to_ring: &str,
    phase: &str,
    acting: Acting<'_>,
) -> Markup {
    if phase == "RolledBack" {
        return html! {};
    }
    let target = format!("release/{name}");
    let button = |action_name: &str, label: &str, confirm: String| {
        let confirm = match acting.context {
            Some(context) => format!("{context} / {name}: {confirm}"),
            None => confirm,
        };
        let token = acting.token(&target, action_name, None);
        action(
            &acting.release_url(name, action_name),
            "{}",
            label,
            &confirm,
            None,
            token,
        )
    };
    let rings = format!("ring {from_ring} to ring {to_ring}");
    let abort = button(
        "abort",
        "Abort (roll back)",
        format!(
            "Abort OperatorRelease {name}: every tenant it moved goes back to ring {from_ring}?"
        ),
    );
    if phase == "Succeeded" {
        return abort;
    }
    html! {
        @if phase == "Paused" {
            (button("resume", "Resume", format!("Resume OperatorRelease {name} ({rings})? Moves and judging go on.")))
        } @else {
            (button("pause", "Pause", format!("Pause OperatorRelease {name} ({rings})? Nothing moves, nothing is judged, no bake time passes.")))
        }
        (button("promote", "Promote", format!("Promote OperatorRelease {name}: end the current wave's bake now?")))
        (button("promote-full", "Promote all", format!("Promote OperatorRelease {name} in full: every remaining wave now, no more baking or judging?")))
        (abort)
    }
}

fn waves(view: &ReleaseView) -> Markup {
    html! {
        h2 { "Waves" }
        ol class="strip" {
            @for wave in &view.waves {
                li class=(format!("wave {}", wave.class)) data-wave=(wave.number) data-state=(wave.state) {
                    strong { "Wave " (wave.number) } " · " (wave.size)
                    br;
                    @if let Some(tenants) = wave.tenants { (tenants) " tenant(s) · " }
                    (wave.state)
                }
            }
        }
    }
}

fn charts(view: &ReleaseView) -> Markup {
    html! {
        h2 { "Canary ring " (view.to_ring) " against " (view.baseline) }
        @if view.charts.is_empty() {
            p class="empty" { "No readings yet: the dashboard reads both rings each time its doctor runs." }
        } @else {
            p class="key" {
                span class="key-line canary" { "ring " (view.to_ring) " (canary)" }
                span class="key-line stable" { (view.baseline) " (stable)" }
            }
            div class="charts" {
                @for one in &view.charts {
                    figure class="chart" {
                        figcaption { strong { (one.signal) } " — " (one.latest) }
                        (chart::render(one))
                    }
                }
            }
        }
    }
}

fn samples(view: &ReleaseView) -> Markup {
    html! {
        h2 { "Last samples" }
        @if view.last_samples.is_empty() {
            p class="empty" { "No sample yet." }
        } @else {
            table class="samples" {
                thead { tr { th { "When" } th { "Verdict" } th { "Why" } } }
                tbody {
                    @for sample in view.last_samples.iter().rev() {
                        tr data-verdict=(sample.verdict) {
                            td { (sample.ago) " ago" }
                            td { span class=(format!("verdict {}", sample.verdict)) { (sample.verdict) } }
                            td { (sample.reason) }
                        }
                    }
                }
            }
        }
    }
}

// ---- a FleetRelease ----

pub fn fleet_release_page(
    chrome: &Chrome<'_>,
    signer: Option<&Signer>,
    view: &FleetReleaseView,
) -> Markup {
    let body = html! {
        h1 { "FleetRelease " (view.name) " " span class="namespace" { "ring " (view.from_ring) " → ring " (view.to_ring) } }
        p { a href="/" { "← the fleet" } }
        div id="fleet-release-summary" { (fleet_summary(chrome, signer, view)) }
        div id="fleet-release-pipeline" { (pipeline(view)) }
        div id="fleet-release-samples" { (soak_samples(view)) }
    };
    let stream = format!("{}/stream", fleet_release_api(&view.name));
    shell(
        chrome,
        &format!("FleetRelease {}", view.name),
        &stream,
        body,
    )
}

pub fn fleet_release_parts(
    chrome: &Chrome<'_>,
    signer: Option<&Signer>,
    view: &FleetReleaseView,
) -> Vec<(&'static str, String)> {
    vec![
        (
            "fleet-release-summary",
            fleet_summary(chrome, signer, view).into_string(),
        ),
        ("fleet-release-pipeline", pipeline(view).into_string()),
        ("fleet-release-samples", soak_samples(view).into_string()),
    ]
}

fn fleet_summary(chrome: &Chrome<'_>, signer: Option<&Signer>, view: &FleetReleaseView) -> Markup {
    html! {
        @if !view.attention.is_empty() {
            p class="attention" id="attention" { strong { "Look here first: " } (view.attention) }
        }
        p class="headline" { (phase_badge(&view.phase)) " " (view.why) }
        p class="next" { strong { "Next: " } (view.next) }
        @if let Some(soak) = &view.soak { p class="soak" { strong { "Soak: " } (soak) } }
        @if !view.unserved.is_empty() {
            p class="warning" {
                "This dashboard does not act in " (view.unserved.join(", "))
                " (not served, or read-only there): approve and resume are written where it acts; \
                 pause and abort, which take the plan's step over every DC, are left to the CLI \
                 or a dashboard acting in every DC of the plan."
            }
        }
        @if !chrome.read_only {
            div class="actions" { (fleet_actions(view, signer)) }
        }
    }
}

/// A FleetRelease's buttons, each confirmation naming the DCs it touches.
fn fleet_actions(view: &FleetReleaseView, signer: Option<&Signer>) -> Markup {
    let served: Vec<&str> = view
        .stages
        .iter()
        .flat_map(|s| &s.dcs)
        .filter(|d| d.served)
        .map(|d| d.context.as_str())
        .collect();
    if served.is_empty() {
        return html! {};
    }
    let dcs = served.join(", ");
    let name = &view.name;
    let button = |action_name: &str, label: &str, confirm: String| {
        let token = signer.map(|s| s.token(&fleet_release_binding(name, action_name)));
        action(
            &format!("{}/actions/{action_name}", fleet_release_api(name)),
            "{}",
            label,
            &format!("{confirm} (written in {dcs})"),
            None,
            token,
        )
    };
    let rollback = button(
        "abort-rollback",
        "Abort and roll back",
        format!(
            "Abort FleetRelease {name} and roll back every DC already released to ring {}?",
            view.from_ring
        ),
    );
    if view.phase == "RolledBack" {
        return html! {};
    }
    // Pause and abort take the plan's step, which reads every DC: offered only when this
    // dashboard acts in every DC of the plan (the server refuses them otherwise).
    let every_dc = view.unserved.is_empty();
    if view.over {
        return if every_dc {
            rollback
        } else {
            html! {}
        };
    }
    html! {
        @if let Some(stage) = view.waiting_stage() {
            (button("approve", "Approve", format!(
                "Approve stage {} ({}) of FleetRelease {name}: release {}?",
                stage.number, stage.name,
                stage.dcs.iter().map(|d| d.context.as_str()).collect::<Vec<_>>().join(", ")
            )))
        }
        @if view.paused {
            (button("resume", "Resume", format!("Resume FleetRelease {name}: stages start and soak again?")))
        } @else if every_dc {
            (button("pause", "Pause", format!("Pause FleetRelease {name}: no stage starts, in-flight releases pause, the soak clock stops?")))
        }
        @if every_dc {
            (button("abort", "Abort", format!("Abort FleetRelease {name}: no stage starts, in-flight DCs roll back?")))
            (rollback)
        }
    }
}

fn pipeline(view: &FleetReleaseView) -> Markup {
    html! {
        h2 { "Stages" }
        ol class="pipeline" {
            @for stage in &view.stages {
                li class=(if stage.current { "stage current" } else { "stage" }) data-stage=(stage.name) {
                    h3 {
                        "Stage " (stage.number) " · " (stage.name)
                        @if stage.approval {
                            " " span class=(if stage.approved { "gate approved" } else { "gate" }) {
                                @if stage.approved { "approved" } @else { "approval" }
                            }
                        }
                    }
                    ul class="dc-cards" {
                        @for dc in &stage.dcs {
                            li class=(format!("dc-card state-{}{}", dc.state, if dc.attention { " attention" } else { "" }))
                                data-context=(dc.context) data-state=(dc.state) {
                                strong { (dc.context) } " " span class="state" { (dc.state) }
                                br;
                                "release: " (dc.release)
                                @if let Some(left) = &dc.soak_left { br; "soak: " (left) }
                                @if let Some(verdict) = &dc.verdict { br; "doctor: " (verdict) }
                                @if !dc.message.is_empty() { br; span class="why" { (dc.message) } }
                                @if !dc.served { br; span class="muted" { "no actions here" } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn soak_samples(view: &FleetReleaseView) -> Markup {
    html! {
        h2 { "Soak samples" }
        @if view.samples.is_empty() {
            p class="empty" { "No soak sample yet." }
        } @else {
            table class="samples" {
                thead { tr { th { "At" } th { "Stage" } th { "Verdict" } th { "Why" } } }
                tbody {
                    @for sample in view.samples.iter().rev() {
                        tr data-verdict=(sample.verdict) {
                            td { (sample.at) } td { (sample.stage) }
                            td { span class=(format!("verdict {}", sample.verdict)) { (sample.verdict) } }
                            td { (sample.reason) }
                        }
                    }
                }
            }
        }
    }
}

/// The link to a FleetRelease's page.
pub fn fleet_release_link(name: &str) -> Markup {
    html! { a href=(fleet_release_href(name)) { (name) } }
}
