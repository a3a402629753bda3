//! `kubectl express dashboard`: a local web UI of the fleet and of each tenant, live, with the
//! CLI's actions behind confirmations (DESIGN section 11).
//!
//! - [`model`]: what the pages and the JSON API show, built purely from the watched objects;
//! - [`layout`]: the layered layout of a prerequisite graph, and [`svg`]: drawing it;
//! - [`pages`]: the HTML (server-rendered with `maud`, plus a small script of our own);
//! - [`server`]: the HTTP server (axum), [`streams`]: its live updates (server-sent events),
//!   and [`guard`]: the checks in front of every request;
//!   [`actions`]: the actions (the same [`crate::control`] functions the CLI verbs call), each
//!   in the DC it names;
//! - across DCs (DESIGN section 13): [`dcs`] keeps each DC's watches, health and doctor,
//!   [`fleet`] merges them into one fleet page (pure), and [`fleet_pages`] renders it.

pub mod actions;
pub mod dcs;
pub mod fleet;
pub mod fleet_pages;
pub mod guard;
pub mod layout;
pub mod model;
pub mod pages;
pub mod server;
pub mod streams;
pub mod svg;
