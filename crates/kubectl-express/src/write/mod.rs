//! Writing the requests only the plugin makes: on operator releases ([`release`]). Requests on
//! clusters and nodes, and a plan's copies, are written with `express_client::write`.

pub mod release;
