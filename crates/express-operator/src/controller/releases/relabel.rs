//! Moving a tenant: the rings' hand-over, started by a release. The release sets the tenant's
//! ring label under the resourceVersion it read and marks it as its own; the two rings'
//! operators release and adopt.

use express_api::ExpressCluster;
use express_api::keys::LABEL_OPERATOR_RING;
use express_api::release::{ANNOTATION_MOVED_AT, ANNOTATION_RELEASED_BY};
use express_api::rings::DEFAULT_RING;
use express_planner::release::{Direction, Move};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use tracing::info;

use super::events::{self, publish};
use crate::controller::context::Context;
use crate::controller::error::Error;

/// Sets the tenant's ring label (none for the default ring) and marks it as this release's,
/// only if the ExpressCluster is still the version the step read: a person who relabelled it
/// meanwhile wins (409), and the next step reads anew.
pub(super) async fn move_tenant(
    ctx: &Context,
    release: &str,
    m: &Move,
    resource_version: Option<String>,
    now: Timestamp,
) -> Result<(), Error> {
    let label = (m.to_ring != DEFAULT_RING).then(|| m.to_ring.clone());
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "labels": {LABEL_OPERATOR_RING: label},
            "annotations": {
                ANNOTATION_RELEASED_BY: release,
                ANNOTATION_MOVED_AT: now.to_string(),
            },
        }
    });
    let api: Api<ExpressCluster> = Api::namespaced(ctx.client.clone(), &m.namespace);
    match api
        .patch(&m.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(cluster) => {
            ctx.moves.remember(&cluster, release, m, now);
            let back = m.direction == Direction::Back;
            info!(namespace = %m.namespace, cluster = %m.name, ring = %m.to_ring, back, release, "moved a tenant");
            publish(
                ctx,
                Some(cluster.object_ref(&())),
                events::tenant_moved(release, &m.to_ring, back),
            )
            .await;
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(()),
        Err(source) => Err(Error::MoveTenant {
            tenant: format!("{}/{}", m.namespace, m.name),
            ring: m.to_ring.clone(),
            release: release.to_owned(),
            source,
        }),
    }
}
