//! Keeps the conversion webhook's certificates, the I/O around [`super::rotation`]: the
//! authority in a Secret of the operator's namespace that every replica shares, its certificate
//! in the `caBundle` of every CRD that converts through the webhook, and this replica's serving
//! certificate, issued from the authority that signs now.
//!
//! Every replica that serves the webhook runs a keeper; they agree through the API server. Each
//! write carries the `resourceVersion` it was decided on, so a replica deciding on what another
//! has just changed loses the race and decides again on its next look.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::authority::{
    Authority, CertificateError, Validity, bundle, new_authority, new_serving, validity_of,
};
use super::rotation::{
    Kept, Policy, Signer, Upkeep, authority_validity, serving_due, serving_validity, signer, upkeep,
};
use super::server::ServingCertificate;

/// The Secret that holds the authority, in the operator's namespace.
pub const SECRET_NAME: &str = "express-operator-webhook";
/// On that Secret: since when (seconds since the epoch) every converting CRD's `caBundle` holds
/// the current authority.
pub const ANNOTATION_IN_BUNDLE_SINCE: &str = "express.dev/ca-in-bundle-since";
const CURRENT_CERTIFICATE: &str = "ca.crt";
const CURRENT_KEY: &str = "ca.key";
const PREVIOUS_CERTIFICATE: &str = "previous-ca.crt";
const PREVIOUS_KEY: &str = "previous-ca.key";

/// Why the keeper could not look after the certificates this time (it tries again).
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    #[error("cannot read or write Secret {namespace}/{SECRET_NAME}: {source}")]
    Secret {
        namespace: String,
        source: kube::Error,
    },
    #[error("cannot read or write the caBundle of CRD {crd}: {source}")]
    Crd { crd: String, source: kube::Error },
    #[error("Secret {namespace}/{SECRET_NAME} has no {key}")]
    Missing {
        namespace: String,
        key: &'static str,
    },
    #[error(transparent)]
    Certificate(#[from] CertificateError),
}

/// The authorities as the Secret holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Authorities {
    current: Authority,
    previous: Option<Authority>,
    in_bundle_since: Option<i64>,
}

impl Authorities {
    fn bundle(&self) -> String {
        bundle(
            self.previous
                .iter()
                .chain(std::iter::once(&self.current))
                .map(|a| a.certificate.as_str()),
        )
    }

    fn kept(&self) -> Result<Kept, CertificateError> {
        Ok(Kept {
            current: validity_of(&self.current.certificate, "certificate authority")?,
            previous: match &self.previous {
                Some(previous) => Some(validity_of(
                    &previous.certificate,
                    "previous certificate authority",
                )?),
                None => None,
            },
            current_in_bundle_since: self.in_bundle_since,
        })
    }
}

/// What this replica serves: the certificate's validity and the authority that signed it.
#[derive(Clone, Debug)]
struct Served {
    validity: Validity,
    signed_by: String,
}

/// One replica's keeper.
pub struct Keeper {
    client: kube::Client,
    namespace: String,
    /// The names the serving certificate is for (the Service's DNS names, or a loopback address).
    names: Vec<String>,
    /// The CRDs whose `caBundle` it keeps (those that name the webhook; the others are left be).
    crds: Vec<String>,
    policy: Policy,
    certificate: Arc<ServingCertificate>,
    served: Mutex<Option<Served>>,
}

impl Keeper {
    pub fn new(
        client: kube::Client,
        namespace: String,
        names: Vec<String>,
        crds: Vec<String>,
        certificate: Arc<ServingCertificate>,
    ) -> Keeper {
        Keeper {
            client,
            namespace,
            names,
            crds,
            policy: Policy::default(),
            certificate,
            served: Mutex::new(None),
        }
    }

    /// The keeper with other lifetimes and margins (tests run a whole cycle in minutes).
    pub fn with_policy(mut self, policy: Policy) -> Keeper {
        self.policy = policy;
        self
    }

