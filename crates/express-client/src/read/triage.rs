//! Reading what the doctor's triage needs of one DC: its Express objects (everywhere, or at least
//! in the namespace in focus), then around them the operator's Lease, Deployment, pods, control
//! ConfigMap, Warning events and releases. What cannot be read is named in the snapshot.

use std::collections::HashMap;
use std::time::Duration;

use express_api::keys::REPORTING_CONTROLLER;
use express_api::rings;
use express_triage::observe;
use express_triage::{ControlPlane, Fleet, LeaseSeen, ReleaseSeen, Ring, Tenant, Warning};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};
use list_pages::ListPaged;

use crate::read::live::{self, forbidden, inventory};
use crate::read::unread::Unread;

/// The label the operator chart puts on every ring's Deployment.
const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=express-operator";

/// What triage needs besides the Express objects already read and what the API server said of
/// its readiness ([`control_plane`]): each ring's Lease, Deployment and pods, and the operator's
/// Warning events. What cannot be read is named in `unreadable`. `doctor` calls it after listing
/// the fleet, the dashboard's banner with the objects its watches hold.
pub async fn fleet_around(
    client: &Client,
    operator_namespace: &str,
    objects: &express_api::Objects,
    mut unreadable: Vec<String>,
    control_plane: ControlPlane,
) -> Fleet {
    let tenants = tenants(objects, operator_namespace);
    let deployments = operator_deployments(client, operator_namespace, &mut unreadable).await;
    let operator_pods = operator_pods(client, operator_namespace, &mut unreadable).await;
    let fleet_rings = rings_seen(
        client,
        operator_namespace,
        &tenants,
        &deployments,
        &operator_pods,
        &mut unreadable,
    )
    .await;
    let warnings = operator_warnings(client, &mut unreadable).await;
    let releases = releases(client, operator_namespace, &mut unreadable).await;
    let fleet_releases = fleet_release_copies(client, operator_namespace, &mut unreadable).await;
    Fleet {
        now: k8s_openapi::jiff::Timestamp::now(),
        rings: fleet_rings,
        tenants,
        warnings,
        unreadable,
        releases,
        fleet_releases,
        control_plane,
    }
}

/// Each tenant with its pause, read for the whole fleet in one pass (not a planner snapshot per
/// tenant: those also read every node's revision history, which the checks do not use).
fn tenants(objects: &express_api::Objects, operator_namespace: &str) -> Vec<Tenant> {
    let inventory = inventory(objects, operator_namespace);
    let pauses: HashMap<express_api::ClusterKey, (String, Option<String>)> =
        express_planner::observe::pauses(&inventory)
            .into_iter()
            .map(|(key, pause)| (key, (pause.scope.name().to_owned(), pause.reason)))
            .collect();
    observe::tenants(objects, |key| pauses.get(key).cloned())
}

async fn operator_deployments(
    client: &Client,
    operator_namespace: &str,
    unreadable: &mut Vec<String>,
) -> Vec<Deployment> {
    let selected = ListParams::default().labels(OPERATOR_SELECTOR);
    match Api::<Deployment>::namespaced(client.clone(), operator_namespace)
        .list_paged(&selected)
        .await
    {
        Ok(list) => list.items,
        Err(error) => {
            unreadable.push(format!(
                "Deployments in {operator_namespace}: {}",
                reason(&error)
            ));
            Vec::new()
        }
    }
}

/// Pods of every ring: the chart names a ring's pods `express-operator-RING`.
async fn operator_pods(
    client: &Client,
    operator_namespace: &str,
    unreadable: &mut Vec<String>,
) -> Vec<Pod> {
    match Api::<Pod>::namespaced(client.clone(), operator_namespace)
        .list_paged(&ListParams::default())
        .await
    {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|p| observe::is_operator_pod(p.labels()))
            .collect(),
        Err(error) => {
            unreadable.push(format!("pods in {operator_namespace}: {}", reason(&error)));
            Vec::new()
        }
    }
}

/// Every ring with a tenant, and `default` always: each is checked for a live leader, so each
/// comes with its Lease, Deployment and pods.
async fn rings_seen(
    client: &Client,
    operator_namespace: &str,
    tenants: &[Tenant],
    deployments: &[Deployment],
    pods: &[Pod],
    unreadable: &mut Vec<String>,
) -> Vec<Ring> {
    let mut ring_names: std::collections::BTreeSet<String> =
        tenants.iter().map(|t| t.ring.clone()).collect();
    ring_names.insert(rings::DEFAULT_RING.to_owned());
    let mut fleet_rings = Vec::new();
    for ring in ring_names {
        let lease = ring_lease(client, operator_namespace, &ring, unreadable).await;
        fleet_rings.push(Ring {
            deployment: deployments
                .iter()
                .find(|d| rings::ring_of(d.labels()) == ring)
                .map(observe::deployment),
            pods: pods
                .iter()
                .filter(|p| rings::ring_of(p.labels()) == ring)
                .map(observe::operator_pod)
                .collect(),
            name: ring,
            lease,
        });
    }
    fleet_rings
}

async fn ring_lease(
    client: &Client,
    operator_namespace: &str,
    ring: &str,
    unreadable: &mut Vec<String>,
) -> LeaseSeen {
    let (namespace, name) = (operator_namespace.to_owned(), rings::lease_name(ring));
    match Api::<Lease>::namespaced(client.clone(), operator_namespace)
        .get_opt(&name)
        .await
    {
        Ok(Some(lease)) => LeaseSeen::Seen(observe::lease(&lease)),
        Ok(None) => LeaseSeen::Missing { namespace, name },
        Err(error) => {
            unreadable.push(format!("Lease {namespace}/{name}: {}", reason(&error)));
            LeaseSeen::Unreadable { namespace, name }
        }
    }
}

