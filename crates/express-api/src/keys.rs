//! Names of labels, annotations and control objects that make up the operator's contract with
//! users, charts and pods. Every other crate refers to these constants, never to string literals.

/// API group of the custom resources.
pub const GROUP: &str = "express.dev";
/// API version of the custom resources.
pub const VERSION: &str = "v1alpha1";

/// Pod label: the Express cluster (clusterName) the pod's node belongs to.
pub const LABEL_CLUSTER: &str = "express.dev/cluster";
/// ExpressCluster label: the operator ring that drives the tenant (absent: `default`). Moving a
/// tenant to another ring is changing this one value; the operators hand it over (DESIGN
/// section 11).
pub const LABEL_OPERATOR_RING: &str = "express.dev/operator-ring";
/// Pod label: the node object the pod belongs to.
pub const LABEL_NODE: &str = "express.dev/node";
/// Pod label: `backend` or `frontend`.
pub const LABEL_KIND: &str = "express.dev/kind";
/// Pod label with the revision the pod runs; on a node object, overrides the computed revision.
pub const LABEL_DEPLOYMENT_REVISION: &str = "express.dev/deployment-revision";

/// Pod annotation: the Express version the pod runs (the image tag).
pub const ANNOTATION_EXPRESS_VERSION: &str = "express.dev/express-version";
/// Pod annotation: the configuration changeset the pod was started with.
pub const ANNOTATION_CONFIG_CHANGESET: &str = "express.dev/config-changeset";
/// Pod annotation written by the application: `Rebuilding`, `Catchup`, ...
pub const ANNOTATION_APP_STATE: &str = "express.dev/app-state";
/// Pod annotation the operator sets to `disabled` before bouncing a node.
pub const ANNOTATION_SHUTDOWN_PROTECTION: &str = "express.dev/shutdown-protection";

/// ExpressCluster annotation: abort the current rollout; the value is a request id.
pub const ANNOTATION_ABORT: &str = "express.dev/abort";
/// ExpressCluster annotation: `"true"` rolls nodes changed by the aborted rollout back.
pub const ANNOTATION_ABORT_ROLLBACK: &str = "express.dev/abort-rollback";
/// ExpressCluster annotation: why `spec.paused` is set (shown with the pause).
pub const ANNOTATION_PAUSE_REASON: &str = "express.dev/pause-reason";
/// ExpressCluster annotation: clear a failed or aborted rollout; the value is a request id.
pub const ANNOTATION_RETRY: &str = "express.dev/retry";
/// Annotation on node objects and the ExpressCluster: the delivery that wrote them (e.g. a hash
/// of the chart values). While the up nodes (and the ExpressCluster) carrying it disagree, no new
/// change starts: the desired state is still being written (DESIGN section 3, rule 8).
pub const ANNOTATION_ROLLOUT_ID: &str = "express.dev/rollout-id";
/// Node annotation: bounce (gracefully restart) the node's pod; the value is a request id.
pub const ANNOTATION_BOUNCE: &str = "express.dev/bounce";
/// Node annotation: `"true"` bounces even while the application is rebuilding, or a node whose
/// pod does not run its desired revision (it restarts on the revision it runs).
pub const ANNOTATION_BOUNCE_FORCE: &str = "express.dev/bounce-force";
/// Node annotation: how long each wait of a bounce may take (`90s`, `10m`, `1h30m`); default
/// ten minutes.
pub const ANNOTATION_BOUNCE_TIMEOUT: &str = "express.dev/bounce-timeout";

/// ConfigMap in the operator's namespace that pauses every Express cluster it manages.
pub const CONTROL_CONFIGMAP_GLOBAL: &str = "express-operator-control";
/// ConfigMap in a tenant namespace that pauses every Express cluster of that namespace.
pub const CONTROL_CONFIGMAP_NAMESPACE: &str = "express-control";
/// Control ConfigMap key: `"true"` pauses.
pub const CONTROL_KEY_PAUSED: &str = "paused";
/// Control ConfigMap key: free text saying why.
pub const CONTROL_KEY_REASON: &str = "reason";

/// Field manager the operator uses for every server-side apply.
pub const FIELD_MANAGER: &str = "express-operator";
/// The Lease the operator's instances of the default ring contend for, in the operator's
/// namespace; other rings add `-RING` ([`crate::rings::lease_name`]).
pub const LEASE_NAME: &str = "express-operator";
/// The reporting controller of every Event the operator publishes.
pub const REPORTING_CONTROLLER: &str = "express-operator";

/// Image repository used when neither the node nor its cluster names one.
pub const DEFAULT_IMAGE_REPOSITORY: &str = "express";
/// Name of the application container in every node pod.
pub const APP_CONTAINER: &str = "express";

/// On an operator pod: `serving` while its build knows every version the CRDs list, so that
/// it may answer their conversions; absent otherwise. The chart's webhook Service selects on
/// it, so a build that would fail a review never receives one (DESIGN section 18).
pub const LABEL_CONVERSION: &str = "express.dev/conversion";
/// [`LABEL_CONVERSION`]'s value on a pod that serves the webhook.
pub const CONVERSION_SERVING: &str = "serving";
/// On an operator pod that serves the webhook: the API versions its build knows, comma
/// separated, oldest first (`v1alpha1,v1beta1`), written by the pod itself.
pub const ANNOTATION_API_VERSIONS: &str = "express.dev/api-versions";
