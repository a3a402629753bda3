//! The events of the API's lifecycle: the CRDs a release applied, each version step taken, and
//! the installed CRDs falling behind this build, on the ring's Lease or the OperatorRelease.

pub(super) use crate::controller::events::{Notice, publish};

/// The build applied its own CRDs before a release's first move, on the OperatorRelease.
pub(super) fn crds_applied(summary: String) -> Notice {
    Notice::normal("CRDsApplied", "apply_crds", summary)
}

/// A release's CRDs listed a version the DC does not serve yet: what changes for people once it
/// is served (kubectl's default version, the renamed fields), said before it is.
pub(super) fn api_version_listed(step: &str) -> Notice {
    Notice::normal(
        "APIVersionListed",
        "list_api_version",
        format!("{step}: {}", express_api::v1beta1::old_names::WHAT_CHANGES),
    )
}

/// A listed version served: the pods behind the webhook all know it (DESIGN section 18).
pub(super) fn api_version_served(crd: &str, versions: &[String]) -> Notice {
    Notice::normal(
        "APIVersionServed",
        "serve_api_version",
        format!(
            "{crd} serves {} now: every pod behind the conversion webhook knows every listed version",
            versions.join(", ")
        ),
    )
}

/// The storage version moved: every ring's build knows the new one.
pub(super) fn storage_version_moved(crd: &str, from: &str, to: &str) -> Notice {
    Notice::normal(
        "StorageVersionMoved",
        "move_storage_version",
        format!(
            "{crd} stores new writes at {to} (was {from}): every ring's build knows it; the stored objects are rewritten next"
        ),
    )
}

/// Every stored object rewritten at the storage version.
pub(super) fn stored_objects_rewritten(crd: &str, to: &str, rewritten: u64) -> Notice {
    Notice::normal(
        "StoredObjectsMigrated",
        "migrate_stored_objects",
        format!("{crd}: {rewritten} stored objects rewritten at {to}"),
    )
}

/// `status.storedVersions` trimmed to the storage version.
pub(super) fn stored_versions_trimmed(crd: &str, to: &str, dropped: &[String]) -> Notice {
    Notice::normal(
        "StoredVersionsTrimmed",
        "trim_stored_versions",
        format!(
            "{crd}: nothing is stored at {} any more; storedVersions is {to} alone",
            dropped.join(", ")
        ),
    )
}

/// The installed CRDs lack fields this build writes (the API server drops them), on the
/// ring's Lease; and when they no longer do.
pub(super) fn api_behind(behind: Option<&str>) -> Notice {
    match behind {
        Some(fields) => Notice::warning(
            "APIBehind",
            "check_crds",
            format!(
                "the installed CRDs lack fields this build writes, which the API server drops: {fields}; a release to this ring applies them"
            ),
        ),
        None => Notice::normal(
            "APICaughtUp",
            "check_crds",
            "the installed CRDs declare every field this build writes".into(),
        ),
    }
}
