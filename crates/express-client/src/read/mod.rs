//! Reading a live DC: its Express objects and the operator's namespace ([`live`]), a plan's
//! copies and the releases it made ([`fleet_release`]), the doctor's verdict over a DC
//! ([`triage`]), and why a kind of ours could not be read ([`unread`]).

pub mod fleet_release;
pub mod live;
pub mod triage;
pub mod unread;
pub mod view_store;
