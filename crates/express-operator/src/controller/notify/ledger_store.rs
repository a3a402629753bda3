//! The ledger's ConfigMap, `express-notified-<ring>` in the operator's namespace: read when
//! this instance begins to lead, written (server-side apply, the operator's field manager)
//! after each pass that changed it.

use express_notify::ledger::LEDGER_KEY;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

use crate::controller::context::Context;

/// The ledger's text, `None` when it was never written.
pub(super) async fn read(ctx: &Context) -> Result<Option<String>, String> {
    let name = express_notify::ledger::configmap_name(&ctx.settings.ring);
    let namespace = &ctx.settings.operator_namespace;
    let map = Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
        .get_opt(&name)
        .await
        .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))?;
    Ok(map.map(|m| {
        m.data
            .and_then(|mut d| d.remove(LEDGER_KEY))
            .unwrap_or_default()
    }))
}

pub(super) async fn write(ctx: &Context, text: &str) -> Result<(), String> {
    let name = express_notify::ledger::configmap_name(&ctx.settings.ring);
    let namespace = &ctx.settings.operator_namespace;
    let map = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": express_api::keys::FIELD_MANAGER},
        },
        "data": {LEDGER_KEY: text},
    });
    Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
        .patch(
            &name,
            &PatchParams::apply(express_api::keys::FIELD_MANAGER).force(),
            &Patch::Apply(&map),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))
}
