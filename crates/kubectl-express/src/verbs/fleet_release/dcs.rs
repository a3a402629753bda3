//! The DCs of one plan: a client per kubeconfig context the plan names (a name the kubeconfig
//! lacks refuses the plan before anything is written), each read and written within
//! `--context-timeout`, all of them at once.

use std::future::Future;
use std::time::Duration;

use express_api::fleet_release::{FleetRelease, FleetReleaseSpec};
use express_planner::fleet_release::{DcRead, DcSeen, ReleaseSeen};
use futures::future::join_all;
use kube::Client;

use crate::contexts::select::Loaded;
use crate::exit::Exit;
use crate::read::fleet_release as read;

/// What one DC showed of the plan.
pub struct Reading {
    pub context: String,
    /// Its copy (None: it has none) and its release; `Err`: why it could not be read.
    pub read: Result<(Option<FleetRelease>, Option<ReleaseSeen>), String>,
}

pub struct Dcs {
    /// The operator's namespace, where the copies and the releases live.
    pub namespace: String,
    pub name: String,
    pub deadline: Duration,
    /// Each DC of the plan in stage order, with its client (`Err`: the kubeconfig makes none).
    pub clients: Vec<(String, Result<Client, String>)>,
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
        let mut clients = Vec::new();
        for (_, context) in spec.contexts() {
            let client = loaded.client(context).await.map(|(client, _)| client);
            clients.push((context.to_owned(), client));
        }
        Ok(Dcs {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            deadline,
            clients,
        })
    }

    /// Runs `work` on every DC with a client, at once, each within the deadline.
    pub async fn each<'a, T, F, Fut>(&'a self, work: F) -> Vec<(String, Result<T, String>)>
    where
        F: Fn(&'a str, &'a Client) -> Fut,
        Fut: Future<Output = Result<T, String>> + 'a,
    {
        let deadline = self.deadline;
        join_all(self.clients.iter().map(|(context, client)| {
            let work = client.as_ref().map(|c| work(context, c));
            async move {
                let result = match work {
                    Err(why) => Err(why.clone()),
                    Ok(future) => match tokio::time::timeout(deadline, future).await {
                        Ok(result) => result,
                        Err(_) => Err(format!(
                            "timeout after {}",
                            express_api::bounce::format_duration(deadline.as_secs())
                        )),
                    },
                };
                (context.clone(), result)
            }
        }))
        .await
    }

    /// Every DC's copy and release.
    pub async fn read(&self) -> Vec<Reading> {
        let (namespace, name) = (self.namespace.as_str(), self.name.as_str());
        self.each(|_, client| async move {
            let copy = read::copy(client, namespace, name).await?;
            let release = read::release(client, namespace, name).await?;
            Ok((copy, release))
        })
        .await
        .into_iter()
        .map(|(context, read)| Reading { context, read })
        .collect()
    }

    /// The DCs as the step sees them, with their doctor's verdicts when `verdicts`.
    pub async fn seen(&self, readings: &[Reading], verdicts: bool) -> Vec<DcSeen> {
        let namespace = self.namespace.as_str();
        let mut doctor = if verdicts {
            self.each(|_, client| async move {
                Ok(crate::read::triage::verdict(client, namespace).await)
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
                    .map_err(Clone::clone)
                    .map(|(_, release)| DcRead {
                        release: release.clone(),
                        verdict: doctor
                            .iter_mut()
                            .find(|(c, _)| *c == r.context)
                            .map(|(_, v)| v.clone().and_then(|v| v)),
                    }),
            })
            .collect()
    }
}
