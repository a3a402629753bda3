//! Conversion between v1alpha1 and v1beta1 (DESIGN section 18): the mapping of docs/api.md on
//! examples, and as properties: any valid object converts to the other version and back
//! unchanged, reads as that version's typed object with nothing dropped, and no input, however
//! malformed, makes conversion panic.

use express_api::conversion::{ANNOTATION_V1ALPHA1_CLUSTER_CONFIG, ApiVersion, convert, review};
use express_api::{
    ClusterConfig, ClusterDefaults, DependencySettings, DeploymentDependencies, ExpressClusterSpec,
    NodeDefaults, NodeKind, NodeSpec, Prerequisite, RolloutSettings, v1beta1,
};
use kube::core::conversion::ConversionReview;
use proptest::prelude::*;
use serde_json::{Value, json};

fn converted(object: &Value, to: ApiVersion) -> Value {
    convert(object.clone(), to).unwrap_or_else(|e| panic!("{e}: {object}"))
}

fn node(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": "shop-fe1", "namespace": "tenant-a", "uid": "u-1", "resourceVersion": "7",
                     "labels": {"team": "web"}},
        "spec": spec,
        "status": {"phase": "Ready", "runningRevision": "abc", "observedGeneration": 2}
    })
}

#[test]
fn a_node_written_at_v1alpha1_reads_at_v1beta1_as_docs_api_md_maps_it() {
    let alpha = node(
        "express.dev/v1alpha1",
        "Frontend",
        json!({
            "clusterConfig": {"clusterName": "shop", "tenantID": 7, "tenantName": "acme"},
            "up": true, "expressVersion": "1.4", "configChangeset": "cs-9", "image": "registry/express",
            "podTemplate": {"metadata": {"labels": {"a": "b"}}},
            "deploymentDependencies": {
                "disabled": false,
                "upgradePrerequisites": [
                    {"expressNode": "shop-be", "kind": "Backend", "podConditionType": "Ready",
                     "conditionStatus": "True", "expressVersion": "1.4", "deploymentRevision": "r2"},
                    {"expressNode": "shop-fe2"}
                ],
                "provisioningPrerequisites": []
            }
        }),
    );
    let beta = converted(&alpha, ApiVersion::V1beta1);
    let mut expected = node(
        "express.dev/v1beta1",
        "Frontend",
        json!({
            "cluster": "shop",
            "up": true, "version": "1.4", "changeset": "cs-9", "image": "registry/express",
            "podTemplate": {"metadata": {"labels": {"a": "b"}}},
            "ordering": {
                "disabled": false,
                "upgrade": [
                    {"node": "shop-be", "kind": "Backend", "condition": {"type": "Ready", "status": "True"},
                     "pin": {"version": "1.4", "revision": "r2"}},
                    {"node": "shop-fe2"}
                ],
                "provisioning": []
            }
        }),
    );
    // The tenant's id and name are the ExpressCluster's at v1beta1; the node keeps them for a
    // reader at v1alpha1 in an annotation.
    expected["metadata"]["annotations"] = json!({
        ANNOTATION_V1ALPHA1_CLUSTER_CONFIG: r#"{"tenantID":7,"tenantName":"acme"}"#
    });
    assert_eq!(beta, expected);
    assert_eq!(converted(&beta, ApiVersion::V1alpha1), alpha);
}

#[test]
fn an_express_cluster_at_both_versions() {
    let alpha = json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": "shop", "namespace": "tenant-a"},
        "spec": {"clusterName": "shop", "tenantID": 7, "tenantName": "acme", "paused": true,
                 "defaults": {"backend": {"expressVersion": "1.4", "configChangeset": "cs"},
                              "frontend": {"image": "registry/express"}},
                 "dependencies": {"disabled": false, "backendUpgradePosition": 1},
                 "rollout": {"maxConcurrent": 2, "settleSeconds": 0}},
        "status": {"phase": "Healthy"}
    });
    let beta = json!({
        "apiVersion": "express.dev/v1beta1", "kind": "ExpressCluster",
        "metadata": {"name": "shop", "namespace": "tenant-a"},
        "spec": {"cluster": "shop", "tenant": {"id": 7, "name": "acme"}, "paused": true,
                 "defaults": {"backend": {"version": "1.4", "changeset": "cs"},
                              "frontend": {"image": "registry/express"}},
                 "ordering": {"disabled": false, "backendUpgradePosition": 1},
                 "rollout": {"maxConcurrent": 2, "settleSeconds": 0}},
        "status": {"phase": "Healthy"}
    });
    assert_eq!(converted(&alpha, ApiVersion::V1beta1), beta);
    assert_eq!(converted(&beta, ApiVersion::V1alpha1), alpha);
}

