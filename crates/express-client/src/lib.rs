//! `express-client`: Express as a client reaches it, below both the kubectl plugin and the
//! operator's `dev --dcs N --demo`. Each module imports only those listed before it: exit codes
//! and their messages ([`exit`]), the runtime a verb runs on ([`runtime`]), connecting to one
//! context ([`connect`]), reading a DC ([`read`]), writing people's requests and a plan's
//! copies ([`write`]), choosing and fanning out over the kubeconfig's contexts ([`contexts`]),
//! and driving one release across DCs ([`fleet_release`], DESIGN section 14).

pub mod connect;
pub mod contexts;
pub mod exit;
pub mod fleet_release;
pub mod read;
pub mod runtime;
pub mod write;
