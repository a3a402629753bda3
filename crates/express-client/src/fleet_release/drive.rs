//! Driving a plan: read every DC, take one pure step, act on the DCs' releases, write the
//! fleet's status into every copy reached, print what happened; again until the plan ends,
//! pauses, reaches an approval gate, or the time given runs out. Killed anywhere, the next
//! driver (any machine) takes the same steps from the DCs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use express_api::fleet_release::{DcState, FleetPhase, FleetReleaseSpec, FleetReleaseStatus};
use express_planner::fleet_release::{FleetSnapshot, FleetStep, step, verdicts_due};
use k8s_openapi::jiff::Timestamp;

use super::dcs::{Dcs, Reading};
use crate::contexts::across::ContextError;
use crate::exit::Code;
use crate::read::fleet_release::merged;
use crate::write::fleet_release as write;

/// The exit code a status gives (an Argo Workflow step retries on 4 and 5): 1 failed, then 4
/// a DC unread, then 3 held, then 5 not over.
pub fn exit_code(status: &FleetReleaseStatus, at_timeout: bool) -> Option<Code> {
    let phase = status.phase();
    if phase == FleetPhase::Succeeded {
        return Some(Code::Done);
    }
    if phase.is_failure() {
        return Some(Code::Failed);
    }
    let stops_here = matches!(phase, FleetPhase::Paused | FleetPhase::WaitingApproval);
    if !at_timeout && !stops_here {
        return None;
    }
    let unread = status
        .data_centers
        .iter()
        .any(|d| d.state == DcState::Unknown);
    Some(if unread {
        Code::Incomplete
    } else if phase == FleetPhase::Inconclusive {
        Code::Inconclusive
    } else {
        Code::Later
    })
}

/// One step over the DCs: read, decide, act, write. Returns the step and the DCs that could
/// not be written to.
pub async fn once(dcs: &Dcs, spec: &FleetReleaseSpec, quiet: bool) -> (FleetStep, Vec<String>) {
    let readings = dcs.read().await;
    let copies: Vec<_> = readings
        .iter()
        .filter_map(|r| r.read.as_ref().ok()?.0.as_ref())
        .collect();
    let (status, requests) = merged(&copies);
    let now = Timestamp::now();
    let unjudged = dcs.seen(&readings, false).await;
    let probe = FleetSnapshot {
        spec,
        status: &status,
        requests,
        dcs: &unjudged,
        now,
    };
    // The doctors are read only when a soak sample (or the last stage's baseline) is due.
    let judged = if verdicts_due(&probe) {
        Some(dcs.seen(&readings, true).await)
    } else {
        None
    };
    let decided = step(&FleetSnapshot {
        dcs: judged.as_deref().unwrap_or(&unjudged),
        ..probe
    });
    let mut unreached = Vec::new();
    let (namespace, name) = (dcs.namespace.as_str(), dcs.name.as_str());
    let actions = &decided.actions;
    let acted = dcs
        .each(|context, client| {
            let (namespace, name, spec) = (namespace.to_owned(), name.to_owned(), spec.clone());
            let mine: Vec<_> = actions
                .iter()
                .filter(|a| a.context() == context)
                .cloned()
                .collect();
            async move {
                let mut done = Vec::new();
                for action in &mine {
                    let line = write::act(&client, &namespace, &name, &spec, action).await;
                    done.push(line.map_err(ContextError::Failed)?);
                }
                Ok(done)
            }
        })
        .await;
    for (context, result) in acted {
        match result {
            Ok(lines) => {
                if !quiet {
                    for line in lines {
                        println!("{}  {line}", clock());
                    }
                }
            }
            Err(why) if actions.iter().any(|a| a.context() == context) => {
                eprintln!("kubectl-express fleet-release: {why}");
                unreached.push(context);
            }
            Err(_) => {}
        }
    }
    // Written only where the copy says something else (the instant of writing aside), and
    // placed again where a DC lost its copy: the plan lives in every DC it names.
    let status = &decided.status;
    let stale: Vec<String> = readings
        .iter()
        .filter(|r| match &r.read {
            Ok((Some(copy), _)) => !same_status(copy.status.as_ref(), status),
            _ => true,
        })
        .map(|r| r.context.clone())
        .collect();
    let stale = &stale;
    let written = dcs
        .each(|context, client| {
            let is_stale = stale.contains(&context);
            let (namespace, name) = (namespace.to_owned(), name.to_owned());
            let (spec, status) = (spec.clone(), status.clone());
            async move {
                if !is_stale {
                    return Ok(());
                }
                write::place(&client, &namespace, &name, &spec)
                    .await
                    .map_err(ContextError::Failed)?;
                write::status(&client, &namespace, &name, &status)
                    .await
                    .map_err(ContextError::Failed)
            }
        })
        .await;
    for (context, result) in written {
        if let Err(why) = result
            && !unreached.contains(&context)
        {
            if !quiet {
                eprintln!("kubectl-express fleet-release: {context}: {why}");
            }
            unreached.push(context);
        }
    }
    (decided, unreached)
}