#[test]
fn the_release_kinds_have_one_version_and_other_groups_are_refused() {
    let release = json!({"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                         "metadata": {"name": "r"}, "spec": {}});
    assert_eq!(converted(&release, ApiVersion::V1alpha1), release);
    let error = convert(release, ApiVersion::V1beta1)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("OperatorRelease exists at express.dev/v1alpha1 only")
    );
    for (object, message) in [
        (
            json!({"apiVersion": "apps/v1", "kind": "Backend"}),
            r#""apps/v1" is not a version this operator build serves (it knows express.dev/v1alpha1 and express.dev/v1beta1)"#,
        ),
        (
            json!({"apiVersion": "express.dev/v2", "kind": "Backend"}),
            r#""express.dev/v2" is not a version this operator build serves (it knows express.dev/v1alpha1 and express.dev/v1beta1)"#,
        ),
        (
            json!({"kind": "Backend"}),
            "the object is not a JSON object with an apiVersion and a kind",
        ),
        (
            json!([1, 2]),
            "the object is not a JSON object with an apiVersion and a kind",
        ),
        (
            json!({"apiVersion": "express.dev/v1alpha1", "kind": "Backend", "spec": {"clusterConfig": "shop"}}),
            "spec.clusterConfig is not an object",
        ),
        (
            json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
                   "spec": {"deploymentDependencies": {"upgradePrerequisites": {"expressNode": "be"}}}}),
            "spec.ordering.upgrade is not a list",
        ),
        (
            json!({"apiVersion": "express.dev/v1beta1", "kind": "Frontend",
                   "spec": {"ordering": {"upgrade": [{"node": "be"}, 3]}}}),
            "spec.deploymentDependencies.upgradePrerequisites[1] is not an object",
        ),
        (
            json!({"apiVersion": "express.dev/v1alpha1", "kind": "Widget"}),
            r#"kind "Widget" is not a kind of express.dev this build converts"#,
        ),
    ] {
        // To the version the object is not at.
        let to = if object["apiVersion"] == "express.dev/v1beta1" {
            ApiVersion::V1alpha1
        } else {
            ApiVersion::V1beta1
        };
        let error = convert(object.clone(), to).err().map(|e| e.to_string());
        assert_eq!(error.as_deref(), Some(message), "{object}");
    }
}

fn review_of(desired: &str, objects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "req-1", "desiredAPIVersion": desired, "objects": objects}
    })
}

fn answer(review_json: Value) -> Value {
    let parsed: ConversionReview =
        serde_json::from_value(review_json).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(review(parsed)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_review_is_answered_in_order_or_fails_naming_the_object() {
    let alpha = |name: &str| {
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
               "metadata": {"name": name, "namespace": "t"},
               "spec": {"clusterConfig": {"clusterName": "shop"}, "expressVersion": "1"}})
    };
    let answered = answer(review_of(
        "express.dev/v1beta1",
        vec![alpha("a"), alpha("b")],
    ));
    assert_eq!(answered["response"]["uid"], "req-1");
    assert_eq!(answered["response"]["result"]["status"], "Success");
    let names: Vec<_> = answered["response"]["convertedObjects"]
        .as_array()
        .map(|objects| {
            objects
                .iter()
                .map(|o| (o["metadata"]["name"].clone(), o["spec"]["cluster"].clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        vec![(json!("a"), json!("shop")), (json!("b"), json!("shop"))]
    );

    let mut broken = alpha("c");
    broken["spec"]["clusterConfig"] = json!(["shop"]);
    let failed = answer(review_of("express.dev/v1beta1", vec![alpha("a"), broken]));
    assert_eq!(failed["response"]["uid"], "req-1");
    assert_eq!(failed["response"]["result"]["status"], "Failure");
    assert_eq!(
        failed["response"]["result"]["message"],
        "cannot convert Backend t/c to express.dev/v1beta1: spec.clusterConfig is not an object"
    );
    assert_eq!(failed["response"]["convertedObjects"], json!([]));

    let unknown = answer(review_of("express.dev/v9", vec![alpha("a")]));
    assert_eq!(unknown["response"]["result"]["status"], "Failure");

    let no_request =
        answer(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}));
    assert_eq!(no_request["response"]["result"]["status"], "Failure");
    assert_eq!(
        no_request["response"]["result"]["message"],
        "the ConversionReview holds no request"
    );
}

// ---- properties ----

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}"
}

