//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded into the JSON object
//! a JSON request would have carried, so the store never knows which encoding a client used.
//!
//! kubectl's typed `create` subcommands and client-go controllers send protobuf. A body is the
//! four magic bytes `k8s\0` followed by a `runtime.Unknown` envelope whose `raw` holds the object.
//! The wire decoding is `k8s-pb`'s (prost); what is ours is the mapping from those messages to
//! Kubernetes JSON, which follows the API server's own rules: empty strings, lists and maps are
//! omitted (`omitempty`), `Time` is RFC 3339 to the second, `MicroTime` to the microsecond,
//! `IntOrString` is a number or a string, `bytes` are base64, and `RawExtension` is inline JSON.
//!
//! Only the kinds listed in [`DECODABLE_KINDS`] are mapped; any other kind is refused with 415
//! naming it, so a client learns to send JSON instead.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The media type client-go and kubectl use for protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every protobuf-encoded Kubernetes object starts with these bytes.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Decodes one message's bytes into its Kubernetes JSON.
type Decoder = fn(&[u8]) -> Result<Value, prost::DecodeError>;

fn message<M: Message + Default + ToJson>(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    Ok(M::decode(raw)?
        .to_json()
        .unwrap_or_else(|| Value::Object(Map::new())))
}

/// `(apiVersion, kind)` of every object kubesim decodes from protobuf, with its decoder: the
/// one list the dispatch, the 415 message and the tests read.
pub const DECODABLE_KINDS: &[(&str, &str, Decoder)] = &[
    ("v1", "Namespace", message::<core::Namespace>),
    ("v1", "ConfigMap", message::<core::ConfigMap>),
    ("v1", "Secret", message::<core::Secret>),
    ("v1", "ServiceAccount", message::<core::ServiceAccount>),
    ("v1", "Service", message::<core::Service>),
    ("v1", "Pod", message::<core::Pod>),
    ("v1", "Event", message::<core::Event>),
    ("events.k8s.io/v1", "Event", message::<events::Event>),
    (
        "coordination.k8s.io/v1",
        "Lease",
        message::<coordination::Lease>,
    ),
    (
        "apps/v1",
        "ControllerRevision",
        message::<apps::ControllerRevision>,
    ),
    ("v1", "DeleteOptions", message::<meta::DeleteOptions>),
    (
        "meta.k8s.io/v1",
        "DeleteOptions",
        message::<meta::DeleteOptions>,
    ),
];

/// Decodes a protobuf request body into the JSON object the same request would carry as JSON.
///
/// Malformed input (no magic prefix, a truncated or corrupt message, raw bytes that are not
/// themselves protobuf) is 400 Bad Request, as the API server answers it; a well-formed envelope
/// holding a kind kubesim cannot map is 415 naming the kind.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let Some(envelope) = body.strip_prefix(MAGIC.as_slice()) else {
        return Err(ApiError::bad_request(format!(
            "the protobuf body does not start with the Kubernetes envelope prefix \"k8s\\x00\" \
             (Content-Type {MEDIA_TYPE})"
        )));
    };
    let unknown = Unknown::decode(envelope).map_err(|err| {
        ApiError::bad_request(format!(
            "the protobuf envelope (runtime.Unknown) could not be decoded: {err}"
        ))
    })?;
    if let Some(encoding) = unknown
        .content_encoding
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        return Err(ApiError::unsupported_media_type(format!(
            "the protobuf envelope declares content encoding {encoding:?}; kubesim decodes \
             unencoded protobuf only"
        )));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let mut object = decode_kind(&api_version, &kind, &raw)?;
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), Value::String(api_version));
        map.insert("kind".into(), Value::String(kind));
    }
    Ok(object)
}

fn decode_kind(api_version: &str, kind: &str, raw: &[u8]) -> Result<Value, ApiError> {
    let found = DECODABLE_KINDS
        .iter()
        .find(|(version, known, _)| *version == api_version && *known == kind);
    let Some((_, _, decoder)) = found else {
        let known: Vec<String> = DECODABLE_KINDS
            .iter()
            .map(|(v, k, _)| format!("{v}/{k}"))
            .collect();
        return Err(ApiError::unsupported_media_type(format!(
            "kubesim cannot decode {api_version}/{kind} from {MEDIA_TYPE}; it decodes {} \
             - send this object as application/json",
            known.join(", ")
        )));
    };
    decoder(raw).map_err(|err| {
        ApiError::bad_request(format!("the protobuf {kind} could not be decoded: {err}"))
    })
}

