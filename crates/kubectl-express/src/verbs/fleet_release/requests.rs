//! A person's requests on a plan: written on every copy reached, as `ID@instant`. Pause and
//! abort take effect at once, with no driver running: the command takes the step itself (the
//! releases paused or rolled back, the phase written into every copy). Approve and resume are
//! acted on by the running driver, or by the next `run NAME`.

use std::collections::BTreeMap;
use std::process::ExitCode;

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

    fn name(self) -> &'static str {
        match self {
            Ask::Pause => "pause",
            Ask::Resume => "resume",
            Ask::Approve => "approve",
            Ask::Abort { rollback: false } => "abort",
            Ask::Abort { rollback: true } => "abort --rollback",
        }
    }

    /// Taken at once by the command, not left to a driver.
    fn at_once(self) -> bool {
        matches!(self, Ask::Pause | Ask::Abort { .. })
    }
}

/// Writes the request on every copy, and for pause and abort takes the step: exit 0 once
/// written, 1 naming each DC it had to change that could not be reached.
pub async fn ask(dcs: &Dcs, spec: &FleetReleaseSpec, ask: Ask) -> ExitCode {
    let request = Request {
        id: request_id(),
        at: Timestamp::now(),
    };
    let mut annotations = BTreeMap::from([(ask.annotation(), request.to_value())]);
    if let Ask::Abort { rollback } = ask {
        annotations.insert(ANNOTATION_ABORT_ROLLBACK, rollback.to_string());
    }
    let (namespace, name) = (dcs.namespace.as_str(), dcs.name.as_str());
    let mut unreached: Vec<String> = Vec::new();
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
            eprintln!(
                "kubectl-express fleet-release {}: {context}: {why}",
                ask.name()
            );
            unreached.push(context);
        }
    }
    let mut phase = None;
    if ask.at_once() {
        let (decided, missed) = once(dcs, spec, false).await;
        for notice in &decided.notices {
            println!("{}", notice.message);
        }
        phase = Some(decided.status.phase());
        for context in missed {
            if !unreached.contains(&context) {
                unreached.push(context);
            }
        }
    }
    println!(
        "fleetrelease/{name}: {} requested (id {}){}",
        ask.name(),
        request.id,
        match (phase, ask.at_once()) {
            (Some(phase), _) => format!(": {phase}"),
            (None, false) =>
                ": acted on by the running driver, or the next `fleet-release run NAME`".into(),
            _ => String::new(),
        }
    );
    if unreached.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "kubectl-express fleet-release {}: not written in {} (they cannot be reached; ask again, or the next driver acts there)",
            ask.name(),
            unreached.join(", ")
        );
        ExitCode::FAILURE
    }
}