fn pod_template() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({})),
        word().prop_map(|w| json!({"metadata": {"labels": {"team": w}}})),
        word().prop_map(|w| json!({"spec": {"containers": [{"name": "express", "env": [{"name": "A", "value": w}]}]}})),
    ]
}

fn kind() -> impl Strategy<Value = NodeKind> {
    prop_oneof![Just(NodeKind::Backend), Just(NodeKind::Frontend)]
}

fn alpha_prerequisite() -> impl Strategy<Value = Prerequisite> {
    (
        word(),
        opt(kind()),
        opt(word()),
        opt(prop_oneof![
            Just("True".to_owned()),
            Just("False".to_owned())
        ]),
        opt(word()),
        opt(word()),
    )
        .prop_map(
            |(
                express_node,
                kind,
                pod_condition_type,
                condition_status,
                express_version,
                deployment_revision,
            )| {
                Prerequisite {
                    express_node,
                    kind,
                    pod_condition_type,
                    condition_status,
                    express_version,
                    deployment_revision,
                }
            },
        )
}

fn alpha_node_spec() -> impl Strategy<Value = NodeSpec> {
    let config = (word(), opt(any::<i64>()), opt(word())).prop_map(
        |(cluster_name, tenant_id, tenant_name)| ClusterConfig {
            cluster_name,
            tenant_id,
            tenant_name,
        },
    );
    let dependencies = (
        any::<bool>(),
        opt(prop::collection::vec(alpha_prerequisite(), 0..3)),
        opt(prop::collection::vec(alpha_prerequisite(), 0..3)),
    )
        .prop_map(
            |(disabled, provisioning_prerequisites, upgrade_prerequisites)| {
                DeploymentDependencies {
                    disabled,
                    provisioning_prerequisites,
                    upgrade_prerequisites,
                }
            },
        );
    (
        config,
        any::<bool>(),
        opt(word()),
        opt(word()),
        opt(word()),
        opt(pod_template()),
        opt(dependencies),
    )
        .prop_map(
            |(
                cluster_config,
                up,
                express_version,
                config_changeset,
                image,
                pod_template,
                deployment_dependencies,
            )| NodeSpec {
                cluster_config,
                up,
                express_version,
                config_changeset,
                image,
                pod_template,
                deployment_dependencies,
            },
        )
}

fn beta_prerequisite() -> impl Strategy<Value = v1beta1::Prerequisite> {
    let condition = (opt(word()), opt(word()))
        .prop_filter("a condition says something", |(t, s)| {
            t.is_some() || s.is_some()
        })
        .prop_map(|(type_, status)| v1beta1::PodCondition { type_, status });
    let pin = (opt(word()), opt(word()))
        .prop_filter("a pin says something", |(v, r)| v.is_some() || r.is_some())
        .prop_map(|(version, revision)| v1beta1::Pin { version, revision });
    (word(), opt(kind()), opt(condition), opt(pin)).prop_map(|(node, kind, condition, pin)| {
        v1beta1::Prerequisite {
            node,
            kind,
            condition,
            pin,
        }
    })
}

fn beta_node_spec() -> impl Strategy<Value = v1beta1::NodeSpec> {
    let ordering = (
        any::<bool>(),
        opt(prop::collection::vec(beta_prerequisite(), 0..3)),
        opt(prop::collection::vec(beta_prerequisite(), 0..3)),
    )
        .prop_map(|(disabled, provisioning, upgrade)| v1beta1::NodeOrdering {
            disabled,
            provisioning,
            upgrade,
        });
    (
        word(),
        any::<bool>(),
        opt(word()),
        opt(word()),
        opt(word()),
        opt(pod_template()),
        opt(ordering),
    )
        .prop_map(
            |(cluster, up, version, changeset, image, pod_template, ordering)| v1beta1::NodeSpec {
                cluster,
                up,
                version,
                changeset,
                image,
                pod_template,
                ordering,
            },
        )
}

fn alpha_defaults() -> impl Strategy<Value = NodeDefaults> {
    (opt(word()), opt(word()), opt(word()), opt(pod_template())).prop_map(
        |(express_version, config_changeset, image, pod_template)| NodeDefaults {
            express_version,
            config_changeset,
            image,
            pod_template,
        },
    )
}

