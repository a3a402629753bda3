//! The fleet page, pure, for one DC or several (DESIGN section 13): each DC's rows, its
//! health, its doctor's verdict and banner go in; one view comes out, with each row's DC, a
//! badge per DC, the fleet verdict, counts, the operator releases of every DC, the unhealthy
//! first, and a page of rows. One DC is the same view with one DC (the page then draws no DC
//! column and no badges, and leads with that DC's doctor banner).
//!
//! A DC that stops answering keeps its rows: the watches' stores keep what they last held, and
//! the rows are marked stale with the time the DC was last seen, so that an outage never reads
//! as an empty (or healthy) DC.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use express_triage::Verdict;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use express_triage::across::{ContextRead, FleetVerdict, fleet_verdict as across_dcs};

use super::rows::{DoctorBanner, FleetReleaseRow, ReleaseRow, TenantRow};
use crate::dashboard::links::encode;
use express_client::contexts::across::ContextError;

/// Rows on one page of the fleet.
pub const PAGE_SIZE: usize = 200;

/// What the dashboard knows of a DC's connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// Its watches have not listed yet.
    Connecting,
    Live,
    /// It cannot be read now; `last_seen` is when it last could (None: never, so no rows).
    Down {
        error: ContextError,
        last_seen: Option<Timestamp>,
    },
}

impl Health {
    /// Why actions in this DC are refused, when they are: nothing is done where the
    /// dashboard cannot see what it does.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Health::Live => None,
            Health::Connecting => Some("not read yet (connecting)".into()),
            Health::Down { error, .. } => Some(format!("cannot be read ({})", describe(error))),
        }
    }
}

/// Why a DC cannot be read, in one line: "Unauthorized", "forbidden: cannot list
/// expressclusters", "unreachable: connection refused".
pub fn describe(error: &ContextError) -> String {
    match error {
        // These say it themselves.
        ContextError::Unauthorized | ContextError::Forbidden(_) => error.to_string(),
        _ => format!("{}: {error}", error.status()),
    }
}

/// The doctor's last verdict on one DC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcDoctor {
    pub verdict: Verdict,
    pub reason: String,
}

/// One DC, as the merge reads it.
pub struct DcInput<'a> {
    pub context: &'a str,
    pub health: &'a Health,
    pub doctor: Option<&'a DcDoctor>,
    /// Its doctor's last report as the banner shows it (failing checks, operator releases).
    pub banner: Option<&'a DoctorBanner>,
    /// `--read-only` or `--read-only-context` names it.
    pub read_only: bool,
    /// Its tenants.
    pub rows: &'a [Arc<TenantRow>],
}

/// One DC's badge: its doctor's verdict, or why it cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Badge {
    pub context: String,
    /// A doctor verdict (`healthy`, `tenant`, `deployment`, `infrastructure`), `pending`
    /// (read, doctor not run yet), `connecting`, or a fleet read's status (`unreachable`,
    /// `forbidden`, `error`).
    pub status: String,
    /// One line: "healthy", "Unauthorized", "unreachable: connection refused".
    pub text: String,
    /// The doctor's reason, or the error in full.
    pub reason: String,
    pub tenants: usize,
    /// Its rows are what it held when last seen.
    pub stale: bool,
    /// When it was last seen, for a DC that is down ("12s ago").
    pub last_seen: Option<String>,
    /// Whether its rows offer actions.
    pub actions: bool,
}

/// `dc`'s badge at `now`.
pub fn badge(dc: &DcInput<'_>, now: Timestamp) -> Badge {
    let (status, text, reason) = match (dc.health, dc.doctor) {
        (Health::Connecting, _) => (
            "connecting".to_owned(),
            "connecting".to_owned(),
            "its watches have not listed yet".to_owned(),
        ),
        (Health::Down { error, .. }, _) => (
            error.status().to_owned(),
            describe(error),
            error.to_string(),
        ),
        (Health::Live, None) => (
            "pending".to_owned(),
            "doctor: not run yet".to_owned(),
            String::new(),
        ),
        (Health::Live, Some(doctor)) => (
            doctor.verdict.as_str().to_owned(),
            doctor.verdict.as_str().to_owned(),
            doctor.reason.clone(),
        ),
    };
    let last_seen = match dc.health {
        Health::Down {
            last_seen: Some(at),
            ..
        } => Some(seen_ago(now, *at)),
        _ => None,
    };
    Badge {
        context: dc.context.to_owned(),
        status,
        text,
        reason,
        tenants: dc.rows.len(),
        stale: matches!(dc.health, Health::Down { .. }) && !dc.rows.is_empty(),
        last_seen,
        actions: !dc.read_only && dc.health.refusal().is_none(),
    }
}

