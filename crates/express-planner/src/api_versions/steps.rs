//! The steps of a version's travel through a DC's CRDs: what the DC holds ([`DcCrd`]), the next
//! step towards what a build carries ([`next_step`]), the versions a step leaves listed
//! ([`versions_after`]), and how far the DC has come.

use std::collections::BTreeSet;
use std::fmt;

use express_api::api_record::{ANNOTATION_STORAGE_MIGRATION, MigrationRecord};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// One version as a CRD lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub served: bool,
    pub storage: bool,
}

/// A CRD as the DC holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DcCrd {
    pub name: String,
    pub versions: Vec<Listed>,
    /// `status.storedVersions`: every version an object may still be stored at.
    pub stored_versions: Vec<String>,
    /// The rewrite of the stored objects, as recorded on the CRD.
    pub migration: Option<Migration>,
    /// The API server could call its conversion webhook: the CRD converts without one, or its
    /// webhook has a `caBundle` to trust it by. A version served before then fails every read
    /// at it, and `kubectl get` reads at the newest.
    pub webhook_trusted: bool,
}

/// The rewrite of a CRD's stored objects at one storage version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    /// The storage version the objects are rewritten at.
    pub to: String,
    /// Objects rewritten so far.
    pub rewritten: u64,
    /// Objects there were to rewrite, once the first page said (its remaining count).
    pub total: Option<u64>,
    /// Every page rewritten, after the storage version moved.
    pub complete: bool,
    /// When the storage version moved (seconds since the epoch), as recorded then.
    pub storage_moved_at: Option<i64>,
}

/// How long the rewrite of the stored objects waits after the storage version moved: every
/// API server of the control plane must store at the new version before an object is written
/// back, or it would be written at the old one again (the Kubernetes storage version migrator
/// waits for the same reason).
pub const STORAGE_SETTLE_SECONDS: i64 = 30;

/// A CRD as a build carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildCrd {
    pub name: String,
    /// Every version the build serves for it, oldest first.
    pub versions: Vec<String>,
    /// The version the build stores it at, once every ring knows it.
    pub storage: String,
}

/// What the builds of the DC know, as they say it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Builds {
    /// Each ring of the DC with the versions its leader's build knows; `None` when it does not
    /// say (a build older than this, or a ring nobody leads).
    pub rings: Vec<(String, Option<Vec<String>>)>,
    /// Each pod behind the conversion webhook's Service with the versions its build knows.
    pub webhook_pods: Vec<(String, Vec<String>)>,
}

/// The next step for one CRD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// List these versions, not served: the older builds leave the webhook first.
    List(Vec<String>),
    /// Serve these listed versions.
    Serve(Vec<String>),
    /// Store at `to` from now on.
    MoveStorage { from: String, to: String },
    /// Rewrite the stored objects at `to`, a page at a time (the next page, or the first).
    Migrate { to: String },
    /// Leave only `to` in `status.storedVersions`.
    Trim { to: String, drop: Vec<String> },
    /// Nothing can be done until this changes.
    Wait(Waiting),
    /// The DC's CRD lists or stores what the build does not know: left as it is.
    Ahead(Vec<String>),
    /// As the build carries it, storage moved and migrated.
    Done,
}

/// What a step waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// The storage version moved less than [`STORAGE_SETTLE_SECONDS`] ago (until then, in
    /// seconds since the epoch).
    StorageSettling { until: i64 },
    /// No pod serves the webhook, so nothing could convert the versions to be served.
    NoWebhookPod,
    /// Pods behind the webhook whose build does not know every listed version (they leave it
    /// on their own; the step follows).
    WebhookPodsBehind(Vec<String>),
    /// Rings whose build does not know the version storage would move to, or does not say.
    RingsBehind(Vec<String>),
    /// The CRD's conversion webhook has no `caBundle` yet (the webhook's keeper writes it).
    WebhookNotTrusted,
}

