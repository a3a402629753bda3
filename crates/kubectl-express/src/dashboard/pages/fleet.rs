//! The one fleet page, over one DC or several, rendered from
//! [`FleetView`]: the doctor's verdict (one DC: its banner with the failing checks; several:
//! the fleet verdict and a badge per DC), the counts, the operator releases of every DC with
//! their requests, the filter, one page of rows (several DCs: a DC column after the namespace;
//! a DC that dropped greys its rows and says when it was last seen), and the page links. The
//! parts the live updates replace are [`parts`].

use maud::{Markup, html};

use super::release::{fleet_release_link, phase_badge, release_actions};
use super::{Chrome, cluster_class, page as shell, progress};
use crate::dashboard::links::{Acting, encode};
use crate::dashboard::model::fleet::{Count, FleetQuery, FleetSort, FleetView, PAGE_SIZE};

/// Past this many namespaces the filter takes a typed name: a list of thousands would weigh
/// more than the page's rows.
const NAMESPACE_CHOICES: usize = 200;

pub fn page(chrome: &Chrome<'_>, view: &FleetView, query: &FleetQuery) -> Markup {
    let across = view.across();
    let body = html! {
        div id="banner" { (banner(view)) }
        @if across { div id="badges" { (badges(view)) } }
        div id="counts" { (counts(view)) }
        div id="releases" { (releases(view, chrome)) }
        div id="fleet-releases" { (fleet_releases(view)) }
        (filter(view, query))
        p class="count" id="count" { (count(view)) }
        table class="tenants" {
            thead { tr {
                th { "Namespace" } @if across { th { "DC" } } th { "Cluster" } th { "Ring" } th { "Operator" }
                th { "Phase" } th { "Progress" } th { "Express versions" } th { "Rollout" }
                th { "Age" } th { "Paused" }
            } }
            tbody id="tenants" { (rows(view, query)) }
        }
        nav id="pages" class="pages" { (pages(view, query)) }
    };
    shell(chrome, "Fleet", "/api/stream", body)
}

/// The parts of the page the live updates replace, by element id.
pub fn parts(
    chrome: &Chrome<'_>,
    view: &FleetView,
    query: &FleetQuery,
) -> Vec<(&'static str, String)> {
    let mut parts = vec![("banner", banner(view).into_string())];
    if view.across() {
        parts.push(("badges", badges(view).into_string()));
    }
    parts.extend([
        ("counts", counts(view).into_string()),
        ("releases", releases(view, chrome).into_string()),
        ("fleet-releases", fleet_releases(view).into_string()),
        ("count", count(view)),
        ("tenants", rows(view, query).into_string()),
        ("pages", pages(view, query).into_string()),
    ]);
    parts
}

