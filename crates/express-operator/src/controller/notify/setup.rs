//! The configuration as the leader reads it: the ConfigMap `express-notifications` of the
//! operator's namespace, each destination's URL and signing key resolved from the Secret of the
//! same name. A destination whose Secret key is missing is left out and named, like any other
//! entry that cannot be used.

use std::collections::BTreeMap;

use express_notify::Config;
use express_notify::config::{CONFIG_KEY, DEFAULT_CONFIG_NAME};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::Resource;
use kube::api::Api;

use crate::controller::context::Context;

/// Where one destination's messages are posted, and with which key they are signed.
pub(super) struct Endpoint {
    pub(super) url: String,
    pub(super) signing_key: Option<Vec<u8>>,
}

pub(super) struct Setup {
    pub(super) config: Config,
    pub(super) endpoints: BTreeMap<String, Endpoint>,
    /// The ConfigMap, for the events about it.
    pub(super) reference: ObjectReference,
    /// When the ConfigMap was created (unix seconds): a ledger that does not exist yet begins
    /// there, so what happened between then and this leader's first look is still told.
    pub(super) created: Option<i64>,
}

/// The configuration, `None` when the ConfigMap does not exist (nobody is told).
pub(super) async fn read(ctx: &Context) -> Result<Option<Setup>, String> {
    let namespace = &ctx.settings.operator_namespace;
    let Some(map) = Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
        .get_opt(DEFAULT_CONFIG_NAME)
        .await
        .map_err(|e| format!("ConfigMap {namespace}/{DEFAULT_CONFIG_NAME}: {e}"))?
    else {
        return Ok(None);
    };
    let reference = map.object_ref(&());
    let created = map
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second());
    let text = map
        .data
        .as_ref()
        .and_then(|d| d.get(CONFIG_KEY))
        .cloned()
        .unwrap_or_default();
    let mut config = express_notify::config::parse(&text)
        .map_err(|e| format!("ConfigMap {namespace}/{DEFAULT_CONFIG_NAME}: {e}"))?;
    let secret = if config
        .destinations
        .iter()
        .any(|d| d.url_secret_key.is_some() || d.signing_secret_key.is_some())
    {
        Api::<Secret>::namespaced(ctx.client.clone(), namespace)
            .get_opt(DEFAULT_CONFIG_NAME)
            .await
            .map_err(|e| format!("Secret {namespace}/{DEFAULT_CONFIG_NAME}: {e}"))?
    } else {
        None
    };
    let endpoints = resolve(&mut config, secret.as_ref(), namespace);
    Ok(Some(Setup {
        config,
        endpoints,
        reference,
        created,
    }))
}

/// Each destination's URL and key; a destination whose Secret key is missing is left out.
fn resolve(
    config: &mut Config,
    secret: Option<&Secret>,
    namespace: &str,
) -> BTreeMap<String, Endpoint> {
    let value = |key: &str| -> Result<Vec<u8>, String> {
        let secret =
            secret.ok_or_else(|| format!("Secret {namespace}/{DEFAULT_CONFIG_NAME} not found"))?;
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .ok_or_else(|| format!("Secret {namespace}/{DEFAULT_CONFIG_NAME} has no key {key}"))
    };
    let mut endpoints = BTreeMap::new();
    let mut problems = Vec::new();
    for d in &config.destinations {
        let url = match (&d.url, &d.url_secret_key) {
            (Some(url), _) => Ok(url.clone()),
            (None, Some(key)) => value(key).and_then(|bytes| {
                String::from_utf8(bytes)
                    .map(|url| url.trim().to_owned())
                    .map_err(|_| format!("the Secret's key {key} is not text"))
            }),
            (None, None) => Err("no url".into()),
        };
        let key = d.signing_secret_key.as_deref().map(value).transpose();
        match (url, key) {
            (Ok(url), Ok(signing_key)) => {
                endpoints.insert(d.name.clone(), Endpoint { url, signing_key });
            }
            (Err(why), _) | (_, Err(why)) => problems.push(format!("{}: {why}", d.name)),
        }
    }
    config
        .destinations
        .retain(|d| endpoints.contains_key(&d.name));
    config.problems.extend(problems);
    endpoints
}
