//! Reading several contexts at once (DESIGN section 13): each selected context gets its own
//! client, a deadline (`--context-timeout`) and a place among at most `--max-parallel` reads in
//! flight, and ends as a [`PerContext`]: what the verb read, or why it could not
//! ([`ContextError`]: unreachable, refused, forbidden, or an error). Nothing is dropped: a context
//! that could not be read is a line in the text and an entry in the JSON.
//! [`super::tail::exit_code`] merges the per-context exit codes into the fleet's.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use express_api::ExpressCluster;
use futures::StreamExt as _;
use kube::api::{Api, ListParams};

use crate::contexts::select::{self, FleetArgs, Loaded, Selection};
use crate::exit::Exit;

/// Why one context could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// The kubeconfig does not make a client for it (no such user, a bad server URL...).
    #[error("{0}")]
    Config(String),
    /// Nothing answered: connection refused, no route, DNS...
    #[error("{0}")]
    Unreachable(String),
    /// It did not answer within `--context-timeout` (seconds).
    #[error("timeout after {}", express_api::bounce::format_duration(*.0))]
    TimedOut(u64),
    /// The API server refused the credentials (401).
    #[error("Unauthorized")]
    Unauthorized,
    /// The credentials may not read what the verb needs (403): what was refused.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// It answered, but the verb could not read what it needs.
    #[error("{0}")]
    Failed(String),
}

impl ContextError {
    /// The `status` of the JSON entry.
    pub fn status(&self) -> &'static str {
        match self {
            ContextError::Unreachable(_) | ContextError::TimedOut(_) => "unreachable",
            ContextError::Unauthorized | ContextError::Forbidden(_) => "forbidden",
            ContextError::Config(_) | ContextError::Failed(_) => "error",
        }
    }

    /// Sorts a failed request: `doing` says what was refused ("list expressclusters").
    pub fn from_kube(error: &kube::Error, doing: &str) -> ContextError {
        match error {
            kube::Error::Api(status) if status.code == 401 => ContextError::Unauthorized,
            kube::Error::Api(status) if status.code == 403 => {
                ContextError::Forbidden(format!("cannot {doing}"))
            }
            kube::Error::Api(status) => ContextError::Failed(format!(
                "cannot {doing}: {} ({})",
                status.message, status.code
            )),
            kube::Error::HyperError(_) | kube::Error::Service(_) => {
                // The cause without kube's "ServiceError: " wrapper.
                ContextError::Unreachable(match std::error::Error::source(error) {
                    Some(cause) => chain(cause),
                    None => error.to_string(),
                })
            }
            other => ContextError::Failed(format!("cannot {doing}: {other}")),
        }
    }
}

/// An error and its sources, `: `-joined (kube's own text for a refused connection is only
/// "client error (Connect)").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// One context's read: the verb's result, or why there is none, and how long it took.
#[derive(Debug)]
pub struct PerContext<T> {
    pub context: String,
    pub elapsed: Duration,
    pub outcome: Result<T, ContextError>,
}

/// What a verb reads one context with.
pub struct Target {
    pub client: kube::Client,
    /// `-n`, else the context's own namespace.
    pub namespace: String,
}

/// The contexts a fleet verb reads, and how.
pub struct Plan {
    pub loaded: Arc<Loaded>,
    pub contexts: Vec<String>,
    pub max_parallel: usize,
    pub deadline: Duration,
    pub require_all: bool,
    pub namespace: Option<String>,
}

impl Plan {
    /// Reads every context with `read`, at most `max_parallel` at once and each within the
    /// deadline, in the order of `contexts`. Before the verb's read, a context is asked for its
    /// version (is it there, are the credentials accepted) and for one ExpressCluster in
    /// `scope` (None: every namespace; may these credentials read them). Each context is a task
    /// of its own: decoding a large DC's lists takes a core, so DCs are read on several.
    pub async fn read_all<T, F, Fut>(&self, scope: Scope, read: F) -> Vec<PerContext<T>>
    where
        T: Send + 'static,
        F: Fn(Target) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, ContextError>> + Send + 'static,
    {
        let read = Arc::new(read);
        let (loaded, namespace) = (self.loaded.clone(), self.namespace.clone());
        each_within(
            &self.contexts,
            self.max_parallel,
            self.deadline,
            move |context| {
                let (read, loaded, namespace) = (read.clone(), loaded.clone(), namespace.clone());
                async move {
                    let (client, default) = loaded
                        .client(&context)
                        .await
                        .map_err(ContextError::Config)?;
                    let namespace = namespace.unwrap_or(default);
                    probe(&client, scope.namespace(&namespace)).await?;
                    read(Target { client, namespace }).await
                }
            },
        )
        .await
    }
}

/// Runs `work` for each context, each a task of its own, at most `max_parallel` at once, each
/// within `deadline` (a context still running then is [`ContextError::TimedOut`]), in the order
/// of `contexts`: the one fan-out of every verb across contexts, the fleet-release driver's too.
pub async fn each_within<T, F, Fut>(
    contexts: &[String],
    max_parallel: usize,
    deadline: Duration,
    work: F,
) -> Vec<PerContext<T>>
where
    T: Send + 'static,
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<T, ContextError>> + Send + 'static,
{
    let work = &work;
    futures::stream::iter(contexts.iter().cloned())
        .map(|context| {
            // Started when a place is free, so that the deadline runs from then.
            let task = tokio::spawn({
                let read = work(context.clone());
                async move {
                    let started = Instant::now();
                    let outcome = match tokio::time::timeout(deadline, read).await {
                        Ok(outcome) => outcome,
                        Err(_) => Err(ContextError::TimedOut(deadline.as_secs())),
                    };
                    (started.elapsed(), outcome)
                }
            });
            async move {
                let (elapsed, outcome) = match task.await {
                    Ok(done) => done,
                    Err(error) => (
                        Duration::ZERO,
                        Err(ContextError::Failed(format!("the read stopped: {error}"))),
                    ),
                };
                PerContext {
                    context,
                    elapsed,
                    outcome,
                }
            }
        })
        .buffered(max_parallel.max(1))
        .collect()
        .await
}

