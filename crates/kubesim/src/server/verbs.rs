//! The read verbs answered from the store: get, list (with Table output) and
//! deletecollection.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::shared::Shared;
use crate::table;

use super::json_response;
use super::request::{Query, Target, delete_options, list_options};

pub(super) fn get(shared: &Shared, target: &Target, as_table: bool) -> Result<Value, ApiError> {
    if let Some(sub) = &target.subresource
        && !(sub == "status" && target.rt.status_subresource)
    {
        return Err(ApiError::path_not_found(&format!("subresource {sub}")));
    }
    let cluster = shared.lock();
    let object = cluster.get(
        &target.rt,
        target.namespace.as_deref().unwrap_or(""),
        target.name.as_deref().unwrap_or(""),
    )?;
    if as_table {
        return Ok(table::table(
            &target.rt,
            &[&object],
            object["metadata"]["resourceVersion"].as_str().unwrap_or(""),
        ));
    }
    Ok((*object).clone())
}

pub(super) fn list(
    shared: &Shared,
    target: &Target,
    query: &Query,
    as_table: bool,
) -> Result<Response, ApiError> {
    let options = list_options(query)?;
    // Serialized after the lock is released: the items are shared, immutable snapshots.
    let list = shared
        .lock()
        .list(&target.rt, target.namespace.as_deref(), &options)?;
    if as_table {
        let values = list.values()?;
        let items: Vec<&Value> = values.iter().collect();
        let mut table = table::table(
            &target.rt,
            &items,
            list.metadata["resourceVersion"].as_str().unwrap_or(""),
        );
        if let Some(token) = list.metadata.get("continue") {
            table["metadata"]["continue"] = token.clone();
        }
        return Ok(json_response(StatusCode::OK, &table));
    }
    let mut response = (StatusCode::OK, list.to_json()?).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

pub(super) fn delete_collection(
    shared: &Shared,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    let options = list_options(query)?;
    let delete = delete_options(headers, body, query)?;
    let mut cluster = shared.lock();
    let list = cluster.list(&target.rt, target.namespace.as_deref(), &options)?;
    let mut deleted = Vec::new();
    for item in list.values()? {
        let namespace = item["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let name = item["metadata"]["name"].as_str().unwrap_or("").to_owned();
        if let Ok(object) = cluster.delete(&target.rt, &namespace, &name, &delete) {
            deleted.push(object);
        }
    }
    Ok(
        json!({"kind": format!("{}List", target.rt.kind), "apiVersion": target.rt.api_version(),
              "metadata": {"resourceVersion": cluster.store.revision().to_string()}, "items": deleted}),
    )
}