fn seen_ago(now: Timestamp, then: Timestamp) -> String {
    let seconds = (now.as_second() - then.as_second()).max(0);
    format!(
        "{} ({} ago)",
        then.strftime("%H:%M:%S UTC"),
        express_triage::age(seconds)
    )
}

/// How the fleet page is sorted: unhealthy first, unless another order is asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FleetSort {
    #[default]
    Health,
    Context,
    Namespace,
    Cluster,
    Phase,
    Progress,
    Age,
}

impl FleetSort {
    pub const ALL: [FleetSort; 7] = [
        FleetSort::Health,
        FleetSort::Context,
        FleetSort::Namespace,
        FleetSort::Cluster,
        FleetSort::Phase,
        FleetSort::Progress,
        FleetSort::Age,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FleetSort::Health => "health",
            FleetSort::Context => "context",
            FleetSort::Namespace => "namespace",
            FleetSort::Cluster => "cluster",
            FleetSort::Phase => "phase",
            FleetSort::Progress => "progress",
            FleetSort::Age => "age",
        }
    }
}

/// The fleet page's filter, sort, grouping and page, from its query string.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize, Serialize)]
pub struct FleetQuery {
    /// Only this DC (kubeconfig context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<String>,
    /// Only tenants this operator version last wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    #[serde(default)]
    pub sort: FleetSort,
    /// `dc`: rows under a heading per DC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
}

impl FleetQuery {
    /// Empty fields mean "any" (a form submits them empty).
    pub fn normalized(mut self) -> FleetQuery {
        let keep = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        self.context = keep(self.context);
        self.namespace = keep(self.namespace);
        self.phase = keep(self.phase);
        self.ring = keep(self.ring);
        self.version = keep(self.version);
        self.q = keep(self.q);
        self.group = keep(self.group).filter(|g| g == "dc");
        self
    }

    pub fn grouped(&self) -> bool {
        self.group.is_some()
    }

    /// The query string of this query on another page (for the page links).
    pub fn with_page(&self, page: usize) -> String {
        let mut pairs = Vec::new();
        for (name, value) in [
            ("context", &self.context),
            ("namespace", &self.namespace),
            ("phase", &self.phase),
            ("ring", &self.ring),
            ("version", &self.version),
            ("q", &self.q),
            ("group", &self.group),
        ] {
            if let Some(value) = value {
                pairs.push(format!("{name}={}", encode(value)));
            }
        }
        if self.sort != FleetSort::Health {
            pairs.push(format!("sort={}", self.sort.as_str()));
        }
        pairs.push(format!("page={page}"));
        format!("?{}", pairs.join("&"))
    }
}

/// One tenant of one DC on the fleet page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetRow {
    /// Its DC (none serialized on a dashboard of one context).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
    #[serde(flatten)]
    pub tenant: TenantRow,
    /// How long ago its rollout started (while active) or finished.
    pub rollout_age: Option<String>,
    /// The DC is down: this is what it held when last seen.
    pub stale: bool,
    pub last_seen: Option<String>,
}

impl FleetRow {
    /// 0: failing (Failed, InvalidSpec, Degraded); 1: not settled or not known (Progressing,
    /// Paused, stale...); 2: Healthy.
    pub fn concern(&self) -> u8 {
        concern(&self.tenant, self.stale)
    }
}

/// [`FleetRow::concern`] of a row of a DC, stale or not.
fn concern(tenant: &TenantRow, stale: bool) -> u8 {
    if stale {
        return 1;
    }
    match tenant.list.phase.as_str() {
        "Failed" | "InvalidSpec" | "Degraded" => 0,
        "Healthy" => 2,
        _ => 1,
    }
}