/// A protobuf value as Kubernetes JSON; `None` means the field is left out, as Go's
/// `omitempty` leaves out empty values.
trait ToJson {
    fn to_json(&self) -> Option<Value>;
}

impl ToJson for String {
    fn to_json(&self) -> Option<Value> {
        (!self.is_empty()).then(|| Value::String(self.clone()))
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

/// `bytes` fields are base64 in JSON.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Option<Value> {
        self.as_ref().and_then(ToJson::to_json)
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Option<Value> {
        (!self.is_empty()).then(|| {
            Value::Array(
                self.iter()
                    .map(|item| item.to_json().unwrap_or(Value::Null))
                    .collect(),
            )
        })
    }
}

impl<T: ToJson> ToJson for BTreeMap<String, T> {
    fn to_json(&self) -> Option<Value> {
        (!self.is_empty()).then(|| {
            Value::Object(
                self.iter()
                    .map(|(key, value)| (key.clone(), value.to_json().unwrap_or(Value::Null)))
                    .collect(),
            )
        })
    }
}

/// Implements [`ToJson`] for a message as an object of its fields, each under its JSON name.
///
/// Go's encoder writes every non-pointer scalar, zero or not, and its JSON encoder then drops
/// the zeros (`omitempty`). Only fields marked `keep` (Go pointers, whose explicit `false` or `0`
/// means something, and the few scalars without `omitempty`) keep a zero. A field whose JSON
/// name is empty is a Go struct embedded inline: its fields are written into this object.
macro_rules! json_object {
    ($($ty:ty { $($field:ident: $json:literal $($keep:ident)?),* $(,)? })*) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> Option<Value> {
                #[allow(unused_mut)]
                let mut object = Map::new();
                $(
                    let keep_zero = false $(|| stringify!($keep) == "keep")?;
                    match self.$field.to_json() {
                        Some(Value::Object(inner)) if $json.is_empty() => object.extend(inner),
                        Some(value) if keep_zero || !is_zero(&value) => {
                            object.insert($json.to_owned(), value);
                        }
                        _ => {}
                    }
                )*
                Some(Value::Object(object))
            }
        }
    )*};
}

mod pod;
mod pod_volumes;

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        _ => false,
    }
}

