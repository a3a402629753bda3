//! Which resources are served: the built-in kinds kubesim knows, plus every version of every
//! CustomResourceDefinition applied at run time.

use serde_json::{Value, json};

/// The group serving the newer view of events (the stored objects are `v1` Events).
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// Whether `rt` is the `events.k8s.io` view of the stored `v1` events.
pub fn is_events_view(rt: &ResourceType) -> bool {
    rt.group == EVENTS_GROUP && rt.plural == "events"
}

/// A printer column for Table output (`kubectl get`).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub json_path: String,
    pub priority: i64,
}

/// One served resource (group, version, plural).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// Built into Kubernetes: strategic merge patch is allowed.
    pub builtin: bool,
    /// Extra Table columns (after NAME) for `kubectl get`.
    pub printer_columns: Vec<PrinterColumn>,
    /// The OpenAPI v3 schema of a custom resource version, if it has one.
    pub schema: Option<Value>,
    /// The CRD's conversion webhook (strategy `Webhook`); without one, a version is the stored
    /// object relabelled (strategy `None`).
    pub conversion: Option<crate::conversion::Shared>,
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Objects are stored per group and plural: all versions of a resource share storage, and
    /// `events.k8s.io` events are the core events seen through another view.
    pub fn storage_key(&self) -> String {
        if is_events_view(self) {
            return "/events".to_owned();
        }
        format!("{}/{}", self.group, self.plural)
    }

    /// Whether objects of this kind carry a metadata.generation that follows spec changes:
    /// custom resources, pods and CRDs themselves do; ConfigMaps, Secrets, Leases... do not.
    pub fn tracks_generation(&self) -> bool {
        !self.builtin || self.plural == "pods" || self.plural == "customresourcedefinitions"
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    status: bool,
    columns: &'static [(&'static str, &'static str, &'static str)],
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        status: true,
        columns: &[("Status", "string", ".status.phase")],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        status: true,
        columns: &[
            ("Status", "string", ".status.phase"),
            (
                "Restarts",
                "integer",
                ".status.containerStatuses[0].restartCount",
            ),
            ("IP", "string", ".status.podIP"),
        ],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        status: false,
        columns: &[],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        status: false,
        columns: &[("Type", "string", ".type")],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "services",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        status: true,
        columns: &[
            ("Type", "string", ".spec.type"),
            ("Cluster-IP", "string", ".spec.clusterIP"),
        ],
    },
    Builtin {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        status: false,
        columns: &[
            ("Type", "string", ".type"),
            ("Reason", "string", ".reason"),
            ("Object", "string", ".involvedObject.name"),
            ("Message", "string", ".message"),
        ],
    },
    Builtin {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        status: false,
        columns: &[
            ("Type", "string", ".type"),
            ("Reason", "string", ".reason"),
            ("Object", "string", ".regarding.name"),
            ("Note", "string", ".note"),
        ],
    },
    Builtin {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        status: false,
        columns: &[("Holder", "string", ".spec.holderIdentity")],
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "controllerrevisions",
        kind: "ControllerRevision",
        namespaced: true,
        short_names: &[],
        status: false,
        columns: &[("Revision", "integer", ".revision")],
    },
    // Stored and served, nothing acts on them: what installing the operator chart writes.
    Builtin {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        status: false,
        columns: &[],
    },
    Builtin {
        group: "apps",
        version: "v1",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        status: true,
        columns: &[("Replicas", "integer", ".spec.replicas")],
    },
    Builtin {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        status: true,
        columns: &[("Min Available", "string", ".spec.minAvailable")],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "roles",
        kind: "Role",
        namespaced: true,
        short_names: &[],
        status: false,
        columns: &[],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "rolebindings",
        kind: "RoleBinding",
        namespaced: true,
        short_names: &[],
        status: false,
        columns: &[("Role", "string", ".roleRef.name")],
    },
    // The operator chart's own API Priority and Fairness level and schema: stored, never
    // enforced (kubesim serves every request at once; docs/kubesim.md).
    Builtin {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        plural: "prioritylevelconfigurations",
        kind: "PriorityLevelConfiguration",
        namespaced: false,
        short_names: &[],
        status: true,
        columns: &[("Type", "string", ".spec.type")],
    },
    Builtin {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        plural: "flowschemas",
        kind: "FlowSchema",
        namespaced: false,
        short_names: &[],
        status: true,
        columns: &[
            (
                "PriorityLevel",
                "string",
                ".spec.priorityLevelConfiguration.name",
            ),
            ("MatchingPrecedence", "integer", ".spec.matchingPrecedence"),
        ],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
        short_names: &[],
        status: false,
        columns: &[],
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short_names: &[],
        status: false,
        columns: &[("Role", "string", ".roleRef.name")],
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        status: true,
        columns: &[("Created At", "date", ".metadata.creationTimestamp")],
    },
];

/// The resources served right now.
#[derive(Clone, Debug)]
pub struct Registry {
    types: Vec<ResourceType>,
}

