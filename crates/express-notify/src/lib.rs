//! Telling people (DESIGN section 21), as pure functions: no I/O, no clock (every decision takes
//! `now`). The operator's `controller::notify` reads the objects, the configuration and the
//! ledger, calls these and does what they say.
//!
//! - [`config`]: the destinations and subscriptions, as the chart writes them into a ConfigMap
//!   (secrets are named, never held: the operator reads them from a Secret);
//! - [`occurrence`]: what is worth telling (a [`Trigger`] on an object at an instant, with the
//!   facts a person needs to act), and [`observe`]: the occurrences a tenant's or a release's
//!   status shows now;
//! - [`ledger`]: what was sent, so that a new leader neither repeats nor loses a message;
//! - [`outbox`]: what each destination is sent now, one message or one group under a flood, and
//!   when to look again;
//! - [`render`]: a message in a destination's format (the documented webhook JSON, Slack's Block
//!   Kit, Alertmanager's v2 alerts).

pub mod config;
pub mod ledger;
pub mod observe;
pub mod occurrence;
pub mod outbox;
pub mod render;

pub use config::{Config, Destination, DestinationKind, Subscription};
pub use ledger::Ledger;
pub use occurrence::{Occurrence, Severity, Subject, Trigger};
pub use outbox::{Delivery, Outbox};
