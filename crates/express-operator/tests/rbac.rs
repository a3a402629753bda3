//! Least privilege, measured per namespace: the operator runs the end-to-end scenarios on
//! kubesim (leader election, provision, upgrade with history pruning, pauses in every scope, a
//! bounce, a failed rollout rolled back, abort and retry), once cluster-wide and once with
//! `watchNamespaces`. kubesim records every request it sends under its own User-Agent with the
//! namespace it reached (`""`: cluster-wide). Each chart mode's rules
//! (`charts/express-operator/rbac/*.yaml`, which the chart's templates include as they are, as a
//! ClusterRole or as a Role per watched namespace, plus a Role in the operator's namespace) must
//! grant exactly that, where it was used: nothing used missing, nothing granted unused unless a
//! `# unused when <mode>: <verb> <resource>: why` comment says why, no wildcards.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::collections::{BTreeMap, BTreeSet};

use express_api::{ExpressCluster, Frontend, conditions};
use express_operator::controller::Settings;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::*;

const AGENT: &str = "express-operator-rbac-test";
const OPERATOR_NS: &str = "express-system";
/// A second watched namespace with no tenant in it, in `watchNamespaces` mode.
const QUIET_NS: &str = "quiet";

/// `(verb, "resource.group/subresource")` as kubesim counts them.
type Access = (String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `watchNamespaces: []`: the watched-namespace rules as a ClusterRole.
    ClusterWide,
    /// `watchNamespaces: [tenant, quiet]`: the same rules as a Role in each.
    Namespaced,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::ClusterWide => "cluster-wide",
            Mode::Namespaced => "namespaced",
        }
    }

    fn watched(self) -> Vec<String> {
        match self {
            Mode::ClusterWide => Vec::new(),
            Mode::Namespaced => vec![NS.into(), QUIET_NS.into()],
        }
    }

    /// Whether the watched-namespace rules apply to a request in `namespace`.
    fn watched_rules_apply(self, namespace: &str) -> bool {
        match self {
            Mode::ClusterWide => true,
            Mode::Namespaced => self.watched().iter().any(|w| w == namespace),
        }
    }
}

/// The grants of one rules file, and those its comments say go unused in a mode.
struct Rules {
    grants: BTreeSet<Access>,
    unused: BTreeSet<Access>,
}

fn rules_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/express-operator/rbac")
}

fn resource_name(group: &str, resource: &str) -> String {
    let (plural, sub) = match resource.split_once('/') {
        Some((plural, sub)) => (plural, Some(sub)),
        None => (resource, None),
    };
    let mut name = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    if let Some(sub) = sub {
        name = format!("{name}/{sub}");
    }
    name
}

fn rules(file: &str, mode: Mode) -> Rules {
    let text = std::fs::read_to_string(rules_dir().join(file)).unwrap();
    let parsed: Vec<k8s_openapi::api::rbac::v1::PolicyRule> = serde_yaml::from_str(&text).unwrap();
    let mut grants = BTreeSet::new();
    for rule in parsed {
        assert!(
            rule.resource_names.is_none()
                || file.contains("operator-namespace")
                || file.contains("own-api"),
            "{rule:?}"
        );
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "no wildcards: {file}"
                    );
                    grants.insert((verb.clone(), resource_name(&group, &resource)));
                }
            }
        }
    }
    let mut unused = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("# unused when ") else {
            assert!(
                !line.trim().starts_with("# unused"),
                "write `# unused when <mode>: <verb> <resource>: why`: {line}"
            );
            continue;
        };
        let parts = rest.split_once(": ").and_then(|(modes, rest)| {
            let (access, why) = rest.split_once(": ")?;
            Some((modes, access.split_once(' ')?, why))
        });
        let Some((modes, (verb, resource), why)) = parts else {
            panic!("write `# unused when <mode>: <verb> <resource>: why`: {line}");
        };
        assert!(
            !why.trim().is_empty(),
            "an unused grant needs a reason: {line}"
        );
        for named in modes.split(',').map(str::trim) {
            assert!(
                ["cluster-wide", "namespaced"].contains(&named),
                "unknown mode {named:?}: {line}"
            );
        }
        if modes.split(',').map(str::trim).any(|m| m == mode.name()) {
            unused.insert((verb.to_owned(), resource.to_owned()));
        }
    }
    let stale: Vec<&Access> = unused.difference(&grants).collect();
    assert!(
        stale.is_empty(),
        "{file}: `# unused` comments for grants that do not exist: {stale:?}"
    );
    Rules { grants, unused }
}

