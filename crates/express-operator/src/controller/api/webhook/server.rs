//! The conversion webhook's HTTPS server: `POST /convert` answers a `ConversionReview` with
//! `express_api::conversion::review`. Its certificate is held by [`ServingCertificate`] and
//! swapped in place when a replica issues it again: the connections that follow get the new one,
//! those under way keep theirs.

use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube::core::conversion::ConversionReview;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::authority::{CertificateError, Serving};

/// The path the CRDs' `clientConfig` names.
pub const PATH: &str = express_api::crd::WEBHOOK_PATH;
/// The largest review read: a list page's conversion is one review, and the API server pages a
/// client's lists only when the client asks; 64 MiB holds some 30,000 nodes.
const MAX_REVIEW_BYTES: usize = 64 << 20;
/// A client that has not finished its TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The serving certificate, replaced in place when it is issued again.
#[derive(Debug, Default)]
pub struct ServingCertificate {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl ServingCertificate {
    /// Serves `serving` from the next handshake on.
    pub fn set(&self, serving: &Serving) -> Result<(), CertificateError> {
        let unreadable = |why: String| CertificateError::Unreadable {
            what: "serving certificate",
            why,
        };
        let chain = CertificateDer::pem_slice_iter(serving.certificate.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| unreadable(e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(serving.key.as_bytes())
            .map_err(|e| unreadable(e.to_string()))?;
        let certified =
            CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
                .map_err(|e| unreadable(e.to_string()))?;
        // A poisoned lock only means a writer panicked mid-assignment of an Arc: the value is
        // whole either way.
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        *current = Some(Arc::new(certified));
        Ok(())
    }

    /// Whether a certificate is set (a replica without one answers no handshake).
    pub fn is_set(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The TLS configuration that serves whatever `certificate` holds at each handshake.
pub fn tls_config(
    certificate: Arc<ServingCertificate>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves the webhook on `listener` until the task is dropped: each connection on a task of its
/// own, so that a slow client holds up nobody.
pub async fn serve(
    listener: TcpListener,
    certificate: Arc<ServingCertificate>,
) -> std::io::Result<()> {
    let config = tls_config(certificate).map_err(std::io::Error::other)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors and the like: wait a little rather than spin.
                tracing::warn!(%error, "the conversion webhook could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "a TLS handshake with the conversion webhook failed");
                    return;
                }
                Err(_) => return,
            };
            let service = hyper::service::service_fn(answer);
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(%peer, %error, "a conversion webhook connection ended in error");
            }
        });
    }
}

fn respond(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.uri().path() != PATH {
        return Ok(respond(StatusCode::NOT_FOUND, b"{}".to_vec()));
    }
    if request.method() != Method::POST {
        return Ok(respond(StatusCode::METHOD_NOT_ALLOWED, b"{}".to_vec()));
    }
    let body = match Limited::new(request.into_body(), MAX_REVIEW_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            let message = format!("the ConversionReview could not be read: {error}");
            return Ok(respond(StatusCode::BAD_REQUEST, failure(&message)));
        }
    };
    let review: ConversionReview = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(error) => {
            let message = format!("the body is not a ConversionReview: {error}");
            return Ok(respond(StatusCode::BAD_REQUEST, failure(&message)));
        }
    };
    let answered = express_api::conversion::review(review);
    match serde_json::to_vec(&answered) {
        Ok(bytes) => Ok(respond(StatusCode::OK, bytes)),
        Err(error) => {
            let message = format!("the answer could not be written: {error}");
            Ok(respond(
                StatusCode::INTERNAL_SERVER_ERROR,
                failure(&message),
            ))
        }
    }
}

/// A review's `Failure` answer, for a body that was no review at all.
fn failure(message: &str) -> Vec<u8> {
    let response = kube::core::conversion::ConversionResponse::invalid(
        kube::core::Status::failure(message, "BadRequest"),
    );
    serde_json::to_vec(&response.into_review()).unwrap_or_default()
}
