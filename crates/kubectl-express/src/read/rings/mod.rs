//! Reading one DC's operator rings: its ExpressClusters and ring Leases (one by one when they
//! may not be listed), and its OperatorReleases, surveyed with the warnings the read left.

pub mod survey;

use std::collections::BTreeSet;

use express_api::ExpressCluster;
use express_api::rings::{self};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};
use list_pages::ListPaged;

use express_client::read::live;
use express_client::read::live::forbidden;

use survey::{Survey, survey, with_releases, without_lease_lines};

/// One context's rings, and the warnings reading them left.
pub struct Read {
    pub survey: Survey,
    pub warnings: Vec<String>,
}

/// Reads the ExpressClusters (of `focus`, else everywhere) and the ring Leases, and surveys them.
/// Leases it may not read are a warning (leadership unknown), anything else failing an error.
pub async fn read(
    client: &Client,
    focus: Option<&str>,
    operator_namespace: &str,
) -> Result<Read, String> {
    let mut undecodable = Vec::new();
    let clusters = live::list(
        live::scoped::<express_api::lenient::Lenient<ExpressCluster>>(client, focus),
        &ListParams::default(),
        "ExpressClusters",
        &mut undecodable,
    )
    .await?;
    let mut warnings: Vec<String> = undecodable
        .iter()
        .map(|bad| {
            format!(
                "warning: in namespace {}: {bad}; its tenant is not counted",
                bad.namespace.as_deref().unwrap_or("?")
            )
        })
        .collect();
    let wanted: BTreeSet<String> = clusters
        .iter()
        .map(|c| rings::ring_of(c.labels()).to_owned())
        .collect();
    let leases = match read_leases(client, operator_namespace, &wanted).await {
        Ok(leases) => Some(leases),
        Err(Unreadable::Forbidden(what)) => {
            warnings.push(format!(
                "warning: cannot read {what} (forbidden): leaders unknown, and the exit code does \
                 not say whether tenants are served"
            ));
            None
        }
        Err(Unreadable::Failed(why)) => return Err(why),
    };
    let mut survey = survey(&clusters, leases.as_deref(), Timestamp::now());
    match Api::<express_api::OperatorRelease>::namespaced(client.clone(), operator_namespace)
        .list_paged(&ListParams::default())
        .await
    {
        Ok(list) => with_releases(&mut survey, &list.items),
        // No OperatorRelease CRD: an operator older than releases.
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => warnings.push(format!(
            "warning: cannot read OperatorReleases in {operator_namespace}: {error}; the RELEASE column is left out"
        )),
    }
    warnings.extend(without_lease_lines(&survey));
    Ok(Read { survey, warnings })
}

/// Why the Leases are not known.
enum Unreadable {
    /// Not allowed: leadership is unknown, and the verb still reports the rest.
    Forbidden(String),
    /// Anything else: the verb cannot run.
    Failed(String),
}

/// The ring Leases of the operator namespace: all of them when they may be listed, else the
/// Lease of each ring in `wanted` one by one (`doctor` needs only `get`, so a user set up for it
/// can still see who leads the rings the tenants name).
async fn read_leases(
    client: &Client,
    operator_namespace: &str,
    wanted: &BTreeSet<String>,
) -> Result<Vec<Lease>, Unreadable> {
    let api = Api::<Lease>::namespaced(client.clone(), operator_namespace);
    match api.list_paged(&ListParams::default()).await {
        Ok(list) => return Ok(list.items),
        Err(error) if forbidden(&error) => {}
        Err(error) => {
            return Err(Unreadable::Failed(format!(
                "cannot list Leases in {operator_namespace}: {error}"
            )));
        }
    }
    let mut leases = Vec::new();
    let mut names: BTreeSet<String> = wanted
        .iter()
        // No operator runs for a ring its name cannot be, so there is no Lease to ask for.
        .filter(|ring| rings::ring_name_problem(ring).is_none())
        .map(|ring| rings::lease_name(ring))
        .collect();
    names.insert(rings::lease_name(rings::DEFAULT_RING));
    for name in names {
        match api.get_opt(&name).await {
            Ok(lease) => leases.extend(lease),
            Err(error) if forbidden(&error) => {
                return Err(Unreadable::Forbidden(format!(
                    "Lease {operator_namespace}/{name}"
                )));
            }
            Err(error) => {
                return Err(Unreadable::Failed(format!(
                    "cannot read Lease {operator_namespace}/{name}: {error}"
                )));
            }
        }
    }
    Ok(leases)
}
