//! Plain HTTP/1.1 on loopback, enough for the operator's metrics and kubesim's control
//! endpoints.

use std::time::Duration;

/// A GET over plain HTTP/1.1 on loopback (the operator's metrics, kubesim's counters), without
/// pulling an HTTP client into the workspace for a benchmark.
pub async fn http_get(url: &str) -> Option<(u16, String)> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || blocking_request("GET", &url))
        .await
        .ok()
        .flatten()
}

pub async fn http_post(url: &str) -> Option<(u16, String)> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || blocking_request("POST", &url))
        .await
        .ok()
        .flatten()
}

fn blocking_request(method: &str, url: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    stream
        .write_all(
            format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some((code, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}
