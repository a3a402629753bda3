//! A person's requests on a plan: written on every copy reached, as `ID@instant`. Pause and
//! abort take effect at once, with no driver running: the command takes the step itself (the
//! releases paused or rolled back, the phase written into every copy). Approve and resume are
//! acted on by the running driver, or by the next `run NAME`.

use std::collections::BTreeMap;

use express_api::fleet_release::{
    ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK, ANNOTATION_APPROVE, ANNOTATION_PAUSE,
    ANNOTATION_RESUME, FleetReleaseSpec, Request,
};
use k8s_openapi::jiff::Timestamp;

use super::dcs::Dcs;
use super::drive::once;
use crate::contexts::across::ContextError;
use crate::write::control::request_id;
use crate::write::fleet_release as write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    Pause,
    Resume,
    Approve,
    Abort { rollback: bool },
}

impl Ask {
    fn annotation(self) -> &'static str {
        match self {
            Ask::Pause => ANNOTATION_PAUSE,
            Ask::Resume => ANNOTATION_RESUME,
            Ask::Approve => ANNOTATION_APPROVE,
            Ask::Abort { .. } => ANNOTATION_ABORT,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Ask::Pause => "pause",
            Ask::Resume => "resume",
            Ask::Approve => "approve",
            Ask::Abort { rollback: false } => "abort",
            Ask::Abort { rollback: true } => "abort --rollback",
        }
    }

    /// Taken at once by the command, not left to a driver.
    pub fn at_once(self) -> bool {
        matches!(self, Ask::Pause | Ask::Abort { .. })
    }
}

/// What a request did: its id, the phase the step wrote (pause and abort), the step's notices,
/// and each DC it had to change that it could not reach, with why.
pub struct Asked {
    pub id: String,
    pub phase: Option<express_api::fleet_release::FleetPhase>,
    pub notices: Vec<String>,
    pub unreached: Vec<(String, String)>,
}

impl Asked {
    /// The line saying what was asked, as the CLI prints it and the dashboard shows it.
    pub fn summary(&self, name: &str, ask: Ask) -> String {
        format!(
            "fleetrelease/{name}: {} requested (id {}){}",
            ask.name(),
            self.id,
            match (self.phase, ask.at_once()) {
                (Some(phase), _) => format!(": {phase}"),
                (None, false) =>
                    ": acted on by the running driver, or the next `fleet-release run NAME`".into(),
                _ => String::new(),
            }
        )
    }

    /// The DCs not written, in words (None: every DC was).
    pub fn not_written(&self, ask: Ask) -> Option<String> {
        (!self.unreached.is_empty()).then(|| {
            format!(
                "{} not written in {} (they cannot be reached; ask again, or the next driver acts there)",
                ask.name(),
                self.unreached
                    .iter()
                    .map(|(context, _)| context.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// Writes the request on every copy, and for pause and abort takes the step. The CLI and the
/// dashboard both call this.
/// `quiet`: the step's own lines are not printed (the dashboard answers with its notices).
pub async fn request(dcs: &Dcs, spec: &FleetReleaseSpec, ask: Ask, quiet: bool) -> Asked {
    let request = Request {
        id: request_id(),
        at: Timestamp::now(),
    };
    let mut annotations = BTreeMap::from([(ask.annotation(), request.to_value())]);
    if let Ask::Abort { rollback } = ask {
        annotations.insert(ANNOTATION_ABORT_ROLLBACK, rollback.to_string());
    }
    let (namespace, name) = (dcs.namespace.as_str(), dcs.name.as_str());
    let mut unreached: Vec<(String, String)> = Vec::new();
    for (context, result) in dcs
        .each(|_, client| {
            let (namespace, name) = (namespace.to_owned(), name.to_owned());
            let annotations = annotations.clone();
            async move {
                write::annotate(&client, &namespace, &name, &annotations)
                    .await
                    .map_err(ContextError::Failed)
            }
        })
        .await
    {
        if let Err(why) = result {
            unreached.push((context, why.to_string()));
        }
    }
    let mut asked = Asked {
        id: request.id,
        phase: None,
        notices: Vec::new(),
        unreached,
    };
    if ask.at_once() {
        let (decided, missed) = once(dcs, spec, quiet).await;
        asked.notices = decided.notices.iter().map(|n| n.message.clone()).collect();
        asked.phase = Some(decided.status.phase());
        for context in missed {
            if !asked.unreached.iter().any(|(c, _)| *c == context) {
                asked
                    .unreached
                    .push((context, "the step could not act there".into()));
            }
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_request_did_is_said_once_for_the_cli_and_the_dashboard() {
        let mut asked = Asked {
            id: "cli-1".into(),
            phase: None,
            notices: Vec::new(),
            unreached: Vec::new(),
        };
        assert_eq!(
            asked.summary("to-canary", Ask::Approve),
            "fleetrelease/to-canary: approve requested (id cli-1): acted on by the running \
             driver, or the next `fleet-release run NAME`"
        );
        assert_eq!(asked.not_written(Ask::Approve), None);
        asked.phase = Some(express_api::fleet_release::FleetPhase::Paused);
        asked.unreached = vec![
            ("dc-b".into(), "timed out".into()),
            ("dc-c".into(), "refused".into()),
        ];
        assert_eq!(
            asked.summary("to-canary", Ask::Pause),
            "fleetrelease/to-canary: pause requested (id cli-1): Paused"
        );
        assert_eq!(
            asked.not_written(Ask::Abort { rollback: true }).as_deref(),
            Some(
                "abort --rollback not written in dc-b, dc-c (they cannot be reached; ask again, \
                 or the next driver acts there)"
            )
        );
    }
}