impl fmt::Display for Waiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waiting::StorageSettling { until } => write!(
                f,
                "the storage version moved a moment ago; the stored objects are rewritten from {until} (seconds since the epoch), once every API server stores at it"
            ),
            Waiting::NoWebhookPod => write!(
                f,
                "no operator pod serves the conversion webhook (conversionWebhook.enabled, a build that knows every listed version)"
            ),
            Waiting::WebhookPodsBehind(pods) => write!(
                f,
                "operator pods behind the conversion webhook do not know every listed version yet: {}",
                pods.join(", ")
            ),
            Waiting::RingsBehind(rings) => write!(
                f,
                "rings whose build does not know the new storage version (or does not say): {}",
                rings.join(", ")
            ),
            Waiting::WebhookNotTrusted => write!(
                f,
                "the CRD's conversion webhook has no caBundle yet: nothing could trust it (the operator serving it writes its authority there)"
            ),
        }
    }
}

impl DcCrd {
    /// A CRD as the DC holds it, with the migration recorded on it.
    pub fn of(crd: &CustomResourceDefinition) -> DcCrd {
        let migration = crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_STORAGE_MIGRATION))
            .and_then(|text| MigrationRecord::from_annotation(text))
            .map(|record| Migration {
                to: record.to,
                rewritten: record.rewritten,
                total: record.total,
                complete: record.complete,
                storage_moved_at: record.storage_moved_at,
            });
        DcCrd {
            name: crd.metadata.name.clone().unwrap_or_default(),
            versions: crd
                .spec
                .versions
                .iter()
                .map(|v| Listed {
                    name: v.name.clone(),
                    served: v.served,
                    storage: v.storage,
                })
                .collect(),
            stored_versions: crd
                .status
                .as_ref()
                .and_then(|s| s.stored_versions.clone())
                .unwrap_or_default(),
            migration,
            webhook_trusted: webhook_trusted(crd),
        }
    }

    fn listed(&self, version: &str) -> Option<&Listed> {
        self.versions.iter().find(|v| v.name == version)
    }

    /// The version objects are written at now.
    pub fn storage(&self) -> Option<&str> {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }

    fn listed_names(&self) -> BTreeSet<&str> {
        self.versions.iter().map(|v| v.name.as_str()).collect()
    }
}

fn knows(known: &[String], version: &str) -> bool {
    known.iter().any(|k| k == version)
}

/// The next step that brings `dc` to what `build` carries, given what the DC's builds know.
pub fn next_step(dc: &DcCrd, build: &BuildCrd, builds: &Builds) -> Step {
    let position = |version: &str| build.versions.iter().position(|v| v == version);
    let unknown: Vec<String> = dc
        .versions
        .iter()
        .filter(|v| position(&v.name).is_none())
        .map(|v| v.name.clone())
        .collect();
    if !unknown.is_empty() {
        return Step::Ahead(unknown);
    }
    let (Some(storage), Some(target)) = (dc.storage(), position(&build.storage)) else {
        // No storage version at all is not a CRD the API server would hold; nothing to decide.
        return Step::Ahead(Vec::new());
    };
    let current = position(storage).unwrap_or(target);
    if current > target {
        return Step::Ahead(vec![storage.to_owned()]);
    }
    let missing: Vec<String> = build
        .versions
        .iter()
        .filter(|v| dc.listed(v).is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Step::List(missing);
    }
    let unserved: Vec<String> = build
        .versions
        .iter()
        .filter(|v| dc.listed(v).is_some_and(|l| !l.served))
        .cloned()
        .collect();
    if !unserved.is_empty() {
        return match webhook_behind(dc, builds) {
            Some(waiting) => Step::Wait(waiting),
            None => Step::Serve(unserved),
        };
    }
    if current < target {
        let behind = rings_behind(&build.storage, builds);
        if !behind.is_empty() {
            return Step::Wait(Waiting::RingsBehind(behind));
        }
        return Step::MoveStorage {
            from: storage.to_owned(),
            to: build.storage.clone(),
        };
    }
    let drop: Vec<String> = dc
        .stored_versions
        .iter()
        .filter(|v| **v != build.storage)
        .cloned()
        .collect();
    if drop.is_empty() {
        return Step::Done;
    }
    let migrated = dc
        .migration
        .as_ref()
        .is_some_and(|m| m.to == build.storage && m.complete);
    if migrated {
        Step::Trim {
            to: build.storage.clone(),
            drop,
        }
    } else {
        Step::Migrate {
            to: build.storage.clone(),
        }
    }
}

