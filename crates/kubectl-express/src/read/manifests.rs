//! Reads Kubernetes manifests (files, directories, stdin; multi-document YAML or JSON; `List`
//! objects) into typed objects, remembering where each came from so that every error names its
//! file and document.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use express_api::keys::{GROUP, VERSION};

use express_api::views::{NodeView, PodView};
use express_api::{Backend, Frontend, Objects};
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;

/// Where an object was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub source: String,
    /// 1-based document number within the source.
    pub document: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {})", self.source, self.document)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}: not valid YAML: {message}")]
    Yaml { origin: Origin, message: String },
    #[error("{origin}: {message}")]
    Invalid { origin: Origin, message: String },
    #[error(
        "{origin}: unsupported object {kind} ({api_version}); expected ExpressCluster, Backend, Frontend (express.dev/v1alpha1), Pod or ConfigMap (v1)"
    )]
    UnsupportedKind {
        origin: Origin,
        kind: String,
        api_version: String,
    },
    #[error("{origin}: {kind} {namespace}/{name} is also defined in {first}")]
    Duplicate {
        origin: Origin,
        first: Origin,
        kind: String,
        namespace: String,
        name: String,
    },
}

/// Every object read, and where from.
#[derive(Default, Debug)]
pub struct Manifests {
    pub objects: Objects,
    origins: HashMap<(String, String, String), Origin>,
    /// Skip kinds other than the ones above instead of refusing them (a rendered chart may
    /// hold anything).
    lenient: bool,
}

impl Manifests {
    /// Where the object of this kind, namespace and name was read from.
    pub fn origin(&self, kind: &str, namespace: &str, name: &str) -> Option<&Origin> {
        self.origins
            .get(&(kind.to_owned(), namespace.to_owned(), name.to_owned()))
    }
}

/// Reads every input (`-` is stdin; directories are read recursively, `.yaml`, `.yml` and
/// `.json` files in name order). Objects without a namespace get `default_namespace`.
/// Returns every error found, not only the first.
pub fn load(inputs: &[PathBuf], default_namespace: &str) -> Result<Manifests, Vec<LoadError>> {
    load_into(Manifests::default(), inputs, &[], default_namespace)
}

/// [`load`], plus texts already read (`(source, text)`, e.g. `helm template` output); kinds
/// other than Express objects, Pods and ConfigMaps are skipped.
pub fn load_lenient(
    inputs: &[PathBuf],
    texts: &[(String, String)],
    default_namespace: &str,
) -> Result<Manifests, Vec<LoadError>> {
    let manifests = Manifests {
        lenient: true,
        ..Manifests::default()
    };
    load_into(manifests, inputs, texts, default_namespace)
}

fn load_into(
    mut manifests: Manifests,
    inputs: &[PathBuf],
    texts: &[(String, String)],
    default_namespace: &str,
) -> Result<Manifests, Vec<LoadError>> {
    let mut errors = Vec::new();
    for (source, text) in texts {
        parse_source(source, text, default_namespace, &mut manifests, &mut errors);
    }
    for input in inputs {
        for (source, text) in read_input(input, &mut errors) {
            parse_source(
                &source,
                &text,
                default_namespace,
                &mut manifests,
                &mut errors,
            );
        }
    }
    if errors.is_empty() {
        Ok(manifests)
    } else {
        Err(errors)
    }
}

fn read_input(input: &Path, errors: &mut Vec<LoadError>) -> Vec<(String, String)> {
    let display = input.display().to_string();
    if display == "-" {
        let mut text = String::new();
        return match std::io::stdin().read_to_string(&mut text) {
            Ok(_) => vec![("<stdin>".to_owned(), text)],
            Err(source) => {
                errors.push(LoadError::Read {
                    path: "<stdin>".into(),
                    source,
                });
                Vec::new()
            }
        };
    }
    if input.is_dir() {
        let mut files = Vec::new();
        collect_manifest_files(input, &mut files, errors);
        files.sort();
        return files
            .into_iter()
            .filter_map(|file| read_file(&file, errors))
            .collect();
    }
    read_file(input, errors).into_iter().collect()
}

fn collect_manifest_files(dir: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<LoadError>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) => {
            errors.push(LoadError::Read {
                path: dir.display().to_string(),
                source,
            });
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_manifest_files(&path, files, errors);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(path);
        }
    }
}

fn read_file(path: &Path, errors: &mut Vec<LoadError>) -> Option<(String, String)> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some((path.display().to_string(), text)),
        Err(source) => {
            errors.push(LoadError::Read {
                path: path.display().to_string(),
                source,
            });
            None
        }
    }
}

