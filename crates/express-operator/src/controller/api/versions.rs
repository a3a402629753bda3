//! The API's versions in this DC (DESIGN section 18), the I/O around
//! `express_planner::api_versions`: what the DC's CRDs list, serve and store, what each ring's
//! build knows (each leader writes it on its ring's Lease) and what the pods behind the
//! conversion webhook know; then the step that is due, taken with a write conditioned on the
//! CRD it was decided on, and an event on the ring's Lease.
//!
//! Listing a new version is the release's ([`super::crds`]: when the DC's release starts, the build
//! applies its CRDs with the versions the DC lacks listed, not served). Every later step is
//! taken here, by the leader of any ring whose build carries them: serving the listed versions,
//! moving the storage version once every ring knows it, rewriting the stored objects a page at
//! a time (each page recorded on the CRD, so a restart goes on from there), and trimming
//! `status.storedVersions`.

use std::collections::BTreeMap;

use express_api::api_record::{
    ANNOTATION_RING_API_VERSIONS, ANNOTATION_STORAGE_MIGRATION, CRD_FIELD_MANAGER, MigrationRecord,
};
use express_api::release::{ApiVersionsSeen, OperatorRelease};
use express_planner::api_versions::{
    BuildCrd, Builds, DcCrd, Step, next_step_at, versions_after, with_flags,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::events::{self, publish};
use crate::controller::context::Context;
use crate::controller::ring_lease;
use crate::crd_check::read::{resource_at, ring_versions};

/// Objects rewritten per page.
const PAGE: u32 = 100;

/// Why a step could not be taken (the next pass tries again).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("cannot write CRD {crd}: {source}")]
    Crd { crd: String, source: kube::Error },
    #[error("cannot rewrite the stored objects of {crd}: {source}")]
    Migrate { crd: String, source: kube::Error },
    #[error("cannot read what the DC's builds know: {0}")]
    Builds(kube::Error),
}

/// Writes the versions this build knows on its ring's Lease, where the other rings' leaders
/// read them before moving the storage version.
async fn say_what_this_build_knows(ctx: &Context) {
    let known = ctx.settings.api.known.join(",");
    let Some(lease) = ring_lease::read(ctx).await else {
        return;
    };
    if lease.annotations().get(ANNOTATION_RING_API_VERSIONS) != Some(&known) {
        ring_lease::annotate(ctx, &[(ANNOTATION_RING_API_VERSIONS, Some(&known))]).await;
    }
}

/// What the DC's builds know: every ring's (its Lease), and every pod's behind the webhook.
async fn builds(ctx: &Context) -> Result<Builds, StepError> {
    let namespace = &ctx.settings.operator_namespace;
    let rings = ring_versions(&ctx.client, namespace)
        .await
        .map_err(|e| StepError::Builds(e.source))?;
    let webhook_pods = match &ctx.settings.api.webhook {
        // Served by URL: by this process, which knows what it knows.
        Some(express_api::crd::WebhookAt::Url(_)) => {
            vec![(
                ctx.settings.identity.clone(),
                ctx.settings.api.known.clone(),
            )]
        }
        _ => webhook_pods(ctx).await?,
    };
    Ok(Builds {
        rings,
        webhook_pods,
    })
}

/// The pods behind the webhook's Service, as its endpoint slices list them, with the versions
/// each says its build knows (none said: none known).
async fn webhook_pods(ctx: &Context) -> Result<Vec<(String, Vec<String>)>, StepError> {
    let namespace = &ctx.settings.operator_namespace;
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), namespace);
    let selector = format!(
        "kubernetes.io/service-name={}",
        express_api::crd::WEBHOOK_SERVICE
    );
    let listed = slices
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(StepError::Builds)?;
    let names: Vec<String> = listed
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter_map(|e| e.target_ref.as_ref()?.name.clone())
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let known: BTreeMap<String, Vec<String>> = pods
        .list(&ListParams::default())
        .await
        .map_err(StepError::Builds)?
        .items
        .into_iter()
        .map(|pod| {
            let known = pod
                .annotations()
                .get(ANNOTATION_RING_API_VERSIONS)
                .map(|k| k.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            (pod.name_any(), known)
        })
        .collect();
    Ok(names
        .into_iter()
        .map(|name| {
            let knows = known.get(&name).cloned().unwrap_or_default();
            (name, knows)
        })
        .collect())
}

/// One pass, while this instance leads: says what this build knows, then takes the step each
/// carried CRD is due, if this build carries another version.
pub(crate) async fn look_after(ctx: &Context) {
    say_what_this_build_knows(ctx).await;
    if ctx.settings.api.webhook.is_none() {
        return;
    }
    let builds = match builds(ctx).await {
        Ok(builds) => builds,
        Err(error) => {
            warn!(%error, "cannot tell what the DC's builds know; no API version step this time");
            return;
        }
    };
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut seen = Vec::new();
    for carried in &ctx.settings.api.crds {
        if let Some(dc) = steps_on(ctx, &api, &carried.crd, &carried.target, &builds).await {
            seen.push(dc);
        }
    }
    if let Some(step) = express_planner::api_versions::dc_versions(&seen) {
        say_on_the_newest_release(ctx, &step).await;
    }
}