/// The Warning events the operator reported.
async fn operator_warnings(client: &Client, unreadable: &mut Vec<String>) -> Vec<Warning> {
    match warning_events(client).await {
        Ok(events) => events
            .iter()
            .filter(|e| e.reporting_controller.as_deref() == Some(REPORTING_CONTROLLER))
            .filter_map(observe::warning)
            .collect(),
        Err(error) => {
            unreadable.push(format!("Events: {}", reason(&error)));
            Vec::new()
        }
    }
}

/// The OperatorReleases: none when their CRD is not installed (an operator older than releases).
async fn releases(
    client: &Client,
    operator_namespace: &str,
    unreadable: &mut Vec<String>,
) -> Vec<ReleaseSeen> {
    match Api::<express_api::OperatorRelease>::namespaced(client.clone(), operator_namespace)
        .list_paged(&ListParams::default())
        .await
    {
        Ok(list) => list.items.iter().map(observe::release).collect(),
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => {
            unreadable.push(format!(
                "OperatorReleases in {operator_namespace}: {}",
                reason(&error)
            ));
            Vec::new()
        }
    }
}

/// Releases across DCs: the copies of this DC, none before their CRD.
async fn fleet_release_copies(
    client: &Client,
    operator_namespace: &str,
    unreadable: &mut Vec<String>,
) -> Vec<ReleaseSeen> {
    match crate::read::fleet_release::copies(client, operator_namespace).await {
        Ok(plans) => plans.iter().map(observe::release).collect(),
        Err(Unread::NotInstalled(_)) => Vec::new(),
        Err(why) => {
            unreadable.push(why.to_string());
            Vec::new()
        }
    }
}

/// The Warning events of every namespace: asked of the server with a field selector, since a
/// healthy fleet has few warnings among many Normal events; a server that refuses the selector
/// (400 Bad Request) is asked for every event, and triage keeps the warnings.
async fn warning_events(client: &Client) -> Result<Vec<Event>, kube::Error> {
    let events = Api::<Event>::all(client.clone());
    match events
        .list_paged(&ListParams::default().fields("type=Warning"))
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 400 => {
            Ok(events.list_paged(&ListParams::default()).await?.items)
        }
        read => Ok(read?.items),
    }
}

/// Why a read failed, in a few words.
fn reason(error: &kube::Error) -> String {
    if forbidden(error) {
        "forbidden".into()
    } else {
        error.to_string()
    }
}

/// Reads what triage needs. The Express objects must be readable (everywhere, or at least in
/// `focus`); anything else that cannot be read is named in the report instead.
pub async fn read_fleet(
    client: &Client,
    operator_namespace: &str,
    focus: Option<&str>,
) -> Result<(Fleet, express_api::Objects), String> {
    // Asked first: an API server that says it is not ready is the answer, and reading the fleet
    // through it would take as long as its storage's timeouts to say less.
    let control_plane = control_plane(client).await;
    if control_plane.failing() {
        let fleet = Fleet {
            now: k8s_openapi::jiff::Timestamp::now(),
            unreadable: vec!["the fleet, not read: the API server says it is not ready".into()],
            control_plane,
            ..Fleet::default()
        };
        return Ok((fleet, express_api::Objects::default()));
    }
    let mut unreadable = Vec::new();
    let objects = match live::load(client, None, operator_namespace, live::Reading::Listing).await {
        Ok(objects) => objects,
        Err(everywhere) => match focus {
            Some(namespace) => {
                let objects = live::load(
                    client,
                    Some(namespace),
                    operator_namespace,
                    live::Reading::Listing,
                )
                .await
                .map_err(|e| format!("{everywhere}; in {namespace}: {e}"))?;
                unreadable.push(format!(
                    "Express objects outside namespace {namespace} ({everywhere})"
                ));
                objects
            }
            None => return Err(everywhere),
        },
    };
    let fleet = fleet_around(
        client,
        operator_namespace,
        &objects,
        unreadable,
        control_plane,
    )
    .await;
    Ok((fleet, objects))
}

/// How long the API server has to say whether it is ready.
const READYZ_WITHIN: Duration = Duration::from_secs(10);

/// What the API server says of its own readiness (`/readyz?verbose`, which every authenticated
/// user may read); an answer that is not about readiness (forbidden, not found, no answer) is
/// kept as the error it was.
pub async fn control_plane(client: &Client) -> ControlPlane {
    let request = match http::Request::get("/readyz?verbose").body(Vec::new()) {
        Ok(request) => request,
        Err(error) => return ControlPlane::Unanswered(format!("/readyz: {error}")),
    };
    match tokio::time::timeout(READYZ_WITHIN, client.request_text(request)).await {
        Err(_) => ControlPlane::Unanswered(format!(
            "/readyz did not answer within {} s",
            READYZ_WITHIN.as_secs()
        )),
        Ok(Ok(_)) => ControlPlane::Ready,
        Ok(Err(kube::Error::Api(status))) if status.code >= 500 => {
            ControlPlane::from_readyz(status.code, &status.message)
        }
        Ok(Err(error)) => ControlPlane::Unanswered(format!("/readyz: {error}")),
    }
}

/// The DC's doctor verdict, with the same checks as `doctor --context`.
pub async fn verdict(
    client: &Client,
    operator_namespace: &str,
) -> Result<express_triage::Verdict, String> {
    let (fleet, _) = read_fleet(client, operator_namespace, None).await?;
    Ok(express_triage::triage(&fleet, &express_triage::Thresholds::default()).verdict)
}
