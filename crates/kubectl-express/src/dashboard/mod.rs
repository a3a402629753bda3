//! `kubectl express dashboard`: a local web UI of the fleet and of each tenant, live, with the
//! CLI's actions behind confirmations (DESIGN sections 11 and 13). One context or several are
//! served the same way: one fleet page over their DCs, a page per tenant.
//!
//! In layers, each importing only those below it:
//! - [`links`]: where links and actions go and the tokens that vouch for them;
//! - [`model`]: what the pages and the JSON API show, pure (the one fleet view, the tenant
//!   page, the graphs, the release pages); [`layout`] lays a prerequisite graph out and
//!   [`svg`] draws it; [`chart`] draws a release's signal over time;
//! - [`pages`]: the HTML (server-rendered with `maud`, plus a small script of our own);
//! - [`dcs`]: each DC's watches, health and doctor;
//! - [`state`]: what every handler shares (the DCs, tokens, the render cache, the refusals);
//! - the handlers: [`guard`] (the checks in front of every request), [`actions`] (the same
//!   [`express_client::write::control`] functions the CLI verbs call, each in the DC it names) and [`streams`]
//!   (the live updates, server-sent events);
//! - [`server`]: the router and starting the server.

pub mod actions;
pub mod chart;
pub mod dcs;
pub mod guard;
pub mod layout;
pub mod links;
pub mod model;
pub mod pages;
pub mod server;
pub mod state;
pub mod streams;
pub mod svg;
