//! `kubectl express fleet-release`: one operator build released across DCs (DESIGN section
//! 14). `run -f PLAN` writes the plan into every DC it names and drives it; `run NAME` resumes
//! a plan from the DCs' copies; `pause`, `resume`, `approve`, `abort [--rollback]` are a
//! person's requests; `plan -f PLAN` says what would happen, touching nothing; without an
//! action, the plan's stages and DCs as the copy in one DC has them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use express_api::fleet_release::{DcState, FleetRelease, FleetReleaseSpec, spec_problems};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::contexts::across::ContextError;
use crate::contexts::select::{Loaded, load};
use crate::exit::{Code, Exit};
use crate::fleet_release::dcs::{self, Dcs};
use crate::fleet_release::drive;
use crate::fleet_release::requests::{Ask, Asked, request as ask_dcs};
use crate::read::fleet_release as read;
use crate::runtime::block_on_threads;
use crate::show::fleet_release::{render, render_list};
use crate::verbs::args::Output;
use crate::write::fleet_release::{Placed, place};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// The plan to show (default: every plan in the context read).
    name: Option<String>,
    /// Output: text or json (the status fields and `name`).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args, Debug, Clone)]
struct Target {
    /// The operator's namespace, where the plan's copies and the releases live.
    #[arg(long, default_value = super::DEFAULT_OPERATOR_NAMESPACE, value_name = "NS", global = true)]
    operator_namespace: String,
    /// Path to the kubeconfig file naming every DC (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE", global = true)]
    kubeconfig: Option<PathBuf>,
    /// The context whose copy of the plan is read (default: the current context).
    #[arg(long, value_name = "NAME", global = true)]
    context: Option<String>,
    /// How long one DC may take to answer a read or a write.
    #[arg(long, default_value = "10s", value_parser = express_api::bounce::parse_duration, global = true)]
    context_timeout: u64,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Write the plan into every DC it names and drive it (or resume NAME from the DCs)
    ///
    /// Exit 0 Succeeded; 1 Failed, Aborted or RolledBack; 2 cannot run; 3 held Inconclusive at
    /// the timeout; 4 a DC could not be read at the timeout; 5 paused, waiting for approval, or
    /// still progressing at the timeout (run again later).
    Run(RunArgs),
    /// Pause the plan: in-flight DCs' releases paused, no stage starts, the soak clock stops
    Pause(Named),
    /// Resume a paused plan (acted on by the driver)
    Resume(Named),
    /// Pass the next approval gate (acted on by the driver)
    Approve(Named),
    /// Stop the plan: in-flight DCs rolled back, no stage starts (--rollback: every DC released)
    Abort(AbortArgs),
    /// What the plan would do, in order, touching nothing
    Plan(PlanArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The plan: a FleetRelease manifest.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "PLAN",
        conflicts_with = "name"
    )]
    file: Option<PathBuf>,
    /// A plan already in the DCs.
    #[arg(required_unless_present = "file")]
    name: Option<String>,
    /// Stop driving after this long (a hung API server included): exit 3, 4 or 5.
    #[arg(long, value_parser = express_api::bounce::parse_duration, value_name = "DURATION")]
    timeout: Option<u64>,
    /// How often the DCs are read while nothing is due (a sample or a soak's end wakes it
    /// sooner).
    #[arg(long, default_value = "5s", value_parser = express_api::bounce::parse_duration, hide = true)]
    poll: u64,
}

#[derive(clap::Args, Debug)]
struct Named {
    name: String,
}

#[derive(clap::Args, Debug)]
struct AbortArgs {
    name: String,
    /// Also roll back every DC already released, even after the plan succeeded.
    #[arg(long)]
    rollback: bool,
}

#[derive(clap::Args, Debug)]
struct PlanArgs {
    /// The plan: a FleetRelease manifest.
    #[arg(short = 'f', long = "filename", value_name = "PLAN")]
    file: PathBuf,
    /// Accepted for symmetry with `run`: `plan` never writes.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(args: Args) -> ExitCode {
    let verb = "fleet-release";
    block_on_threads(verb, Exit::usage, async move {
        let target = args.target.clone();
        match args.action {
            None => show(&target, args.name.as_deref(), args.output).await,
            Some(Action::Run(run)) => drive(&target, run).await.map(ExitCode::from),
            Some(Action::Pause(n)) => request(&target, &n.name, Ask::Pause).await,
            Some(Action::Resume(n)) => request(&target, &n.name, Ask::Resume).await,
            Some(Action::Approve(n)) => request(&target, &n.name, Ask::Approve).await,
            Some(Action::Abort(a)) => {
                request(
                    &target,
                    &a.name,
                    Ask::Abort {
                        rollback: a.rollback,
                    },
                )
                .await
            }
            Some(Action::Plan(p)) => dry_run(&target, &p.file),
        }
    })
}

