//! One tenant as a row of the fleet page (the `list` verb's row and what the page adds), and
//! the doctor's banner of a DC with its operator releases.

use std::collections::BTreeSet;
use std::sync::Arc;

use express_api::{NodeRef, Objects};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::shown::age;
use crate::show::cluster::{self, ListRow};
use express_client::read::live::{Changed, Stores};

/// One tenant on the fleet page: the `list` verb's row, and what the page adds to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRow {
    #[serde(flatten)]
    pub list: ListRow,
    /// Up nodes whose pod runs their desired revision.
    pub up_to_date: usize,
    /// Nodes that are up (not intentionally down).
    pub up: usize,
    /// The Express versions the nodes' pods run, sorted.
    pub versions: Vec<String>,
    /// When the rollout started (while active) or finished: its age is read when the row is
    /// shown, so that a row stays valid until its tenant changes.
    #[serde(skip)]
    rollout_since: Option<Timestamp>,
}

impl TenantRow {
    /// "3/4": nodes on their desired revision out of the nodes up.
    pub fn progress(&self) -> String {
        format!("{}/{}", self.up_to_date, self.up)
    }

    /// When its rollout started (while active) or finished.
    pub fn rollout_since(&self) -> Option<Timestamp> {
        self.rollout_since
    }

    /// How long ago, at `now`, its rollout started (while active) or finished.
    pub fn rollout_age(&self, now: Timestamp) -> Option<String> {
        age(now, self.rollout_since)
    }

    /// A row from its parts, its rollout `rollout_since`.
    #[cfg(test)]
    pub(crate) fn new(
        list: ListRow,
        up_to_date: usize,
        up: usize,
        versions: Vec<String>,
        rollout_since: Option<Timestamp>,
    ) -> TenantRow {
        TenantRow {
            list,
            up_to_date,
            up,
            versions,
            rollout_since,
        }
    }

    /// Whether a column (versions included) contains `lowercase`, whatever its case.
    pub(crate) fn mentions(&self, lowercase: &str) -> bool {
        let row = &self.list;
        [
            &row.namespace,
            &row.cluster,
            &row.phase,
            &row.rollout,
            &row.paused,
            &row.ring,
            &row.operator_version,
        ]
        .into_iter()
        .chain(&self.versions)
        .any(|cell| cell.to_lowercase().contains(lowercase))
    }
}

/// A row as a page shows it at a time: the row and its rollout's age then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownRow {
    #[serde(flatten)]
    pub row: TenantRow,
    pub rollout_age: Option<String>,
}

impl ShownRow {
    pub fn at(row: TenantRow, now: Timestamp) -> ShownRow {
        ShownRow {
            rollout_age: row.rollout_age(now),
            row,
        }
    }
}

/// The doctor's verdict and the checks that are not ok, for the banner.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorBanner {
    pub verdict: String,
    pub reason: String,
    pub checks: Vec<DoctorCheck>,
    /// The operator's releases (DESIGN section 12), read with the doctor's other inputs.
    pub releases: Vec<ReleaseRow>,
    /// The releases across DCs this DC holds a copy of (DESIGN section 14).
    #[serde(rename = "fleetReleases")]
    pub fleet_releases: Vec<FleetReleaseRow>,
}

/// A release across DCs as one DC's copy has it: its phase, and each DC's state.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetReleaseRow {
    pub name: String,
    pub phase: String,
    pub message: String,
    /// When a driver last wrote the copy: across DCs the newest copy is shown.
    pub updated_at: Option<String>,
    /// The one line a person needs first: the DC in trouble or the stage waiting (empty: none).
    pub attention: String,
    pub data_centers: Vec<FleetDcRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetDcRow {
    pub stage: String,
    pub context: String,
    pub state: String,
    /// Its own release's phase and wave ("Progressing, wave 2"), or "-".
    pub release: String,
}

impl FleetReleaseRow {
    pub fn of(plan: &express_api::FleetRelease) -> FleetReleaseRow {
        let status = plan.status.clone().unwrap_or_default();
        FleetReleaseRow {
            name: plan.metadata.name.clone().unwrap_or_default(),
            phase: status.phase().as_str().to_owned(),
            message: status.message.clone().unwrap_or_default(),
            updated_at: status.updated_at.as_ref().map(|t| t.0.to_string()),
            // The time only counts the soak down, which the line does not say.
            attention: super::fleet_release::FleetReleaseView::of(
                plan,
                &[],
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            )
            .attention,
            data_centers: plan
                .spec
                .contexts()
                .map(|(stage, context)| {
                    let dc = status.dc(context);
                    FleetDcRow {
                        stage: plan.spec.stages[stage].name.clone(),
                        context: context.to_owned(),
                        state: dc.map_or("Waiting", |d| d.state.as_str()).to_owned(),
                        release: dc.and_then(|d| d.release.as_ref()).map_or_else(
                            || "-".to_owned(),
                            |r| format!("{}, wave {}", r.phase, r.wave + 1),
                        ),
                    }
                })
                .collect(),
        }
    }
}

/// One OperatorRelease on the fleet page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRow {
    pub name: String,
    pub from_ring: String,
    pub to_ring: String,
    pub phase: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorCheck {
    pub name: String,
    pub status: String,
    pub summary: String,
    pub evidence: Vec<String>,
}

