//! Where a run starts: the kubeconfig naming every DC, the plan from a file (written into every
//! DC that lacks it) or from the DCs' copies, then driven to its end under one bound. The
//! `fleet-release` verb and `express-operator dev --dcs N --demo` both start here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use express_api::fleet_release::{FleetRelease, FleetReleaseSpec, spec_problems};

use super::dcs::Dcs;
use super::drive;
use crate::contexts::across::ContextError;
use crate::contexts::select::{Loaded, load};
use crate::exit::{Code, Exit};
use crate::read::fleet_release as read;
use crate::write::fleet_release::{Placed, place};

/// Which DCs a run reaches and how: the operator's namespace in each (where the copies and the
/// releases live), the kubeconfig naming them, the context whose copy is read, and how long one
/// DC may take to answer.
#[derive(Clone, Debug)]
pub struct Reach {
    pub operator_namespace: String,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub context_timeout: Duration,
}

/// The plan a run drives: a manifest, or a plan already in the DCs.
#[derive(Clone, Debug)]
pub enum Plan {
    File(PathBuf),
    Named(String),
}

/// How often the driver reads the DCs while nothing is due, unless told otherwise.
pub const DEFAULT_POLL: Duration = Duration::from_secs(5);

/// Drives `plan` to its end (or `timeout`): exit 0 Succeeded, 1 Failed, Aborted or RolledBack,
/// 3, 4 or 5 as [`drive::exit_code`] says. A different plan under the same name in any DC
/// refuses the file before anything is written.
pub async fn run(
    reach: &Reach,
    plan: &Plan,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<Code, Exit> {
    let loaded = kubeconfig(reach)?;
    let deadline = reach.context_timeout;
    let (name, spec) = match plan {
        Plan::File(path) => plan_file(path)?,
        Plan::Named(name) => {
            let copy = copy_in_context(&loaded, reach, name).await?;
            (name.clone(), copy.spec)
        }
    };
    let dcs = Dcs::open(&loaded, &spec, &reach.operator_namespace, &name, deadline).await?;
    if let Plan::File(_) = plan {
        place_everywhere(&dcs, &spec).await?;
    }
    let poll = poll.max(Duration::from_secs(1));
    let drive = drive::run(&dcs, &spec, timeout, poll);
    // The whole run is bounded, a driver stuck on a hung API server included.
    Ok(match timeout {
        Some(t) => tokio::time::timeout(t + deadline * 3, drive)
            .await
            .unwrap_or(Code::Incomplete),
        None => drive.await,
    })
}

/// Writes the plan into every DC that lacks it, after checking none holds another plan under
/// its name.
async fn place_everywhere(dcs: &Dcs, spec: &FleetReleaseSpec) -> Result<(), Exit> {
    let name = &dcs.name;
    let readings = dcs.read().await;
    let different = drive::different_copies(&readings, spec);
    if !different.is_empty() {
        return Err(Exit::usage(format!(
            "FleetRelease {name} holds a different plan in {}: a changed plan is a new FleetRelease (another name)",
            different.join(", ")
        )));
    }
    for (context, placed) in dcs
        .each(|_, client| {
            let namespace = dcs.namespace.clone();
            let (name, spec) = (name.clone(), spec.clone());
            async move {
                place(&client, &namespace, &name, &spec)
                    .await
                    .map_err(ContextError::Failed)
            }
        })
        .await
    {
        match placed {
            Ok(Placed::Created) => println!("{context}: FleetRelease {name} written"),
            Ok(Placed::Unchanged) => {}
            Err(why) => eprintln!("kubectl-express fleet-release: {context}: {why}"),
        }
    }
    Ok(())
}

/// A plan file: a FleetRelease with a name and a valid spec.
pub fn plan_file(path: &Path) -> Result<(String, FleetReleaseSpec), Exit> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Exit::usage(format!("cannot read {}: {e}", path.display())))?;
    let plan: FleetRelease = serde_yaml::from_str(&text)
        .map_err(|e| Exit::usage(format!("{} is not a FleetRelease: {e}", path.display())))?;
    let name = plan
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Exit::usage(format!("{}: the plan has no metadata.name", path.display())))?;
    let problems = spec_problems(&plan.spec);
    if !problems.is_empty() {
        return Err(Exit::usage(format!(
            "{}: the plan is invalid: {}",
            path.display(),
            problems.join("; ")
        )));
    }
    Ok((name, plan.spec))
}

/// The kubeconfig, its warnings said once.
pub fn kubeconfig(reach: &Reach) -> Result<Loaded, Exit> {
    let loaded = load(reach.kubeconfig.as_deref()).map_err(Exit::usage)?;
    for warning in &loaded.warnings {
        eprintln!("kubectl-express fleet-release: warning: {warning}");
    }
    Ok(loaded)
}

/// The copy of the plan in the context read (`--context`, else the current one).
pub async fn copy_in_context(
    loaded: &Loaded,
    reach: &Reach,
    name: &str,
) -> Result<FleetRelease, Exit> {
    let context = reach
        .context
        .clone()
        .or_else(|| loaded.current_context().map(str::to_owned))
        .ok_or_else(|| Exit::usage("no --context and no current context to read the plan from"))?;
    if !loaded.context_names().contains(&context) {
        return Err(Exit::usage(format!(
            "no context named {context:?} in the kubeconfig (it has: {})",
            loaded.context_names().join(", ")
        )));
    }
    let (client, _) = loaded.client(&context).await.map_err(Exit::usage)?;
    let deadline = reach.context_timeout;
    let found = tokio::time::timeout(
        deadline,
        read::copy(&client, &reach.operator_namespace, name),
    )
    .await
    .map_err(|_| {
        Exit::new(
            Code::Incomplete,
            format!("context {context}: timeout reading FleetRelease {name}"),
        )
    })?
    .map_err(|why| Exit::failure(why.to_string()))?;
    found.ok_or_else(|| {
        Exit::usage(format!(
            "no FleetRelease {name} in namespace {} of context {context}",
            reach.operator_namespace
        ))
    })
}