/// Where the DC's API versions stand, read from its versioned CRDs now (`v1beta1: listed, not
/// served`); none while each lists one version or when they cannot be read.
pub(super) async fn dc_step(ctx: &Context) -> Option<String> {
    let seen = crate::crd_check::read::versioned_crds(&ctx.client)
        .await
        .ok()?;
    express_planner::api_versions::dc_versions(&seen)
}

/// A pass takes at most this many steps on one CRD (a rewrite that ends is trimmed at once).
const STEPS_PER_PASS: usize = 3;

/// Takes the steps due on one CRD, one after the other while each is taken and the next is due
/// at once (a wait, or a step that failed, ends it until the next pass); the CRD as it was left.
async fn steps_on(
    ctx: &Context,
    api: &Api<CustomResourceDefinition>,
    build: &CustomResourceDefinition,
    target: &BuildCrd,
    builds: &Builds,
) -> Option<DcCrd> {
    let mut last = None;
    for _ in 0..STEPS_PER_PASS {
        let installed = match api.get_opt(&target.name).await {
            Ok(Some(installed)) => installed,
            Ok(None) => return last,
            Err(error) => {
                warn!(%error, crd = %target.name, "cannot read the DC's CRD");
                return last;
            }
        };
        let dc = DcCrd::of(&installed);
        let step = next_step_at(&dc, target, builds, Timestamp::now().as_second());
        let acts = !matches!(
            step,
            Step::List(_) | Step::Wait(_) | Step::Ahead(_) | Step::Done
        );
        let taken = take(ctx, build, &installed, &dc, &step).await;
        last = Some(dc);
        if let Err(error) = taken {
            warn!(%error, crd = %target.name, ?step, "an API version step failed; trying again");
            return last;
        }
        if !acts {
            return last;
        }
    }
    last
}

/// Writes where the DC's API versions stand (as this pass left them) into the newest
/// OperatorRelease's `status.apiVersions`, when it says otherwise: the steps go on after the
/// release that listed the version has ended, and a person reads the newest release. A merge
/// patch of that field alone: the release's own status is the release loop's apply.
async fn say_on_the_newest_release(ctx: &Context, step: &str) {
    let releases: Api<OperatorRelease> =
        Api::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace);
    let listed = match releases.list(&ListParams::default()).await {
        Ok(listed) => listed.items,
        Err(error) => {
            warn!(%error, "cannot read the OperatorReleases to say where the API versions stand");
            return;
        }
    };
    let Some(newest) = listed
        .iter()
        .max_by_key(|r| (r.creation_timestamp().map(|t| t.0), r.name_any()))
    else {
        return;
    };
    let said = newest
        .status
        .as_ref()
        .and_then(|s| s.api_versions.as_ref())
        .map(|seen| seen.step.as_str());
    if said == Some(step) {
        return;
    }
    let patch = serde_json::json!({"status": {"apiVersions": ApiVersionsSeen {
        step: step.to_owned(),
        seen_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
    }}});
    if let Err(error) = releases
        .patch_status(
            &newest.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        warn!(%error, release = %newest.name_any(), "cannot say where the API versions stand on the newest release");
    }
}

/// Takes one step on one CRD.
async fn take(
    ctx: &Context,
    build: &CustomResourceDefinition,
    installed: &CustomResourceDefinition,
    dc: &DcCrd,
    step: &Step,
) -> Result<(), StepError> {
    let name = installed.name_any();
    let note = match step {
        Step::Serve(_) | Step::MoveStorage { .. } => {
            let mut crd = with_flags(build, &versions_after(dc, step));
            // Decided on this version of the CRD: a write in between makes this one fail.
            crd.metadata.resource_version = installed.resource_version();
            Api::<CustomResourceDefinition>::all(ctx.client.clone())
                .patch(
                    &name,
                    &PatchParams::apply(CRD_FIELD_MANAGER).force(),
                    &Patch::Apply(&crd),
                )
                .await
                .map_err(|source| StepError::Crd {
                    crd: name.clone(),
                    source,
                })?;
            if let Step::MoveStorage { to, .. } = step {
                // A migration recorded before this move is not one at the new version.
                write_migration(
                    ctx,
                    &name,
                    &MigrationRecord {
                        to: to.clone(),
                        ..MigrationRecord::default()
                    },
                )
                .await?;
            }
            match step {
                Step::Serve(versions) => events::api_version_served(&name, versions),
                Step::MoveStorage { from, to } => events::storage_version_moved(&name, from, to),
                _ => return Ok(()),
            }
        }
        Step::Migrate { to } => {
            let record = migrate(ctx, installed, to).await?;
            events::stored_objects_rewritten(&name, to, record.rewritten)
        }
        Step::Trim { to, drop } => {
            let patch = serde_json::json!({"status": {"storedVersions": [to]}});
            Api::<CustomResourceDefinition>::all(ctx.client.clone())
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| StepError::Crd {
                    crd: name.clone(),
                    source,
                })?;
            events::stored_versions_trimmed(&name, to, drop)
        }
        Step::List(_) | Step::Wait(_) | Step::Ahead(_) | Step::Done => {
            if let Step::Wait(waiting) = step {
                info!(crd = %name, %waiting, "an API version step waits");
            }
            return Ok(());
        }
    };
    info!(crd = %name, ?step, "API version step taken");
    if let Some(lease) = ring_lease::read(ctx).await {
        publish(ctx, Some(lease.object_ref(&())), note).await;
    }
    Ok(())
}

