//! The webhook's certificates: the operator's own certificate authority (its certificate goes in
//! the CRDs' `caBundle`) and the serving certificates each replica issues from it for itself.
//! Issued with rcgen and read back with x509-parser; no I/O, and the time is an argument.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// Why a certificate could not be issued or read. Each message names the certificate.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("cannot issue the webhook's {what}: {source}")]
    Issue {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("the webhook's {what} is not a readable PEM certificate: {why}")]
    Unreadable { what: &'static str, why: String },
    #[error("the webhook's {what} key is not a readable PEM private key: {source}")]
    UnreadableKey {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("{0} is not a time a certificate can hold")]
    Time(i64),
}

/// A certificate's validity, in seconds since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

/// A certificate authority the operator keeps: its certificate and key, in PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    pub certificate: String,
    pub key: String,
}

/// A serving certificate and its key, in PEM, and what it is valid for.
#[derive(Clone, Debug)]
pub struct Serving {
    pub certificate: String,
    pub key: String,
    pub validity: Validity,
}

fn offset_time(seconds: i64) -> Result<time::OffsetDateTime, CertificateError> {
    time::OffsetDateTime::from_unix_timestamp(seconds).map_err(|_| CertificateError::Time(seconds))
}

fn params(validity: Validity) -> Result<CertificateParams, CertificateError> {
    let mut params = CertificateParams::default();
    params.not_before = offset_time(validity.not_before)?;
    params.not_after = offset_time(validity.not_after)?;
    Ok(params)
}

/// The authority's name: its start in the name, so that an old and a new authority in one
/// `caBundle` never share a subject.
fn authority_name(not_before: i64) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "express.dev");
    name.push(
        DnType::CommonName,
        format!("express-operator conversion webhook CA {not_before}"),
    );
    name
}

/// A new certificate authority valid for `validity`.
pub fn new_authority(validity: Validity) -> Result<Authority, CertificateError> {
    let issue = |source| CertificateError::Issue {
        what: "certificate authority",
        source,
    };
    let key = KeyPair::generate().map_err(issue)?;
    let mut params = params(validity)?;
    params.distinguished_name = authority_name(validity.not_before);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let certificate = params.self_signed(&key).map_err(issue)?;
    Ok(Authority {
        certificate: certificate.pem(),
        key: key.serialize_pem(),
    })
}

/// A serving certificate for `names` (DNS names or IP addresses), signed by `authority`.
pub fn new_serving(
    authority: &Authority,
    names: &[String],
    validity: Validity,
) -> Result<Serving, CertificateError> {
    let issue = |source| CertificateError::Issue {
        what: "serving certificate",
        source,
    };
    let authority_key =
        KeyPair::from_pem(&authority.key).map_err(|source| CertificateError::UnreadableKey {
            what: "certificate authority",
            source,
        })?;
    let issuer = Issuer::from_ca_cert_pem(&authority.certificate, authority_key).map_err(|e| {
        CertificateError::Unreadable {
            what: "certificate authority",
            why: e.to_string(),
        }
    })?;
    let key = KeyPair::generate().map_err(issue)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(issue)?;
    let validity_params = self::params(validity)?;
    params.not_before = validity_params.not_before;
    params.not_after = validity_params.not_after;
    params
        .distinguished_name
        .push(DnType::CommonName, "express-operator conversion webhook");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let certificate = params.signed_by(&key, &issuer).map_err(issue)?;
    Ok(Serving {
        certificate: certificate.pem(),
        key: key.serialize_pem(),
        validity,
    })
}

/// The validity of the first certificate in `pem`.
pub fn validity_of(pem: &str, what: &'static str) -> Result<Validity, CertificateError> {
    let unreadable = |why: String| CertificateError::Unreadable { what, why };
    let (_, block) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| unreadable(e.to_string()))?;
    let certificate = block.parse_x509().map_err(|e| unreadable(e.to_string()))?;
    let validity = certificate.validity();
    Ok(Validity {
        not_before: validity.not_before.timestamp(),
        not_after: validity.not_after.timestamp(),
    })
}

/// The `caBundle` for these authorities' certificates, in the order given.
pub fn bundle<'a>(certificates: impl IntoIterator<Item = &'a str>) -> String {
    certificates
        .into_iter()
        .map(|pem| pem.trim_end().to_owned() + "\n")
        .collect()
}
