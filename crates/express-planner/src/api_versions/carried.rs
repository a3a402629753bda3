//! The API a build carries into a DC, decided once from the flags it runs with: the CRDs its
//! release applies (with `--serve-v1beta1`, the versioned kinds serving `v1beta1` beside
//! `v1alpha1` through the conversion webhook), each with where it takes the DC, and the versions
//! of `express.dev` it knows. `express-operator run`, `express-operator crd` (and `crd check`)
//! and the version pass all take it from [`carried_api`], so a build never applies CRDs other
//! than those it prints. Then the CRD a release applies where the DC already holds one
//! ([`fitted`]): the versions it lacks listed, nothing else moved.

use express_api::conversion::ApiVersion;
use express_api::crd::{self, WebhookAt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::steps::{BuildCrd, DcCrd, Listed, Step, versions_after};

/// The flags that decide the API a build carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiFlags {
    /// `--serve-v1beta1`: carry `v1beta1` beside `v1alpha1`, converted by the webhook.
    pub serve_v1beta1: bool,
    /// Where the CRDs send conversions (an operator run outside the cluster); none: the chart's
    /// Service in `operator_namespace`. Without `serve_v1beta1` nothing converts, and it is
    /// not used.
    pub webhook_url: Option<String>,
    /// The operator's namespace, where the chart's webhook Service is.
    pub operator_namespace: String,
    /// The versions to behave as knowing (a test's older build); empty: every version this
    /// build knows.
    pub known: Vec<String>,
}

/// The API a build carries into a DC.
#[derive(Clone, Debug, PartialEq)]
pub struct CarriedApi {
    /// The versions this build knows, oldest first.
    pub known: Vec<String>,
    /// Where its CRDs send conversions, when it carries `v1beta1`; none: `v1alpha1` alone.
    pub webhook: Option<WebhookAt>,
    /// The CRDs its release applies, in a stable order, each with where it takes the DC.
    pub crds: Vec<CarriedCrd>,
}

/// One CRD as a build carries it: as it applies it, and where it takes the DC (every version
/// it lists served, stored at the newest).
#[derive(Clone, Debug, PartialEq)]
pub struct CarriedCrd {
    pub crd: CustomResourceDefinition,
    pub target: BuildCrd,
}

/// Why a build cannot make the CRDs its flags ask for (a defect of the build, said at start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CarriedApiError(pub String);

impl std::fmt::Display for CarriedApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot make the CRDs serving v1beta1: {}", self.0)
    }
}

impl std::error::Error for CarriedApiError {}

/// The API a build run with `flags` carries.
pub fn carried_api(flags: &ApiFlags) -> Result<CarriedApi, CarriedApiError> {
    let known = if flags.known.is_empty() {
        known_versions()
    } else {
        flags.known.clone()
    };
    let webhook = flags.serve_v1beta1.then(|| match &flags.webhook_url {
        Some(url) => WebhookAt::Url(url.clone()),
        None => WebhookAt::Service {
            namespace: flags.operator_namespace.clone(),
            name: crd::WEBHOOK_SERVICE.to_owned(),
            port: crd::WEBHOOK_SERVICE_PORT,
        },
    });
    let crds = match &webhook {
        Some(at) => crd::serving_v1beta1(at).map_err(CarriedApiError)?,
        None => crd::all(),
    };
    Ok(CarriedApi {
        known,
        webhook,
        crds: crds.into_iter().map(CarriedCrd::of).collect(),
    })
}

impl Default for CarriedApi {
    /// `v1alpha1` alone, every version this build knows: a build run without flags.
    fn default() -> Self {
        CarriedApi {
            known: known_versions(),
            webhook: None,
            crds: crd::all().into_iter().map(CarriedCrd::of).collect(),
        }
    }
}

impl CarriedApi {
    /// The CRDs alone, as the release applies them where the DC has none.
    pub fn crds(&self) -> Vec<CustomResourceDefinition> {
        self.crds.iter().map(|c| c.crd.clone()).collect()
    }

    /// The carried CRD of this name.
    pub fn crd(&self, name: &str) -> Option<&CarriedCrd> {
        self.crds.iter().find(|c| c.target.name == name)
    }
}

impl CarriedCrd {
    fn of(crd: CustomResourceDefinition) -> CarriedCrd {
        let versions: Vec<String> = crd.spec.versions.iter().map(|v| v.name.clone()).collect();
        let target = BuildCrd {
            name: crd.metadata.name.clone().unwrap_or_default(),
            storage: versions.last().cloned().unwrap_or_default(),
            versions,
        };
        CarriedCrd { crd, target }
    }
}

/// The CRD a build applies (`build`, as it carries it for `target`) where the DC has
/// `installed`: the versions the DC lacks listed, not served, and every other version's serving
/// and storage as the DC has them (a release never moves storage or serves a version; the
/// version pass does). Where the DC lacks the CRD, the build's as it is.
pub fn fitted(
    build: &CustomResourceDefinition,
    target: &BuildCrd,
    installed: Option<&CustomResourceDefinition>,
) -> CustomResourceDefinition {
    let Some(installed) = installed else {
        return build.clone();
    };
    let dc = DcCrd::of(installed);
    let missing: Vec<String> = target
        .versions
        .iter()
        .filter(|v| !dc.versions.iter().any(|l| l.name == **v))
        .cloned()
        .collect();
    let mut versions = versions_after(&dc, &Step::List(missing));
    versions.retain(|l| target.versions.contains(&l.name));
    with_flags(build, &versions)
}

/// The versions of `express.dev` this build knows, oldest first.
pub fn known_versions() -> Vec<String> {
    ApiVersion::ALL
        .iter()
        .map(|v| v.name().to_owned())
        .collect()
}

/// `build` with its versions' `served` and `storage` as `versions` says (the schemas stay the
/// build's); a version `versions` does not name is left out.
pub fn with_flags(
    build: &CustomResourceDefinition,
    versions: &[Listed],
) -> CustomResourceDefinition {
    let mut crd = build.clone();
    crd.spec
        .versions
        .retain_mut(|v| match versions.iter().find(|l| l.name == v.name) {
            Some(listed) => {
                v.served = listed.served;
                v.storage = listed.storage;
                true
            }
            None => false,
        });
    crd
}
