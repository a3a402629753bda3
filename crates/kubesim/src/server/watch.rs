//! Watch streams: the events a watcher is owed, bookmarks, selectors, and the end of a
//! stream when the watcher falls behind or the server stops.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::api::View;
use crate::error::ApiError;
use crate::selector::{FieldSelector, LabelSelector};
use crate::shared::Shared;
use crate::store::{Event, EventType, Stored};
use crate::table;

use super::error_response;
use super::request::{Query, Target, list_options};

/// What a stored change is to this watch, as the API server tells it: nothing (another resource
/// or namespace, or outside the selection before and after), or ADDED, MODIFIED or DELETED. An
/// object that starts matching the selectors is ADDED; one that stops matching is DELETED
/// (carrying its new state). Labels come from the index; the object is parsed only for a field
/// selector.
pub(super) fn delivered(
    target: &Target,
    key: &str,
    labels: &LabelSelector,
    fields: &FieldSelector,
    event: &Event,
) -> Option<&'static str> {
    let ours = event.resource == key
        && target
            .namespace
            .as_deref()
            .is_none_or(|ns| !target.rt.namespaced || ns == event.namespace);
    if !ours {
        return None;
    }
    let view = View::of(&target.rt);
    let is = view.selected(labels, fields, &event.object);
    match (&event.kind, &event.previous) {
        (EventType::Modified, Some(previous)) => {
            match (view.selected(labels, fields, previous), is) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
        (kind, _) => is.then_some(kind.as_str()),
    }
}

/// One line of a watch stream, before encoding.
pub(super) enum Outgoing {
    /// ADDED, MODIFIED or DELETED, with the object as stored.
    Change(&'static str, Stored),
    /// BOOKMARK or ERROR, built here.
    Synthetic(Value),
}

pub(super) fn watch(
    shared: Arc<Shared>,
    target: Target,
    query: &Query,
    as_table: bool,
) -> Response {
    let options = match list_options(query) {
        Ok(options) => options,
        Err(err) => return error_response(&err),
    };
    let send_initial = query.flag("sendInitialEvents");
    if send_initial && query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return error_response(&ApiError::invalid(
            "",
            "ListOptions",
            "",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires resourceVersionMatch=NotOlderThan",
        ));
    }
    let bookmarks = query.flag("allowWatchBookmarks");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let key = target.rt.storage_key();
    let requested = query.get("resourceVersion").unwrap_or("");

    // Under the lock only cheap clones of stored objects are taken; encoding happens later.
    let (initial, receiver, start_revision) = {
        let cluster = shared.lock();
        let receiver = cluster.store.subscribe();
        let current = cluster.store.revision();
        if send_initial || requested.is_empty() || requested == "0" {
            let mut initial: Vec<Outgoing> = cluster
                .store
                .list(
                    &key,
                    target.namespace.as_deref().filter(|_| target.rt.namespaced),
                )
                .filter(|(_, o)| View::of(&target.rt).selected(&options.labels, &options.fields, o))
                .map(|(_, o)| Outgoing::Change("ADDED", o.clone()))
                .collect();
            if send_initial {
                initial.push(Outgoing::Synthetic(json!({"type": "BOOKMARK", "object": {
                    "kind": target.rt.kind, "apiVersion": target.rt.api_version(),
                    "metadata": {"resourceVersion": current.to_string(),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}}})));
            }
            (initial, Some(receiver), current)
        } else {
            let Ok(since) = requested.parse::<u64>() else {
                return error_response(&ApiError::bad_request(format!(
                    "invalid resourceVersion {requested:?}"
                )));
            };
            match cluster.store.changes_since(since) {
                Ok(changes) => {
                    let replay = changes
                        .iter()
                        .filter_map(|e| {
                            let kind =
                                delivered(&target, &key, &options.labels, &options.fields, e)?;
                            Some(Outgoing::Change(kind, e.object.clone()))
                        })
                        .collect();
                    (replay, Some(receiver), current)
                }
                Err(too_old) => {
                    let err = ApiError::gone(format!(
                        "too old resource version: {since} ({})",
                        too_old.oldest
                    ));
                    (
                        vec![Outgoing::Synthetic(
                            json!({"type": "ERROR", "object": err.status()}),
                        )],
                        None,
                        current,
                    )
                }
            }
        }
    };

    let (sender, mut outgoing) = mpsc::channel::<Bytes>(256);
    let mut epoch = shared.faults.watch_epoch();
    let interval = shared.bookmark_interval;
    let rt = target.rt.clone();
    let view = View::of(&rt);
    tokio::spawn(async move {
        let encode = |line: &Outgoing| -> Bytes {
            let mut text = match line {
                Outgoing::Change(kind, object) if as_table => {
                    let value = view.value(&object.value());
                    let table = table::table(
                        &rt,
                        &[&value],
                        value["metadata"]["resourceVersion"].as_str().unwrap_or(""),
                    );
                    json!({"type": kind, "object": table}).to_string()
                }
                Outgoing::Change(kind, object) => {
                    format!("{{\"type\":\"{kind}\",\"object\":{}}}", view.text(object))
                }
                Outgoing::Synthetic(value) => value.to_string(),
            };
            text.push('\n');
            Bytes::from(text)
        };
        for line in &initial {
            if sender.send(encode(line)).await.is_err() {
                return;
            }
        }
        drop(initial);
        let Some(mut receiver) = receiver else { return };
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        let mut last_revision = start_revision;
        loop {
            let sleep_until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                received = receiver.recv() => match received {
                    Ok(event) => {
                        if event.revision <= start_revision {
                            continue;
                        }
                        let Some(kind) = delivered(&target, &key, &options.labels, &options.fields, &event) else {
                            continue;
                        };
                        last_revision = event.revision;
                        if sender.send(encode(&Outgoing::Change(kind, event.object.clone()))).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let err = ApiError::gone("watch fell too far behind; too old resource version");
                        let _ = sender.send(encode(&Outgoing::Synthetic(json!({"type": "ERROR", "object": err.status()})))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    let bookmark = json!({"type": "BOOKMARK", "object": {"kind": target.rt.kind, "apiVersion": target.rt.api_version(),
                        "metadata": {"resourceVersion": last_revision.to_string()}}});
                    if sender.send(encode(&Outgoing::Synthetic(bookmark))).await.is_err() {
                        return;
                    }
                }
                _ = epoch.changed() => return,
                _ = sleep_until_deadline => return,
                _ = sender.closed() => return,
            }
        }
    });
    let stream = futures::stream::poll_fn(move |cx| {
        outgoing.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
