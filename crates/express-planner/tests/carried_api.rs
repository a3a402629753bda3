//! The API a build carries, from its flags: a table of every case `run`, `crd` and the version
//! pass meet, then the CRD a release applies where the DC already has one.

use express_api::crd::{VERSIONED, WebhookAt};
use express_planner::api_versions::{ApiFlags, CarriedApi, carried_api, fitted};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Each CRD's name, the versions it lists, the version it targets for storage, and where it
/// sends conversions (`None`: it does not convert).
type Shape = Vec<(String, Vec<String>, String, Option<String>)>;

fn shape(api: &CarriedApi) -> Shape {
    api.crds
        .iter()
        .map(|c| {
            let listed = c.crd.spec.versions.iter().map(|v| v.name.clone()).collect();
            assert_eq!(c.target.versions, listed, "{}", c.target.name);
            assert_eq!(c.crd.metadata.name.as_deref(), Some(c.target.name.as_str()));
            let converts = c
                .crd
                .spec
                .conversion
                .as_ref()
                .and_then(|conversion| conversion.webhook.as_ref())
                .and_then(|webhook| webhook.client_config.as_ref())
                .map(|config| match (&config.url, &config.service) {
                    (Some(url), _) => url.clone(),
                    (None, Some(service)) => format!(
                        "{}/{}:{}{}",
                        service.namespace,
                        service.name,
                        service.port.unwrap_or_default(),
                        service.path.as_deref().unwrap_or_default()
                    ),
                    (None, None) => "nowhere".into(),
                });
            (
                c.target.name.clone(),
                listed,
                c.target.storage.clone(),
                converts,
            )
        })
        .collect()
}

const ALL: [&str; 5] = [
    "expressclusters.express.dev",
    "backends.express.dev",
    "frontends.express.dev",
    "operatorreleases.express.dev",
    "fleetreleases.express.dev",
];

/// Every CRD at v1alpha1 alone, converting nowhere.
fn alpha_alone() -> Shape {
    ALL.iter()
        .map(|name| {
            (
                (*name).to_owned(),
                vec!["v1alpha1".to_owned()],
                "v1alpha1".to_owned(),
                None,
            )
        })
        .collect()
}

/// The versioned kinds listing both and targeting storage at v1beta1, converting at `to`; the
/// release kinds at v1alpha1 alone.
fn serving_beta(to: &str) -> Shape {
    ALL.iter()
        .map(|name| {
            if VERSIONED.contains(name) {
                (
                    (*name).to_owned(),
                    vec!["v1alpha1".to_owned(), "v1beta1".to_owned()],
                    "v1beta1".to_owned(),
                    Some(to.to_owned()),
                )
            } else {
                (
                    (*name).to_owned(),
                    vec!["v1alpha1".to_owned()],
                    "v1alpha1".to_owned(),
                    None,
                )
            }
        })
        .collect()
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

#[test]
fn the_api_a_build_carries_follows_its_flags() {
    let every_version = strings(&["v1alpha1", "v1beta1"]);
    let service = |ns: &str| WebhookAt::Service {
        namespace: ns.into(),
        name: "express-operator-webhook".into(),
        port: 443,
    };
    struct Case {
        what: &'static str,
        flags: ApiFlags,
        known: Vec<String>,
        webhook: Option<WebhookAt>,
        crds: Shape,
    }
    let cases = [
        Case {
            what: "no flags: v1alpha1 alone, every version known",
            flags: ApiFlags {
                operator_namespace: "express-system".into(),
                ..ApiFlags::default()
            },
            known: every_version.clone(),
            webhook: None,
            crds: alpha_alone(),
        },
        Case {
            what: "a URL without --serve-v1beta1 converts nothing",
            flags: ApiFlags {
                webhook_url: Some("https://127.0.0.1:9443/convert".into()),
                operator_namespace: "express-system".into(),
                ..ApiFlags::default()
            },
            known: every_version.clone(),
            webhook: None,
            crds: alpha_alone(),
        },
        Case {
            what: "--serve-v1beta1: the chart's Service in the operator's namespace",
            flags: ApiFlags {
                serve_v1beta1: true,
                operator_namespace: "ops".into(),
                ..ApiFlags::default()
            },
            known: every_version.clone(),
            webhook: Some(service("ops")),
            crds: serving_beta("ops/express-operator-webhook:443/convert"),
        },
        Case {
            what: "--serve-v1beta1 with a URL: the URL",
            flags: ApiFlags {
                serve_v1beta1: true,
                webhook_url: Some("https://127.0.0.1:9443/convert".into()),
                operator_namespace: "ops".into(),
                ..ApiFlags::default()
            },
            known: every_version.clone(),
            webhook: Some(WebhookAt::Url("https://127.0.0.1:9443/convert".into())),
            crds: serving_beta("https://127.0.0.1:9443/convert"),
        },
        Case {
            what: "an older build's known versions change what it knows, not what it carries",
            flags: ApiFlags {
                known: strings(&["v1alpha1"]),
                operator_namespace: "express-system".into(),
                ..ApiFlags::default()
            },
            known: strings(&["v1alpha1"]),
            webhook: None,
            crds: alpha_alone(),
        },
    ];
    for case in cases {
        let api = match carried_api(&case.flags) {
            Ok(api) => api,
            Err(error) => panic!("{}: {error}", case.what),
        };
        assert_eq!(api.known, case.known, "{}", case.what);
        assert_eq!(api.webhook, case.webhook, "{}", case.what);
        assert_eq!(shape(&api), case.crds, "{}", case.what);
    }
}

#[test]
fn a_build_run_without_flags_carries_what_its_default_says() {
    let flags = ApiFlags {
        operator_namespace: "express-system".into(),
        ..ApiFlags::default()
    };
    assert_eq!(carried_api(&flags).ok(), Some(CarriedApi::default()));
}

fn versions(crd: &CustomResourceDefinition) -> Vec<(String, bool, bool)> {
    crd.spec
        .versions
        .iter()
        .map(|v| (v.name.clone(), v.served, v.storage))
        .collect()
}

#[test]
fn a_release_lists_a_new_version_unserved_and_never_undoes_a_later_step() {
    let flags = ApiFlags {
        serve_v1beta1: true,
        webhook_url: Some("https://127.0.0.1:1/convert".into()),
        ..ApiFlags::default()
    };
    let Ok(beta) = carried_api(&flags) else {
        panic!("the CRDs serving v1beta1 are made");
    };
    let Some(backend) = beta.crd("backends.express.dev") else {
        panic!("the Backend CRD is carried");
    };
    let Some(alpha_only) = CarriedApi::default()
        .crd("backends.express.dev")
        .map(|c| c.crd.clone())
    else {
        panic!("the Backend CRD is carried alone");
    };
    // A DC at v1alpha1: v1beta1 listed, not served; storage stays.
    assert_eq!(
        versions(&fitted(&backend.crd, &backend.target, Some(&alpha_only))),
        [
            ("v1alpha1".into(), true, true),
            ("v1beta1".into(), false, false)
        ]
    );
    // A DC whose storage moved already: applied again, it stays moved and served.
    let mut moved = backend.crd.clone();
    for v in &mut moved.spec.versions {
        v.served = true;
        v.storage = v.name == "v1beta1";
    }
    assert_eq!(
        versions(&fitted(&backend.crd, &backend.target, Some(&moved))),
        [
            ("v1alpha1".into(), true, false),
            ("v1beta1".into(), true, true)
        ]
    );
    // No CRD in the DC: the build's as it is.
    assert_eq!(
        versions(&fitted(&backend.crd, &backend.target, None)),
        versions(&backend.crd)
    );
}