/// A plan file: a FleetRelease with a name and a valid spec.
fn plan_file(path: &PathBuf) -> Result<(String, FleetReleaseSpec), Exit> {
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

fn kubeconfig(target: &Target) -> Result<Loaded, Exit> {
    let loaded = load(target.kubeconfig.as_deref()).map_err(Exit::usage)?;
    for warning in &loaded.warnings {
        eprintln!("kubectl-express fleet-release: warning: {warning}");
    }
    Ok(loaded)
}

/// The copy of the plan in the context read (`--context`, else the current one).
async fn copy_in_context(
    loaded: &Loaded,
    target: &Target,
    name: &str,
) -> Result<FleetRelease, Exit> {
    let context = target
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
    let deadline = Duration::from_secs(target.context_timeout);
    let found = tokio::time::timeout(
        deadline,
        read::copy(&client, &target.operator_namespace, name),
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
            target.operator_namespace
        ))
    })
}

/// Drives the plan file `plan` across the DCs `kubeconfig` names to its end, as `fleet-release
/// run -f PLAN --timeout T --context-timeout C` does: `express-operator dev --dcs N --demo`
/// drives its demo with it in process, needing no plugin binary beside it.
pub async fn run_plan(
    plan: &Path,
    kubeconfig: &Path,
    timeout: Duration,
    context_timeout: Duration,
) -> Result<Code, Exit> {
    let target = Target {
        operator_namespace: super::DEFAULT_OPERATOR_NAMESPACE.to_owned(),
        kubeconfig: Some(kubeconfig.to_owned()),
        context: None,
        context_timeout: context_timeout.as_secs(),
    };
    let args = RunArgs {
        file: Some(plan.to_owned()),
        name: None,
        timeout: Some(timeout.as_secs()),
        poll: DEFAULT_POLL_SECONDS,
    };
    drive(&target, args).await
}

/// How often the driver reads the DCs while nothing is due, unless told otherwise.
const DEFAULT_POLL_SECONDS: u64 = 5;