/// The versions a CRD lists after `step`, as the step's write sets them (steps that list,
/// serve or move storage; the others leave them as they are).
pub fn versions_after(dc: &DcCrd, step: &Step) -> Vec<Listed> {
    let mut versions = dc.versions.clone();
    match step {
        Step::List(added) => versions.extend(added.iter().map(|name| Listed {
            name: name.clone(),
            served: false,
            storage: false,
        })),
        Step::Serve(served) => {
            for v in versions.iter_mut().filter(|v| served.contains(&v.name)) {
                v.served = true;
            }
        }
        Step::MoveStorage { to, .. } => {
            for v in versions.iter_mut() {
                v.storage = v.name == *to;
            }
        }
        Step::Migrate { .. } | Step::Trim { .. } | Step::Wait(_) | Step::Ahead(_) | Step::Done => {}
    }
    versions
}

/// The next step at `now` (seconds since the epoch): [`next_step`], except that the rewrite of
/// the stored objects does not start within [`STORAGE_SETTLE_SECONDS`] of the storage move.
pub fn next_step_at(dc: &DcCrd, build: &BuildCrd, builds: &Builds, now: i64) -> Step {
    let step = next_step(dc, build, builds);
    if let Step::Migrate { to } = &step
        && let Some(migration) = dc.migration.as_ref().filter(|m| m.to == *to)
        && migration.rewritten == 0
        && !migration.complete
        && let Some(moved) = migration.storage_moved_at
    {
        let until = moved.saturating_add(STORAGE_SETTLE_SECONDS);
        if now < until {
            return Step::Wait(Waiting::StorageSettling { until });
        }
    }
    step
}

/// Whether the API server can call `crd`'s conversion webhook: no webhook named, or one with a
/// `caBundle`.
fn webhook_trusted(crd: &CustomResourceDefinition) -> bool {
    let Some(conversion) = crd
        .spec
        .conversion
        .as_ref()
        .filter(|c| c.strategy == "Webhook")
    else {
        return true;
    };
    conversion
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref())
        .and_then(|c| c.ca_bundle.as_ref())
        .is_some_and(|bundle| !bundle.0.is_empty())
}

/// Why the listed versions may not be served yet, if they may not.
fn webhook_behind(dc: &DcCrd, builds: &Builds) -> Option<Waiting> {
    if !dc.webhook_trusted {
        return Some(Waiting::WebhookNotTrusted);
    }
    if builds.webhook_pods.is_empty() {
        return Some(Waiting::NoWebhookPod);
    }
    let listed = dc.listed_names();
    let behind: Vec<String> = builds
        .webhook_pods
        .iter()
        .filter(|(_, known)| !listed.iter().all(|v| knows(known, v)))
        .map(|(pod, _)| pod.clone())
        .collect();
    (!behind.is_empty()).then_some(Waiting::WebhookPodsBehind(behind))
}

/// The rings whose build does not know `version`, or does not say what it knows.
fn rings_behind(version: &str, builds: &Builds) -> Vec<String> {
    builds
        .rings
        .iter()
        .filter(|(_, known)| !known.as_deref().is_some_and(|k| knows(k, version)))
        .map(|(ring, _)| ring.clone())
        .collect()
}

/// How far a DC's API has come towards what a build carries, for `status.api` and
/// `kubectl express release`: the least advanced of its CRDs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// A version of the build's is not listed yet.
    Behind,
    /// Every version listed; some not served yet.
    Listed,
    /// Every version served; storage not moved.
    Served,
    /// Storage moved; objects being rewritten (`rewritten` of `total`, when known).
    Migrating { rewritten: u64, total: Option<u64> },
    /// Storage moved, every object rewritten, `storedVersions` the storage version alone.
    Trimmed,
    /// The DC lists or stores what the build does not know.
    Ahead,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Behind => write!(f, "not listed"),
            Stage::Listed => write!(f, "listed, not served"),
            Stage::Served => write!(f, "served"),
            Stage::Migrating {
                rewritten,
                total: Some(total),
            } => write!(f, "storage moved, migrated {rewritten}/{total}"),
            Stage::Migrating {
                rewritten,
                total: None,
            } => write!(f, "storage moved, migrated {rewritten}"),
            Stage::Trimmed => write!(f, "trimmed"),
            Stage::Ahead => write!(f, "ahead of this build"),
        }
    }
}