/// Rewrites the stored objects of `crd` at `to`, a page at a time from where the record on the
/// CRD says, recording each page; returns the record once every page is rewritten.
async fn migrate(
    ctx: &Context,
    crd: &CustomResourceDefinition,
    to: &str,
) -> Result<MigrationRecord, StepError> {
    let name = crd.name_any();
    let failed = |source| StepError::Migrate {
        crd: name.clone(),
        source,
    };
    let mut record = crd
        .annotations()
        .get(ANNOTATION_STORAGE_MIGRATION)
        .and_then(|text| MigrationRecord::from_annotation(text))
        .filter(|r| r.to == to)
        .unwrap_or_else(|| MigrationRecord {
            to: to.to_owned(),
            ..MigrationRecord::default()
        });
    let resource = resource_at(crd, to);
    let all: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
    while !record.complete {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(next) = &record.next {
            params = params.continue_token(next);
        }
        let page = match all.list(&params).await {
            Ok(page) => page,
            // The continue token expired: start again from the first page (rewriting an
            // object twice changes nothing).
            Err(kube::Error::Api(status)) if status.code == 410 => {
                record = MigrationRecord {
                    to: to.to_owned(),
                    storage_moved_at: record.storage_moved_at,
                    ..MigrationRecord::default()
                };
                continue;
            }
            Err(source) => return Err(failed(source)),
        };
        if record.total.is_none() {
            let remaining = page.metadata.remaining_item_count.unwrap_or(0);
            record.total = Some(page.items.len() as u64 + u64::try_from(remaining).unwrap_or(0));
        }
        for object in &page.items {
            rewrite(ctx, &resource, object).await.map_err(&failed)?;
            record.rewritten += 1;
        }
        record.next = page.metadata.continue_.filter(|c| !c.is_empty());
        record.complete = record.next.is_none();
        write_migration(ctx, &name, &record).await?;
    }
    Ok(record)
}

/// Writes `object` back as it was read: the API server stores it at the storage version. An
/// object changed or deleted since it was read was written at that version already (or is
/// gone), so neither is an error.
async fn rewrite(
    ctx: &Context,
    resource: &ApiResource,
    object: &DynamicObject,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(namespace) => Api::namespaced_with(ctx.client.clone(), namespace, resource),
        None => Api::all_with(ctx.client.clone(), resource),
    };
    match api
        .replace(&object.name_any(), &PostParams::default(), object)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

async fn write_migration(
    ctx: &Context,
    crd: &str,
    record: &MigrationRecord,
) -> Result<(), StepError> {
    let text = serde_json::to_string(record).unwrap_or_default();
    let patch =
        serde_json::json!({"metadata": {"annotations": {ANNOTATION_STORAGE_MIGRATION: text}}});
    Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| StepError::Crd {
            crd: crd.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use express_planner::api_versions::Migration;

    #[test]
    fn a_migration_record_reads_back_and_a_garbled_one_is_none() {
        let record = MigrationRecord {
            to: "v1beta1".into(),
            rewritten: 200,
            total: Some(450),
            next: Some("token".into()),
            complete: false,
            storage_moved_at: Some(1_000),
        };
        let mut crd = CustomResourceDefinition::default();
        crd.annotations_mut().insert(
            ANNOTATION_STORAGE_MIGRATION.into(),
            serde_json::to_string(&record).unwrap_or_default(),
        );
        assert_eq!(
            DcCrd::of(&crd).migration,
            Some(Migration {
                to: "v1beta1".into(),
                rewritten: 200,
                total: Some(450),
                complete: false,
                storage_moved_at: Some(1_000),
            })
        );
        crd.annotations_mut()
            .insert(ANNOTATION_STORAGE_MIGRATION.into(), "{not json".into());
        assert_eq!(DcCrd::of(&crd).migration, None);
    }
}
