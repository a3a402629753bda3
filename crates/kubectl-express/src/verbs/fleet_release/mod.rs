//! `kubectl express fleet-release`: one operator build released across DCs (DESIGN section
//! 14). `run -f PLAN` writes the plan into every DC it names and drives it; `run NAME` resumes
//! a plan from the DCs' copies; `pause`, `resume`, `approve`, `abort [--rollback]` are a
//! person's requests; `plan -f PLAN` says what would happen, touching nothing; without an
//! action, the plan's stages and DCs as the copy in one DC has them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use express_api::fleet_release::{DcState, FleetReleaseSpec};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::show::fleet_release::{render, render_list};
use crate::verbs::args::Output;
use express_client::contexts::select::load;
use express_client::exit::{Code, Exit};
use express_client::fleet_release::dcs::{self, Dcs};
use express_client::fleet_release::requests::{Ask, Asked, request as ask_dcs};
use express_client::fleet_release::start::{
    self, Plan, Reach, copy_in_context, kubeconfig, plan_file,
};
use express_client::read::fleet_release as read;
use express_client::runtime::block_on_threads;

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

impl Target {
    fn reach(&self) -> Reach {
        Reach {
            operator_namespace: self.operator_namespace.clone(),
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            context_timeout: Duration::from_secs(self.context_timeout),
        }
    }
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
        let reach = args.target.reach();
        match args.action {
            None => show(&reach, args.name.as_deref(), args.output).await,
            Some(Action::Run(run)) => {
                let plan = match (run.file, run.name) {
                    (Some(path), _) => Plan::File(path),
                    (None, Some(name)) => Plan::Named(name),
                    (None, None) => {
                        return Err(Exit::usage("give -f PLAN or the NAME of a plan in the DCs"));
                    }
                };
                let timeout = run.timeout.map(Duration::from_secs);
                start::run(&reach, &plan, timeout, Duration::from_secs(run.poll))
                    .await
                    .map(ExitCode::from)
            }
            Some(Action::Pause(n)) => request(&reach, &n.name, Ask::Pause).await,
            Some(Action::Resume(n)) => request(&reach, &n.name, Ask::Resume).await,
            Some(Action::Approve(n)) => request(&reach, &n.name, Ask::Approve).await,
            Some(Action::Abort(a)) => {
                request(
                    &reach,
                    &a.name,
                    Ask::Abort {
                        rollback: a.rollback,
                    },
                )
                .await
            }
            Some(Action::Plan(p)) => dry_run(&reach, &p.file),
        }
    })
}

async fn request(reach: &Reach, name: &str, what: Ask) -> Result<ExitCode, Exit> {
    let loaded = kubeconfig(reach)?;
    let copy = copy_in_context(&loaded, reach, name).await?;
    let deadline = reach.context_timeout;
    let dcs = Dcs::open(
        &loaded,
        &copy.spec,
        &reach.operator_namespace,
        name,
        deadline,
    )
    .await?;
    Ok(ask(&dcs, &copy.spec, what).await)
}

/// The plan as the copy in one DC has it: exit 1 when it ended badly, 4 when a DC could not be
/// read.
async fn show(reach: &Reach, name: Option<&str>, output: Output) -> Result<ExitCode, Exit> {
    let loaded = kubeconfig(reach)?;
    let Some(name) = name else {
        let context = reach
            .context
            .clone()
            .or_else(|| loaded.current_context().map(str::to_owned))
            .ok_or_else(|| Exit::usage("no --context and no current context"))?;
        let (client, _) = loaded.client(&context).await.map_err(Exit::usage)?;
        let plans = read::copies(&client, &reach.operator_namespace)
            .await
            .map_err(|why| Exit::failure(why.to_string()))?;
        match output {
            Output::Json => print_json(&serde_json::to_value(&plans).unwrap_or_default())?,
            _ => print!("{}", render_list(&plans)),
        }
        return Ok(ExitCode::SUCCESS);
    };
    let copy = copy_in_context(&loaded, reach, name).await?;
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
fn dry_run(reach: &Reach, path: &Path) -> Result<ExitCode, Exit> {
    let (name, spec) = plan_file(path)?;
    let mut out = format!(
        "FleetRelease {name}: ring {} → ring {}{} in namespace {}, one OperatorRelease {name} per DC\n",
        spec.from_ring,
        spec.to_ring,
        spec.version
            .as_deref()
            .map(|v| format!(", build {v}"))
            .unwrap_or_default(),
        reach.operator_namespace
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
    match load(reach.kubeconfig.as_deref()) {
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