/// Waits until the ExpressCluster's `Paused` condition says `status`.
async fn paused(env: &Env, status: &str) {
    wait_until(&format!("Paused={status}"), async || {
        cluster(env).await.status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == conditions::PAUSED && c.status == status)
        })
    })
    .await;
}

/// Runs the operator in `mode` through every scenario; returns what it called, per namespace.
async fn measure(mode: Mode) -> BTreeMap<Access, BTreeSet<String>> {
    let env = env_without_operator().await;
    express_operator::install::create_namespace(&env.client, QUIET_NS)
        .await
        .unwrap();
    let client = env.sim.client_with_agent(AGENT).unwrap();
    let (leader, _lease) =
        express_operator::leader::elect(client.clone(), OPERATOR_NS, "default", "rbac")
            .await
            .unwrap();
    tokio::spawn(express_operator::controller::run(
        client,
        Settings {
            namespaces: mode.watched(),
            ..Settings::cluster_wide("rbac", 2)
        },
        express_operator::metrics::Metrics::new(),
        leader,
    ));

    tenant(
        &env,
        json!({"rollout": {"revisionHistoryLimit": 2}}),
        &[("fe1", json!({})), ("fe2", json!({}))],
    )
    .await;
    settle(&env).await;
    change(&env, v("v2")).await;
    settle(&env).await;

    // Pauses in every scope.
    control(&env, NS, "express-control", "true").await;
    paused(&env, "True").await;
    control(&env, NS, "express-control", "false").await;
    paused(&env, "False").await;
    control(&env, OPERATOR_NS, "express-operator-control", "true").await;
    paused(&env, "True").await;
    control(&env, OPERATOR_NS, "express-operator-control", "false").await;
    paused(&env, "False").await;
    change(&env, json!({"spec": {"paused": true}})).await;
    paused(&env, "True").await;
    change(&env, json!({"spec": {"paused": false}})).await;
    paused(&env, "False").await;
    settle(&env).await;

    // A bounce.
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"express.dev/bounce": "b1"}}})),
        )
        .await
        .unwrap();
    wait_until("bounced", async || {
        frontend(&env, "fe1")
            .await
            .status
            .and_then(|s| s.bounce)
            .and_then(|b| b.phase)
            == Some(express_api::BouncePhase::Succeeded)
    })
    .await;

    // A failed rollout, rolled back (the backend fails after both frontends changed: they
    // return to the revision they ran, read from its ControllerRevision); then an abort and a
    // retry, each acted on.
    let template = json!({"metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop"}}});
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(env.client.clone(), NS);
    let revision_of = async |name: &str| {
        pods.get(name).await.ok().and_then(|p| {
            p.metadata
                .labels?
                .get(express_api::keys::LABEL_DEPLOYMENT_REVISION)
                .cloned()
        })
    };
    let before = revision_of("acme-fe1").await.expect("fe1 runs a revision");
    change(&env, json!({"spec": {"defaults": {"frontend": {"expressVersion": "v3"}, "backend": {"expressVersion": "v3", "podTemplate": template}}}})).await;
    wait_until("failed and both frontends rolled back", async || {
        let failed = cluster(&env)
            .await
            .status
            .and_then(|s| s.rollout)
            .and_then(|r| r.failed_node)
            .is_some();
        failed
            && revision_of("acme-fe1").await.as_ref() == Some(&before)
            && revision_of("acme-fe2").await.as_ref() == Some(&before)
    })
    .await;
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch("acme", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"express.dev/abort": "a1", "express.dev/retry": "r1"}}})))
        .await
        .unwrap();
    wait_until("abort and retry acted on", async || {
        cluster(&env)
            .await
            .status
            .and_then(|s| s.requests)
            .is_some_and(|r| r.abort.as_deref() == Some("a1") && r.retry.as_deref() == Some("r1"))
    })
    .await;

    // An OperatorRelease the default ring judges: a canary ring whose leader holds its Lease
    // (by hand: no canary operator runs here; its build's CRDs recorded as current for this
    // release, written while the release is paused) but never adopts, so the release moves the
    // tenant, samples both rings, fails at the adoption deadline and moves it back.
    let now = k8s_openapi::jiff::Timestamp::now();
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        env.client.clone(),
        OPERATOR_NS,
    );
    leases
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "express-operator-canary"},
                "spec": {"holderIdentity": "canary-1", "leaseDurationSeconds": 3600,
                         "acquireTime": now.to_string(), "renewTime": now.to_string()}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let releases = Api::<express_api::OperatorRelease>::namespaced(env.client.clone(), OPERATOR_NS);
    let created = releases
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                "metadata": {"name": "to-canary"},
                "spec": {"fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}],
                         "bakeSeconds": 1, "intervalSeconds": 1, "failureLimit": 0,
                         "adoptionDeadlineSeconds": 1, "paused": true}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let record = json!({"outcome": "Current", "build": "0.1.0", "checkedAt": now.to_string(),
                        "releaseUid": created.metadata.uid});
    leases
        .patch(
            "express-operator-canary",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                express_api::api_record::ANNOTATION_API_RECORD: record.to_string()}}})),
        )
        .await
        .unwrap();
    releases
        .patch(
            "to-canary",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    wait_until(
        "the release rolled back and the tenant driven by default again",
        async || {
            let release =
                Api::<express_api::OperatorRelease>::namespaced(env.client.clone(), OPERATOR_NS)
                    .get("to-canary")
                    .await
                    .ok();
            let rolled_back = release
                .and_then(|r| r.status)
                .is_some_and(|s| s.phase == Some(express_api::ReleasePhase::RolledBack));
            let owner = cluster(&env).await.status.and_then(|s| s.operator);
            rolled_back
                && owner.is_some_and(|o| o.ring == "default" && o.released.is_none() && !o.adopting)
        },
    )
    .await;

    // A release to the default ring (from the canary, whose judge does not run here): the
    // default ring's build checks its CRDs against every stored object and applies them.
    Api::<express_api::OperatorRelease>::namespaced(env.client.clone(), OPERATOR_NS)
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                "metadata": {"name": "back-to-default"},
                "spec": {"fromRing": "canary", "toRing": "default", "waves": [{"percent": 100}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    wait_until(
        "the default ring's build recorded its CRDs' check",
        async || {
            Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                env.client.clone(),
                OPERATOR_NS,
            )
            .get("express-operator")
            .await
            .ok()
            .and_then(|l| l.metadata.annotations)
            .and_then(|a| {
                a.get(express_api::api_record::ANNOTATION_API_RECORD)
                    .cloned()
            })
            .and_then(|r| express_api::api_record::ApiRecord::from_annotation(&r))
            .is_some_and(|r| r.outcome == express_api::api_record::ApiOutcome::Current)
        },
    )
    .await;

    let counters = env.sim.counters();
    counters
        .by_agent_namespace
        .get(AGENT)
        .expect("the operator's requests")
        .iter()
        .filter_map(|(call, namespaces)| {
            let (verb, resource) = call.split_once(' ')?;
            Some((
                (verb.to_owned(), resource.to_owned()),
                namespaces.keys().cloned().collect(),
            ))
        })
        .collect()
}

/// The chart's rules in `mode` grant exactly what the operator used, where it used it.
fn assert_exactly_granted(mode: Mode, used: &BTreeMap<Access, BTreeSet<String>>) {
    let watched = rules("watched-namespaces.yaml", mode);
    let own = rules("operator-namespace.yaml", mode);
    let api = rules("own-api.yaml", mode);
    let calls = format!("{mode:?}: used (call: namespaces, \"\" = cluster-wide): {used:#?}");

    let missing: Vec<(&Access, &String)> = used
        .iter()
        .flat_map(|(access, namespaces)| namespaces.iter().map(move |ns| (access, ns)))
        .filter(|(access, ns)| {
            let by_watched = mode.watched_rules_apply(ns) && watched.grants.contains(*access);
            let by_own = *ns == OPERATOR_NS && own.grants.contains(*access);
            let by_api = ns.is_empty() && api.grants.contains(*access);
            !by_watched && !by_own && !by_api
        })
        .collect();
    assert!(
        missing.is_empty(),
        "used but not granted there: {missing:?}\n{calls}"
    );

    let idle_watched: Vec<&Access> = watched
        .grants
        .iter()
        .filter(|access| !watched.unused.contains(*access))
        .filter(|access| {
            !used
                .get(*access)
                .is_some_and(|nss| nss.iter().any(|ns| mode.watched_rules_apply(ns)))
        })
        .collect();
    let idle_own: Vec<&Access> = own
        .grants
        .iter()
        .filter(|access| !own.unused.contains(*access))
        .filter(|access| {
            !used
                .get(*access)
                .is_some_and(|nss| nss.contains(OPERATOR_NS))
        })
        .collect();
    let idle_api: Vec<&Access> = api
        .grants
        .iter()
        .filter(|access| !api.unused.contains(*access))
        .filter(|access| !used.get(*access).is_some_and(|nss| nss.contains("")))
        .collect();
    assert!(
        idle_watched.is_empty() && idle_own.is_empty() && idle_api.is_empty(),
        "granted but unused (and no `# unused when {}:` reason): watched-namespaces.yaml \
         {idle_watched:?}, operator-namespace.yaml {idle_own:?}, own-api.yaml {idle_api:?}\n{calls}",
        mode.name()
    );

    let lease = ("get".to_string(), "leases.coordination.k8s.io".to_string());
    assert_eq!(
        used.get(&lease).cloned().unwrap_or_default(),
        BTreeSet::from([OPERATOR_NS.to_string()]),
        "the Lease is read in the operator's namespace only\n{calls}"
    );
    for (access, namespaces) in used {
        if access.1.starts_with("leases.") {
            assert!(
                namespaces.iter().all(|ns| ns == OPERATOR_NS),
                "{access:?} outside the operator's namespace\n{calls}"
            );
        }
    }
}

#[tokio::test]
async fn cluster_wide_the_chart_grants_exactly_what_the_operator_uses() {
    let used = measure(Mode::ClusterWide).await;
    assert_exactly_granted(Mode::ClusterWide, &used);
}

#[tokio::test]
async fn with_watch_namespaces_the_chart_grants_exactly_what_the_operator_uses_and_nothing_cluster_wide_but_its_own_api()
 {
    let used = measure(Mode::Namespaced).await;
    let api = rules("own-api.yaml", Mode::Namespaced);
    let cluster_wide: Vec<&Access> = used
        .iter()
        .filter(|(access, namespaces)| namespaces.contains("") && !api.grants.contains(*access))
        .map(|(access, _)| access)
        .collect();
    assert!(
        cluster_wide.is_empty(),
        "cluster-wide calls in watchNamespaces mode beyond its own API: {cluster_wide:?}"
    );
    let outside: Vec<(&Access, &String)> = used
        .iter()
        .flat_map(|(access, namespaces)| namespaces.iter().map(move |ns| (access, ns)))
        .filter(|(access, ns)| {
            let own_api = ns.is_empty() && api.grants.contains(*access);
            !Mode::Namespaced.watched_rules_apply(ns) && *ns != OPERATOR_NS && !own_api
        })
        .collect();
    assert!(
        outside.is_empty(),
        "calls outside the watched namespaces: {outside:?}"
    );
    assert_exactly_granted(Mode::Namespaced, &used);
}