fn settings() -> impl Strategy<Value = (DependencySettings, RolloutSettings)> {
    (
        any::<bool>(),
        0u32..5,
        1u32..4,
        1u32..900,
        any::<bool>(),
        0u32..20,
        0u32..60,
        1u32..600,
    )
        .prop_map(
            |(
                disabled,
                backend_upgrade_position,
                max_concurrent,
                progress_deadline_seconds,
                auto_rollback,
                revision_history_limit,
                settle_seconds,
                settle_timeout_seconds,
            )| {
                (
                    DependencySettings {
                        disabled,
                        backend_upgrade_position,
                    },
                    RolloutSettings {
                        max_concurrent,
                        progress_deadline_seconds,
                        auto_rollback,
                        revision_history_limit,
                        settle_seconds,
                        settle_timeout_seconds,
                    },
                )
            },
        )
}

fn alpha_cluster_spec() -> impl Strategy<Value = ExpressClusterSpec> {
    (
        opt(word()),
        opt(any::<i64>()),
        opt(word()),
        any::<bool>(),
        opt(alpha_defaults()),
        opt(alpha_defaults()),
        settings(),
    )
        .prop_map(
            |(
                cluster_name,
                tenant_id,
                tenant_name,
                paused,
                backend,
                frontend,
                (dependencies, rollout),
            )| {
                ExpressClusterSpec {
                    cluster_name,
                    tenant_id,
                    tenant_name,
                    paused,
                    defaults: ClusterDefaults { backend, frontend },
                    dependencies,
                    rollout,
                }
            },
        )
}

fn beta_cluster_spec() -> impl Strategy<Value = v1beta1::ExpressClusterSpec> {
    let tenant = (opt(any::<i64>()), opt(word()))
        .prop_filter("a tenant says something", |(i, n)| {
            i.is_some() || n.is_some()
        })
        .prop_map(|(id, name)| v1beta1::Tenant { id, name });
    let defaults = || {
        (opt(word()), opt(word()), opt(word()), opt(pod_template())).prop_map(
            |(version, changeset, image, pod_template)| v1beta1::NodeDefaults {
                version,
                changeset,
                image,
                pod_template,
            },
        )
    };
    (
        opt(word()),
        opt(tenant),
        any::<bool>(),
        opt(defaults()),
        opt(defaults()),
        settings(),
    )
        .prop_map(
            |(cluster, tenant, paused, backend, frontend, (ordering, rollout))| {
                v1beta1::ExpressClusterSpec {
                    cluster,
                    tenant,
                    paused,
                    defaults: v1beta1::ClusterDefaults { backend, frontend },
                    ordering,
                    rollout,
                }
            },
        )
}

/// Metadata as the API server would hold it: sometimes annotations and labels of the user's.
fn metadata() -> impl Strategy<Value = Value> {
    (word(), opt(word()), opt(word())).prop_map(|(name, annotation, label)| {
        let mut metadata =
            json!({"name": name, "namespace": "tenant", "uid": "u", "generation": 3});
        if let Some(a) = annotation {
            metadata["annotations"] = json!({"express.dev/rollout-id": a});
        }
        if let Some(l) = label {
            metadata["labels"] = json!({"team": l});
        }
        metadata
    })
}

fn object(api_version: ApiVersion, kind: &str, metadata: Value, spec: Value) -> Value {
    let phase = if kind == "ExpressCluster" {
        "Healthy"
    } else {
        "Ready"
    };
    json!({"apiVersion": api_version.api_version(), "kind": kind, "metadata": metadata, "spec": spec,
           "status": {"phase": phase, "observedGeneration": 3}})
}

/// `value` read as `T` and written again: equal to `value` when `T` holds every field of it.
fn through<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value) -> Value {
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value}"));
    serde_json::to_value(typed).unwrap_or_else(|e| panic!("{e}"))
}

