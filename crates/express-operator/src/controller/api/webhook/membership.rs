//! Which pods answer the webhook: only those whose build knows every version the CRDs list
//! (DESIGN section 18: "served only by builds that know every served version").
//!
//! The chart's Service selects the operator's pods labelled
//! `express.dev/conversion: serving`, and each pod sets or removes that label on itself: it
//! reads the CRDs every look and labels itself only while its build knows every version they
//! list, served or not. A pod of a build that does not know a version is therefore out of the
//! Service before that version can be served: whoever adds a version lists it `served: false`
//! first, waits until the Service's endpoints are only pods that know it, then serves it. The
//! pod also writes the versions it knows (`express.dev/api-versions`), so that wait, doctor and
//! a person can see which pods are which without asking them.
//!
//! The decision is pure ([`serves`], [`listed_versions`]); [`Membership`] is its I/O.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use express_api::keys::{ANNOTATION_API_VERSIONS, CONVERSION_SERVING, LABEL_CONVERSION};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

/// Why a pod could not decide or record whether it serves (it tries again).
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    #[error("cannot read CRD {crd} to learn the versions it lists: {source}")]
    Crd { crd: String, source: kube::Error },
    #[error("cannot label the operator's own pod {namespace}/{pod}: {source}")]
    Pod {
        namespace: String,
        pod: String,
        source: kube::Error,
    },
}

/// Every version the CRDs list, served or not.
pub fn listed_versions<'a>(
    crds: impl IntoIterator<Item = &'a CustomResourceDefinition>,
) -> BTreeSet<String> {
    crds.into_iter()
        .flat_map(|crd| crd.spec.versions.iter().map(|v| v.name.clone()))
        .collect()
}

/// Whether a build that knows `known` may answer conversions between `listed`: it must know
/// each of them. With no CRD read (nothing listed) it serves nothing: there is nothing to
/// convert, and a pod that could not read the CRDs must not claim it can.
pub fn serves(known: &[String], listed: &BTreeSet<String>) -> bool {
    !listed.is_empty() && listed.iter().all(|v| known.contains(v))
}

/// The merge patch that records the decision on the pod: the label set or removed, and the
/// versions the build knows.
pub fn pod_patch(known: &[String], serving: bool) -> serde_json::Value {
    let label = serving.then_some(CONVERSION_SERVING);
    serde_json::json!({
        "metadata": {
            "labels": {LABEL_CONVERSION: label},
            "annotations": {ANNOTATION_API_VERSIONS: known.join(",")},
        }
    })
}

/// One pod's membership in the webhook's Service.
pub struct Membership {
    client: kube::Client,
    namespace: String,
    pod: String,
    known: Vec<String>,
    crds: Vec<String>,
    recorded: Mutex<Option<bool>>,
}

impl Membership {
    /// `pod` in `namespace` (the operator's), for a build that knows `known`, deciding on
    /// the versions `crds` list.
    pub fn new(
        client: kube::Client,
        namespace: String,
        pod: String,
        known: Vec<String>,
        crds: Vec<String>,
    ) -> Membership {
        Membership {
            client,
            namespace,
            pod,
            known,
            crds,
            recorded: Mutex::new(None),
        }
    }

    /// Decides and records every `every` until the task is dropped.
    pub async fn run(self, every: Duration) {
        let mut failures = 0u32;
        loop {
            let wait = match self.look().await {
                Ok(_) => {
                    failures = 0;
                    every
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, "cannot decide whether this pod serves the conversion webhook; trying again");
                    crate::runner::backoff(failures).min(every)
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// One look: reads the CRDs, decides, and writes the pod's label when the decision is not
    /// the one last written. Returns the decision.
    pub async fn look(&self) -> Result<bool, MembershipError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut crds = Vec::new();
        for name in &self.crds {
            let crd = api
                .get_opt(name)
                .await
                .map_err(|source| MembershipError::Crd {
                    crd: name.clone(),
                    source,
                })?;
            crds.extend(crd);
        }
        let listed = listed_versions(&crds);
        let serving = serves(&self.known, &listed);
        let recorded = *self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        if recorded != Some(serving) {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
            pods.patch(
                &self.pod,
                &PatchParams::default(),
                &Patch::Merge(&pod_patch(&self.known, serving)),
            )
            .await
            .map_err(|source| MembershipError::Pod {
                namespace: self.namespace.clone(),
                pod: self.pod.clone(),
                source,
            })?;
            tracing::info!(
                serving,
                listed = ?listed,
                known = ?self.known,
                "conversion webhook: this pod {}",
                if serving { "serves it" } else { "stays out of it (its build does not know every listed version)" }
            );
            *self.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(serving);
        }
        Ok(serving)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    };

    fn crd(versions: &[(&str, bool)]) -> CustomResourceDefinition {
        CustomResourceDefinition {
            spec: CustomResourceDefinitionSpec {
                versions: versions
                    .iter()
                    .map(|(name, served)| CustomResourceDefinitionVersion {
                        name: (*name).to_owned(),
                        served: *served,
                        ..CustomResourceDefinitionVersion::default()
                    })
                    .collect(),
                ..CustomResourceDefinitionSpec::default()
            },
            ..CustomResourceDefinition::default()
        }
    }

    fn known(versions: &[&str]) -> Vec<String> {
        versions.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn a_build_serves_only_when_it_knows_every_listed_version() {
        let both = known(&["v1alpha1", "v1beta1"]);
        let old = known(&["v1alpha1"]);
        let cases: [(&str, Vec<CustomResourceDefinition>, &Vec<String>, bool); 7] = [
            (
                "one version, known",
                vec![crd(&[("v1alpha1", true)])],
                &old,
                true,
            ),
            (
                "a newer build, one version listed",
                vec![crd(&[("v1alpha1", true)])],
                &both,
                true,
            ),
            (
                "both served, both known",
                vec![crd(&[("v1alpha1", true), ("v1beta1", true)])],
                &both,
                true,
            ),
            (
                "both served, the older build",
                vec![crd(&[("v1alpha1", true), ("v1beta1", true)])],
                &old,
                false,
            ),
            // Listed before served: the older build leaves before the version is served.
            (
                "listed, not served yet",
                vec![crd(&[("v1alpha1", true), ("v1beta1", false)])],
                &old,
                false,
            ),
            (
                "one CRD of several lists it",
                vec![
                    crd(&[("v1alpha1", true)]),
                    crd(&[("v1alpha1", true), ("v1beta1", true)]),
                ],
                &old,
                false,
            ),
            ("no CRD read", vec![], &both, false),
        ];
        for (name, crds, known, expected) in cases {
            assert_eq!(serves(known, &listed_versions(&crds)), expected, "{name}");
        }
    }

    #[test]
    fn a_version_no_build_knows_keeps_every_build_out() {
        let listed = listed_versions(&[crd(&[("v1alpha1", true), ("v1", false)])]);
        assert!(!serves(&known(&["v1alpha1", "v1beta1"]), &listed));
    }

    #[test]
    fn the_patch_sets_the_label_or_removes_it_and_names_the_known_versions() {
        let versions = known(&["v1alpha1", "v1beta1"]);
        assert_eq!(
            pod_patch(&versions, true),
            serde_json::json!({"metadata": {
                "labels": {"express.dev/conversion": "serving"},
                "annotations": {"express.dev/api-versions": "v1alpha1,v1beta1"},
            }})
        );
        assert_eq!(
            pod_patch(&versions, false)["metadata"]["labels"]["express.dev/conversion"],
            serde_json::Value::Null,
            "a merge patch removes a label with null"
        );
    }
}
