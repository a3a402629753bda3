//! The guard in front of every request (DESIGN section 11): every request must name an
//! allowed `Host` (a DNS-rebinding page cannot reach a loopback server under its own name);
//! every POST must come from one of our pages (`Origin` and `Sec-Fetch-Site` when the browser
//! sends them) and carry the token bound to the pages of this server (across DCs: to its DC,
//! tenant and action, which the action checks, [`super::actions`]); `--read-only` refuses every
//! POST. Every answer gets the headers that keep the pages to themselves.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::links::{TOKEN_HEADER, same_secret};
use super::state::{AppState, Settings, refuse};

/// Why a request is refused, if it is (pure: the tests call it with forged headers).
pub fn refusal(
    method: &Method,
    headers: &HeaderMap,
    settings: &Settings,
    token: Option<&str>,
) -> Option<(StatusCode, &'static str)> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host_allowed = header(header::HOST.as_str()).is_some_and(|host| {
        settings
            .allowed_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    });
    if !host_allowed {
        return Some((
            StatusCode::MISDIRECTED_REQUEST,
            "this Host is not one the dashboard answers to (see --allowed-host)",
        ));
    }
    if method == Method::GET || method == Method::HEAD {
        return None;
    }
    if settings.read_only {
        return Some((StatusCode::FORBIDDEN, "the dashboard is read-only"));
    }
    if header("sec-fetch-site").is_some_and(|site| site != "same-origin" && site != "none") {
        return Some((StatusCode::FORBIDDEN, "cross-site request refused"));
    }
    if let Some(origin) = header(header::ORIGIN.as_str()) {
        let ours = settings
            .allowed_hosts
            .iter()
            .any(|host| origin.eq_ignore_ascii_case(&format!("http://{host}")));
        if !ours {
            return Some((StatusCode::FORBIDDEN, "request from another origin refused"));
        }
    }
    // Across DCs each action checks the token bound to it: nothing more to refuse here.
    let token = token?;
    match header(TOKEN_HEADER) {
        Some(sent) if same_secret(sent.as_bytes(), token.as_bytes()) => None,
        _ => Some((
            StatusCode::FORBIDDEN,
            "missing or wrong token: actions are taken from the dashboard's own pages",
        )),
    }
}

pub(super) async fn guard(
    State(shared): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if let Some((status, why)) = refusal(
        request.method(),
        request.headers(),
        &shared.settings,
        (!shared.fleet_mode).then_some(shared.token()),
    ) {
        return refuse(status, why);
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    );
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn settings(read_only: bool) -> Settings {
        Settings {
            operator_namespace: "express-system".into(),
            read_only,
            allowed_hosts: vec!["127.0.0.1:3110".into(), "localhost:3110".into()],
            doctor_every: crate::dashboard::dcs::DOCTOR_EVERY,
            streaming_lists: false,
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    const TOKEN: &str = "0123456789abcdef";

    #[test]
    fn pages_are_served_to_an_allowed_host_only() {
        let ok = headers(&[("host", "localhost:3110")]);
        assert_eq!(
            refusal(&Method::GET, &ok, &settings(false), Some(TOKEN)),
            None
        );
        // A DNS-rebinding page reaches the loopback server under its own name.
        let rebound = headers(&[("host", "evil.example:3110")]);
        let refused = refusal(&Method::GET, &rebound, &settings(false), Some(TOKEN));
        assert_eq!(refused.map(|r| r.0), Some(StatusCode::MISDIRECTED_REQUEST));
        assert!(
            refusal(
                &Method::GET,
                &HeaderMap::new(),
                &settings(false),
                Some(TOKEN)
            )
            .is_some()
        );
    }

    #[test]
    fn a_post_needs_the_token_and_our_origin() {
        let post = |pairs: &[(&'static str, &'static str)]| {
            refusal(
                &Method::POST,
                &headers(pairs),
                &settings(false),
                Some(TOKEN),
            )
            .map(|r| r.1)
        };
        let host = ("host", "127.0.0.1:3110");
        let token = (TOKEN_HEADER, TOKEN);
        assert_eq!(post(&[host, token]), None);
        assert_eq!(
            post(&[
                host,
                token,
                ("origin", "http://127.0.0.1:3110"),
                ("sec-fetch-site", "same-origin")
            ]),
            None
        );
        assert!(post(&[host]).unwrap().contains("token"));
        assert!(
            post(&[host, (TOKEN_HEADER, "0123456789abcdeX")])
                .unwrap()
                .contains("token")
        );
        assert!(
            post(&[host, token, ("origin", "http://evil.example")])
                .unwrap()
                .contains("origin")
        );
        assert!(
            post(&[host, token, ("sec-fetch-site", "cross-site")])
                .unwrap()
                .contains("cross-site")
        );
    }

    #[test]
    fn read_only_refuses_every_post_and_serves_pages() {
        let pairs = headers(&[("host", "127.0.0.1:3110"), (TOKEN_HEADER, TOKEN)]);
        assert_eq!(
            refusal(&Method::POST, &pairs, &settings(true), Some(TOKEN)),
            Some((StatusCode::FORBIDDEN, "the dashboard is read-only"))
        );
        assert_eq!(
            refusal(&Method::GET, &pairs, &settings(true), Some(TOKEN)),
            None
        );
    }

    #[test]
    fn across_dcs_the_guard_leaves_the_token_to_the_action() {
        let post = |pairs: &[(&'static str, &'static str)], read_only: bool| {
            refusal(&Method::POST, &headers(pairs), &settings(read_only), None).map(|r| r.1)
        };
        let host = ("host", "127.0.0.1:3110");
        assert_eq!(post(&[host], false), None);
        // Host, origin and read-only are still the guard's.
        assert!(
            post(&[host, ("origin", "http://evil.example")], false)
                .unwrap()
                .contains("origin")
        );
        assert_eq!(post(&[host], true), Some("the dashboard is read-only"));
        assert!(post(&[("host", "evil.example")], false).is_some());
    }
}
