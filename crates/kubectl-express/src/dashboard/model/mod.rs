//! What the dashboard's pages and its JSON API show, pure: view models built from the objects
//! the watches hold, the tenant's events, the doctor's report and a `now`. The pages render
//! these, and `/api/...` serves them as they are, so a tool reading the API sees what a person
//! sees.
//!
//! - [`rows`]: one tenant as a row, and a DC's doctor banner with its operator releases;
//! - [`fleet`]: the one fleet page, over one DC or several;
//! - [`tenant`]: the tenant page, with its graphs from [`graph`];
//! - [`release`] and [`fleet_release`]: the release pages (an OperatorRelease's waves and
//!   charts, a FleetRelease's stages);
//! - [`shown`]: how ages and phases read.

pub mod fleet;
pub mod fleet_release;
pub mod graph;
pub mod release;
pub mod rows;
pub mod shown;
pub mod tenant;

#[cfg(test)]
mod tests;
