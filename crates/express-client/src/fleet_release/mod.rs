//! Driving a release across DCs (DESIGN section 14), below the verb and the dashboard that both
//! use it: the plan's DCs and the fan-out over them ([`dcs`]), one step of the plan and the
//! driver's loop ([`drive`]), and a person's requests ([`requests`]).

pub mod dcs;
pub mod drive;
pub mod requests;
pub mod start;