async fn drive(target: &Target, args: RunArgs) -> Result<Code, Exit> {
    let loaded = kubeconfig(target)?;
    let deadline = Duration::from_secs(target.context_timeout);
    let (name, spec) = match (&args.file, &args.name) {
        (Some(path), _) => {
            let (name, spec) = plan_file(path)?;
            let dcs =
                Dcs::open(&loaded, &spec, &target.operator_namespace, &name, deadline).await?;
            // A different plan under this name anywhere refuses it before anything is written.
            let readings = dcs.read().await;
            let different = drive::different_copies(&readings, &spec);
            if !different.is_empty() {
                return Err(Exit::usage(format!(
                    "FleetRelease {name} holds a different plan in {}: a changed plan is a new FleetRelease (another name)",
                    different.join(", ")
                )));
            }
            for (context, placed) in dcs
                .each(|_, client| {
                    let namespace = target.operator_namespace.clone();
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
            (name, spec)
        }
        (None, Some(name)) => {
            let copy = copy_in_context(&loaded, target, name).await?;
            (name.clone(), copy.spec)
        }
        (None, None) => return Err(Exit::usage("give -f PLAN or the NAME of a plan in the DCs")),
    };
    let dcs = Dcs::open(&loaded, &spec, &target.operator_namespace, &name, deadline).await?;
    let timeout = args.timeout.map(Duration::from_secs);
    let poll = Duration::from_secs(args.poll.max(1));
    let drive = drive::run(&dcs, &spec, timeout, poll);
    // The whole run is bounded, a driver stuck on a hung API server included.
    Ok(match timeout {
        Some(t) => tokio::time::timeout(t + deadline * 3, drive)
            .await
            .unwrap_or(Code::Incomplete),
        None => drive.await,
    })
}

async fn request(target: &Target, name: &str, what: Ask) -> Result<ExitCode, Exit> {
    let loaded = kubeconfig(target)?;
    let copy = copy_in_context(&loaded, target, name).await?;
    let deadline = Duration::from_secs(target.context_timeout);
    let dcs = Dcs::open(
        &loaded,
        &copy.spec,
        &target.operator_namespace,
        name,
        deadline,
    )
    .await?;
    Ok(ask(&dcs, &copy.spec, what).await)
}

/// The plan as the copy in one DC has it: exit 1 when it ended badly, 4 when a DC could not be
/// read.
async fn show(target: &Target, name: Option<&str>, output: Output) -> Result<ExitCode, Exit> {
    let loaded = kubeconfig(target)?;
    let Some(name) = name else {
        let context = target
            .context
            .clone()
            .or_else(|| loaded.current_context().map(str::to_owned))
            .ok_or_else(|| Exit::usage("no --context and no current context"))?;
        let (client, _) = loaded.client(&context).await.map_err(Exit::usage)?;
        let plans = read::copies(&client, &target.operator_namespace)
            .await
            .map_err(|why| Exit::failure(why.to_string()))?;
        match output {
            Output::Json => print_json(&serde_json::to_value(&plans).unwrap_or_default())?,
            _ => print!("{}", render_list(&plans)),
        }
        return Ok(ExitCode::SUCCESS);
    };
    let copy = copy_in_context(&loaded, target, name).await?;
    let status = copy.status.clone().unwrap_or_default();
    match output {
        Output::Json => {
            let mut value = serde_json::to_value(&status).unwrap_or_default();
            if let Some(map) = value.as_object_mut() {
                map.insert("name".into(), copy.name_any().into());
                map.insert("phase".into(), status.phase().as_str().into());
            }
            print_json(&value)?;
        }
        _ => print!("{}", render(&copy, &status, Timestamp::now())),
    }
    let code = if status.phase().is_failure() {
        Code::Failed
    } else if status
        .data_centers
        .iter()
        .any(|d| d.state == DcState::Unknown)
    {
        Code::Incomplete
    } else {
        Code::Done
    };
    Ok(code.into())
}

fn print_json(value: &serde_json::Value) -> Result<(), Exit> {
    crate::contexts::tail::print_json(value)
}

/// What would happen, in order; the contexts the kubeconfig lacks are named (exit 2).
fn dry_run(target: &Target, path: &PathBuf) -> Result<ExitCode, Exit> {
    let (name, spec) = plan_file(path)?;
    let mut out = format!(
        "FleetRelease {name}: ring {} → ring {}{} in namespace {}, one OperatorRelease {name} per DC\n",
        spec.from_ring,
        spec.to_ring,
        spec.version
            .as_deref()
            .map(|v| format!(", build {v}"))
            .unwrap_or_default(),
        target.operator_namespace
    );
    let waves: Vec<String> = spec.release.waves.iter().map(ToString::to_string).collect();
    out.push_str(&format!(
        "each DC's release: waves {}, bake {}s, a sample every {}s, {} failed sample(s) tolerated\n",
        waves.join(" → "),
        spec.release.bake_seconds,
        spec.release.interval_seconds,
        spec.release.failure_limit
    ));
    let last = spec.stages.len().saturating_sub(1);
    for (i, stage) in spec.stages.iter().enumerate() {
        if stage.approval {
            out.push_str(&format!(
                "{}. wait for `fleet-release approve {name}`\n",
                i + 1
            ));
        }
        out.push_str(&format!(
            "{}. stage {} ({}): release {} at once, within {}s\n",
            i + 1,
            i,
            stage.name,
            stage.contexts.join(", "),
            spec.stage_deadline_seconds
        ));
        let against = if i == last {
            "each against its own verdict before its stage started".to_owned()
        } else {
            let later: Vec<&str> = spec
                .contexts()
                .filter(|(s, _)| *s > i)
                .map(|(_, c)| c)
                .collect();
            format!("against {} (not yet released)", later.join(", "))
        };
        out.push_str(&format!(
            "   then soak {}s: {} every {}s\n",
            spec.soak_seconds, against, spec.release.interval_seconds
        ));
    }
    print!("{out}");
    // The kubeconfig must name every DC for `run` to start.
    match load(target.kubeconfig.as_deref()) {
        Ok(loaded) => dcs::missing_contexts(&loaded, &spec)?,
        Err(why) => eprintln!("kubectl-express fleet-release plan: {why}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The CLI's request: exit 0 once written everywhere, 1 naming each DC it had to change that
/// could not be reached.
async fn ask(dcs: &Dcs, spec: &FleetReleaseSpec, ask: Ask) -> ExitCode {
    let asked: Asked = ask_dcs(dcs, spec, ask, false).await;
    for (context, why) in &asked.unreached {
        eprintln!(
            "kubectl-express fleet-release {}: {context}: {why}",
            ask.name()
        );
    }
    for notice in &asked.notices {
        println!("{notice}");
    }
    println!("{}", asked.summary(&dcs.name, ask));
    match asked.not_written(ask) {
        None => ExitCode::SUCCESS,
        Some(why) => {
            eprintln!("kubectl-express fleet-release {why}");
            ExitCode::FAILURE
        }
    }
}
