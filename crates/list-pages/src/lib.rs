//! Every list the plugin and the operator make, a page at a time: 500 objects a page
//! (client-go's pager and kubectl's `--chunk-size` default), so that a DC of 10,000 tenants
//! answers in pages instead of one response of its whole fleet. A page that fails is asked once more; a continue token that
//! expired (410, the API server compacted its history mid-list) starts the list over, once.
//! And how a watch first fills ([`FirstListing`]): streamed where the server answers, else in
//! pages.

mod first_listing;
pub use first_listing::FirstListing;

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use kube::api::{Api, ListParams, ObjectList};
use serde::de::DeserializeOwned;

/// Objects a page.
pub const PAGE_SIZE: u32 = 500;

/// How long to wait before asking for a failed page again.
const RETRY_AFTER: Duration = Duration::from_millis(250);

/// [`Api::list`], a page at a time: the same list, every page's items in one.
pub trait ListPaged<K: Clone> {
    fn list_paged(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = Result<ObjectList<K>, kube::Error>> + Send;
}

impl<K> ListPaged<K> for Api<K>
where
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list_paged(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        paged(|token| {
            let mut page = params.clone().limit(PAGE_SIZE);
            if let Some(token) = token {
                page = page.continue_token(&token);
            }
            async move { self.list(&page).await }
        })
        .await
    }
}

/// Whether asking again may help: not a refusal (a 4xx but 429 says the same again).
fn worth_retrying(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

fn expired(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 410)
}

/// The pager over any source of pages (`fetch` gets the continue token, None for the first):
/// every page's items in one list.
pub async fn paged<K, F, Fut>(fetch: F) -> Result<ObjectList<K>, kube::Error>
where
    K: Clone,
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<ObjectList<K>, kube::Error>>,
{
    let whole = paged_fold(
        fetch,
        || None,
        |whole: &mut Option<ObjectList<K>>, page| match whole {
            None => *whole = Some(page),
            Some(whole) => whole.items.extend(page.items),
        },
    )
    .await?;
    let mut whole = whole.unwrap_or_else(|| unreachable_empty());
    whole.metadata.continue_ = None;
    Ok(whole)
}

/// The pager handing each page to `fold` as it arrives, so that a caller keeps what it makes
/// of a page (client-go's `EachListItem`), never the page: a list of 10,000 tenants' pods is
/// then never whole in memory. A list that starts over (an expired token) starts again from
/// `init()`, so nothing is folded twice.
pub async fn paged_fold<K, T, F, Fut>(
    mut fetch: F,
    init: impl Fn() -> T,
    mut fold: impl FnMut(&mut T, ObjectList<K>),
) -> Result<T, kube::Error>
where
    K: Clone,
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<ObjectList<K>, kube::Error>>,
{
    let mut started_over = false;
    'list: loop {
        let mut folded = init();
        let mut token: Option<String> = None;
        loop {
            let page = match fetch(token.clone()).await {
                Ok(page) => page,
                Err(error) if expired(&error) && token.is_some() && !started_over => {
                    started_over = true;
                    continue 'list;
                }
                Err(error) if worth_retrying(&error) && !expired(&error) => {
                    tokio::time::sleep(RETRY_AFTER).await;
                    match fetch(token.clone()).await {
                        Ok(page) => page,
                        Err(again) if expired(&again) && token.is_some() && !started_over => {
                            started_over = true;
                            continue 'list;
                        }
                        Err(again) => return Err(again),
                    }
                }
                Err(error) => return Err(error),
            };
            let next = page.metadata.continue_.clone().filter(|t| !t.is_empty());
            fold(&mut folded, page);
            match next {
                Some(next) => token = Some(next),
                None => return Ok(folded),
            }
        }
    }
}

