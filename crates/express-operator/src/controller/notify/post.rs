//! One message posted to one destination: 2xx is accepted, anything else (an answer, no answer
//! within the deadline, no connection) is a failure with its reason.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;

use crate::controller::outbound::HttpsClient;

/// How long a destination may take to answer: a hung one delays only its own messages.
pub(super) const DEADLINE: Duration = Duration::from_secs(10);

pub(super) type Client = HttpsClient<Full<Bytes>>;

pub(super) async fn post(
    client: &Client,
    url: &str,
    message: &express_notify::render::Message,
) -> Result<(), String> {
    let target = format!("{}{}", url.trim_end_matches('/'), message.path);
    let mut request = hyper::Request::post(&target);
    for (name, value) in &message.headers {
        request = request.header(*name, value);
    }
    let request = request
        .body(Full::new(Bytes::from(message.body.clone())))
        .map_err(|e| format!("{}: {e}", redacted(&target)))?;
    let answer = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("{}: {e}", redacted(&target)))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if status.is_success() {
            Ok(())
        } else {
            let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
            Err(format!("{} answered {status}: {text}", redacted(&target)))
        }
    };
    tokio::time::timeout(DEADLINE, answer).await.map_err(|_| {
        format!(
            "{}: no answer within {}s",
            redacted(&target),
            DEADLINE.as_secs()
        )
    })?
}

/// A URL as an error may show it: scheme and host only (a Slack webhook's path is its secret).
fn redacted(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split('/').next().unwrap_or("");
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_never_shows_a_urls_path() {
        assert_eq!(
            super::redacted("https://hooks.slack.example/services/T0/B0/secret"),
            "https://hooks.slack.example"
        );
        assert_eq!(super::redacted("nonsense"), "://nonsense");
    }
}
