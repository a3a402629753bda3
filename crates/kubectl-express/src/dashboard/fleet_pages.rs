//! The fleet page across DCs, rendered from [`super::fleet::DcFleetView`]: the fleet verdict
//! and a badge per DC, the counts, the filter, one page of rows (a DC column after the
//! namespace; a DC that dropped greys its rows and says when it was last seen), and the page
//! links. The parts the live updates replace are [`parts`].

use maud::{Markup, html};

use super::actions::Acting;
use super::fleet::{Count, DcFleetView, DcQuery, DcSort, encode};
use super::pages::{Chrome, cluster_class, page as shell, progress};

/// Past this many namespaces the filter takes a typed name: a list of thousands would weigh
/// more than the page's rows.
const NAMESPACE_CHOICES: usize = 200;

pub fn page(chrome: &Chrome<'_>, view: &DcFleetView, query: &DcQuery) -> Markup {
    let body = html! {
        div id="verdict" { (verdict(view)) }
        div id="badges" { (badges(view)) }
        div id="counts" { (counts(view)) }
        (filter(view, query))
        p class="count" id="count" { (count(view)) }
        table class="tenants" {
            thead { tr {
                th { "Namespace" } th { "DC" } th { "Cluster" } th { "Ring" } th { "Operator" }
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
pub fn parts(view: &DcFleetView, query: &DcQuery) -> Vec<(&'static str, String)> {
    vec![
        ("verdict", verdict(view).into_string()),
        ("badges", badges(view).into_string()),
        ("counts", counts(view).into_string()),
        ("count", count(view)),
        ("tenants", rows(view, query).into_string()),
        ("pages", pages(view, query).into_string()),
    ]
}

fn verdict(view: &DcFleetView) -> Markup {
    html! {
        div class=(format!("doctor verdict-{}", view.verdict)) data-verdict=(view.verdict) {
            strong { "doctor: " (view.headline) } " — " (view.reason)
        }
    }
}

fn badges(view: &DcFleetView) -> Markup {
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

fn counts(view: &DcFleetView) -> Markup {
    let c = &view.counts;
    html! {
        p class="counts" {
            span class="tally" { strong { (view.total) " tenants" } }
            @if c.failing > 0 { " " span class="tally failing" data-count="failing" { (c.failing) " failing" } }
            @if c.stale > 0 { " " span class="tally stale" data-count="stale" { (c.stale) " stale" } }
            " " (tally("DC", "context", &c.by_context))
            " " (tally("phase", "phase", &c.by_phase))
            " " (tally("ring", "ring", &c.by_ring))
            " " (tally("operator", "version", &c.by_version))
        }
    }
}

fn count(view: &DcFleetView) -> String {
    let first = (view.page - 1) * super::fleet::PAGE_SIZE;
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

fn filter(view: &DcFleetView, query: &DcQuery) -> Markup {
    let chosen = |current: &Option<String>, value: &str| current.as_deref() == Some(value);
    html! {
        form id="filter" class="filter" method="get" action="/" {
            label { "DC "
                select name="context" {
                    option value="" { "all" }
                    @for context in &view.contexts {
                        option value=(context) selected[chosen(&query.context, context)] { (context) }
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
            label { "Text " input type="search" name="q" value=(query.q.as_deref().unwrap_or_default()) placeholder="cluster, DC, version, ring…"; }
            label { "Sort by "
                select name="sort" {
                    @for key in DcSort::ALL {
                        option value=(key.as_str()) selected[query.sort == key] {
                            (if key == DcSort::Health { "unhealthy first" } else { key.as_str() })
                        }
                    }
                }
            }
            label { input type="checkbox" name="group" value="dc" checked[query.grouped()]; " group by DC" }
            noscript { button { "Apply" } }
        }
    }
}

fn rows(view: &DcFleetView, query: &DcQuery) -> Markup {
    // Grouped, a heading row before each DC's first row.
    let headed: Vec<bool> = view
        .tenants
        .iter()
        .enumerate()
        .map(|(i, row)| query.grouped() && (i == 0 || view.tenants[i - 1].context != row.context))
        .collect();
    html! {
        @if view.tenants.is_empty() {
            tr { td colspan="11" class="empty" { "No Express clusters found." } }
        }
        @for (row, headed) in view.tenants.iter().zip(headed) {
            @let list = &row.tenant.list;
            @if headed {
                @let badge = view.badge(&row.context);
                tr class="dc-group" data-group=(row.context) {
                    th colspan="11" {
                        (row.context)
                        @if let Some(badge) = badge { " — " span class=(format!("dc-text status-{}", badge.status)) { (badge.text) } }
                    }
                }
            }
            @let acting = Acting { context: Some(&row.context), signer: None };
            tr class=[row.stale.then_some("stale")] data-context=(row.context) data-namespace=(list.namespace)
                data-cluster=(list.cluster) data-phase=(list.phase) data-stale=[row.stale.then_some("true")] {
                td { (list.namespace) }
                td class="dc" { (row.context) }
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
                td { (row.tenant.rollout_age.as_deref().unwrap_or("-")) }
                td { (list.paused) }
            }
        }
    }
}

fn pages(view: &DcFleetView, query: &DcQuery) -> Markup {
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
    use express_triage::Verdict;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::dashboard::fleet::{DcDoctor, DcInput, Health, merge};
    use crate::dashboard::model::TenantRow;
    use crate::fleet::ContextError;
    use crate::view::ListRow;

    fn row(namespace: String, phase: &str) -> TenantRow {
        TenantRow::new(
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
        )
    }

    #[test]
    fn the_page_has_the_dc_column_stale_rows_groups_and_page_links() {
        let now: Timestamp = "2026-05-01T12:00:00Z".parse().unwrap();
        let a: Vec<TenantRow> = (0..250)
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
                read_only: false,
                rows: &a,
            },
            DcInput {
                context: "dc-b",
                health: &down,
                doctor: None,
                read_only: false,
                rows: &b,
            },
        ];
        let query = DcQuery {
            group: Some("dc".into()),
            ..DcQuery::default()
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
            &DcQuery {
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
}
