//! What the operator sends outside the cluster shares: an HTTP(S) client on the stack kube
//! already builds on (hyper, rustls, the system's CA roots unless a CA is given), for a
//! release's Prometheus and for notifications' destinations alike.

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub(crate) type HttpsClient<B> = Client<hyper_rustls::HttpsConnector<HttpConnector>, B>;

/// A TLS configuration trusting the system's CA roots.
pub(crate) fn system_roots() -> Result<rustls::ClientConfig, String> {
    Ok(
        hyper_rustls::ConfigBuilderExt::with_native_roots(rustls::ClientConfig::builder())
            .map_err(|e| format!("cannot load the system's CA roots: {e}"))?
            .with_no_client_auth(),
    )
}

/// A client for `http://` and `https://` URLs under `tls`.
pub(crate) fn https_client<B>(tls: rustls::ClientConfig) -> HttpsClient<B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
{
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}
