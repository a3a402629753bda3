//! What the actuator is asked to do: one [`Operation`] on one node's pod, and where the spec of
//! a pod it creates comes from ([`PodSource`]). Built only through [`Action::new`].

use express_api::NodeKind;

use crate::snapshot::{Change, NodeIndex, NodeObservation};

/// One pod operation the actuator performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Create the missing pod.
    CreatePod,
    /// Record the replacement in the node's status, then delete the old pod.
    ReplacePod,
    /// A recorded replacement whose old pod is still present: delete it (again).
    ResumeReplacement,
    /// A recorded replacement whose old pod is gone: create the new pod.
    FinishReplacement,
    /// Delete the pod of a node set down.
    RemovePod,
    /// Delete a pod whose containers ended so that the node can be provisioned again.
    DeleteEndedPod,
    /// Bounce: disable the application's shutdown protection (best effort), then delete the
    /// pod gracefully.
    DeleteForBounce,
    /// Bounce: the old pod is gone; create the new one on the revision the old one ran.
    CreateForBounce,
}

impl Operation {
    /// It deletes a pod the node may still serve from, as a step of a change or a removal: the
    /// statuses written with it count the node out of service at once. A bounce's deletion is
    /// not one of them (its own record tells each step, and a change the node just finished must
    /// still be seen finished on the pod being bounced), nor is an ended pod's (not serving, and
    /// often deleted at once).
    pub fn retires_pod(self) -> bool {
        matches!(
            self,
            Operation::ReplacePod | Operation::ResumeReplacement | Operation::RemovePod
        )
    }
}

/// Where the spec of a pod the operator creates comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodSource {
    /// The node's desired spec, as the snapshot computed it (and its desired revision).
    Desired,
    /// The spec a ControllerRevision keeps for this revision: a rollback, or a forced bounce
    /// of a node whose desired revision is not the one it runs.
    Kept(String),
}

impl PodSource {
    /// The kept revision the pod is built from, if it is not the desired one.
    pub fn kept_revision(&self) -> Option<&str> {
        match self {
            PodSource::Desired => None,
            PodSource::Kept(revision) => Some(revision),
        }
    }
}

/// An operation on one node's pod, allowed now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub node: NodeIndex,
    pub name: String,
    pub kind: NodeKind,
    pub operation: Operation,
    /// Where the spec of the pod it creates (or, for a replacement, the pod it moves to) comes
    /// from.
    pub source: PodSource,
    /// Record this change in the node's status before touching the pod.
    pub record: Option<Change>,
}

impl Action {
    /// An operation on the snapshot node `node` (at `index`), recording nothing yet.
    pub fn new(
        index: NodeIndex,
        node: &NodeObservation,
        operation: Operation,
        source: PodSource,
    ) -> Action {
        Action {
            node: index,
            name: node.name.clone(),
            kind: node.kind,
            operation,
            source,
            record: None,
        }
    }

    /// Records `record` in the node's status before the pod is touched.
    pub fn recording(mut self, record: Option<Change>) -> Action {
        self.record = record;
        self
    }

    /// The revision the pod it creates runs: the kept one, else the node's desired revision
    /// (None when the node's spec is invalid).
    pub fn pod_revision<'a>(&'a self, node: &'a NodeObservation) -> Option<&'a str> {
        self.source
            .kept_revision()
            .or_else(|| node.desired.as_ref().ok().map(|d| d.revision.as_str()))
    }
}
