//! Reading: get and list (selectors, pagination with continue tokens, resourceVersion).

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::store::{Object, Stored};

use super::{Cluster, List, ListOptions, View, decode_continue, encode_continue};

impl Cluster {
    pub fn get(&self, rt: &ResourceType, namespace: &str, name: &str) -> Result<Object, ApiError> {
        let stored = self
            .store
            .get(&rt.storage_key(), self.scope(rt, namespace), name)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        self.served(rt, &stored)
    }

    /// A list response; `namespace` None lists across namespaces.
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<List, ApiError> {
        let (after, began) = match &options.continue_token {
            Some(token) => {
                let (namespace, name, began) = decode_continue(token)?;
                let began = match began {
                    Some(began) if began < self.store.compacted_at() => {
                        // The API server's answer when it can go on: the rest of the list, read
                        // at the latest revision, through the token in the 410's metadata.
                        return Err(ApiError::continue_too_old(encode_continue(
                            &namespace, &name, None,
                        )));
                    }
                    Some(began) => began,
                    None => self.store.revision(),
                };
                (Some((namespace, name)), began)
            }
            None => (None, self.store.revision()),
        };
        let namespace = if rt.namespaced { namespace } else { None };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0usize;
        let key_of_resource = rt.storage_key();
        let objects: Box<dyn Iterator<Item = (&(String, String), &Stored)>> = match &after {
            Some(after) => Box::new(self.store.list_after(&key_of_resource, namespace, after)),
            None => Box::new(self.store.list(&key_of_resource, namespace)),
        };
        let view = View::of(rt);
        // The API server says how many objects are left after a page (`remainingItemCount`)
        // when nothing is selected; with a selector it omits it (it would have to read them
        // all), and one more match is then enough to know a continue token is needed.
        let counting = options.labels.is_empty() && options.fields.is_empty();
        for (key, object) in objects {
            if !view.selected(&options.labels, &options.fields, object) {
                continue;
            }
            if options.limit.is_some_and(|limit| items.len() >= limit) {
                remaining += 1;
                if counting {
                    continue;
                }
                break;
            }
            items.push(object.clone());
            last_key = Some(key.clone());
        }
        // Every page reports the revision the first page was read at, as the API server's do
        // (it serves them all from that revision). Later pages read the store as it is now, so
        // a watch from this revision replays what changed between the pages; reporting the
        // current revision would let the watch skip changes to objects already listed.
        let mut metadata = json!({"resourceVersion": began.to_string()});
        if remaining > 0
            && let Some((ns, name)) = last_key
        {
            metadata["continue"] = Value::String(encode_continue(&ns, &name, Some(began)));
            if counting {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        Ok(List {
            kind: format!("{}List", rt.kind),
            view,
            metadata,
            items,
        })
    }
}