    /// Looks after the certificates every `every` until the task is dropped.
    pub async fn run(self, every: Duration) {
        let mut failures = 0u32;
        loop {
            let wait = match self.look(now()).await {
                Ok(step) => {
                    failures = 0;
                    if step != Upkeep::Nothing {
                        tracing::info!(step = ?step, "conversion webhook certificates looked after");
                        // One step at a time; the next follows at once.
                        Duration::from_millis(200)
                    } else {
                        every
                    }
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, "cannot look after the conversion webhook's certificates; trying again");
                    crate::runner::backoff(failures).min(every)
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// One look: the next step of the authorities' upkeep, then this replica's certificate.
    pub async fn look(&self, now: i64) -> Result<Upkeep, KeeperError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret_error = |source| KeeperError::Secret {
            namespace: self.namespace.clone(),
            source,
        };
        let secret = secrets.get_opt(SECRET_NAME).await.map_err(secret_error)?;
        let authorities = secret
            .as_ref()
            .map(|s| self.authorities_of(s))
            .transpose()?;
        let kept = authorities.as_ref().map(Authorities::kept).transpose()?;
        let converting = self.converting_crds().await?;
        let wanted = authorities.as_ref().map(Authorities::bundle);
        let holds = converting.iter().all(|crd| {
            wanted
                .as_deref()
                .is_some_and(|w| ca_bundle(crd) == Some(w.as_bytes()))
        });
        let step = upkeep(kept.as_ref(), holds, now, &self.policy);
        let resource_version = secret
            .as_ref()
            .and_then(|s| s.metadata.resource_version.clone());
        match (step, &authorities) {
            (Upkeep::Create, _) => {
                let fresh = Authorities {
                    current: new_authority(authority_validity(now, &self.policy))?,
                    previous: None,
                    in_bundle_since: None,
                };
                self.write(&secrets, &fresh, resource_version).await?;
            }
            (Upkeep::WriteBundle, Some(authorities)) => {
                let bundle = authorities.bundle();
                for crd in &converting {
                    self.write_bundle(crd, &bundle).await?;
                }
            }
            (Upkeep::MarkInBundle, Some(authorities)) => {
                let marked = Authorities {
                    in_bundle_since: Some(now),
                    ..authorities.clone()
                };
                self.write(&secrets, &marked, resource_version).await?;
            }
            (Upkeep::Rotate, Some(authorities)) => {
                let rotated = Authorities {
                    current: new_authority(authority_validity(now, &self.policy))?,
                    previous: Some(authorities.current.clone()),
                    in_bundle_since: None,
                };
                self.write(&secrets, &rotated, resource_version).await?;
            }
            (Upkeep::RetirePrevious, Some(authorities)) => {
                let retired = Authorities {
                    previous: None,
                    ..authorities.clone()
                };
                self.write(&secrets, &retired, resource_version).await?;
            }
            _ => {}
        }
        if let (Some(authorities), Some(kept)) = (&authorities, &kept) {
            self.serve_from(authorities, kept, now)?;
        }
        Ok(step)
    }

    /// Issues this replica's serving certificate again when it is due.
    fn serve_from(
        &self,
        authorities: &Authorities,
        kept: &Kept,
        now: i64,
    ) -> Result<(), KeeperError> {
        let (authority, validity) = match (signer(kept, now, &self.policy), &authorities.previous) {
            (Signer::Previous, Some(previous)) => (previous, kept.previous),
            _ => (&authorities.current, Some(kept.current)),
        };
        let Some(authority_validity) = validity else {
            return Ok(());
        };
        let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        let due = serving_due(
            served.as_ref().map(|s| s.validity),
            served
                .as_ref()
                .is_some_and(|s| s.signed_by == authority.certificate),
            now,
            &self.policy,
        );
        if !due {
            return Ok(());
        }
        let serving = new_serving(
            authority,
            &self.names,
            serving_validity(authority_validity, now, &self.policy),
        )?;
        self.certificate.set(&serving)?;
        tracing::info!(
            not_after = serving.validity.not_after,
            "conversion webhook serving certificate issued"
        );
        *served = Some(Served {
            validity: serving.validity,
            signed_by: authority.certificate.clone(),
        });
        Ok(())
    }

    fn authorities_of(&self, secret: &Secret) -> Result<Authorities, KeeperError> {
        let empty = BTreeMap::new();
        let data = secret.data.as_ref().unwrap_or(&empty);
        let text = |key: &'static str| -> Option<String> {
            data.get(key)
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
        };
        let required = |key: &'static str| {
            text(key).ok_or_else(|| KeeperError::Missing {
                namespace: self.namespace.clone(),
                key,
            })
        };
        let current = Authority {
            certificate: required(CURRENT_CERTIFICATE)?,
            key: required(CURRENT_KEY)?,
        };
        let previous = match (text(PREVIOUS_CERTIFICATE), text(PREVIOUS_KEY)) {
            (Some(certificate), Some(key)) => Some(Authority { certificate, key }),
            _ => None,
        };
        let in_bundle_since = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_IN_BUNDLE_SINCE))
            .and_then(|v| v.parse().ok());
        Ok(Authorities {
            current,
            previous,
            in_bundle_since,
        })
    }

    /// Writes the authorities; a conflict (another replica wrote first) is no error: the next
    /// look decides on what it wrote.
    async fn write(
        &self,
        secrets: &Api<Secret>,
        authorities: &Authorities,
        resource_version: Option<String>,
    ) -> Result<(), KeeperError> {
        let mut data = BTreeMap::from([
            (
                CURRENT_CERTIFICATE.to_owned(),
                ByteString(authorities.current.certificate.clone().into_bytes()),
            ),
            (
                CURRENT_KEY.to_owned(),
                ByteString(authorities.current.key.clone().into_bytes()),
            ),
        ]);
        if let Some(previous) = &authorities.previous {
            data.insert(
                PREVIOUS_CERTIFICATE.to_owned(),
                ByteString(previous.certificate.clone().into_bytes()),
            );
            data.insert(
                PREVIOUS_KEY.to_owned(),
                ByteString(previous.key.clone().into_bytes()),
            );
        }
        let annotations = authorities.in_bundle_since.map(|since| {
            BTreeMap::from([(ANNOTATION_IN_BUNDLE_SINCE.to_owned(), since.to_string())])
        });
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET_NAME.to_owned()),
                namespace: Some(self.namespace.clone()),
                resource_version: resource_version.clone(),
                annotations,
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "express-operator".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(data),
            ..Secret::default()
        };
        let written = match resource_version {
            Some(_) => secrets
                .replace(SECRET_NAME, &PostParams::default(), &secret)
                .await
                .map(|_| ()),
            None => secrets
                .create(&PostParams::default(), &secret)
                .await
                .map(|_| ()),
        };
        match written {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(KeeperError::Secret {
                namespace: self.namespace.clone(),
                source,
            }),
        }
    }

    /// The kept CRDs that convert through the webhook.
    async fn converting_crds(&self) -> Result<Vec<CustomResourceDefinition>, KeeperError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut converting = Vec::new();
        for name in &self.crds {
            let crd = api.get_opt(name).await.map_err(|source| KeeperError::Crd {
                crd: name.clone(),
                source,
            })?;
            if let Some(crd) = crd
                && crd
                    .spec
                    .conversion
                    .as_ref()
                    .is_some_and(|c| c.strategy == "Webhook" && c.webhook.is_some())
            {
                converting.push(crd);
            }
        }
        Ok(converting)
    }

    /// Writes `bundle` as the CRD's `caBundle`, on the version of the CRD it was decided on.
    async fn write_bundle(
        &self,
        crd: &CustomResourceDefinition,
        bundle: &str,
    ) -> Result<(), KeeperError> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": crd.metadata.resource_version},
            "spec": {"conversion": {"webhook": {"clientConfig": {
                "caBundle": k8s_openapi::ByteString(bundle.as_bytes().to_vec()),
            }}}}
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(KeeperError::Crd { crd: name, source }),
        }
    }
}

/// The CRD's `caBundle`, as bytes (PEM).
fn ca_bundle(crd: &CustomResourceDefinition) -> Option<&[u8]> {
    crd.spec
        .conversion
        .as_ref()?
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?
        .ca_bundle
        .as_ref()
        .map(|b| b.0.as_slice())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}
