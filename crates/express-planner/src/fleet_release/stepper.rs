//! The step's working state: the status being written, the actions and notices so far, and
//! what every gate asks of the snapshot (a DC's release, whether it can be read, its status
//! entry), with the edits more than one gate makes.

use express_api::fleet_release::{DcRelease, DcState, DcStatus, FleetPhase, FleetReleaseStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::model::{DcSeen, FleetAction, FleetSnapshot, ReleaseSeen};
use crate::gates::Notice;

pub(super) struct Stepper<'a> {
    pub(super) s: &'a FleetSnapshot<'a>,
    pub(super) status: FleetReleaseStatus,
    pub(super) actions: Vec<FleetAction>,
    pub(super) notices: Vec<Notice>,
    /// The phase's reason, set by the gate that decides the phase.
    pub(super) message: Option<String>,
}

impl<'a> Stepper<'a> {
    pub(super) fn new(s: &'a FleetSnapshot<'a>) -> Stepper<'a> {
        Stepper {
            s,
            status: s.status.clone(),
            actions: Vec::new(),
            notices: Vec::new(),
            message: None,
        }
    }

    pub(super) fn notice(&mut self, warning: bool, reason: &'static str, message: String) {
        self.notices.push(Notice {
            warning,
            reason,
            message,
        });
    }

    pub(super) fn now(&self) -> Timestamp {
        self.s.now
    }

    pub(super) fn seen(&self, context: &str) -> Option<&'a DcSeen> {
        self.s.dcs.iter().find(|d| d.context == context)
    }

    /// Its release, when it could be read.
    pub(super) fn release(&self, context: &str) -> Option<&'a ReleaseSeen> {
        self.seen(context)?.read.as_ref().ok()?.release.as_ref()
    }

    pub(super) fn unreadable(&self, context: &str) -> Option<&'a str> {
        match self.seen(context).map(|d| &d.read) {
            Some(Ok(_)) => None,
            Some(Err(why)) => Some(why),
            None => Some("not read"),
        }
    }

    pub(super) fn dc_mut(&mut self, context: &str) -> &mut DcStatus {
        let index = match self
            .status
            .data_centers
            .iter()
            .position(|d| d.context == context)
        {
            Some(index) => index,
            None => {
                self.status.data_centers.push(DcStatus {
                    context: context.to_owned(),
                    stage: self.s.spec.stage_of(context).unwrap_or(0) as u32,
                    ..DcStatus::default()
                });
                self.status.data_centers.len() - 1
            }
        };
        &mut self.status.data_centers[index]
    }

    pub(super) fn set_state(&mut self, context: &str, state: DcState, message: Option<String>) {
        let dc = self.dc_mut(context);
        dc.state = state;
        dc.message = message;
    }

    pub(super) fn phase(&mut self, phase: FleetPhase, message: String) {
        self.status.phase = Some(phase);
        self.message = Some(message);
    }

    pub(super) fn stage_contexts(&self, stage: usize) -> &'a [String] {
        self.s
            .spec
            .stages
            .get(stage)
            .map_or(&[][..], |s| s.contexts.as_slice())
    }

    /// DCs whose release exists and is not over.
    pub(super) fn in_flight(&self) -> Vec<&'a str> {
        self.s
            .spec
            .contexts()
            .map(|(_, c)| c)
            .filter(|c| self.release(c).is_some_and(|r| !r.phase.is_final()))
            .collect()
    }

    /// Every DC in the status, in stage order, with what its release shows; unreadable ones
    /// keep what was last known and say why.
    pub(super) fn observe(&mut self) {
        let contexts: Vec<&str> = self.s.spec.contexts().map(|(_, c)| c).collect();
        self.status
            .data_centers
            .retain(|d| contexts.contains(&d.context.as_str()));
        for context in contexts {
            let seen = self.release(context).map(|r| DcRelease {
                phase: r.phase,
                wave: r.wave,
                moved_tenants: r.moved,
            });
            let succeeded_at = self.release(context).and_then(|r| r.finished_at);
            let unreadable = self.unreadable(context);
            let verdict = self
                .seen(context)
                .and_then(|d| d.read.as_ref().ok())
                .and_then(|r| r.verdict.as_ref())
                .and_then(|v| v.as_ref().ok())
                .copied();
            let dc = self.dc_mut(context);
            if let Some(release) = seen {
                dc.release = Some(release);
            }
            if let Some(at) = succeeded_at {
                dc.succeeded_at = Some(Time(at));
            }
            if verdict.is_some() {
                dc.verdict = verdict;
            }
            if let Some(why) = unreadable {
                // A DC whose stage passed its soak is not needed again.
                if dc.state != DcState::Succeeded {
                    dc.state = DcState::Unknown;
                }
                dc.message = Some(format!("cannot be read: {why}"));
            }
        }
        let order = |d: &DcStatus| self.s.spec.contexts().position(|(_, c)| c == d.context);
        let mut dcs = std::mem::take(&mut self.status.data_centers);
        dcs.sort_by_key(order);
        self.status.data_centers = dcs;
        self.status.updated_at = Some(Time(self.now()));
    }
}
