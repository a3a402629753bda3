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

use crate::api::{Cluster, ListOptions, View};
use crate::error::ApiError;
use crate::registry::ResourceType;
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

/// What the watch asked for in its query.
struct WatchRequest {
    options: ListOptions,
    send_initial: bool,
    bookmarks: bool,
    timeout: Option<Duration>,
}

impl WatchRequest {
    fn parse(query: &Query) -> Result<Self, ApiError> {
        // The options' rules, sendInitialEvents' included, are list_options' own.
        let options = list_options(query)?;
        let send_initial = query.flag("sendInitialEvents");
        Ok(WatchRequest {
            options,
            send_initial,
            bookmarks: query.flag("allowWatchBookmarks"),
            timeout: query
                .get("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .map(Duration::from_secs),
        })
    }
}

/// Where a stream starts: the lines owed before any live event, the live events (none once
/// the start is an ERROR), and the revision after which live events count.
struct Start {
    initial: Vec<Outgoing>,
    receiver: Option<broadcast::Receiver<Arc<Event>>>,
    revision: u64,
}

/// What the streaming task needs to follow live events once the response has been returned.
struct Live {
    target: Target,
    key: String,
    options: ListOptions,
    bookmarks: bool,
    timeout: Option<Duration>,
    epoch: tokio::sync::watch::Receiver<u64>,
    interval: Duration,
}

pub(super) fn watch(
    shared: Arc<Shared>,
    target: Target,
    query: &Query,
    as_table: bool,
) -> Response {
    let request = match WatchRequest::parse(query) {
        Ok(request) => request,
        Err(err) => return error_response(&err),
    };
    let key = target.rt.storage_key();
    let requested = query.get("resourceVersion").unwrap_or("");
    let start = match starting_point(&shared, &target, &key, &request, requested) {
        Ok(start) => start,
        Err(err) => return error_response(&err),
    };
    let (sender, outgoing) = mpsc::channel::<Bytes>(256);
    let live = Live {
        epoch: shared.faults.watch_epoch(),
        interval: shared.bookmark_interval,
        key,
        options: request.options,
        bookmarks: request.bookmarks,
        timeout: request.timeout,
        target,
    };
    let encoder = Encoder::new(&live.target.rt, as_table);
    tokio::spawn(stream(sender, encoder, start, live));
    streaming_response(outgoing)
}

/// The lines a new watch is owed before live events: the current state for a watch from
/// nothing (or with initial events), else the changes since the revision it names, or a 410
/// ERROR when that revision is compacted away.
fn starting_point(
    shared: &Shared,
    target: &Target,
    key: &str,
    request: &WatchRequest,
    requested: &str,
) -> Result<Start, ApiError> {
    // Under the lock only cheap clones of stored objects are taken; encoding happens later.
    let cluster = shared.lock();
    let receiver = cluster.store.subscribe();
    let current = cluster.store.revision();
    if request.send_initial || requested.is_empty() || requested == "0" {
        return Ok(Start {
            initial: current_state(&cluster, target, key, request, current),
            receiver: Some(receiver),
            revision: current,
        });
    }
    let Ok(since) = requested.parse::<u64>() else {
        return Err(ApiError::bad_request(format!(
            "invalid resourceVersion {requested:?}"
        )));
    };
    Ok(match cluster.store.changes_since(key, since) {
        Ok(changes) => Start {
            initial: changes
                .iter()
                .filter_map(|e| {
                    let kind = delivered(
                        target,
                        key,
                        &request.options.labels,
                        &request.options.fields,
                        e,
                    )?;
                    Some(Outgoing::Change(kind, e.object.clone()))
                })
                .collect(),
            receiver: Some(receiver),
            revision: current,
        },
        Err(too_old) => {
            let err = ApiError::gone(format!(
                "too old resource version: {since} ({})",
                too_old.oldest
            ));
            Start {
                initial: vec![Outgoing::Synthetic(
                    json!({"type": "ERROR", "object": err.status()}),
                )],
                receiver: None,
                revision: current,
            }
        }
    })
}

/// Every selected object as ADDED, closed by the initial-events-end bookmark when asked for.
fn current_state(
    cluster: &Cluster,
    target: &Target,
    key: &str,
    request: &WatchRequest,
    current: u64,
) -> Vec<Outgoing> {
    let options = &request.options;
    let mut initial: Vec<Outgoing> = cluster
        .store
        .list(
            key,
            target.namespace.as_deref().filter(|_| target.rt.namespaced),
        )
        .filter(|(_, o)| View::of(&target.rt).selected(&options.labels, &options.fields, o))
        .map(|(_, o)| Outgoing::Change("ADDED", o.clone()))
        .collect();
    if request.send_initial {
        initial.push(Outgoing::Synthetic(json!({"type": "BOOKMARK", "object": {
            "kind": target.rt.kind, "apiVersion": target.rt.api_version(),
            "metadata": {"resourceVersion": current.to_string(),
                         "annotations": {"k8s.io/initial-events-end": "true"}}}})));
    }
    initial
}

/// Turns watch lines into the bytes of the stream, as objects or as one-row tables.
struct Encoder {
    rt: ResourceType,
    view: View,
    as_table: bool,
}

impl Encoder {
    fn new(rt: &ResourceType, as_table: bool) -> Self {
        let rt = rt.clone();
        let view = View::of(&rt);
        Encoder { rt, view, as_table }
    }

