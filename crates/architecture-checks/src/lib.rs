//! The house rules of `docs/architecture.md`, held against the code by this crate's tests:
//! [`floors`] (no import runs back up a floor inside any folder), [`functions`] (no function
//! longer than a page), [`map`] (every path and item the map names exists), over the crate
//! sources as [`source`] reads them; and [`links`] (every link of the map and of the decisions
//! beside it leads to a file and heading that exist).

pub mod floors;
pub mod functions;
pub mod links;
pub mod map;
pub mod source;