/// Never reached: a page was just stored.
fn unreachable_empty<K: Clone>() -> ObjectList<K> {
    ObjectList {
        types: Default::default(),
        metadata: Default::default(),
        items: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use kube::core::ListMeta;

    use super::*;

    fn page(items: &[&str], next: Option<&str>) -> Result<ObjectList<String>, kube::Error> {
        Ok(ObjectList {
            types: Default::default(),
            metadata: ListMeta {
                continue_: next.map(Into::into),
                ..ListMeta::default()
            },
            items: items.iter().map(|s| (*s).to_owned()).collect(),
        })
    }

    fn status(code: u16) -> Result<ObjectList<String>, kube::Error> {
        Err(kube::Error::Api(
            kube::core::Status::failure("refused", if code == 410 { "Expired" } else { "x" })
                .with_code(code)
                .boxed(),
        ))
    }

    /// Answers the scripted pages in order, recording the token each request carried.
    async fn run(
        script: Vec<Result<ObjectList<String>, kube::Error>>,
    ) -> (Result<Vec<String>, u16>, Vec<Option<String>>) {
        let script = Mutex::new(VecDeque::from(script));
        let asked = Mutex::new(Vec::new());
        let result = paged(|token| {
            asked.lock().unwrap().push(token);
            let next = script
                .lock()
                .unwrap()
                .pop_front()
                .expect("a request too many");
            async move { next }
        })
        .await;
        let result = result.map(|l| l.items).map_err(|e| match e {
            kube::Error::Api(s) => s.code,
            _ => 0,
        });
        (result, asked.into_inner().unwrap())
    }

    #[tokio::test]
    async fn pages_follow_their_continue_tokens_into_one_list() {
        let (got, asked) = run(vec![page(&["a", "b"], Some("t1")), page(&["c"], None)]).await;
        assert_eq!(got.unwrap(), ["a", "b", "c"]);
        assert_eq!(asked, [None, Some("t1".into())]);
    }

    #[tokio::test]
    async fn a_failed_page_is_asked_once_more() {
        let (got, asked) = run(vec![
            page(&["a"], Some("t1")),
            status(503),
            page(&["b"], None),
        ])
        .await;
        assert_eq!(got.unwrap(), ["a", "b"]);
        assert_eq!(asked, [None, Some("t1".into()), Some("t1".into())]);
        // Twice: the error stands; a refusal is not asked again.
        let (got, _) = run(vec![page(&["a"], Some("t1")), status(503), status(503)]).await;
        assert_eq!(got.unwrap_err(), 503);
        let (got, asked) = run(vec![status(403)]).await;
        assert_eq!((got.unwrap_err(), asked.len()), (403, 1));
    }

    #[tokio::test]
    async fn each_page_is_folded_as_it_arrives_and_a_list_started_over_folds_afresh() {
        let script = Mutex::new(VecDeque::from(vec![
            page(&["a"], Some("t1")),
            status(410),
            page(&["a", "b"], Some("t2")),
            page(&["c"], None),
        ]));
        let sizes = paged_fold(
            |_| {
                let next = script
                    .lock()
                    .unwrap()
                    .pop_front()
                    .expect("a request too many");
                async move { next }
            },
            Vec::new,
            |sizes: &mut Vec<usize>, page| sizes.push(page.items.len()),
        )
        .await
        .unwrap();
        assert_eq!(sizes, [2, 1], "the page of the first try is not kept");
    }

    #[tokio::test]
    async fn an_expired_token_starts_the_list_over_once() {
        let (got, asked) = run(vec![
            page(&["a"], Some("t1")),
            status(410),
            page(&["a", "b"], Some("t2")),
            page(&["c"], None),
        ])
        .await;
        assert_eq!(got.unwrap(), ["a", "b", "c"], "nothing from the first try");
        assert_eq!(asked, [None, Some("t1".into()), None, Some("t2".into())]);
        let (got, _) = run(vec![
            page(&["a"], Some("t1")),
            status(410),
            page(&["a"], Some("t2")),
            status(410),
        ])
        .await;
        assert_eq!(got.unwrap_err(), 410, "once only");
    }
}
