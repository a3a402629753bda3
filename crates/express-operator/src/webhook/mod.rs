//! The conversion webhook (DESIGN section 18): the HTTPS server that answers the API server's
//! `ConversionReview`s with `express_api::conversion` ([`server`]), the certificates it serves
//! and the authority that signs them ([`authority`]), and when that authority is made, rotated and
//! retired ([`rotation`], pure).
//!
//! Not yet wired into `run`: the CRDs do not name `v1beta1` until the operator keeps its
//! authority in a Secret and writes it into their `caBundle` (docs/api.md says where this stands).

pub mod authority;
pub mod rotation;
pub mod server;
