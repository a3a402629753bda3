//! The live updates (server-sent events): a fleet page's parts, rendered once per change
//! whoever watches, and a tenant page's parts with its namespace's events, watched for as long
//! as the page is open. Every stream starts with `hello` and the serving process's instance.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::watch;

use super::dcs::Dc;
use super::model::fleet::FleetQuery;
use super::pages::{self, update};
use super::state::{AppState, ReleasePath, TenantPath, no_dc};
use express_client::read::live::no_cluster;

/// Changes arriving this close together are sent as one update.
const COALESCE: Duration = Duration::from_millis(150);
/// Ages on a page move even when nothing changes: re-render this often.
const REFRESH: Duration = Duration::from_secs(10);

/// Waits for the next change (or the periodic refresh), then lets close changes gather.
/// False when the watches are gone.
async fn next_change(changes: &mut watch::Receiver<u64>) -> bool {
    tokio::select! {
        changed = changes.changed() => if changed.is_err() { return false; },
        () = tokio::time::sleep(REFRESH) => {}
    }
    tokio::time::sleep(COALESCE).await;
    true
}

type Updates = Sse<
    axum::response::sse::KeepAliveStream<
        std::pin::Pin<Box<dyn Stream<Item = Result<SseEvent, Infallible>> + Send>>,
    >,
>;

/// A live stream: first `hello` with the server's instance, then the updates.
fn sse(instance: &str, stream: impl Stream<Item = SseEvent> + Send + 'static) -> Updates {
    let hello = SseEvent::default().event("hello").data(instance);
    let stream = futures::stream::once(async move { hello }).chain(stream);
    Sse::new(stream.map(Ok).boxed()).keep_alive(KeepAlive::default())
}

pub(super) async fn fleet_stream(
    State(shared): State<AppState>,
    Query(query): Query<FleetQuery>,
) -> Updates {
    let query = query.normalized();
    // A render younger than half the refresh serves every page asking, ages included.
    rendered_updates(shared, move |shared| {
        shared.fleet_update(&query, REFRESH / 2)
    })
}

/// An update each time a change of the watches changes what `render` gives; the first goes out
/// at once (the page may be older than the stream).
fn rendered_updates(
    shared: AppState,
    render: impl Fn(&AppState) -> Arc<String> + Clone + Send + Sync + 'static,
) -> Updates {
    let changes = shared.changes.clone();
    let instance = shared.instance.clone();
    let stream = futures::stream::unfold(
        (shared, changes, Arc::new(String::new()), true),
        move |(shared, mut changes, last, first)| {
            let render = render.clone();
            async move {
                let mut first = first;
                loop {
                    if !first && !next_change(&mut changes).await {
                        return None;
                    }
                    first = false;
                    let data = render(&shared);
                    if data != last {
                        let event = SseEvent::default().event("update").data(data.as_str());
                        return Some((event, (shared, changes, data, false)));
                    }
                }
            }
        },
    );
    sse(&instance, stream)
}

/// A release is read again this often while its page is open: one GET of one object (a
/// FleetRelease: one per DC), cheaper than a watch per page and as live as a person needs.
const RELEASE_POLL: Duration = Duration::from_secs(2);

/// Updates of a page whose view is read anew each [`RELEASE_POLL`]: `render` gives its parts.
/// A read that fails keeps the page as it was (the next one may answer); the stream ends when
/// the page goes.
fn polled_updates<F, Fut>(instance: &str, render: F) -> Updates
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, String>> + Send,
{
    let render = Arc::new(render);
    let stream = futures::stream::unfold((String::new(), true), move |(mut last, first)| {
        let render = render.clone();
        async move {
            let mut first = first;
            loop {
                if !first {
                    tokio::time::sleep(RELEASE_POLL).await;
                }
                first = false;
                if let Ok(data) = render().await
                    && data != last
                {
                    last = data.clone();
                    let event = SseEvent::default().event("update").data(data);
                    return Some((event, (last, false)));
                }
            }
        }
    });
    sse(instance, stream)
}