impl Default for Registry {
    fn default() -> Self {
        let types = BUILTINS
            .iter()
            .map(|b| ResourceType {
                group: b.group.into(),
                version: b.version.into(),
                plural: b.plural.into(),
                singular: b.kind.to_ascii_lowercase(),
                kind: b.kind.into(),
                namespaced: b.namespaced,
                short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
                categories: if matches!(b.plural, "pods" | "services") {
                    vec!["all".into()]
                } else {
                    Vec::new()
                },
                status_subresource: b.status,
                builtin: true,
                printer_columns: b
                    .columns
                    .iter()
                    .map(|(name, type_, path)| PrinterColumn {
                        name: (*name).into(),
                        type_: (*type_).into(),
                        json_path: (*path).into(),
                        priority: 0,
                    })
                    .collect(),
                schema: None,
                conversion: None,
            })
            .collect();
        Registry { types }
    }
}

impl Registry {
    pub fn all(&self) -> &[ResourceType] {
        &self.types
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// The resources served under one group-version (discovery and OpenAPI documents).
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<&ResourceType> {
        self.types
            .iter()
            .filter(|t| t.group == group && t.version == version)
            .collect()
    }

    /// Every (group, versions) pair, groups in first-registered order, core group excluded;
    /// each group's versions highest priority first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) if !versions.contains(&t.version) => {
                    versions.push(t.version.clone())
                }
                Some(_) => {}
                None => groups.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        // As the API server lists them: by Kubernetes' version priority, highest first, so that
        // the first is the group's preferred version (kubectl reads at it).
        for (_, versions) in &mut groups {
            versions.sort_by_cached_key(|v| {
                std::cmp::Reverse(kube::core::Version::parse(v).priority())
            });
        }
        groups
    }

    /// Serves (or re-serves) the versions of a CRD. Returns the storage key it occupies.
    pub fn serve_crd(&mut self, crd: &Value) -> Result<String, String> {
        let spec = crd.get("spec").ok_or("spec is required")?;
        let group = spec["group"]
            .as_str()
            .filter(|g| !g.is_empty())
            .ok_or("spec.group is required")?;
        let names = &spec["names"];
        let plural = names["plural"]
            .as_str()
            .filter(|p| !p.is_empty())
            .ok_or("spec.names.plural is required")?;
        let kind = names["kind"]
            .as_str()
            .filter(|k| !k.is_empty())
            .ok_or("spec.names.kind is required")?;
        let expected_name = format!("{plural}.{group}");
        if crd["metadata"]["name"].as_str() != Some(expected_name.as_str()) {
            return Err(format!("metadata.name must be {expected_name}"));
        }
        let namespaced = match spec["scope"].as_str() {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            _ => return Err("spec.scope must be Namespaced or Cluster".into()),
        };
        let versions = spec["versions"]
            .as_array()
            .filter(|v| !v.is_empty())
            .ok_or("spec.versions must not be empty")?;
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        };
        let conversion = crate::conversion::Webhook::of_crd(spec, group)?.map(std::sync::Arc::new);
        let mut served = Vec::new();
        for version in versions {
            let name = version["name"]
                .as_str()
                .ok_or("every version needs a name")?;
            if let Some(problem) =
                crate::schema::undefined_field(&version["schema"]["openAPIV3Schema"])
            {
                return Err(problem);
            }
            if version["served"].as_bool() == Some(false) {
                continue;
            }
            served.push(ResourceType {
                group: group.into(),
                version: name.into(),
                plural: plural.into(),
                singular: names["singular"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| kind.to_ascii_lowercase()),
                kind: kind.into(),
                namespaced,
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                status_subresource: version["subresources"]["status"].is_object(),
                builtin: false,
                printer_columns: version["additionalPrinterColumns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| {
                        Some(PrinterColumn {
                            name: c["name"].as_str()?.into(),
                            type_: c["type"].as_str().unwrap_or("string").into(),
                            json_path: c["jsonPath"].as_str()?.into(),
                            priority: c["priority"].as_i64().unwrap_or(0),
                        })
                    })
                    .collect(),
                schema: version["schema"].get("openAPIV3Schema").cloned(),
                conversion: conversion.clone(),
            });
        }
        let key = format!("{group}/{plural}");
        self.types
            .retain(|t| !(t.group == group && t.plural == plural));
        self.types.extend(served);
        Ok(key)
    }

    /// Stops serving a CRD's resources.
    pub fn remove_crd(&mut self, group: &str, plural: &str) {
        self.types
            .retain(|t| t.builtin || !(t.group == group && t.plural == plural));
    }
}

/// Adds the CRD's storage version to `status.storedVersions` when it is not there yet: the API
/// server records every version objects may have been stored at, until a migrator trims it.
pub fn keep_storage_version_recorded(crd: &mut Value) {
    let Some(storage) = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"].as_bool() == Some(true))
        .and_then(|v| v["name"].as_str())
        .map(str::to_owned)
    else {
        return;
    };
    let recorded = &mut crd["status"]["storedVersions"];
    if !recorded.is_array() {
        *recorded = json!([]);
    }
    if let Some(list) = recorded.as_array_mut()
        && !list.iter().any(|v| v.as_str() == Some(storage.as_str()))
    {
        list.push(Value::String(storage));
    }
}

/// The status a CRD gets once served.
pub fn established_crd_status(crd: &Value, now: &str) -> Value {
    let names = crd["spec"]["names"].clone();
    json!({
        "acceptedNames": names,
        "storedVersions": crd["spec"]["versions"].as_array().into_iter().flatten()
            .filter(|v| v["storage"].as_bool() == Some(true))
            .filter_map(|v| v["name"].as_str()).collect::<Vec<_>>(),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ]
    })
}
