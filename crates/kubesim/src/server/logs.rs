//! `GET .../pods/NAME/log`: what the simulated kubelet's containers wrote, with `follow`,
//! `tailLines`, `sinceSeconds` and `timestamps`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;

use crate::error::ApiError;
use crate::shared::Shared;

use super::error_response;
use super::request::{Query, Target};

/// `GET .../pods/NAME/log`: the container's lines (`container`, `previous`, `tailLines`,
/// `timestamps`), and with `follow` every new one until the container's run ends or the pod
/// goes.
pub(super) fn pod_log(shared: Arc<Shared>, target: &Target, query: &Query) -> Response {
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let Some(pod) = shared
        .lock()
        .store
        .get(crate::api::POD_KEY, &namespace, &name)
    else {
        return error_response(&ApiError::not_found("", "pods", &name));
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_owned();
    let containers: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    let container = match (query.get("container"), containers.as_slice()) {
        (Some(wanted), _) if containers.iter().any(|c| c == wanted) => wanted.to_owned(),
        (Some(wanted), _) => {
            return error_response(&ApiError::bad_request(format!(
                "container {wanted} is not valid for pod {name}"
            )));
        }
        (None, [only]) => only.clone(),
        (None, _) => {
            return error_response(&ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let request = crate::logs::LogRequest {
        container,
        previous: query.flag("previous"),
        tail_lines: query.get("tailLines").and_then(|t| t.parse().ok()),
        timestamps: query.flag("timestamps"),
    };
    let first = match shared.logs.read(&uid, &request, None) {
        Ok(read) => read,
        Err(why) => return error_response(&ApiError::bad_request(why)),
    };
    let text_response = |body: Body| {
        let mut response = Response::new(body);
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        response
    };
    if !query.flag("follow") || first.ended {
        return text_response(Body::from(first.text));
    }
    let (sender, mut outgoing) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut next = first.next;
        if sender.send(Bytes::from(first.text)).await.is_err() {
            return;
        }
        loop {
            // A line written between the read and the wait is seen at the latest a moment later.
            let _ = tokio::time::timeout(Duration::from_millis(250), shared.logs.written()).await;
            let gone = shared
                .lock()
                .store
                .get(crate::api::POD_KEY, &namespace, &name)
                .is_none_or(|p| p["metadata"]["uid"].as_str() != Some(uid.as_str()));
            let Ok(read) = shared.logs.read(&uid, &request, Some(next)) else {
                return;
            };
            next = read.next;
            if !read.text.is_empty() && sender.send(Bytes::from(read.text)).await.is_err() {
                return;
            }
            if read.ended || gone || sender.is_closed() {
                return;
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| {
        outgoing.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>))
    });
    text_response(Body::from_stream(stream))
}
