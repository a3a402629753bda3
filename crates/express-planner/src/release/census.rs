//! Who is where, as a release counts it: movable or pinned, moved, adopted, returning; and the
//! release's order of the movable tenants.

use express_api::release::OperatorReleaseSpec;
use express_api::rings::DEFAULT_RING;
use k8s_openapi::jiff::Timestamp;
use sha2::{Digest, Sha256};

/// One tenant as a release sees it: its ExpressCluster's ring label, the release marks on it and
/// the owner its status names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReleaseTenant {
    pub namespace: String,
    /// The ExpressCluster's name (what a move labels).
    pub name: String,
    /// The ring label, when set and not empty.
    pub label: Option<String>,
    /// The release that set the label (`express.dev/released-by`).
    pub released_by: Option<String>,
    /// When a release last moved it.
    pub moved_at: Option<Timestamp>,
    /// The ring that drives it: `status.operator` names it, neither released nor adopting.
    pub driven_by: Option<String>,
}

impl ReleaseTenant {
    /// The ring its label names.
    pub fn ring(&self) -> &str {
        self.label.as_deref().unwrap_or(DEFAULT_RING)
    }

    /// Someone other than a release set its ring label: never moved.
    pub fn pinned(&self) -> bool {
        self.label.is_some() && self.released_by.is_none()
    }

    pub(crate) fn order_key(&self) -> (u64, &str, &str) {
        let digest = Sha256::digest(format!("{}/{}", self.namespace, self.name).as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        (u64::from_be_bytes(first), &self.namespace, &self.name)
    }
}

/// Who is where, as the release counts it.
pub(crate) struct Census<'a> {
    /// Movable tenants of `fromRing` not moved yet, in the release's order.
    pub unmoved: Vec<&'a ReleaseTenant>,
    /// Tenants this release moved that are on `toRing`.
    pub moved: Vec<&'a ReleaseTenant>,
    /// Of those, driven by `toRing`.
    pub adopted: usize,
    /// Tenants this release moved back that `fromRing` does not drive yet.
    pub returning: usize,
    pub pinned: usize,
}

impl Census<'_> {
    pub fn movable(&self) -> usize {
        self.unmoved.len() + self.moved.len()
    }
    pub fn in_flight(&self) -> usize {
        self.moved.len() - self.adopted
    }
}

pub(crate) fn census<'a>(
    name: &str,
    spec: &OperatorReleaseSpec,
    tenants: &'a [ReleaseTenant],
) -> Census<'a> {
    let ours = |t: &ReleaseTenant| t.released_by.as_deref() == Some(name);
    let mut unmoved: Vec<&ReleaseTenant> = tenants
        .iter()
        .filter(|t| !t.pinned() && t.ring() == spec.from_ring && !ours(t))
        .collect();
    // A tenant this release moved back is movable again only for another release.
    unmoved.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    let moved: Vec<&ReleaseTenant> = tenants
        .iter()
        .filter(|t| ours(t) && t.ring() == spec.to_ring)
        .collect();
    let adopted = moved
        .iter()
        .filter(|t| t.driven_by.as_deref() == Some(spec.to_ring.as_str()))
        .count();
    let returning = tenants
        .iter()
        .filter(|t| {
            ours(t)
                && t.ring() == spec.from_ring
                && t.driven_by.as_deref() != Some(spec.from_ring.as_str())
        })
        .count();
    Census {
        unmoved,
        moved,
        adopted,
        returning,
        pinned: tenants.iter().filter(|t| t.pinned()).count(),
    }
}

pub(crate) fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
