//! A `ConversionReview` answered: every object at the version asked for, in the order given, or
//! a `Failure` that says which object and why. Never a panic, whatever the review holds.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

use super::{ApiVersion, ConversionError, convert};

/// The answer to `review`, as the API server expects it back.
pub fn review(review: ConversionReview) -> ConversionReview {
    let mut request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(_) => {
            return ConversionResponse::invalid(Status::failure(
                "the ConversionReview holds no request",
                "BadRequest",
            ))
            .into_review();
        }
    };
    let objects = std::mem::take(&mut request.objects);
    let desired = request.desired_api_version.clone();
    let response = ConversionResponse::for_request(request);
    let Some(to) = ApiVersion::of_api_version(&desired) else {
        let message = ConversionError::UnknownVersion(desired).to_string();
        return response
            .failure(Status::failure(&message, "BadRequest"))
            .into_review();
    };
    let mut converted = Vec::with_capacity(objects.len());
    for (index, object) in objects.into_iter().enumerate() {
        let name = describe(&object, index);
        match convert(object, to) {
            Ok(object) => converted.push(object),
            Err(error) => {
                let message = format!("cannot convert {name} to {desired}: {error}");
                return response
                    .failure(Status::failure(&message, "BadRequest"))
                    .into_review();
            }
        }
    }
    response.success(converted).into_review()
}

/// How a failure names an object: `Backend tenant-a/shop-be`, or its place in the review.
fn describe(object: &serde_json::Value, index: usize) -> String {
    let text = |pointer: &str| object.pointer(pointer).and_then(|v| v.as_str());
    match (
        text("/kind"),
        text("/metadata/namespace"),
        text("/metadata/name"),
    ) {
        (Some(kind), Some(namespace), Some(name)) => format!("{kind} {namespace}/{name}"),
        (Some(kind), None, Some(name)) => format!("{kind} {name}"),
        _ => format!("object {index} of the review"),
    }
}
