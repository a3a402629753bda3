//! A FleetRelease's occurrences, told by one DC of the plan, its teller: a stage waiting for
//! approval, a DC failed, unreachable or with its doctor at infrastructure, the plan failed,
//! aborted or done.

use express_api::fleet_release::{DcState, DcStatus, FleetPhase, FleetRelease};
use express_api::verdict::Verdict;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::base::{Base, fact, instant, rings, subscribed};
use crate::config::ANNOTATION_NOTIFY;
use crate::occurrence::{Fact, Occurrence, Subject, Trigger};

/// The DC that tells what a FleetRelease shows: the first of the plan, in stage order, that its
/// status does not mark unreachable. Every DC holds a copy of the plan and its status; each
/// reads the same teller from it, and only that DC's leader tells.
pub fn fleet_teller(plan: &FleetRelease) -> Option<&str> {
    let status = plan.status.as_ref();
    plan.spec
        .contexts()
        .map(|(_, context)| context)
        .find(|context| {
            status
                .and_then(|s| s.dc(context))
                .is_none_or(|dc| dc.state != DcState::Unknown)
        })
}

/// What a FleetRelease's status shows, when `dc` (this DC's name, as the notifications
/// configuration gives it) is its teller, or when no name is given (then every DC tells).
pub fn fleet_release(plan: &FleetRelease, dc: Option<&str>) -> Vec<Occurrence> {
    let Some(status) = &plan.status else {
        return Vec::new();
    };
    if dc.is_some() && fleet_teller(plan) != dc {
        return Vec::new();
    }
    let name = plan.name_any();
    let base = Base {
        subject: Subject {
            kind: "FleetRelease".into(),
            namespace: plan.metadata.namespace.clone(),
            name: name.clone(),
        },
        uid: plan.uid().unwrap_or_default(),
        subscribed: subscribed(plan.annotations().get(ANNOTATION_NOTIFY)),
    };
    let stages = plan.spec.stages.len();
    let stage_index = status.stage as usize;
    let stage_name = plan
        .spec
        .stages
        .get(stage_index)
        .map(|s| s.name.clone())
        .unwrap_or_default();
    let build = rings(
        &plan.spec.from_ring,
        &plan.spec.to_ring,
        plan.spec.version.as_deref(),
    );
    let states = fact(
        "DCs",
        status
            .data_centers
            .iter()
            .map(|d| format!("{} {}", d.context, d.state.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let updated = instant(status.updated_at.as_ref());
    let seen = Plan {
        plan,
        status,
        name,
        base,
        build,
        states,
        updated,
        stages,
        stage_index,
        stage_name,
    };
    let mut found: Vec<Occurrence> = seen.waiting().into_iter().collect();
    found.extend(seen.data_centers());
    found.extend(seen.end());
    found
}

/// One plan as its occurrences read it.
struct Plan<'a> {
    plan: &'a FleetRelease,
    status: &'a express_api::FleetReleaseStatus,
    name: String,
    base: Base,
    build: Fact,
    states: Fact,
    updated: Timestamp,
    stages: usize,
    stage_index: usize,
    stage_name: String,
}

impl Plan<'_> {
    /// The next stage waits for a person's approval.
    fn waiting(&self) -> Option<Occurrence> {
        let Plan {
            plan,
            status,
            name,
            base,
            build,
            states,
            updated,
            stages,
            stage_index,
            stage_name,
        } = self;
        let (updated, stages, stage_index) = (*updated, *stages, *stage_index);
        if status.phase() != FleetPhase::WaitingApproval {
            return None;
        }
        let contexts = plan
            .spec
            .stages
            .get(stage_index)
            .map(|s| s.contexts.join(", "))
            .unwrap_or_default();
        let since = status
            .soak
            .as_ref()
            .and_then(|s| s.last_sample_at.as_ref())
            .map(|t| t.0)
            .unwrap_or(updated);
        Some(base.occurrence(
            Trigger::FleetWaitingApproval,
            format!("stage {stage_index}"),
            since,
            format!(
                "FleetRelease {name}: stage {} of {stages} ({stage_name}) waits for approval",
                stage_index + 1
            ),
            vec![
                build.clone(),
                fact("stage", format!("{stage_name}: {contexts}")),
                states.clone(),
            ],
            Some(format!("kubectl express fleet-release approve {name}")),
        ))
    }

    /// Each DC failed, rolled back or unreachable.
    fn data_centers(&self) -> Vec<Occurrence> {
        let Plan {
            status,
            name,
            base,
            build,
            updated,
            ..
        } = self;
        let updated = *updated;
        let mut found = Vec::new();
        for dc in &status.data_centers {
            let failed = matches!(dc.state, DcState::Failed | DcState::RolledBack);
            if !failed && dc.state != DcState::Unknown {
                found.extend(self.infrastructure(dc));
                continue;
            }
            let (trigger, title) = if failed {
                (
                    Trigger::FleetDcFailed,
                    format!(
                        "FleetRelease {name}: DC {} {}",
                        dc.context,
                        if dc.state == DcState::RolledBack {
                            "rolled back"
                        } else {
                            "failed"
                        }
                    ),
                )
            } else {
                (
                    Trigger::FleetDcUnreachable,
                    format!("FleetRelease {name}: DC {} cannot be read", dc.context),
                )
            };
            let mut facts = vec![build.clone(), fact("DC", dc.context.clone())];
            if let Some(release) = &dc.release {
                facts.push(fact(
                    "its release",
                    format!(
                        "{} at wave {}, {} tenants moved",
                        release.phase,
                        release.wave + 1,
                        release.moved_tenants
                    ),
                ));
            }
            if let Some(verdict) = dc.verdict {
                facts.push(fact("doctor", verdict.to_string()));
            }
            facts.push(fact("why", dc.message.clone().unwrap_or_default()));
            found.push(base.occurrence(
                trigger,
                format!("{} stage {}", dc.context, dc.stage),
                if failed {
                    instant(dc.started_at.as_ref()).max(updated)
                } else {
                    updated
                },
                title,
                facts,
                Some(format!("kubectl express fleet-release {name}")),
            ));
        }
        found
    }

    /// A DC that answers while its doctor says `infrastructure`: once a stage, and only while
    /// the plan runs (a verdict is kept as the soak last read it, so an ended plan's would be
    /// stale). A DC failed or unreadable is told by its own trigger, with the verdict among its
    /// facts.
    fn infrastructure(&self, dc: &DcStatus) -> Option<Occurrence> {
        if dc.verdict != Some(Verdict::Infrastructure) || self.status.phase().is_final() {
            return None;
        }
        let Plan {
            name,
            base,
            build,
            updated,
            ..
        } = self;
        Some(base.occurrence(
            Trigger::FleetDcInfrastructure,
            format!("{} stage {}", dc.context, dc.stage),
            *updated,
            format!(
                "FleetRelease {name}: DC {}'s doctor says infrastructure",
                dc.context
            ),
            vec![
                build.clone(),
                fact("DC", dc.context.clone()),
                fact("its state", dc.state.as_str().to_string()),
                fact(
                    "who to engage",
                    "the platform team of the DC: its API server, etcd or nodes, not the build"
                        .to_string(),
                ),
                fact("why", dc.message.clone().unwrap_or_default()),
            ],
            Some(format!("kubectl express doctor --context {}", dc.context)),
        ))
    }

    /// The plan's end: failed, aborted, done.
    fn end(&self) -> Option<Occurrence> {
        let Plan {
            status,
            name,
            base,
            build,
            states,
            updated,
            ..
        } = self;
        let phase = status.phase();
        let (trigger, verb) = match phase {
            FleetPhase::Succeeded => (Trigger::FleetDone, "succeeded in every DC"),
            FleetPhase::Failed => (Trigger::FleetFailed, "failed: no later stage starts"),
            FleetPhase::Aborted => (Trigger::FleetAborted, "was aborted"),
            FleetPhase::RolledBack => (
                Trigger::FleetAborted,
                "was aborted with rollback: every DC released went back",
            ),
            _ => return None,
        };
        Some(
            base.occurrence(
                trigger,
                phase.as_str().into(),
                *updated,
                format!("FleetRelease {name} {verb}"),
                vec![
                    build.clone(),
                    states.clone(),
                    fact("why", status.message.clone().unwrap_or_default()),
                ],
                (trigger != Trigger::FleetDone)
                    .then(|| format!("kubectl express fleet-release {name}")),
            ),
        )
    }
}