impl DoctorBanner {
    pub fn from_report(
        report: &express_triage::Report,
        releases: &[express_triage::ReleaseSeen],
        fleet_releases: &[express_api::FleetRelease],
    ) -> DoctorBanner {
        DoctorBanner {
            fleet_releases: fleet_releases.iter().map(FleetReleaseRow::of).collect(),
            releases: releases
                .iter()
                .map(|r| ReleaseRow {
                    name: r.name.clone(),
                    from_ring: r.from_ring.clone(),
                    to_ring: r.to_ring.clone(),
                    phase: r.phase.to_string(),
                    message: r.message.clone().unwrap_or_default(),
                })
                .collect(),
            verdict: report.verdict.as_str().to_owned(),
            reason: report.reason.clone(),
            checks: report
                .checks
                .iter()
                .filter(|c| c.status != express_triage::Status::Ok)
                .map(|c| DoctorCheck {
                    name: c.name.to_owned(),
                    status: c.status.as_str().to_owned(),
                    summary: c.summary.clone(),
                    evidence: c.evidence.clone(),
                })
                .collect(),
        }
    }
}

/// Every tenant of one DC as a row, by namespace then cluster, each built from its own
/// namespace's objects (so the cost grows with the fleet, not with its square).
#[cfg(test)]
pub fn rows(objects: &Objects, operator_namespace: &str) -> Vec<Arc<TenantRow>> {
    rows_by_namespace(objects, operator_namespace)
        .into_values()
        .flatten()
        .collect()
}

/// The rows of every namespace that has a tenant, by namespace.
fn rows_by_namespace(
    objects: &Objects,
    operator_namespace: &str,
) -> std::collections::BTreeMap<String, Vec<Arc<TenantRow>>> {
    cluster::by_namespace(objects, operator_namespace)
        .into_iter()
        .map(|(namespace, group)| {
            let rows = namespace_rows(&group, &namespace, operator_namespace);
            (
                namespace,
                rows.into_iter().map(Arc::new).collect::<Vec<_>>(),
            )
        })
        .filter(|(_, rows)| !rows.is_empty())
        .collect()
}

/// The rows of one namespace's objects (with the operator-wide control ConfigMap).
fn namespace_rows(group: &Objects, namespace: &str, operator_namespace: &str) -> Vec<TenantRow> {
    cluster::namespace_rows(group, operator_namespace)
        .into_iter()
        .map(|list| {
            let nodes = group.nodes_of(namespace, &list.cluster);
            tenant_row(list, group, &nodes)
        })
        .collect()
}

/// A DC's rows kept by namespace, so that a change redraws the rows of the namespaces it
/// touched and shares the others (the dashboard's redraw of one tenant costs that tenant).
#[derive(Default)]
pub struct DcRows {
    seen: Option<express_client::read::live::Seen>,
    by_namespace: std::collections::BTreeMap<String, Vec<Arc<TenantRow>>>,
    all: Arc<Vec<Arc<TenantRow>>>,
}

impl DcRows {
    /// The rows of what `stores` hold now, rebuilding only those of the namespaces changed
    /// since the last call.
    pub fn refresh(
        &mut self,
        stores: &Stores,
        operator_namespace: &str,
    ) -> Arc<Vec<Arc<TenantRow>>> {
        let (seen, changed) = stores.changes_since(self.seen.as_ref());
        match changed {
            Changed::Namespaces(namespaces) if namespaces.is_empty() => {}
            Changed::Namespaces(namespaces) => {
                for namespace in namespaces.into_iter().flatten() {
                    let group = stores.objects_in(&namespace);
                    let rows = namespace_rows(&group, &namespace, operator_namespace);
                    if rows.is_empty() {
                        self.by_namespace.remove(&namespace);
                    } else {
                        self.by_namespace
                            .insert(namespace, rows.into_iter().map(Arc::new).collect());
                    }
                }
                self.all = Arc::new(self.by_namespace.values().flatten().cloned().collect());
            }
            Changed::Everything => {
                self.by_namespace = rows_by_namespace(&stores.objects(), operator_namespace);
                self.all = Arc::new(self.by_namespace.values().flatten().cloned().collect());
            }
        }
        self.seen = Some(seen);
        self.all.clone()
    }
}

pub(super) fn tenant_row(list: ListRow, group: &Objects, nodes: &[NodeRef<'_>]) -> TenantRow {
    let express_cluster = group.express_cluster(&list.namespace, &list.cluster);
    let rollout = express_cluster
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.rollout.as_ref());
    let since = rollout.and_then(|r| {
        let active = r.state.is_some_and(|s| s.is_active());
        let time = if active {
            r.started_at.as_ref()
        } else {
            r.finished_at.as_ref().or(r.started_at.as_ref())
        };
        time.map(|t| t.0)
    });
    let up: Vec<&NodeRef<'_>> = nodes.iter().filter(|n| n.spec().up).collect();
    let versions: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.status()?.running_version.clone())
        .collect();
    TenantRow {
        up_to_date: up
            .iter()
            .filter(|n| cluster::on_desired_revision(n))
            .count(),
        up: up.len(),
        versions: versions.into_iter().collect(),
        rollout_since: since,
        list,
    }
}