/// The stage of one CRD.
pub fn stage(dc: &DcCrd, build: &BuildCrd) -> Stage {
    // The builds only decide when a step may be taken, not how far the CRD has come.
    let everyone = Builds {
        rings: Vec::new(),
        webhook_pods: vec![(String::new(), build.versions.clone())],
    };
    match next_step(dc, build, &everyone) {
        Step::List(_) => Stage::Behind,
        Step::Serve(_) | Step::Wait(_) => Stage::Listed,
        Step::MoveStorage { .. } => Stage::Served,
        Step::Migrate { .. } | Step::Trim { .. } => {
            let migration = dc.migration.as_ref().filter(|m| m.to == build.storage);
            Stage::Migrating {
                rewritten: migration.map(|m| m.rewritten).unwrap_or(0),
                total: migration.and_then(|m| m.total),
            }
        }
        Step::Done => Stage::Trimmed,
        Step::Ahead(_) => Stage::Ahead,
    }
}

/// The stage of a DC: its least advanced CRD (a CRD the build carries that the DC lacks is
/// `Behind`).
pub fn dc_stage(dc: &[DcCrd], build: &[BuildCrd]) -> Stage {
    build
        .iter()
        .map(|b| match dc.iter().find(|d| d.name == b.name) {
            Some(d) => stage(d, b),
            None => Stage::Behind,
        })
        .min()
        .unwrap_or(Stage::Trimmed)
}

/// Where a DC's versioned CRDs stand, read from them alone (each one's goal is the newest
/// version it lists), in the words of `kubectl express release` and doctor:
/// `v1beta1: listed, not served`, `v1beta1: served`, `v1beta1: storage moved, migrated 3/7`,
/// `v1beta1: trimmed`. None while every CRD lists one version.
pub fn dc_versions(crds: &[DcCrd]) -> Option<String> {
    let mut stages = Vec::new();
    for crd in crds.iter().filter(|c| c.versions.len() > 1) {
        let mut versions: Vec<String> = crd.versions.iter().map(|v| v.name.clone()).collect();
        versions.sort_by_cached_key(|v| kube::core::Version::parse(v).priority());
        let Some(newest) = versions.last().cloned() else {
            continue;
        };
        let goal = BuildCrd {
            name: crd.name.clone(),
            versions,
            storage: newest.clone(),
        };
        stages.push((stage(crd, &goal), newest));
    }
    let (least, newest) = stages.into_iter().min()?;
    Some(format!("{newest}: {least}"))
}

/// Whether people need telling what v1beta1 changes for them
/// (`express_api::v1beta1::old_names::WHAT_CHANGES`) when the DC's API versions stand at `step`,
/// as [`dc_versions`] words it: while v1beta1 is listed and not yet served, and, with
/// `newly_served`, once it is served until the storage version moves.
pub fn renames_ahead(step: &str, newly_served: bool) -> bool {
    let at = |stage: Stage| step == format!("{}: {stage}", express_api::v1beta1::VERSION);
    at(Stage::Listed) || (newly_served && at(Stage::Served))
}

/// Why a build must not lead a ring in this DC: a CRD stored at a version it does not know (a
/// rollback past a storage move), or no longer serving the version it reads and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CannotRead {
    pub crd: String,
    pub why: String,
}

/// Whether a build that knows `known` and reads and writes at `reads` can work with what the
/// DC stores; every CRD it cannot, with why.
pub fn cannot_read(dc: &[DcCrd], known: &[String], reads: &str) -> Vec<CannotRead> {
    let mut problems = Vec::new();
    for crd in dc {
        if let Some(storage) = crd.storage()
            && !knows(known, storage)
        {
            problems.push(CannotRead {
                crd: crd.name.clone(),
                why: format!(
                    "its objects are stored at {storage}, a version this build does not know (it knows {})",
                    known.join(", ")
                ),
            });
            continue;
        }
        if !crd.listed(reads).is_some_and(|l| l.served) {
            problems.push(CannotRead {
                crd: crd.name.clone(),
                why: format!(
                    "it no longer serves {reads}, the version this build reads and writes"
                ),
            });
        }
    }
    problems
}
