//! What each cached kind costs in heap bytes, measured in this process with dhat as the
//! operator's caches would hold one tenant's objects.

use std::sync::Arc;

use express_api::{Backend, ExpressCluster, Frontend};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;

/// Counts the heap this process holds, for [`cache_cost_per_kind`]; it only forwards to the
/// system allocator while no dhat profiler runs.
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// What each cached kind costs: one tenant's objects as the API serves them, each decoded
/// 200 times the way the operator's caches decode them (`Lenient<K>`: slimmed, then decoded,
/// behind an `Arc`, keyed by its `ObjectRef` as the reflector's store keys it), weighed by the
/// heap bytes they hold (requested sizes: the allocator's rounding and headers come on top).
pub async fn cache_cost_per_kind(client: &kube::Client, namespace: &str) {
    use express_api::lenient::Lenient;
    use express_api::views::{Interner, NodeView, PodView, RevisionView};
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use kube::api::{ApiResource, DynamicObject, ListParams};

    async fn raw<K: kube::Resource<DynamicType = ()>>(
        client: &kube::Client,
        namespace: &str,
    ) -> Vec<serde_json::Value> {
        let resource = ApiResource::erase::<K>(&());
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .map(|o| {
                let mut value = serde_json::to_value(o).expect("json");
                value["apiVersion"] = json!(resource.api_version);
                value["kind"] = json!(resource.kind);
                value
            })
            .collect()
    }

    /// Weighs what the operator's index keeps of each object (`Watch::view` in the
    /// controller's caches): its view, behind an `Arc`, keyed by its name.
    fn weigh<K, V>(raw: &[serde_json::Value], view: fn(&Arc<K>, &Interner) -> Arc<V>) -> f64
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Clone + 'static,
        Lenient<K>: kube::Resource<DynamicType = ()>,
    {
        const COPIES: usize = 200;
        let texts: Vec<String> = raw.iter().map(|v| v.to_string()).collect();
        let interner = Interner::default();
        let before = dhat::HeapStats::get().curr_bytes;
        let mut held = Vec::with_capacity(COPIES * texts.len());
        for copy in 0..COPIES {
            for text in &texts {
                let object: Lenient<K> = serde_json::from_str(text).expect("decode");
                let name = format!(
                    "{copy}-{}",
                    kube::Resource::meta(&object)
                        .name
                        .clone()
                        .unwrap_or_default()
                );
                if let Some(decoded) = object.decoded() {
                    held.push((name.into_boxed_str(), view(decoded, &interner)));
                }
            }
        }
        let after = dhat::HeapStats::get().curr_bytes;
        // The vector holding them is the measurement's, not the cache's.
        let vector = std::mem::size_of_val(held.as_slice());
        let bytes =
            after.saturating_sub(before + vector) as f64 / (COPIES * texts.len().max(1)) as f64;
        drop(held);
        bytes
    }

    fn whole<K>(object: &Arc<K>, _: &Interner) -> Arc<K> {
        object.clone()
    }

    type Weigh = fn(&[serde_json::Value]) -> f64;
    let kinds: [(&str, Vec<serde_json::Value>, Weigh); 5] = [
        (
            "ExpressCluster",
            raw::<ExpressCluster>(client, namespace).await,
            |raw| weigh::<ExpressCluster, _>(raw, whole),
        ),
        (
            "Backend (view)",
            raw::<Backend>(client, namespace).await,
            |raw| {
                weigh::<Backend, _>(raw, |node, interner| {
                    Arc::new(NodeView::of(&**node, Some(interner)))
                })
            },
        ),
        (
            "Frontend (view)",
            raw::<Frontend>(client, namespace).await,
            |raw| {
                weigh::<Frontend, _>(raw, |node, interner| {
                    Arc::new(NodeView::of(&**node, Some(interner)))
                })
            },
        ),
        ("Pod (view)", raw::<Pod>(client, namespace).await, |raw| {
            weigh::<Pod, _>(raw, |pod, interner| {
                Arc::new(PodView::new(pod, Some(interner)))
            })
        }),
        (
            "ControllerRevision (view)",
            raw::<ControllerRevision>(client, namespace).await,
            |raw| {
                weigh::<ControllerRevision, _>(raw, |revision, interner| {
                    Arc::new(RevisionView::new(revision, Some(interner)))
                })
            },
        ),
    ];
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut per_tenant = 0.0;
    let mut parts = Vec::new();
    for (kind, objects, weigh) in &kinds {
        let bytes = weigh(objects);
        per_tenant += bytes * objects.len() as f64;
        parts.push(format!("{kind} {bytes:.0} B x {}", objects.len()));
    }
    println!(
        "cache cost per kind (heap bytes per decoded object, the tenant's count): {}; {:.1} KiB per tenant",
        parts.join(", "),
        per_tenant / 1024.0
    );
}