/// One DC: its doctor's banner with the failing checks; several: the fleet verdict.
fn banner(view: &FleetView) -> Markup {
    if view.across() {
        return html! {
            div class=(format!("doctor verdict-{}", view.verdict)) data-verdict=(view.verdict) {
                strong { "doctor: " (view.headline) } " — " (view.reason)
            }
        };
    }
    html! {
        @match &view.doctor {
            None => div class="doctor pending" { "doctor: not run yet" },
            Some(doctor) => div class=(format!("doctor verdict-{}", doctor.verdict)) data-verdict=(doctor.verdict) {
                strong { "doctor: " (doctor.verdict) } " — " (doctor.reason)
                @if !doctor.checks.is_empty() {
                    ul {
                        @for check in &doctor.checks {
                            li class=(format!("check {}", check.status)) {
                                strong { (check.name) } " [" (check.status) "] " (check.summary)
                                @if !check.evidence.is_empty() {
                                    ul class="evidence" { @for line in &check.evidence { li { (line) } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The releases across DCs: each plan's phase and why, and each DC's state stage by stage.
fn fleet_releases(view: &FleetView) -> Markup {
    if view.fleet_releases.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Releases across DCs" }
        @for plan in &view.fleet_releases {
            div class="fleet-release" data-fleet-release=(plan.name) data-phase=(plan.phase) {
                p { strong { (fleet_release_link(&plan.name)) } " " (phase_badge(&plan.phase)) " — " (plan.message) }
                @if !plan.attention.is_empty() {
                    p class="attention" { strong { "Look here first: " } (plan.attention) }
                }
                table class="stages" {
                    thead { tr { th { "Stage" } th { "DC" } th { "State" } th { "Its release" } } }
                    tbody {
                        @for dc in &plan.data_centers {
                            tr data-context=(dc.context) data-state=(dc.state) {
                                td { (dc.stage) } td { (dc.context) }
                                td { span class=(format!("state {}", dc.state)) { (dc.state) } }
                                td { (dc.release) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The operator releases of every DC (from each doctor's last read), each with its requests
/// behind a confirmation unless read-only, in a DC that takes no action, or over.
fn releases(view: &FleetView, chrome: &Chrome<'_>) -> Markup {
    if view.releases.is_empty() {
        return html! {};
    }
    let across = view.across();
    html! {
        h2 { "Operator releases" }
        table class="releases" {
            thead { tr {
                @if across { th { "DC" } }
                th { "Release" } th { "Rings" } th { "Phase" } th { "Where it stands" }
                @if !chrome.read_only { th { "Actions" } }
            } }
            tbody {
                @for dc_release in &view.releases {
                    @let r = &dc_release.release;
                    tr data-release=(r.name) data-context=[across.then_some(&dc_release.context)] {
                        @if across { td class="dc" { (dc_release.context) } }
                        td { a href=(Acting::of(&dc_release.context, chrome.acting.signer).release_href(&r.name)) { (r.name) } }
                        td { "ring " (r.from_ring) " → ring " (r.to_ring) }
                        td class="phase-cell" { (phase_badge(&r.phase)) }
                        td class="message" { (r.message) }
                        @if !chrome.read_only {
                            td class="actions" {
                                @if dc_release.actions {
                                    (release_actions(&r.name, &r.from_ring, &r.to_ring, &r.phase, Acting::of(&dc_release.context, chrome.acting.signer)))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn badges(view: &FleetView) -> Markup {
    html! {
        ul class="dcs" {
            @for badge in &view.badges {
                li class=(format!("dc status-{}", badge.status)) data-context=(badge.context) data-status=(badge.status) title=(badge.reason) {
                    a href=(format!("/?context={}", encode(&badge.context))) { strong { (badge.context) } }
                    " " span class="dc-text" { (badge.text) }
                    " · " (badge.tenants) " tenants"
                    @if let Some(seen) = &badge.last_seen { " · last seen " (seen) }
                    @if !badge.actions { " · " span class="no-actions" { "no actions" } }
                }
            }
        }
    }
}

fn tally(name: &str, field: &str, count: &Count) -> Markup {
    html! {
        span class="tally" data-count=(field) {
            span class="tally-name" { (name) ":" }
            @for (value, n) in count {
                " " a href=(format!("/?{field}={}", encode(value))) { (value) } " " (n)
            }
        }
    }
}

fn counts(view: &FleetView) -> Markup {
    let c = &view.counts;
    html! {
        p class="counts" {
            span class="tally" { strong { (view.total) " tenants" } }
            @if c.failing > 0 { " " span class="tally failing" data-count="failing" { (c.failing) " failing" } }
            @if c.stale > 0 { " " span class="tally stale" data-count="stale" { (c.stale) " stale" } }
            @if view.across() { " " (tally("DC", "context", &c.by_context)) }
            " " (tally("phase", "phase", &c.by_phase))
            " " (tally("ring", "ring", &c.by_ring))
            " " (tally("operator", "version", &c.by_version))
        }
    }
}

fn count(view: &FleetView) -> String {
    let first = (view.page - 1) * PAGE_SIZE;
    let range = if view.shown == 0 {
        String::new()
    } else {
        format!(" ({}–{} shown)", first + 1, first + view.tenants.len())
    };
    if view.shown == view.total {
        format!("{} tenants{range}", view.total)
    } else {
        format!("{} of {} tenants{range}", view.shown, view.total)
    }
}

fn filter(view: &FleetView, query: &FleetQuery) -> Markup {
    let chosen = |current: &Option<String>, value: &str| current.as_deref() == Some(value);
    let across = view.across();
    html! {
        form id="filter" class="filter" method="get" action="/" {
            @if across {
                label { "DC "
                    select name="context" {
                        option value="" { "all" }
                        @for context in &view.contexts {
                            option value=(context) selected[chosen(&query.context, context)] { (context) }
                        }
                    }
                }
            }
            label { "Namespace "
                @if view.namespaces.len() <= NAMESPACE_CHOICES {
                    select name="namespace" {
                        option value="" { "all" }
                        @for namespace in &view.namespaces {
                            option value=(namespace) selected[chosen(&query.namespace, namespace)] { (namespace) }
                        }
                    }
                } @else {
                    input type="search" name="namespace" value=(query.namespace.as_deref().unwrap_or_default()) placeholder="exact name";
                }
            }
            label { "Phase "
                select name="phase" {
                    option value="" { "all" }
                    @for phase in &view.phases {
                        option value=(phase) selected[chosen(&query.phase, phase)] { (phase) }
                    }
                }
            }
            @if let Some(ring) = &query.ring { input type="hidden" name="ring" value=(ring); }
            @if let Some(version) = &query.version { input type="hidden" name="version" value=(version); }
            label { "Text " input type="search" name="q" value=(query.q.as_deref().unwrap_or_default()) placeholder=(if across { "cluster, DC, version, ring…" } else { "cluster, version, ring…" }); }
            label { "Sort by "
                select name="sort" {
                    @for key in FleetSort::ALL {
                        option value=(key.as_str()) selected[query.sort == key] {
                            (if key == FleetSort::Health { "unhealthy first" } else { key.as_str() })
                        }
                    }
                }
            }
            @if across { label { input type="checkbox" name="group" value="dc" checked[query.grouped()]; " group by DC" } }
            noscript { button { "Apply" } }
        }
    }
}

fn rows(view: &FleetView, query: &FleetQuery) -> Markup {
    let across = view.across();
    let columns = if across { "11" } else { "10" };
    // Grouped, a heading row before each DC's first row.
    let headed: Vec<bool> = view
        .tenants
        .iter()
        .enumerate()
        .map(|(i, row)| query.grouped() && (i == 0 || view.tenants[i - 1].context != row.context))
        .collect();
    html! {
        @if view.tenants.is_empty() {
            tr { td colspan=(columns) class="empty" { "No Express clusters found." } }
        }
        @for (row, headed) in view.tenants.iter().zip(headed) {
            @let list = &row.tenant.list;
            @if headed {
                @let badge = view.badge(&row.context);
                tr class="dc-group" data-group=(row.context) {
                    th colspan=(columns) {
                        (row.context)
                        @if let Some(badge) = badge { " — " span class=(format!("dc-text status-{}", badge.status)) { (badge.text) } }
                    }
                }
            }
            @let acting = Acting::of(&row.context, None);
            tr class=[row.stale.then_some("stale")] data-context=[across.then_some(&row.context)] data-namespace=(list.namespace)
                data-cluster=(list.cluster) data-phase=(list.phase) data-stale=[row.stale.then_some("true")] {
                td { (list.namespace) }
                @if across { td class="dc" { (row.context) } }
                td { a href=(acting.tenant_href(&list.namespace, &list.cluster)) { (list.cluster) } }
                td { (list.ring) }
                td { (list.operator_version) }
                td {
                    span class=(format!("phase {}", cluster_class(&list.phase))) { (list.phase) }
                    @if let Some(seen) = &row.last_seen { " " span class="seen" { "stale: last seen " (seen) } }
                }
                td class="progress" { (progress(&row.tenant)) }
                td { (if row.tenant.versions.is_empty() { "-".to_owned() } else { row.tenant.versions.join(", ") }) }
                td { (list.rollout) }
                td { (row.rollout_age.as_deref().unwrap_or("-")) }
                td { (list.paused) }
            }
        }
    }
}

fn pages(view: &FleetView, query: &FleetQuery) -> Markup {
    html! {
        @if view.pages > 1 {
            @if view.page > 1 { a rel="prev" href=(query.with_page(view.page - 1)) { "← previous" } " " }
            @for n in 1..=view.pages {
                @if n == view.page {
                    strong class="page" aria-current="page" { (n) } " "
                } @else {
                    a class="page" href=(query.with_page(n)) data-page=(n) { (n) } " "
                }
            }
            @if view.page < view.pages { a rel="next" href=(query.with_page(view.page + 1)) { "next →" } }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use express_triage::Verdict;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::dashboard::model::fleet::{DcDoctor, DcInput, Health, merge};
    use crate::dashboard::model::rows::TenantRow;
    use crate::show::cluster::ListRow;
    use express_client::contexts::across::ContextError;

    fn row(namespace: String, phase: &str) -> Arc<TenantRow> {
        Arc::new(TenantRow::new(
            ListRow {
                namespace,
                cluster: "shop".into(),
                phase: phase.into(),
                rollout: "Complete".into(),
                progress: String::new(),
                current: "-".into(),
                ready: "1/1".into(),
                paused: "-".into(),
                ring: "default".into(),
                operator_version: "0.5.0".into(),
            },
            1,
            1,
            vec!["v1".into()],
            None,
        ))
    }

    #[test]
    fn the_page_has_the_dc_column_stale_rows_groups_and_page_links() {
        let now: Timestamp = "2026-05-01T12:00:00Z".parse().unwrap();
        let a: Vec<Arc<TenantRow>> = (0..250)
            .map(|i| row(format!("team-{i:03}"), "Healthy"))
            .collect();
        let b = vec![row("team-x".into(), "Failed")];
        let healthy = DcDoctor {
            verdict: Verdict::Healthy,
            reason: "ok".into(),
        };
        let down = Health::Down {
            error: ContextError::Unreachable("connection refused".into()),
            last_seen: Some("2026-05-01T11:59:00Z".parse().unwrap()),
        };
        let dcs = [
            DcInput {
                context: "dc-a",
                health: &Health::Live,
                doctor: Some(&healthy),
                banner: None,
                read_only: false,
                rows: &a,
            },
            DcInput {
                context: "dc-b",
                health: &down,
                doctor: None,
                banner: None,
                read_only: false,
                rows: &b,
            },
        ];
        let query = FleetQuery {
            group: Some("dc".into()),
            ..FleetQuery::default()
        };
        let view = merge(&dcs, &query, now);
        let html = rows(&view, &query).into_string();
        // A heading per DC, dc-a's first (grouped, in the selection's order).
        let headings: Vec<&str> = html
            .match_indices("data-group=\"")
            .map(|(i, _)| &html[i + 12..i + 16])
            .collect();
        assert_eq!(headings, ["dc-a"]);
        // The DC column follows the namespace; dc-b's stale row is on page 2 here, grouped.
        assert!(
            html.contains("<td>team-000</td><td class=\"dc\">dc-a</td>"),
            "{html}"
        );
        let second = merge(
            &dcs,
            &FleetQuery {
                page: Some(2),
                ..query.clone()
            },
            now,
        );
        let html = rows(&second, &query).into_string();
        assert!(html.contains("data-group=\"dc-b\""));
        assert!(
            html.contains("class=\"stale\" data-context=\"dc-b\""),
            "{html}"
        );
        assert!(
            html.contains("stale: last seen 11:59:00 UTC (1m ago)"),
            "{html}"
        );
        // Page links keep the query; the current page is not a link.
        let links = pages(&second, &query).into_string();
        assert!(links.contains("href=\"?group=dc&amp;page=1\""), "{links}");
        assert!(links.contains("aria-current=\"page\">2<"), "{links}");
        // 251 namespaces: the filter takes a typed name, not a list of them all.
        let form = filter(&view, &query).into_string();
        assert!(
            form.contains("input type=\"search\" name=\"namespace\""),
            "{form}"
        );
        assert!(!form.contains("option value=\"team-000\""));
        // The badge of the DC that dropped says why and takes no action.
        let badges = badges(&view).into_string();
        assert!(badges.contains("data-status=\"unreachable\""), "{badges}");
        assert!(
            badges.contains("unreachable: connection refused"),
            "{badges}"
        );
        assert!(badges.contains("no actions"), "{badges}");
    }

    #[test]
    fn the_releases_across_dcs_show_each_dc_s_state_from_the_newest_copy() {
        use crate::dashboard::model::rows::{DoctorBanner, FleetDcRow, FleetReleaseRow};
        let now: Timestamp = "2026-05-01T12:00:00Z".parse().unwrap();
        let plan = |updated: &str, state_b: &str| FleetReleaseRow {
            name: "to-0-3-0".into(),
            phase: "Soaking".into(),
            message: "soaking stage 0".into(),
            updated_at: Some(updated.into()),
            attention: String::new(),
            data_centers: ["dc-a", "dc-b"]
                .iter()
                .map(|c| FleetDcRow {
                    stage: if *c == "dc-a" { "canary-dc" } else { "rest" }.into(),
                    context: (*c).into(),
                    state: if *c == "dc-a" { "Soaking" } else { state_b }.into(),
                    release: "-".into(),
                })
                .collect(),
        };
        let banner = |row: FleetReleaseRow| DoctorBanner {
            verdict: "healthy".into(),
            reason: String::new(),
            checks: Vec::new(),
            releases: Vec::new(),
            fleet_releases: vec![row],
        };
        // dc-b's copy is older (its last write before it dropped): dc-a's is shown.
        let (a, b) = (
            banner(plan("2026-05-01T11:59:50Z", "Waiting")),
            banner(plan("2026-05-01T11:50:00Z", "Unknown")),
        );
        let healthy = DcDoctor {
            verdict: Verdict::Healthy,
            reason: "ok".into(),
        };
        let dcs = [
            DcInput {
                context: "dc-b",
                health: &Health::Live,
                doctor: Some(&healthy),
                banner: Some(&b),
                read_only: false,
                rows: &[],
            },
            DcInput {
                context: "dc-a",
                health: &Health::Live,
                doctor: Some(&healthy),
                banner: Some(&a),
                read_only: false,
                rows: &[],
            },
        ];
        let view = merge(&dcs, &FleetQuery::default(), now);
        assert_eq!(view.fleet_releases.len(), 1);
        let html = fleet_releases(&view).into_string();
        assert!(html.contains("data-fleet-release=\"to-0-3-0\""), "{html}");
        assert!(
            html.contains("data-context=\"dc-b\" data-state=\"Waiting\""),
            "{html}"
        );
        assert!(!html.contains("Unknown"), "{html}");
    }
}
