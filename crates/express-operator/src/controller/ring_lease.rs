//! This instance's ring's Lease as a notice board: what the leader reads back from it and the
//! annotations it writes there (its build, the API it applied, the versions it knows). The
//! election itself is `leader.rs`'s; this room only reads and annotates, and sits below every
//! step that says something on the Lease, so that none of them imports another for it.

use express_api::rings;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use tracing::warn;

use super::context::Context;

fn leases(ctx: &Context) -> Api<Lease> {
    Api::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace)
}

/// This ring's Lease, or `None` when it is absent or cannot be read (logged: the callers look
/// again on their next pass).
pub(super) async fn read(ctx: &Context) -> Option<Lease> {
    let name = rings::lease_name(&ctx.settings.ring);
    match leases(ctx).get_opt(&name).await {
        Ok(lease) => lease,
        Err(error) => {
            warn!(lease = %name, %error, "cannot read the ring's Lease");
            None
        }
    }
}

/// Sets (or, with `None`, removes) annotations on this ring's Lease in one merge patch; what
/// failed is logged and written again on the next pass.
pub(super) async fn annotate(ctx: &Context, annotations: &[(&str, Option<&str>)]) {
    let name = rings::lease_name(&ctx.settings.ring);
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(key, value)| ((*key).to_owned(), serde_json::json!(value)))
        .collect();
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    if let Err(error) = leases(ctx)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        let keys: Vec<&String> = annotations.keys().collect();
        warn!(lease = %name, %error, ?keys, "cannot write on the ring's Lease");
    }
}