pub(super) async fn release_stream(
    State(shared): State<AppState>,
    Path(ReleasePath { context, name }): Path<ReleasePath>,
) -> Updates {
    let instance = shared.instance.clone();
    let dc = match shared.dc(context.as_deref()) {
        Ok(dc) => dc,
        Err(_) => return gone(&instance, no_dc(context.as_deref())),
    };
    polled_updates(&instance, move || {
        let (shared, dc, name) = (shared.clone(), dc.clone(), name.clone());
        async move {
            let view = shared.release(&dc, &name).await.map_err(|(_, why)| why)?;
            let chrome = shared.chrome(&dc);
            Ok(update(pages::release::release_parts(&chrome, &view)))
        }
    })
}

pub(super) async fn fleet_release_stream(
    State(shared): State<AppState>,
    Path(name): Path<String>,
) -> Updates {
    let instance = shared.instance.clone();
    polled_updates(&instance, move || {
        let (shared, name) = (shared.clone(), name.clone());
        async move {
            let view = shared.fleet_release(&name).await?;
            let chrome = shared.fleet_chrome();
            Ok(update(pages::release::fleet_release_parts(
                &chrome,
                shared.fleet_signer(),
                &view,
            )))
        }
    })
}

/// A tenant stream that can only say the tenant is not there.
fn gone(instance: &str, why: String) -> Updates {
    let event = SseEvent::default().event("gone").data(why);
    sse(instance, futures::stream::once(async move { event }))
}

pub(super) async fn tenant_stream(
    State(shared): State<AppState>,
    Path(TenantPath {
        context,
        namespace,
        cluster,
    }): Path<TenantPath>,
) -> Updates {
    let instance = shared.instance.clone();
    let (dc, client) = match shared.dc(context.as_deref()) {
        Ok(dc) => match dc.client.clone() {
            Some(client) => (dc, client),
            None => return gone(&instance, "no client for this context".into()),
        },
        Err(_) => return gone(&instance, no_dc(context.as_deref())),
    };
    // The namespace's events, watched for as long as the page is open.
    let (events, writer) = reflector::store::<Event>();
    let api = Api::<Event>::namespaced(client, &namespace);
    let event_changes = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .map(|_| ())
    .boxed();
    let changes = shared.changes.clone();
    struct Follow {
        shared: AppState,
        dc: Arc<Dc>,
        changes: watch::Receiver<u64>,
        event_changes: std::pin::Pin<Box<dyn Stream<Item = ()> + Send>>,
        events: reflector::Store<Event>,
        last: String,
        first: bool,
        gone: bool,
    }
    impl Follow {
        /// Takes every event the watch has ready, so that a relist of hundreds of events is
        /// one wake-up, not one each.
        fn drain_events(&mut self) {
            while let Some(Some(())) = self.event_changes.next().now_or_never() {}
        }

        /// The events listed so far, or None until the watch has listed them once (the page
        /// keeps the events it was served with until then).
        fn events(&self) -> Option<Vec<Arc<Event>>> {
            let mut ready = std::pin::pin!(self.events.wait_until_ready());
            ready.as_mut().now_or_never().map(|_| self.events.state())
        }
    }
    let follow = Follow {
        shared,
        dc,
        changes,
        event_changes,
        events,
        last: String::new(),
        first: true,
        gone: false,
    };
    let stream = futures::stream::unfold(follow, move |mut follow| {
        let (namespace, cluster) = (namespace.clone(), cluster.clone());
        async move {
            if follow.gone {
                return None;
            }
            loop {
                if !follow.first {
                    tokio::select! {
                        more = next_change(&mut follow.changes) => if !more { return None; },
                        Some(()) = follow.event_changes.next() => {
                            follow.drain_events();
                            tokio::time::sleep(COALESCE).await;
                        }
                    }
                }
                follow.first = false;
                follow.drain_events();
                let events = follow.events();
                let listed = events.as_deref().unwrap_or_default();
                let Some(view) = follow
                    .shared
                    .tenant(&follow.dc, &namespace, &cluster, listed)
                else {
                    follow.gone = true;
                    let event = SseEvent::default()
                        .event("gone")
                        .data(no_cluster(&namespace, &cluster));
                    return Some((event, follow));
                };
                let chrome = follow.shared.chrome(&follow.dc);
                let mut parts = pages::tenant::tenant_parts(&view, &chrome);
                if events.is_none() {
                    parts.retain(|(id, _)| *id != pages::tenant::EVENTS_PART);
                }
                let data = update(parts);
                if data != follow.last {
                    follow.last = data.clone();
                    return Some((SseEvent::default().event("update").data(data), follow));
                }
            }
        }
    });
    sse(&instance, stream)
}