fn parse_source(
    source: &str,
    text: &str,
    default_namespace: &str,
    manifests: &mut Manifests,
    errors: &mut Vec<LoadError>,
) {
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let origin = Origin {
            source: source.to_owned(),
            document: i + 1,
        };
        let value: serde_yaml::Value = match serde::Deserialize::deserialize(document) {
            Ok(value) => value,
            Err(err) => {
                errors.push(LoadError::Yaml {
                    origin,
                    message: err.to_string(),
                });
                // The parser cannot resynchronise after a syntax error in a stream.
                return;
            }
        };
        if value.is_null() {
            continue;
        }
        let json = match serde_json::to_value(&value) {
            Ok(json) => json,
            Err(err) => {
                errors.push(LoadError::Invalid {
                    origin,
                    message: format!("cannot be read as a Kubernetes object: {err}"),
                });
                continue;
            }
        };
        add_object(json, &origin, default_namespace, manifests, errors);
    }
}

fn add_object(
    mut object: serde_json::Value,
    origin: &Origin,
    default_namespace: &str,
    manifests: &mut Manifests,
    errors: &mut Vec<LoadError>,
) {
    let Some(map) = object.as_object_mut() else {
        errors.push(LoadError::Invalid {
            origin: origin.clone(),
            message: "a document must be a mapping (a Kubernetes object)".into(),
        });
        return;
    };
    let text = |key: &str| {
        map.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if kind.ends_with("List") && map.get("items").is_some_and(|i| i.is_array()) {
        if let Some(serde_json::Value::Array(items)) = map.remove("items") {
            for item in items {
                add_object(item, origin, default_namespace, manifests, errors);
            }
        }
        return;
    }
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(meta) = metadata.as_object_mut()
        && meta.get("namespace").is_none_or(|n| n.is_null())
    {
        meta.insert("namespace".into(), default_namespace.into());
    }
    let name = metadata
        .get("name")
        .and_then(|n| n.as_str())
        .unwrap_or("")
        .to_owned();
    let namespace = metadata
        .get("namespace")
        .and_then(|n| n.as_str())
        .unwrap_or(default_namespace)
        .to_owned();
    if name.is_empty() {
        errors.push(LoadError::Invalid {
            origin: origin.clone(),
            message: format!("{kind} has no metadata.name"),
        });
        return;
    }
    let key = (kind.clone(), namespace.clone(), name.clone());
    if let Some(first) = manifests.origins.get(&key) {
        errors.push(LoadError::Duplicate {
            origin: origin.clone(),
            first: first.clone(),
            kind,
            namespace,
            name,
        });
        return;
    }
    let describe = format!("{kind} {namespace}/{name}");
    let express = api_version == format!("{GROUP}/{VERSION}");
    let added = match (api_version.as_str(), kind.as_str()) {
        (_, "ExpressCluster") if express => {
            typed(object, &describe).map(|o| manifests.objects.clusters.push(Arc::new(o)))
        }
        (_, "Backend") if express => typed::<Backend>(object, &describe)
            .map(|o| manifests.objects.backends.push(Arc::new(NodeView::from(o)))),
        (_, "Frontend") if express => typed::<Frontend>(object, &describe).map(|o| {
            manifests
                .objects
                .frontends
                .push(Arc::new(NodeView::from(o)))
        }),
        ("v1", "Pod") => typed::<Pod>(object, &describe)
            .map(|o| manifests.objects.pods.push(Arc::new(PodView::from(&o)))),
        ("v1", "ConfigMap") => {
            typed(object, &describe).map(|o| manifests.objects.config_maps.push(Arc::new(o)))
        }
        _ if manifests.lenient => return,
        _ => {
            errors.push(LoadError::UnsupportedKind {
                origin: origin.clone(),
                kind,
                api_version,
            });
            return;
        }
    };
    match added {
        Ok(()) => {
            manifests.origins.insert(key, origin.clone());
        }
        Err(message) => errors.push(LoadError::Invalid {
            origin: origin.clone(),
            message,
        }),
    }
}

/// Deserializes with the path of the offending field in the message.
fn typed<T: DeserializeOwned>(object: serde_json::Value, describe: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(object).map_err(|err| {
        let path = err.path().to_string();
        if path == "." {
            format!("{describe}: {}", err.inner())
        } else {
            format!("{describe}: {path}: {}", err.inner())
        }
    })
}
