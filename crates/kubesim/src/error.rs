//! API errors, rendered as Kubernetes `Status` objects with reason, code and message.

use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    /// Seconds for a Retry-After header (injected 5xx).
    pub retry_after: Option<u64>,
    /// A continue token in the Status's metadata, with which a list can go on.
    pub continue_token: Option<String>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    /// The details the API server gives: empty fields left out, as Go's `omitempty` does.
    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut details = serde_json::Map::new();
        for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
            if !value.is_empty() {
                details.insert(key.to_owned(), json!(value));
            }
        }
        self.details = Some(Box::new(Value::Object(details)));
        self
    }

    /// 409 for a server-side apply that would take fields other managers own.
    pub fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        let mut err = Self::new(409, "Conflict", message);
        err.details = Some(Box::new(json!({ "causes": causes })));
        err
    }

    /// 422 for request options the API server refuses (`ListOptions`, `PatchOptions`...):
    /// one cause on the option's name, worded as it words them.
    pub fn invalid_option(options: &str, field: &str, reason: &'static str, why: &str) -> Self {
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{options}.meta.k8s.io \"\" is invalid: {field}: {why}"),
        )
        .with_details("meta.k8s.io", options, "");
        if let Some(details) = err.details.as_deref_mut() {
            details["causes"] = json!([{"reason": reason, "message": why, "field": field}]);
        }
        err
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(group, plural, name)
    }

    pub fn path_not_found(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(group, plural, name)
    }

    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(group: &str, kind: &str, name: &str, why: impl Into<String>) -> Self {
        let why = why.into();
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {why}"),
        )
        .with_details(group, kind, name)
    }

    /// 422 for an object breaking its schema, one cause per field, worded as the API server
    /// words it: `Frontend.express.dev "acme-fe1" is invalid: spec.up: Invalid value: ...`.
    pub fn invalid_fields(
        group: &str,
        kind: &str,
        name: &str,
        causes: &[crate::schema::Cause],
    ) -> Self {
        let described: Vec<String> = causes.iter().map(crate::schema::Cause::describe).collect();
        let why = match described.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: {why}",
                qualified_kind(group, kind)
            ),
        )
        .with_details(group, kind, name);
        if let Some(details) = err.details.as_deref_mut() {
            details["causes"] = causes
                .iter()
                .map(|cause| {
                    json!({"reason": cause.reason, "message": cause.message, "field": cause.field})
                })
                .collect();
        }
        err
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// A request body over the limit, worded as the API server words it.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 410 for a continue token from before a compaction, worded as the API server words it
    /// when it can go on: `token` continues the list after the same object, at the latest
    /// revision.
    pub fn continue_too_old(token: String) -> Self {
        let mut err = Self::gone(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may \
             show up in the list.",
        );
        err.continue_token = Some(token);
        err
    }

    /// An injected failure, with the reason the API server gives its code.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            413 => "RequestEntityTooLarge",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, format!("injected fault: HTTP {code}"))
    }

    /// 403 as RBAC refuses a request, in its words. kubesim has one user, named after its
    /// kubeconfig's: `kubesim`.
    pub fn forbidden(
        group: &str,
        plural: &str,
        subresource: Option<&str>,
        name: Option<&str>,
        verb: &str,
        namespace: Option<&str>,
    ) -> Self {
        let object = match name {
            Some(name) => format!("{} \"{name}\"", qualified(group, plural)),
            None => qualified(group, plural),
        };
        let resource = match subresource {
            Some(subresource) => format!("{plural}/{subresource}"),
            None => plural.to_owned(),
        };
        let scope = match namespace {
            Some(namespace) => format!("in the namespace \"{namespace}\""),
            None => "at the cluster scope".to_owned(),
        };
        Self::new(
            403,
            "Forbidden",
            format!(
                "{object} is forbidden: User \"kubesim\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}"
            ),
        )
        .with_details(group, plural, name.unwrap_or_default())
    }

    /// A write refused by a stop set on its client ([`crate::faults::Faults::stop_writes_after`]).
    pub fn writes_stopped() -> Self {
        Self::new(
            503,
            "ServiceUnavailable",
            "kubesim: this client's writes are stopped",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object sent as the response body (or inside a watch ERROR event).
    pub fn status(&self) -> Value {
        let metadata = match &self.continue_token {
            Some(token) => json!({ "continue": token }),
            None => json!({}),
        };
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = (**details).clone();
        }
        // The API server says how long to wait in the body too, where clients read it.
        if let Some(seconds) = self.retry_after {
            status["details"]["retryAfterSeconds"] = json!(seconds);
        }
        status
    }
}

fn qualified_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    /// What the API server answers a request whose credentials it does not accept: 401 with
    /// the bare message `Unauthorized` (it says no more, so as not to help a guesser).
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden_terminating(namespace: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        )
    }
}