json_object! {
    meta::ObjectMeta {
        name: "name", generate_name: "generateName", namespace: "namespace",
        self_link: "selfLink", uid: "uid", resource_version: "resourceVersion",
        generation: "generation", creation_timestamp: "creationTimestamp",
        deletion_timestamp: "deletionTimestamp",
        deletion_grace_period_seconds: "deletionGracePeriodSeconds" keep, labels: "labels",
        annotations: "annotations", owner_references: "ownerReferences",
        finalizers: "finalizers", managed_fields: "managedFields",
    }
    meta::OwnerReference {
        api_version: "apiVersion", kind: "kind", name: "name", uid: "uid",
        controller: "controller" keep, block_owner_deletion: "blockOwnerDeletion" keep,
    }
    meta::ManagedFieldsEntry {
        manager: "manager", operation: "operation", api_version: "apiVersion", time: "time",
        fields_type: "fieldsType", fields_v1: "fieldsV1", subresource: "subresource",
    }
    meta::Condition {
        r#type: "type", status: "status", observed_generation: "observedGeneration",
        last_transition_time: "lastTransitionTime", reason: "reason", message: "message",
    }
    meta::DeleteOptions {
        grace_period_seconds: "gracePeriodSeconds" keep, preconditions: "preconditions",
        orphan_dependents: "orphanDependents" keep, propagation_policy: "propagationPolicy",
        dry_run: "dryRun",
    }
    meta::Preconditions { uid: "uid", resource_version: "resourceVersion" }
    core::Namespace { metadata: "metadata", spec: "spec", status: "status" }
    core::NamespaceSpec { finalizers: "finalizers" }
    core::NamespaceStatus { phase: "phase", conditions: "conditions" }
    core::NamespaceCondition {
        r#type: "type", status: "status", last_transition_time: "lastTransitionTime",
        reason: "reason", message: "message",
    }
    core::ConfigMap {
        metadata: "metadata", immutable: "immutable" keep, data: "data", binary_data: "binaryData",
    }
    core::Secret {
        metadata: "metadata", immutable: "immutable" keep, data: "data", string_data: "stringData",
        r#type: "type",
    }
    core::ServiceAccount {
        metadata: "metadata", secrets: "secrets", image_pull_secrets: "imagePullSecrets",
        automount_service_account_token: "automountServiceAccountToken" keep,
    }
    core::ObjectReference {
        kind: "kind", namespace: "namespace", name: "name", uid: "uid",
        api_version: "apiVersion", resource_version: "resourceVersion", field_path: "fieldPath",
    }
    core::LocalObjectReference { name: "name" }
    core::Service { metadata: "metadata", spec: "spec", status: "status" }
    core::ServiceSpec {
        ports: "ports", selector: "selector", cluster_ip: "clusterIP", cluster_ips: "clusterIPs",
        r#type: "type", external_ips: "externalIPs", session_affinity: "sessionAffinity",
        load_balancer_ip: "loadBalancerIP",
        load_balancer_source_ranges: "loadBalancerSourceRanges",
        external_name: "externalName", external_traffic_policy: "externalTrafficPolicy",
        health_check_node_port: "healthCheckNodePort",
        publish_not_ready_addresses: "publishNotReadyAddresses",
        session_affinity_config: "sessionAffinityConfig", ip_families: "ipFamilies",
        ip_family_policy: "ipFamilyPolicy",
        allocate_load_balancer_node_ports: "allocateLoadBalancerNodePorts" keep,
        load_balancer_class: "loadBalancerClass",
        internal_traffic_policy: "internalTrafficPolicy",
        traffic_distribution: "trafficDistribution",
    }
    core::ServicePort {
        name: "name", protocol: "protocol", app_protocol: "appProtocol", port: "port" keep,
        target_port: "targetPort", node_port: "nodePort",
    }
    core::SessionAffinityConfig { client_ip: "clientIP" }
    core::ClientIpConfig { timeout_seconds: "timeoutSeconds" keep }
    core::ServiceStatus { load_balancer: "loadBalancer", conditions: "conditions" }
    core::LoadBalancerStatus { ingress: "ingress" }
    core::LoadBalancerIngress { ip: "ip", hostname: "hostname", ip_mode: "ipMode", ports: "ports" }
    core::PortStatus { port: "port", protocol: "protocol", error: "error" }
    core::Event {
        metadata: "metadata", involved_object: "involvedObject", reason: "reason",
        message: "message", source: "source", first_timestamp: "firstTimestamp",
        last_timestamp: "lastTimestamp", count: "count", r#type: "type",
        event_time: "eventTime", series: "series", action: "action", related: "related",
        reporting_component: "reportingComponent", reporting_instance: "reportingInstance",
    }
    core::EventSource { component: "component", host: "host" }
    core::EventSeries { count: "count", last_observed_time: "lastObservedTime" }
    events::Event {
        metadata: "metadata", event_time: "eventTime", series: "series",
        reporting_controller: "reportingController", reporting_instance: "reportingInstance",
        action: "action", reason: "reason", regarding: "regarding", related: "related",
        note: "note", r#type: "type", deprecated_source: "deprecatedSource",
        deprecated_first_timestamp: "deprecatedFirstTimestamp",
        deprecated_last_timestamp: "deprecatedLastTimestamp",
        deprecated_count: "deprecatedCount",
    }
    events::EventSeries { count: "count", last_observed_time: "lastObservedTime" }
    coordination::Lease { metadata: "metadata", spec: "spec" }
    coordination::LeaseSpec {
        holder_identity: "holderIdentity", lease_duration_seconds: "leaseDurationSeconds" keep,
        acquire_time: "acquireTime", renew_time: "renewTime",
        lease_transitions: "leaseTransitions" keep, strategy: "strategy",
        preferred_holder: "preferredHolder",
    }
    apps::ControllerRevision { metadata: "metadata", data: "data", revision: "revision" keep }
}

/// `metav1.Time`: whole seconds in RFC 3339; the zero time is sent as an empty message.
impl ToJson for meta::Time {
    fn to_json(&self) -> Option<Value> {
        timestamp(self.seconds, None)
    }
}

/// `metav1.MicroTime`: RFC 3339 with six fractional digits.
impl ToJson for meta::MicroTime {
    fn to_json(&self) -> Option<Value> {
        timestamp(self.seconds, Some(self.nanos.unwrap_or(0)))
    }
}

fn timestamp(seconds: Option<i64>, nanos: Option<i32>) -> Option<Value> {
    let seconds = u64::try_from(seconds?).ok()?;
    let whole = crate::clock::rfc3339(UNIX_EPOCH + Duration::from_secs(seconds));
    Some(Value::String(match nanos {
        None => whole,
        Some(nanos) => {
            let micros = nanos.clamp(0, 999_999_999) / 1000;
            format!("{}.{micros:06}Z", whole.trim_end_matches('Z'))
        }
    }))
}