    fn encode(&self, line: &Outgoing) -> Bytes {
        let mut text = match line {
            Outgoing::Change(kind, object) => self
                .change(kind, object)
                // An object the conversion webhook could not convert: the API server sends the
                // error in the stream.
                .unwrap_or_else(|error| {
                    json!({"type": "ERROR", "object": error.status()}).to_string()
                }),
            Outgoing::Synthetic(value) => value.to_string(),
        };
        text.push('\n');
        Bytes::from(text)
    }

    fn change(&self, kind: &str, object: &Stored) -> Result<String, ApiError> {
        if self.as_table {
            let value = self.view.value(&object.value())?;
            let table = table::table(
                &self.rt,
                &[&value],
                value["metadata"]["resourceVersion"].as_str().unwrap_or(""),
            );
            return Ok(json!({"type": kind, "object": table}).to_string());
        }
        Ok(format!(
            "{{\"type\":\"{kind}\",\"object\":{}}}",
            self.view.text(object)?
        ))
    }
}

/// The streaming task: the starting lines, then live events until the watch ends.
async fn stream(sender: mpsc::Sender<Bytes>, encoder: Encoder, start: Start, live: Live) {
    for line in &start.initial {
        if sender.send(encoder.encode(line)).await.is_err() {
            return;
        }
    }
    drop(start.initial);
    let Some(receiver) = start.receiver else {
        return;
    };
    follow(&sender, &encoder, receiver, start.revision, live).await;
}

/// Live events after `start_revision`, with bookmarks when asked for, until the watcher
/// leaves, falls behind, times out, or the watches are cut.
async fn follow(
    sender: &mpsc::Sender<Bytes>,
    encoder: &Encoder,
    mut receiver: broadcast::Receiver<Arc<Event>>,
    start_revision: u64,
    mut live: Live,
) {
    let deadline = live.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut ticker = tokio::time::interval(live.interval);
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
                    let Some(kind) = delivered(&live.target, &live.key, &live.options.labels, &live.options.fields, &event) else {
                        continue;
                    };
                    last_revision = event.revision;
                    if sender.send(encoder.encode(&Outgoing::Change(kind, event.object.clone()))).await.is_err() {
                        return;
                    }
                }
                // The API server ends a watcher that cannot keep up without a word (its cache
                // closes the stream, no ERROR event): the client watches again from the last
                // revision it saw, which history still holds or answers with 410.
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if live.bookmarks => {
                let bookmark = json!({"type": "BOOKMARK", "object": {"kind": live.target.rt.kind, "apiVersion": live.target.rt.api_version(),
                    "metadata": {"resourceVersion": last_revision.to_string()}}});
                if sender.send(encoder.encode(&Outgoing::Synthetic(bookmark))).await.is_err() {
                    return;
                }
            }
            _ = live.epoch.changed() => return,
            _ = sleep_until_deadline => return,
            _ = sender.closed() => return,
        }
    }
}

fn streaming_response(mut outgoing: mpsc::Receiver<Bytes>) -> Response {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;
    use crate::registry::Registry;

    fn change(revision: u64, name: &str) -> Arc<Event> {
        Arc::new(Event {
            revision,
            resource: "/configmaps".into(),
            namespace: "default".into(),
            kind: EventType::Added,
            object: Stored::new(&json!({"metadata": {"name": name, "namespace": "default"}})),
            previous: None,
        })
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_ended_without_an_error_event() {
        let rt = Registry::default()
            .find("", "v1", "configmaps")
            .expect("configmaps")
            .clone();
        let (changes, receiver) = broadcast::channel(2);
        for revision in 2..6 {
            changes.send(change(revision, "c")).expect("a receiver");
        }
        let (_epoch_sender, epoch) = tokio::sync::watch::channel(0);
        let live = Live {
            key: rt.storage_key(),
            target: Target {
                rt: rt.clone(),
                namespace: Some("default".into()),
                name: None,
                subresource: None,
            },
            options: ListOptions::default(),
            bookmarks: false,
            timeout: Some(Duration::from_secs(10)),
            epoch,
            interval: Duration::from_secs(10),
        };
        let (sender, mut sent) = mpsc::channel(16);
        tokio::time::timeout(
            Duration::from_secs(5),
            follow(&sender, &Encoder::new(&rt, false), receiver, 1, live),
        )
        .await
        .expect("the watch ends as soon as it has fallen behind");
        drop(sender);
        assert_eq!(sent.recv().await, None, "nothing, no ERROR event, was sent");
    }
}