/// A tenant of one DC while the page is chosen: the rows stay the DCs' own, and only the
/// page's rows become [`FleetRow`]s (a fleet of 10,000 tenants is not copied per redraw).
#[derive(Clone, Copy)]
struct Candidate<'a> {
    /// Its DC's place in the merge's input.
    dc: usize,
    context: &'a str,
    tenant: &'a TenantRow,
    stale: bool,
}

impl Candidate<'_> {
    fn concern(&self) -> u8 {
        concern(self.tenant, self.stale)
    }

    fn matches(&self, query: &FleetQuery) -> bool {
        let list = &self.tenant.list;
        query.context.as_ref().is_none_or(|c| self.context == c)
            && query
                .namespace
                .as_ref()
                .is_none_or(|n| &list.namespace == n)
            && query.phase.as_ref().is_none_or(|p| &list.phase == p)
            && query.ring.as_ref().is_none_or(|r| &list.ring == r)
            && query
                .version
                .as_ref()
                .is_none_or(|v| &list.operator_version == v)
            && query.q.as_ref().is_none_or(|q| {
                let q = q.to_lowercase();
                self.context.to_lowercase().contains(&q) || self.tenant.mentions(&q)
            })
    }
}

/// How many tenants have each value.
pub type Count = Vec<(String, usize)>;

/// The counts the page leads with, over every tenant of every DC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub by_context: Count,
    pub by_phase: Count,
    pub by_ring: Count,
    pub by_version: Count,
    /// Failing tenants (Failed, InvalidSpec, Degraded).
    pub failing: usize,
    pub stale: usize,
}

/// One operator release of one DC (DESIGN section 12).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DcRelease {
    /// Its DC (none serialized on a dashboard of one context).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
    #[serde(flatten)]
    pub release: ReleaseRow,
    /// Its DC takes actions (not read-only, and read).
    pub actions: bool,
}

/// The fleet page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetView {
    /// The doctor's verdicts merged as `doctor --context` merges them.
    pub verdict: String,
    pub headline: String,
    pub reason: String,
    pub badges: Vec<Badge>,
    pub counts: Counts,
    /// This page's rows.
    pub tenants: Vec<FleetRow>,
    /// Tenants the filter keeps, and tenants in all.
    pub shown: usize,
    pub total: usize,
    pub page: usize,
    pub pages: usize,
    pub contexts: Vec<String>,
    pub namespaces: Vec<String>,
    pub phases: Vec<String>,
    /// One DC: its doctor's banner, once its doctor has run (several DCs: their badges).
    pub doctor: Option<DoctorBanner>,
    /// The operator releases of every DC, in the DCs' order.
    pub releases: Vec<DcRelease>,
    /// The releases across DCs, each from the copy written last of the DCs read.
    pub fleet_releases: Vec<FleetReleaseRow>,
}

impl FleetView {
    /// More than one DC: the page shows the DC column, badges and DC filter.
    pub fn across(&self) -> bool {
        self.contexts.len() > 1
    }

    pub fn badge(&self, context: &str) -> Option<&Badge> {
        self.badges.iter().find(|b| b.context == context)
    }
}

fn count<'a>(values: impl Iterator<Item = &'a str>) -> Count {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for value in values {
        *counts.entry(value).or_default() += 1;
    }
    counts.into_iter().map(|(k, n)| (k.to_owned(), n)).collect()
}