/// `resource.Quantity` is its canonical string (`500m`, `1Gi`).
impl ToJson for k8s_pb::apimachinery::pkg::api::resource::Quantity {
    fn to_json(&self) -> Option<Value> {
        self.string.to_json()
    }
}

/// `intstr.IntOrString`: type 0 is the integer, type 1 the string.
impl ToJson for IntOrString {
    fn to_json(&self) -> Option<Value> {
        match self.r#type {
            Some(1) => Some(Value::String(self.str_val.clone().unwrap_or_default())),
            _ => Some(Value::from(self.int_val.unwrap_or(0))),
        }
    }
}

/// `runtime.RawExtension` carries the embedded object's JSON as bytes.
impl ToJson for RawExtension {
    fn to_json(&self) -> Option<Value> {
        let raw = self.raw.as_deref().filter(|raw| !raw.is_empty())?;
        Some(serde_json::from_slice(raw).unwrap_or(Value::Null))
    }
}

/// `metav1.FieldsV1` carries the managed-fields set as JSON bytes.
impl ToJson for meta::FieldsV1 {
    fn to_json(&self) -> Option<Value> {
        let raw = self.raw.as_deref().filter(|raw| !raw.is_empty())?;
        Some(serde_json::from_slice(raw).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
    use serde_json::json;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    fn metadata(name: &str) -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some(name.into()),
            // Go's encoder always writes strings and the zero time; both must vanish.
            namespace: Some(String::new()),
            creation_timestamp: Some(meta::Time::default()),
            ..Default::default()
        })
    }

    #[test]
    fn a_configmap_decodes_to_the_json_kubectl_would_send() {
        let configmap = core::ConfigMap {
            metadata: metadata("settings"),
            data: BTreeMap::from([("a".to_owned(), "b".to_owned())]),
            binary_data: BTreeMap::from([("bin".to_owned(), vec![0, 255])]),
            // A Go pointer: an explicit false is kept.
            immutable: Some(false),
        };
        let decoded = decode(&envelope("v1", "ConfigMap", configmap.encode_to_vec()));
        assert_eq!(
            decoded,
            Ok(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings"},
                "data": {"a": "b"}, "binaryData": {"bin": "AP8="}, "immutable": false,
            }))
        );
    }

    #[test]
    fn services_carry_int_or_string_ports_and_events_carry_times() {
        let service = core::Service {
            metadata: metadata("web"),
            spec: Some(core::ServiceSpec {
                r#type: Some("ClusterIP".into()),
                // Go writes non-pointer zeros on the wire; its JSON leaves them out.
                health_check_node_port: Some(0),
                publish_not_ready_addresses: Some(false),
                ports: vec![
                    core::ServicePort {
                        name: Some("http".into()),
                        port: Some(80),
                        target_port: Some(IntOrString {
                            r#type: Some(0),
                            int_val: Some(8080),
                            str_val: Some(String::new()),
                        }),
                        ..Default::default()
                    },
                    core::ServicePort {
                        name: Some("admin".into()),
                        port: Some(81),
                        target_port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: Some("admin".into()),
                        }),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            status: None,
        };
        let decoded = decode(&envelope("v1", "Service", service.encode_to_vec()));
        let Ok(decoded) = decoded else {
            panic!("{decoded:?}")
        };
        assert_eq!(decoded["spec"]["ports"][0]["targetPort"], json!(8080));
        assert_eq!(decoded["spec"]["ports"][1]["targetPort"], json!("admin"));
        assert_eq!(decoded["spec"]["type"], json!("ClusterIP"));
        assert_eq!(decoded["spec"].get("healthCheckNodePort"), None);
        assert_eq!(decoded["spec"].get("publishNotReadyAddresses"), None);

        let event = events::Event {
            metadata: metadata("e1"),
            event_time: Some(meta::MicroTime {
                seconds: Some(1_795_000_000),
                nanos: Some(123_456_789),
            }),
            regarding: Some(core::ObjectReference {
                kind: Some("Frontend".into()),
                name: Some("acme-fe1".into()),
                ..Default::default()
            }),
            note: Some("upgrading".into()),
            ..Default::default()
        };
        let decoded = decode(&envelope(
            "events.k8s.io/v1",
            "Event",
            event.encode_to_vec(),
        ));
        let Ok(decoded) = decoded else {
            panic!("{decoded:?}")
        };
        assert_eq!(decoded["eventTime"], json!("2026-11-18T11:06:40.123456Z"));
        assert_eq!(decoded["regarding"]["name"], json!("acme-fe1"));
    }

    #[test]
    fn bad_bodies_are_client_errors_naming_the_problem() {
        let missing_magic = decode(b"{\"kind\":\"ConfigMap\"}");
        assert!(matches!(&missing_magic, Err(e) if e.code == 400 && e.message.contains("k8s")));

        let full = envelope(
            "v1",
            "ConfigMap",
            core::ConfigMap::default().encode_to_vec(),
        );
        let truncated = decode(&full[..full.len() - 3]);
        assert!(
            matches!(&truncated, Err(e) if e.code == 400),
            "{truncated:?}"
        );

        let deployment = decode(&envelope("apps/v1", "Deployment", vec![]));
        assert!(
            matches!(&deployment, Err(e) if e.code == 415 && e.message.contains("apps/v1/Deployment") && e.message.contains(MEDIA_TYPE)),
            "{deployment:?}"
        );

        let not_a_configmap = decode(&envelope("v1", "ConfigMap", vec![0xff, 0xff, 0xff]));
        assert!(matches!(&not_a_configmap, Err(e) if e.code == 400));
    }

    /// A Pod uses every special encoding: Go structs embedded inline (a probe's handler, a
    /// volume's source, a reference's name), quantities, int-or-string ports, and zeros that
    /// mean something (`runAsUser: 0`).
    #[test]
    fn a_pod_decodes_with_inline_structs_quantities_and_meaningful_zeros() {
        let container = core::Container {
            name: Some("express".into()),
            image: Some("express:9.1".into()),
            readiness_probe: Some(core::Probe {
                handler: Some(core::ProbeHandler {
                    http_get: Some(core::HttpGetAction {
                        path: Some("/health".into()),
                        port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: Some("http".into()),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                period_seconds: Some(5),
                ..Default::default()
            }),
            resources: Some(core::ResourceRequirements {
                limits: BTreeMap::from([(
                    "memory".to_owned(),
                    k8s_pb::apimachinery::pkg::api::resource::Quantity {
                        string: Some("1Gi".into()),
                    },
                )]),
                ..Default::default()
            }),
            security_context: Some(core::SecurityContext {
                run_as_user: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = core::Pod {
            metadata: metadata("acme-fe1"),
            spec: Some(core::PodSpec {
                containers: vec![container],
                volumes: vec![core::Volume {
                    name: Some("config".into()),
                    volume_source: Some(core::VolumeSource {
                        config_map: Some(core::ConfigMapVolumeSource {
                            local_object_reference: Some(core::LocalObjectReference {
                                name: Some("acme-config".into()),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                }],
                termination_grace_period_seconds: Some(0),
                ..Default::default()
            }),
            status: None,
        };
        let decoded = decode(&envelope("v1", "Pod", pod.encode_to_vec()));
        let Ok(decoded) = decoded else {
            panic!("{decoded:?}")
        };
        let container = &decoded["spec"]["containers"][0];
        assert_eq!(
            container["readinessProbe"],
            json!({"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5})
        );
        assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
        assert_eq!(container["securityContext"]["runAsUser"], 0);
        assert_eq!(
            decoded["spec"]["volumes"][0],
            json!({"name": "config", "configMap": {"name": "acme-config"}})
        );
        assert_eq!(decoded["spec"]["terminationGracePeriodSeconds"], 0);
    }

    proptest::proptest! {
        /// Whatever the bytes, the decoder answers: an object, or a 400/415 naming the problem.
        #[test]
        fn the_decoder_never_panics_on_any_bytes(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            with_magic in proptest::prelude::any::<bool>(),
        ) {
            let body = if with_magic { [MAGIC.as_slice(), &bytes].concat() } else { bytes };
            match decode(&body) {
                Ok(object) => proptest::prop_assert!(object.is_object()),
                Err(err) => proptest::prop_assert!(matches!(err.code, 400 | 415), "{err:?}"),
            }
        }

        /// Random bytes inside a well-formed envelope, for every kind that is decoded.
        #[test]
        fn every_kind_survives_random_raw_bytes(
            kind in proptest::sample::select(
                DECODABLE_KINDS.iter().map(|(v, k, _)| (*v, *k)).collect::<Vec<_>>()
            ),
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        ) {
            match decode(&envelope(kind.0, kind.1, raw)) {
                Ok(object) => {
                    proptest::prop_assert_eq!(&object["kind"], kind.1);
                    proptest::prop_assert_eq!(&object["apiVersion"], kind.0);
                }
                Err(err) => proptest::prop_assert_eq!(err.code, 400, "{:?}", err),
            }
        }
    }
}