/// Where the probe looks for ExpressClusters.
#[derive(Clone, Copy, Debug)]
pub enum Scope {
    /// Every namespace.
    All,
    /// The verb's namespace (`-n`, else the context's).
    Namespace,
}

impl Scope {
    pub fn namespace<'a>(&self, namespace: &'a str) -> Option<&'a str> {
        match self {
            Scope::All => None,
            Scope::Namespace => Some(namespace),
        }
    }
}

pub async fn probe(client: &kube::Client, namespace: Option<&str>) -> Result<(), ContextError> {
    client
        .apiserver_version()
        .await
        .map_err(|e| ContextError::from_kube(&e, "get /version"))?;
    let api: Api<ExpressCluster> = crate::read::live::scoped(client, namespace);
    let doing = match namespace {
        Some(namespace) => format!("list expressclusters in namespace {namespace}"),
        None => "list expressclusters".to_owned(),
    };
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(ContextError::Failed(
            "no ExpressCluster API here (the CRDs are not installed)".into(),
        )),
        Err(error) => Err(ContextError::from_kube(&error, &doing)),
    }
}

/// Runs a fleet verb over `selection`: reads the kubeconfig (a warning on stderr per name two
/// files define), selects the contexts (exit 2 when none match, or a name is unknown), prints
/// them with `--list-contexts`, else hands the plan to `work`.
pub fn run<F, Fut>(verb: &str, args: &FleetArgs, selection: Selection, work: F) -> ExitCode
where
    F: FnOnce(Plan) -> Fut,
    Fut: Future<Output = Result<ExitCode, Exit>>,
{
    crate::runtime::block_on_threads(verb, Exit::usage, async {
        let loaded = select::load(args.kubeconfig.as_deref()).map_err(Exit::usage)?;
        for warning in &loaded.warnings {
            eprintln!("kubectl-express {verb}: {warning}");
        }
        let chosen = select::select(
            &loaded.context_names(),
            loaded.current_context(),
            &selection,
        )
        .map_err(|e| Exit::usage(e.to_string()))?;
        if args.list_contexts {
            for context in &chosen {
                println!("{context}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        work(Plan {
            loaded: Arc::new(loaded),
            contexts: chosen,
            max_parallel: usize::from(args.max_parallel),
            deadline: Duration::from_secs(args.context_timeout),
            require_all: args.require_all,
            namespace: args.namespace.clone(),
        })
        .await
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn contexts_are_read_a_few_at_a_time_each_within_the_deadline() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let contexts: Vec<String> = ["dc-a", "dc-b", "dc-c", "dc-d", "dc-e"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let (now, most) = (
            std::sync::Arc::new(AtomicUsize::new(0)),
            std::sync::Arc::new(AtomicUsize::new(0)),
        );
        let started = Instant::now();
        let results = each_within(&contexts, 2, Duration::from_secs(1), |context| {
            let (now, most) = (now.clone(), most.clone());
            async move {
                let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(running, Ordering::SeqCst);
                // dc-c never answers; the others take a moment.
                let pause = if context == "dc-c" { 3600 } else { 0 };
                tokio::time::sleep(Duration::from_millis(100) + Duration::from_secs(pause)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(context.len())
            }
        })
        .await;
        assert_eq!(
            most.load(Ordering::SeqCst),
            2,
            "at most --max-parallel at once"
        );
        let order: Vec<&str> = results.iter().map(|r| r.context.as_str()).collect();
        assert_eq!(order, ["dc-a", "dc-b", "dc-c", "dc-d", "dc-e"]);
        assert_eq!(results[2].outcome, Err(ContextError::TimedOut(1)));
        assert!(results[2].elapsed >= Duration::from_secs(1));
        assert!(results.iter().filter(|r| r.outcome == Ok(4)).count() == 4);
        // The dead context cost its deadline, not the whole command.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn errors_say_what_went_wrong_and_sort_into_statuses() {
        let cases = [
            (
                ContextError::TimedOut(10),
                "unreachable",
                "timeout after 10s",
            ),
            (ContextError::Unauthorized, "forbidden", "Unauthorized"),
            (
                ContextError::Forbidden("cannot list expressclusters".into()),
                "forbidden",
                "forbidden: cannot list expressclusters",
            ),
            (
                ContextError::Unreachable("connection refused".into()),
                "unreachable",
                "connection refused",
            ),
            (ContextError::Config("no user".into()), "error", "no user"),
            (ContextError::Failed("boom".into()), "error", "boom"),
        ];
        for (error, status, text) in cases {
            assert_eq!(error.status(), status, "{error:?}");
            assert_eq!(error.to_string(), text);
        }
        let status = |code: u16| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("no", "Reason").with_code(code),
            ))
        };
        assert_eq!(
            ContextError::from_kube(&status(401), "list expressclusters"),
            ContextError::Unauthorized
        );
        assert_eq!(
            ContextError::from_kube(&status(403), "list expressclusters"),
            ContextError::Forbidden("cannot list expressclusters".into())
        );
        assert_eq!(
            ContextError::from_kube(&status(500), "get /version"),
            ContextError::Failed("cannot get /version: no (500)".into())
        );
    }
}
