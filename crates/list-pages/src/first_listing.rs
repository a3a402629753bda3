//! How a watch fills its store the first time, and again after a 410: one watch streaming the
//! objects and then their changes (KEP-3157's `sendInitialEvents`, where the server serves
//! it), or a list in pages and then the watch, which every server answers. The plugin's
//! dashboard and the operator choose alike, and only where the server answers a probe.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher;

use crate::PAGE_SIZE;

/// The annotation of the bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The pod a probe's streaming watch selects: none, so the answer is the bookmark alone.
const PROBE_POD: &str = "express-streaming-lists-probe";

/// Streamed or paged: see the module's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstListing {
    Streamed,
    Paged,
}

impl FirstListing {
    /// Paged unless `streamed` is asked for; then streamed if the server answers a streaming
    /// watch of the pods `pods` reaches with its initial-events-end bookmark within
    /// `deadline`, paged otherwise. A version cannot tell: servers of 1.33 and later may have
    /// the feature off and refuse `sendInitialEvents`, and a watch refused so would retry for
    /// ever.
    pub async fn choose(pods: Api<Pod>, streamed: bool, deadline: Duration) -> FirstListing {
        if !streamed {
            return FirstListing::Paged;
        }
        let params = WatchParams::streaming_lists()
            .fields(&format!("metadata.name={PROBE_POD}"))
            .timeout(u32::try_from(deadline.as_secs()).unwrap_or(10).max(1));
        let answered = async {
            let events = pods.watch(&params, "").await.ok()?;
            let mut events = std::pin::pin!(events);
            match events.next().await {
                Some(Ok(WatchEvent::Bookmark(bookmark))) => Some(
                    bookmark
                        .metadata
                        .annotations
                        .contains_key(INITIAL_EVENTS_END),
                ),
                _ => None,
            }
        };
        match tokio::time::timeout(deadline, answered).await {
            Ok(Some(true)) => FirstListing::Streamed,
            _ => FirstListing::Paged,
        }
    }

    /// `config` filling this way.
    pub fn config(self, config: watcher::Config) -> watcher::Config {
        match self {
            FirstListing::Streamed => config.streaming_lists(),
            FirstListing::Paged => config.page_size(PAGE_SIZE),
        }
    }
}
