//! The DCs of one plan: a client per kubeconfig context the plan names (a name the kubeconfig
//! lacks refuses the plan before anything is written), each read and written within
//! `--context-timeout`, all of them at once, through the one fan-out every verb across
//! contexts uses (`contexts::across`: its deadline, its typed errors).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use express_api::fleet_release::{FleetRelease, FleetReleaseSpec};
use express_planner::fleet_release::{DcRead, DcSeen, ReleaseSeen};
use kube::Client;

use crate::contexts::across::{ContextError, each_within};
use crate::contexts::select::Loaded;
use crate::exit::Exit;
use crate::read::fleet_release as read;

/// What one DC showed of the plan.
pub struct Reading {
    pub context: String,
    /// Its copy (None: it has none) and its release; `Err`: why it could not be read.
    pub read: Result<(Option<FleetRelease>, Option<ReleaseSeen>), ContextError>,
}

pub struct Dcs {
    /// The operator's namespace, where the copies and the releases live.
    pub namespace: String,
    pub name: String,
    pub deadline: Duration,
    /// The DCs of the plan in stage order.
    pub contexts: Vec<String>,
    /// Each DC's client (`Err`: the kubeconfig makes none).
    clients: Arc<BTreeMap<String, Result<Client, ContextError>>>,
}

/// The contexts of `spec` that `loaded` lacks, refused with the names it has.
pub fn missing_contexts(loaded: &Loaded, spec: &FleetReleaseSpec) -> Result<(), Exit> {
    let known = loaded.context_names();
    let missing: Vec<&str> = spec
        .contexts()
        .map(|(_, c)| c)
        .filter(|c| !known.iter().any(|k| k == c))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Exit::usage(format!(
        "the plan names {} that the kubeconfig lacks (it has: {}); nothing was written",
        missing
            .iter()
            .map(|c| format!("context {c:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        known.join(", ")
    )))
}

impl Dcs {
    pub async fn open(
        loaded: &Loaded,
        spec: &FleetReleaseSpec,
        namespace: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<Dcs, Exit> {
        missing_contexts(loaded, spec)?;
        let mut contexts = Vec::new();
        let mut clients = BTreeMap::new();
        for (_, context) in spec.contexts() {
            let client = loaded
                .client(context)
                .await
                .map(|(client, _)| client)
                .map_err(ContextError::Config);
            contexts.push(context.to_owned());
            clients.insert(context.to_owned(), client);
        }
        Ok(Dcs {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            deadline,
            contexts,
            clients: Arc::new(clients),
        })
    }

    /// The plan's DCs with the clients a caller already holds (the dashboard's): a DC of the
    /// plan it has none for is its [`ContextError`] (`why`), acted on by nobody here.
    pub fn with_clients(
        spec: &FleetReleaseSpec,
        namespace: &str,
        name: &str,
        deadline: Duration,
        held: &BTreeMap<String, Client>,
        why: &str,
    ) -> Dcs {
        let contexts: Vec<String> = spec.contexts().map(|(_, c)| c.to_owned()).collect();
        let clients = contexts
            .iter()
            .map(|context| {
                let client = held
                    .get(context)
                    .cloned()
                    .ok_or_else(|| ContextError::Config(why.to_owned()));
                (context.clone(), client)
            })
            .collect();
        Dcs {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            deadline,
            contexts,
            clients: Arc::new(clients),
        }
    }

    /// Runs `work` on every DC with a client, all at once, each within the deadline; a DC
    /// without a client, or past the deadline, is its [`ContextError`].
    pub async fn each<T, F, Fut>(&self, work: F) -> Vec<(String, Result<T, ContextError>)>
    where
        T: Send + 'static,
        F: Fn(String, Client) -> Fut,
        Fut: Future<Output = Result<T, ContextError>> + Send + 'static,
    {
        let clients = self.clients.clone();
        let work = &work;
        each_within(
            &self.contexts,
            self.contexts.len(),
            self.deadline,
            move |context| {
                let started = match clients.get(&context) {
                    Some(Ok(client)) => Ok(work(context, client.clone())),
                    Some(Err(why)) => Err(why.clone()),
                    None => Err(ContextError::Config(format!(
                        "no client for context {context}"
                    ))),
                };
                async move {
                    match started {
                        Ok(future) => future.await,
                        Err(why) => Err(why),
                    }
                }
            },
        )
        .await
        .into_iter()
        .map(|done| (done.context, done.outcome))
        .collect()
    }

    /// Every DC's copy and release.
    pub async fn read(&self) -> Vec<Reading> {
        let (namespace, name) = (self.namespace.clone(), self.name.clone());
        self.each(move |_, client| {
            let (namespace, name) = (namespace.clone(), name.clone());
            async move {
                let copy = read::copy(&client, &namespace, &name)
                    .await
                    .map_err(|why| ContextError::Failed(why.to_string()))?;
                let release = read::release(&client, &namespace, &name)
                    .await
                    .map_err(ContextError::Failed)?;
                Ok((copy, release))
            }
        })
        .await
        .into_iter()
        .map(|(context, read)| Reading { context, read })
        .collect()
    }

    /// The DCs as the step sees them, with their doctor's verdicts when `verdicts`.
    pub async fn seen(&self, readings: &[Reading], verdicts: bool) -> Vec<DcSeen> {
        let namespace = self.namespace.clone();
        let mut doctor = if verdicts {
            self.each(move |_, client| {
                let namespace = namespace.clone();
                async move { Ok(crate::read::triage::verdict(&client, &namespace).await) }
            })
            .await
        } else {
            Vec::new()
        };
        readings
            .iter()
            .map(|r| DcSeen {
                context: r.context.clone(),
                read: r
                    .read
                    .as_ref()
                    .map_err(ToString::to_string)
                    .map(|(_, release)| DcRead {
                        release: release.clone(),
                        verdict: doctor
                            .iter_mut()
                            .find(|(c, _)| *c == r.context)
                            .map(|(_, v)| v.clone().map_err(|e| e.to_string()).and_then(|v| v)),
                    }),
            })
            .collect()
    }
}