/// Any JSON, a few levels deep, with the keys conversion looks at among its keys.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("spec".to_owned()),
        Just("metadata".to_owned()),
        Just("annotations".to_owned()),
        Just("clusterConfig".to_owned()),
        Just("cluster".to_owned()),
        Just("clusterName".to_owned()),
        Just("ordering".to_owned()),
        Just("deploymentDependencies".to_owned()),
        Just("upgrade".to_owned()),
        Just("upgradePrerequisites".to_owned()),
        Just("condition".to_owned()),
        Just("pin".to_owned()),
        Just("tenant".to_owned()),
        Just("defaults".to_owned()),
        Just("backend".to_owned()),
        Just(ANNOTATION_V1ALPHA1_CLUSTER_CONFIG.to_owned()),
        word(),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        word().prop_map(Value::from),
        Just(json!("{\"tenantID\":1}")),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_v1alpha1_node_converts_to_v1beta1_and_back_unchanged(
        spec in alpha_node_spec(), metadata in metadata(), backend in any::<bool>()
    ) {
        let kind = if backend { "Backend" } else { "Frontend" };
        let alpha = object(ApiVersion::V1alpha1, kind, metadata, serde_json::to_value(&spec).unwrap_or_default());
        let beta = converted(&alpha, ApiVersion::V1beta1);
        // Nothing of the v1beta1 object is a field v1beta1 does not know.
        if backend {
            prop_assert_eq!(&through::<v1beta1::Backend>(&beta), &beta);
        } else {
            prop_assert_eq!(&through::<v1beta1::Frontend>(&beta), &beta);
        }
        prop_assert_eq!(converted(&beta, ApiVersion::V1alpha1), alpha);
    }

    #[test]
    fn a_v1beta1_node_converts_to_v1alpha1_and_back_unchanged(
        spec in beta_node_spec(), metadata in metadata()
    ) {
        let beta = object(ApiVersion::V1beta1, "Backend", metadata, serde_json::to_value(&spec).unwrap_or_default());
        let alpha = converted(&beta, ApiVersion::V1alpha1);
        prop_assert_eq!(&through::<express_api::Backend>(&alpha), &alpha);
        prop_assert_eq!(converted(&alpha, ApiVersion::V1beta1), beta);
    }

    #[test]
    fn an_express_cluster_converts_both_ways_unchanged(
        alpha_spec in alpha_cluster_spec(), beta_spec in beta_cluster_spec(), metadata in metadata()
    ) {
        let alpha = object(ApiVersion::V1alpha1, "ExpressCluster", metadata.clone(),
                           serde_json::to_value(&alpha_spec).unwrap_or_default());
        let beta = converted(&alpha, ApiVersion::V1beta1);
        prop_assert_eq!(&through::<v1beta1::ExpressCluster>(&beta), &beta);
        prop_assert_eq!(converted(&beta, ApiVersion::V1alpha1), alpha);

        let beta = object(ApiVersion::V1beta1, "ExpressCluster", metadata,
                          serde_json::to_value(&beta_spec).unwrap_or_default());
        let alpha = converted(&beta, ApiVersion::V1alpha1);
        prop_assert_eq!(&through::<express_api::ExpressCluster>(&alpha), &alpha);
        prop_assert_eq!(converted(&alpha, ApiVersion::V1beta1), beta);
    }

    /// A node's deployment revision is computed from the hub: whatever version a node was
    /// written at, the operator sees the same spec, so a version change never starts a rollout.
    #[test]
    fn a_nodes_spec_is_the_same_through_either_version(spec in alpha_node_spec(), metadata in metadata()) {
        let alpha = object(ApiVersion::V1alpha1, "Frontend", metadata, serde_json::to_value(&spec).unwrap_or_default());
        let back = converted(&converted(&alpha, ApiVersion::V1beta1), ApiVersion::V1alpha1);
        let read: express_api::Frontend = serde_json::from_value(back).unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(&read.spec.0, &spec);
    }

    #[test]
    fn no_input_makes_conversion_panic(
        spec in any_json(), metadata in any_json(),
        kind in prop_oneof![Just("Backend"), Just("Frontend"), Just("ExpressCluster"), Just("OperatorRelease"), Just("Other")],
        from in prop_oneof![Just(ApiVersion::V1alpha1), Just(ApiVersion::V1beta1)],
        to in prop_oneof![Just(ApiVersion::V1alpha1), Just(ApiVersion::V1beta1)],
    ) {
        let object = json!({"apiVersion": from.api_version(), "kind": kind, "metadata": metadata, "spec": spec});
        let _ = convert(object.clone(), to);
        let answered = answer(review_of(&to.api_version(), vec![object]));
        let status = answered["response"]["result"]["status"].as_str().unwrap_or_default().to_owned();
        prop_assert!(status == "Success" || status == "Failure", "{}", answered);
    }

    #[test]
    fn no_review_makes_the_webhook_panic(body in any_json()) {
        if let Ok(parsed) = serde_json::from_value::<ConversionReview>(body) {
            let _ = review(parsed);
        }
    }
}