/// The same status, as written on the wire (times to the second), but for when it was written.
fn same_status(copy: Option<&FleetReleaseStatus>, status: &FleetReleaseStatus) -> bool {
    let Some(copy) = copy else {
        return false;
    };
    let undated = |s: &FleetReleaseStatus| {
        serde_json::to_value(FleetReleaseStatus {
            updated_at: None,
            ..s.clone()
        })
        .ok()
    };
    undated(copy) == undated(status)
}

fn clock() -> String {
    Timestamp::now().strftime("%H:%M:%S").to_string()
}

/// Drives the plan until it ends, stops for a person, or `timeout` passes.
pub async fn run(
    dcs: &Dcs,
    spec: &FleetReleaseSpec,
    timeout: Option<Duration>,
    poll: Duration,
) -> Code {
    let started = Instant::now();
    let mut shown: BTreeMap<String, String> = BTreeMap::new();
    let mut last_message = None;
    loop {
        let (decided, _) = once(dcs, spec, false).await;
        for notice in &decided.notices {
            println!("{}  {}", clock(), notice.message);
        }
        report_releases(&decided.status, &mut shown);
        if decided.status.message != last_message
            && let Some(message) = &decided.status.message
        {
            println!("{}  {}: {message}", clock(), decided.status.phase());
            last_message = decided.status.message.clone();
        }
        let out_of_time = timeout.is_some_and(|t| started.elapsed() >= t);
        if let Some(code) = exit_code(&decided.status, out_of_time) {
            if code == Code::Incomplete {
                for dc in &decided.status.data_centers {
                    if dc.state == DcState::Unknown {
                        eprintln!(
                            "kubectl-express fleet-release: {}: {}",
                            dc.context,
                            dc.message.as_deref().unwrap_or("cannot be read")
                        );
                    }
                }
            }
            return code;
        }
        let mut pause = poll;
        if let Some(wake) = decided.wake_at {
            let seconds = (wake.as_second() - Timestamp::now().as_second()).max(0);
            pause = pause.min(
                Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
                    .max(Duration::from_millis(200)),
            );
        }
        if let Some(t) = timeout {
            pause = pause.min(t.saturating_sub(started.elapsed()));
        }
        tokio::time::sleep(pause).await;
    }
}

/// Prints each DC's release as it moves: its phase and wave, once per change.
fn report_releases(status: &FleetReleaseStatus, shown: &mut BTreeMap<String, String>) {
    for dc in &status.data_centers {
        let now = match &dc.release {
            Some(r) => format!(
                "{} (release {} wave {}, {} tenant(s) moved)",
                dc.state.as_str(),
                r.phase,
                r.wave + 1,
                r.moved_tenants
            ),
            None => dc.state.as_str().to_owned(),
        };
        if shown.get(&dc.context) != Some(&now) {
            println!("{}  {}: {now}", clock(), dc.context);
            shown.insert(dc.context.clone(), now);
        }
    }
}

/// The readings' copies that hold a different plan than `spec` (a plan changed under the name).
pub fn different_copies(readings: &[Reading], spec: &FleetReleaseSpec) -> Vec<String> {
    readings
        .iter()
        .filter_map(|r| {
            let copy = r.read.as_ref().ok()?.0.as_ref()?;
            (&copy.spec != spec).then(|| r.context.clone())
        })
        .collect()
}