/// Merges the DCs (in the order given) into the page `query` asks for.
pub fn merge(dcs: &[DcInput<'_>], query: &FleetQuery, now: Timestamp) -> FleetView {
    let badges: Vec<Badge> = dcs.iter().map(|dc| badge(dc, now)).collect();
    let mut rows: Vec<Candidate<'_>> = Vec::with_capacity(dcs.iter().map(|d| d.rows.len()).sum());
    for (place, (dc, badge)) in dcs.iter().zip(&badges).enumerate() {
        rows.extend(dc.rows.iter().map(|tenant| Candidate {
            dc: place,
            context: dc.context,
            tenant,
            stale: badge.stale,
        }));
    }
    let counts = Counts {
        by_context: dcs
            .iter()
            .map(|dc| (dc.context.to_owned(), dc.rows.len()))
            .collect(),
        by_phase: count(rows.iter().map(|r| r.tenant.list.phase.as_str())),
        by_ring: count(rows.iter().map(|r| r.tenant.list.ring.as_str())),
        by_version: count(rows.iter().map(|r| r.tenant.list.operator_version.as_str())),
        failing: rows.iter().filter(|r| r.concern() == 0).count(),
        stale: rows.iter().filter(|r| r.stale).count(),
    };
    let namespaces: BTreeSet<&str> = rows
        .iter()
        .map(|r| r.tenant.list.namespace.as_str())
        .collect();
    let phases: BTreeSet<&str> = rows.iter().map(|r| r.tenant.list.phase.as_str()).collect();
    let total = rows.len();
    rows.retain(|r| r.matches(query));
    sort(&mut rows, query);
    let shown = rows.len();
    let pages = shown.div_ceil(PAGE_SIZE).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    let tenants: Vec<FleetRow> = rows
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .map(|r| {
            let badge = &badges[r.dc];
            FleetRow {
                context: r.context.to_owned(),
                tenant: r.tenant.clone(),
                rollout_age: r.tenant.rollout_age(now),
                stale: r.stale,
                last_seen: badge.last_seen.clone().filter(|_| badge.stale),
            }
        })
        .collect();
    let FleetVerdict {
        verdict,
        headline,
        reason,
        ..
    } = fleet_verdict(dcs);
    let releases = dcs
        .iter()
        .zip(&badges)
        .flat_map(|(dc, badge)| {
            dc.banner
                .into_iter()
                .flat_map(|b| &b.releases)
                .map(|r| DcRelease {
                    context: dc.context.to_owned(),
                    release: r.clone(),
                    actions: badge.actions,
                })
        })
        .collect();
    let mut fleet_releases: Vec<FleetReleaseRow> = Vec::new();
    for row in dcs
        .iter()
        .filter_map(|dc| dc.banner)
        .flat_map(|b| &b.fleet_releases)
    {
        match fleet_releases.iter_mut().find(|r| r.name == row.name) {
            Some(kept) if kept.updated_at >= row.updated_at => {}
            Some(kept) => *kept = row.clone(),
            None => fleet_releases.push(row.clone()),
        }
    }
    FleetView {
        fleet_releases,
        verdict: verdict.map_or("unknown", Verdict::as_str).to_owned(),
        headline,
        reason,
        badges,
        counts,
        tenants,
        shown,
        total,
        page,
        pages,
        // The one context of a single-context dashboard has no name to show.
        contexts: dcs
            .iter()
            .filter(|dc| !dc.context.is_empty())
            .map(|dc| dc.context.to_owned())
            .collect(),
        namespaces: namespaces.into_iter().map(str::to_owned).collect(),
        phases: phases.into_iter().map(str::to_owned).collect(),
        doctor: match dcs {
            [one] => one.banner.cloned(),
            _ => None,
        },
        releases,
    }
}

/// `doctor --context`'s fleet verdict over the DCs' last verdicts; a DC not read (yet) is
/// named as such, never counted healthy.
fn fleet_verdict(dcs: &[DcInput<'_>]) -> FleetVerdict {
    let pending = ContextError::Failed("not read yet".into());
    let versions: Vec<Vec<String>> = dcs
        .iter()
        .map(|dc| {
            let set: BTreeSet<&str> = dc
                .rows
                .iter()
                .map(|r| r.list.operator_version.as_str())
                .filter(|v| *v != crate::text::NONE)
                .collect();
            set.into_iter().map(str::to_owned).collect()
        })
        .collect();
    let read: Vec<ContextRead<'_>> = dcs
        .iter()
        .zip(&versions)
        .map(|(dc, versions)| ContextRead {
            context: dc.context,
            read: match (dc.health, dc.doctor) {
                (Health::Live, Some(doctor)) => {
                    Ok((doctor.verdict, doctor.reason.as_str(), versions.as_slice()))
                }
                (Health::Down { error, .. }, _) => Err(error),
                _ => Err(&pending),
            },
        })
        .collect();
    across_dcs(&read)
}

fn sort(rows: &mut [Candidate<'_>], query: &FleetQuery) {
    let by_name = |a: &Candidate<'_>, b: &Candidate<'_>| {
        (a.dc, &a.tenant.list.namespace, &a.tenant.list.cluster).cmp(&(
            b.dc,
            &b.tenant.list.namespace,
            &b.tenant.list.cluster,
        ))
    };
    let done = |r: &Candidate<'_>| {
        (r.tenant.up_to_date * 1000)
            .checked_div(r.tenant.up)
            .unwrap_or(1000)
    };
    // Oldest rollout first; tenants without one last.
    let oldest_first =
        |a: Option<Timestamp>, b: Option<Timestamp>| (a.is_none(), a).cmp(&(b.is_none(), b));
    let grouped = query.grouped();
    rows.sort_by(|a, b| {
        let group = if grouped {
            a.dc.cmp(&b.dc)
        } else {
            std::cmp::Ordering::Equal
        };
        let key = match query.sort {
            FleetSort::Health => a.concern().cmp(&b.concern()),
            FleetSort::Context => a.dc.cmp(&b.dc),
            FleetSort::Namespace => a.tenant.list.namespace.cmp(&b.tenant.list.namespace),
            FleetSort::Cluster => a.tenant.list.cluster.cmp(&b.tenant.list.cluster),
            FleetSort::Phase => a.tenant.list.phase.cmp(&b.tenant.list.phase),
            // Least done first, as on the single-DC page.
            FleetSort::Progress => done(a).cmp(&done(b)),
            FleetSort::Age => oldest_first(a.tenant.rollout_since(), b.tenant.rollout_since()),
        };
        group.then(key).then_with(|| by_name(a, b))
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::show::cluster::ListRow;

    fn now() -> Timestamp {
        "2026-05-01T12:00:00Z".parse().unwrap()
    }

    fn row(
        namespace: &str,
        cluster: &str,
        phase: &str,
        ring: &str,
        version: &str,
    ) -> Arc<TenantRow> {
        Arc::new(TenantRow::new(
            ListRow {
                namespace: namespace.into(),
                cluster: cluster.into(),
                phase: phase.into(),
                rollout: "Complete".into(),
                progress: String::new(),
                current: "-".into(),
                ready: "2/2".into(),
                paused: "-".into(),
                ring: ring.into(),
                operator_version: version.into(),
            },
            2,
            2,
            vec!["v1".into()],
            Some("2026-05-01T11:59:00Z".parse().unwrap()),
        ))
    }

    fn doctor(verdict: Verdict) -> DcDoctor {
        DcDoctor {
            verdict,
            reason: format!("{} reason", verdict.as_str()),
        }
    }

    fn names(view: &FleetView) -> Vec<String> {
        view.tenants
            .iter()
            .map(|r| {
                format!(
                    "{}/{}/{}",
                    r.context, r.tenant.list.namespace, r.tenant.list.cluster
                )
            })
            .collect()
    }

    #[test]
    fn rows_of_every_dc_merge_with_their_dc_and_the_unhealthy_lead() {
        let a = vec![
            row("team-a", "shop", "Healthy", "default", "0.5.0"),
            row("team-b", "shop", "Failed", "default", "0.5.0"),
        ];
        let b = vec![
            row("team-a", "shop", "Progressing", "canary", "0.6.0"),
            row("team-c", "web", "Healthy", "default", "0.5.0"),
        ];
        let healthy = doctor(Verdict::Healthy);
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
                health: &Health::Live,
                doctor: Some(&healthy),
                banner: None,
                read_only: false,
                rows: &b,
            },
        ];
        let view = merge(&dcs, &FleetQuery::default(), now());
        assert_eq!(
            names(&view),
            [
                "dc-a/team-b/shop",
                "dc-b/team-a/shop",
                "dc-a/team-a/shop",
                "dc-b/team-c/web"
            ]
        );
        assert_eq!(
            (view.shown, view.total, view.page, view.pages),
            (4, 4, 1, 1)
        );
        assert_eq!(view.verdict, "healthy");
        assert_eq!(
            view.counts.by_context,
            [("dc-a".to_owned(), 2), ("dc-b".to_owned(), 2)]
        );
        assert_eq!(
            view.counts.by_phase,
            [
                ("Failed".to_owned(), 1),
                ("Healthy".to_owned(), 2),
                ("Progressing".to_owned(), 1)
            ]
        );
        assert_eq!(
            view.counts.by_ring,
            [("canary".to_owned(), 1), ("default".to_owned(), 3)]
        );
        assert_eq!(
            view.counts.by_version,
            [("0.5.0".to_owned(), 3), ("0.6.0".to_owned(), 1)]
        );
        assert_eq!(view.counts.failing, 1);
        // The same namespace in two DCs stays two tenants; a filter by DC keeps one.
        let only_b = merge(
            &dcs,
            &FleetQuery {
                context: Some("dc-b".into()),
                ..FleetQuery::default()
            },
            now(),
        );
        assert_eq!(names(&only_b), ["dc-b/team-a/shop", "dc-b/team-c/web"]);
        assert_eq!((only_b.shown, only_b.total), (2, 4));
        // Text finds a DC's name too; ring and operator version filter.
        let text = |q: FleetQuery| names(&merge(&dcs, &q.normalized(), now()));
        assert_eq!(
            text(FleetQuery {
                q: Some("DC-B".into()),
                ..FleetQuery::default()
            })
            .len(),
            2
        );
        assert_eq!(
            text(FleetQuery {
                ring: Some("canary".into()),
                ..FleetQuery::default()
            }),
            ["dc-b/team-a/shop"]
        );
        assert_eq!(
            text(FleetQuery {
                version: Some("0.5.0".into()),
                sort: FleetSort::Namespace,
                ..FleetQuery::default()
            }),
            ["dc-a/team-a/shop", "dc-a/team-b/shop", "dc-b/team-c/web"]
        );
        // Grouped by DC: each DC's rows together, unhealthy first within.
        assert_eq!(
            text(FleetQuery {
                group: Some("dc".into()),
                ..FleetQuery::default()
            }),
            [
                "dc-a/team-b/shop",
                "dc-a/team-a/shop",
                "dc-b/team-a/shop",
                "dc-b/team-c/web"
            ]
        );
        // Another group value is no grouping.
        assert!(
            !FleetQuery {
                group: Some("ring".into()),
                ..FleetQuery::default()
            }
            .normalized()
            .grouped()
        );
    }

    #[test]
    fn each_dc_has_a_badge_its_verdict_or_why_it_cannot_be_read() {
        let rows = vec![row("team-a", "shop", "Healthy", "default", "0.5.0")];
        let infra = doctor(Verdict::Infrastructure);
        let lost_at: Timestamp = "2026-05-01T11:59:18Z".parse().unwrap();
        // (health, doctor, read-only, rows, badge)
        type Case<'a> = (
            Health,
            Option<&'a DcDoctor>,
            bool,
            &'a [Arc<TenantRow>],
            Badge,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                Health::Live,
                Some(&infra),
                false,
                &rows,
                Badge {
                    context: "dc".into(),
                    status: "infrastructure".into(),
                    text: "infrastructure".into(),
                    reason: "infrastructure reason".into(),
                    tenants: 1,
                    stale: false,
                    last_seen: None,
                    actions: true,
                },
            ),
            (
                Health::Live,
                None,
                true,
                &rows,
                Badge {
                    context: "dc".into(),
                    status: "pending".into(),
                    text: "doctor: not run yet".into(),
                    reason: String::new(),
                    tenants: 1,
                    stale: false,
                    last_seen: None,
                    actions: false,
                },
            ),
            (
                Health::Down {
                    error: ContextError::Unauthorized,
                    last_seen: None,
                },
                None,
                false,
                &[],
                Badge {
                    context: "dc".into(),
                    status: "forbidden".into(),
                    text: "Unauthorized".into(),
                    reason: "Unauthorized".into(),
                    tenants: 0,
                    stale: false,
                    last_seen: None,
                    actions: false,
                },
            ),
            (
                Health::Down {
                    error: ContextError::Unreachable("connection refused".into()),
                    last_seen: Some(lost_at),
                },
                Some(&infra),
                false,
                &rows,
                Badge {
                    context: "dc".into(),
                    status: "unreachable".into(),
                    text: "unreachable: connection refused".into(),
                    reason: "connection refused".into(),
                    tenants: 1,
                    stale: true,
                    last_seen: Some("11:59:18 UTC (42s ago)".into()),
                    actions: false,
                },
            ),
            (
                Health::Connecting,
                None,
                false,
                &[],
                Badge {
                    context: "dc".into(),
                    status: "connecting".into(),
                    text: "connecting".into(),
                    reason: "its watches have not listed yet".into(),
                    tenants: 0,
                    stale: false,
                    last_seen: None,
                    actions: false,
                },
            ),
        ];
        for (health, doctor, read_only, rows, want) in cases {
            let dc = DcInput {
                context: "dc",
                health: &health,
                doctor,
                banner: None,
                read_only,
                rows,
            };
            assert_eq!(badge(&dc, now()), want, "{health:?}");
        }
    }

    #[test]
    fn a_dc_that_dropped_keeps_its_rows_stale_and_is_never_healthy() {
        let a = vec![row("team-a", "shop", "Healthy", "default", "0.5.0")];
        let b = vec![row("team-b", "shop", "Healthy", "default", "0.5.0")];
        let healthy = doctor(Verdict::Healthy);
        let down = Health::Down {
            error: ContextError::Unreachable("connection refused".into()),
            last_seen: Some("2026-05-01T11:58:00Z".parse().unwrap()),
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
                // Its last verdict before it dropped does not count.
                doctor: Some(&healthy),
                banner: None,
                read_only: false,
                rows: &b,
            },
        ];
        let view = merge(&dcs, &FleetQuery::default(), now());
        // The stale row leads (not known healthy), with when it was last seen.
        assert_eq!(names(&view), ["dc-b/team-b/shop", "dc-a/team-a/shop"]);
        let stale = &view.tenants[0];
        assert!(stale.stale);
        assert_eq!(stale.last_seen.as_deref(), Some("11:58:00 UTC (2m ago)"));
        assert!(!view.tenants[1].stale && view.tenants[1].last_seen.is_none());
        assert_eq!(view.counts.stale, 1);
        assert_eq!(view.verdict, "unknown");
        assert!(view.reason.contains("not read: dc-b"), "{}", view.reason);
        assert!(!view.badge("dc-b").unwrap().actions);
        assert!(view.badge("dc-a").unwrap().actions);
    }

    #[test]
    fn the_fleet_is_paged_and_the_links_keep_the_query() {
        let many: Vec<Arc<TenantRow>> = (0..450)
            .map(|i| {
                row(
                    &format!("team-{i:03}"),
                    "shop",
                    "Healthy",
                    "default",
                    "0.5.0",
                )
            })
            .collect();
        let healthy = doctor(Verdict::Healthy);
        let dcs = [DcInput {
            context: "dc-a",
            health: &Health::Live,
            doctor: Some(&healthy),
            banner: None,
            read_only: false,
            rows: &many,
        }];
        let page = |n: Option<usize>| {
            merge(
                &dcs,
                &FleetQuery {
                    page: n,
                    ..FleetQuery::default()
                },
                now(),
            )
        };
        let first = page(None);
        assert_eq!((first.tenants.len(), first.page, first.pages), (200, 1, 3));
        assert_eq!(first.tenants[0].tenant.list.namespace, "team-000");
        let last = page(Some(3));
        assert_eq!(last.tenants.len(), 50);
        assert_eq!(last.tenants[0].tenant.list.namespace, "team-400");
        // Past the end: the last page; 0: the first.
        assert_eq!(page(Some(9)).page, 3);
        assert_eq!(page(Some(0)).page, 1);
        let query = FleetQuery {
            context: Some("dc a".into()),
            sort: FleetSort::Age,
            group: Some("dc".into()),
            ..FleetQuery::default()
        };
        assert_eq!(
            query.with_page(2),
            "?context=dc%20a&group=dc&sort=age&page=2"
        );
    }

    #[test]
    fn actions_are_refused_where_the_dc_cannot_be_seen() {
        assert_eq!(Health::Live.refusal(), None);
        assert_eq!(
            Health::Connecting.refusal().as_deref(),
            Some("not read yet (connecting)")
        );
        let down = Health::Down {
            error: ContextError::Forbidden("cannot list expressclusters".into()),
            last_seen: None,
        };
        assert_eq!(
            down.refusal().as_deref(),
            Some("cannot be read (forbidden: cannot list expressclusters)")
        );
    }
}
