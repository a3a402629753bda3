//! What a build did with its own CRDs in a DC (DESIGN section 15), in the words every reader
//! shares: the build being released checks its CRDs against the DC's and what it stores, applies
//! them when compatible, and records the outcome on its ring's Lease; the release copies the
//! record into `status.api` before its first move. A build running on CRDs that lack fields it
//! writes says so on the same Lease.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// On a ring's Lease: the JSON [`ApiRecord`] of its leader's last check of its own CRDs.
pub const ANNOTATION_API_RECORD: &str = "express.dev/api-record";
/// On a ring's Lease: the fields this ring's build writes that the installed CRDs lack
/// (`crd: path, path; crd: path`), absent when there are none.
pub const ANNOTATION_API_BEHIND: &str = "express.dev/api-behind";
/// On a CRD a build applied: that build's version, so that an older build leaves it.
pub const ANNOTATION_APPLIED_BY_BUILD: &str = "express.dev/applied-by-build";
/// The field manager of the CRDs a build applies (its tenants' objects use `FIELD_MANAGER`).
pub const CRD_FIELD_MANAGER: &str = "express-operator-crds";
/// The release condition saying whether the build's CRDs suit this DC.
pub const CONDITION_API_COMPATIBLE: &str = "APICompatible";
/// How many problems a record keeps (the first, in the check's order).
pub const PROBLEMS_KEPT: usize = 5;

/// On a ring's Lease: the API versions its leader's build knows, comma separated, oldest first
/// (the same words as an operator pod's `express.dev/api-versions`); storage moves to a version
/// only once every ring's Lease names it (DESIGN section 18).
pub const ANNOTATION_RING_API_VERSIONS: &str = crate::keys::ANNOTATION_API_VERSIONS;
/// On a ring's Lease: why its build refuses to lead here (it cannot read what the DC stores),
/// absent when it does not.
pub const ANNOTATION_CANNOT_READ: &str = "express.dev/cannot-read-api";
/// On a CRD: the rewrite of its stored objects at the storage version, as JSON
/// ([`MigrationRecord`]), written after every page.
pub const ANNOTATION_STORAGE_MIGRATION: &str = "express.dev/storage-migration";

/// What [`ANNOTATION_STORAGE_MIGRATION`] holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationRecord {
    /// The storage version the objects are rewritten at.
    pub to: String,
    pub rewritten: u64,
    /// Objects there were to rewrite, once the first page said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Where the next page starts (the list's continue token); none before the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    pub complete: bool,
    /// When the storage version moved (seconds since the epoch): the rewrite waits a while
    /// after it, so that every API server stores at the new version first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_moved_at: Option<i64>,
}

impl MigrationRecord {
    /// The record a CRD carries, if it carries a readable one.
    pub fn from_annotation(value: &str) -> Option<MigrationRecord> {
        serde_json::from_str(value).ok()
    }
}

/// What the check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ApiOutcome {
    /// Compatible, and applied: some CRD's generation moved.
    Applied,
    /// Compatible, and the DC already had exactly these CRDs.
    Current,
    /// A newer build applied the DC's CRDs, and they are a compatible successor of this
    /// build's: left as they are (a build never downgrades a CRD).
    Newer,
    /// Applying would break what the DC stores or serves: nothing was written.
    Breaking,
}

impl ApiOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiOutcome::Applied => "Applied",
            ApiOutcome::Current => "Current",
            ApiOutcome::Newer => "Newer",
            ApiOutcome::Breaking => "Breaking",
        }
    }

    /// Whether a release may move tenants to the build that recorded it.
    pub fn compatible(self) -> bool {
        self != ApiOutcome::Breaking
    }
}

/// One CRD's generation around the check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdGeneration {
    pub name: String,
    /// None: the DC did not have it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// None: not applied (breaking, or the DC's is newer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
}

/// What a build did with its CRDs in a DC: on its ring's Lease, and in a release's `status.api`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiRecord {
    pub outcome: ApiOutcome,
    /// The build that checked (its leader's version).
    pub build: String,
    /// The uid of the release it was checked for: another release's record (an earlier
    /// release to the same ring) is not this one's, whatever the clocks say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crds: Vec<CrdGeneration>,
    /// Stored objects validated against the build's schemas.
    #[serde(default)]
    pub objects_checked: u64,
    /// The first problems, breaking ones first (warnings of a compatible change too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    pub checked_at: Time,
}

impl ApiRecord {
    /// The record a Lease carries, if it carries a readable one.
    pub fn from_annotation(value: &str) -> Option<ApiRecord> {
        serde_json::from_str(value).ok()
    }

    /// One line for a condition, an event or doctor.
    pub fn summary(&self) -> String {
        let first = |n: usize| {
            self.problems
                .iter()
                .take(n)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        };
        match self.outcome {
            ApiOutcome::Breaking => format!(
                "build {}'s CRDs would break this DC ({} stored object(s) checked): {}",
                self.build,
                self.objects_checked,
                first(3)
            ),
            ApiOutcome::Applied => format!(
                "build {} applied its CRDs ({}; {} stored object(s) checked)",
                self.build,
                self.generations(),
                self.objects_checked
            ),
            ApiOutcome::Current => format!(
                "build {}'s CRDs are already installed ({} stored object(s) checked)",
                self.build, self.objects_checked
            ),
            ApiOutcome::Newer => format!(
                "the DC's CRDs are newer than build {}'s and compatible with it: left as they are",
                self.build
            ),
        }
    }

    /// `name gen before→after` for the CRDs whose generation moved.
    fn generations(&self) -> String {
        let moved: Vec<String> = self
            .crds
            .iter()
            .filter(|c| c.after.is_some() && c.after != c.before)
            .map(|c| {
                let before = c.before.map_or_else(|| "new".to_owned(), |g| g.to_string());
                let after = c.after.map_or_else(String::new, |g| g.to_string());
                format!("{} generation {before}→{after}", c.name)
            })
            .collect();
        if moved.is_empty() {
            "no generation moved".to_owned()
        } else {
            moved.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn record(outcome: ApiOutcome) -> ApiRecord {
        ApiRecord {
            outcome,
            build: "0.2.0".into(),
            release_uid: Some("u1".into()),
            crds: vec![
                CrdGeneration {
                    name: "expressclusters.express.dev".into(),
                    before: Some(1),
                    after: Some(2),
                },
                CrdGeneration {
                    name: "backends.express.dev".into(),
                    before: Some(3),
                    after: Some(3),
                },
            ],
            objects_checked: 12,
            problems: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            checked_at: Time(Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn a_record_survives_the_lease_annotation() {
        let written = serde_json::to_string(&record(ApiOutcome::Applied)).unwrap();
        assert_eq!(
            ApiRecord::from_annotation(&written),
            Some(record(ApiOutcome::Applied))
        );
        assert_eq!(ApiRecord::from_annotation("not json"), None);
    }

    #[test]
    fn summaries_name_what_moved_and_the_first_problems() {
        let applied = record(ApiOutcome::Applied).summary();
        assert!(
            applied.contains("expressclusters.express.dev generation 1→2"),
            "{applied}"
        );
        assert!(!applied.contains("backends"), "{applied}");
        let breaking = record(ApiOutcome::Breaking).summary();
        assert!(breaking.ends_with("a; b; c"), "{breaking}");
        assert!(!ApiOutcome::Breaking.compatible());
        assert!(ApiOutcome::Newer.compatible());
    }
}
