//! What notifications tell on the ConfigMap `express-notifications`: an entry that cannot be
//! used, a destination failing, a failing destination answering again.

pub(super) use crate::controller::events::{Notice, publish};

pub(super) fn unusable(problems: &[String]) -> Notice {
    Notice::warning(
        "NotificationConfigInvalid",
        "read_notifications",
        format!("left out of notifications: {}", problems.join("; ")),
    )
}

pub(super) fn failing(destination: &str, failures: u32, why: &str) -> Notice {
    Notice::warning(
        "NotificationsFailing",
        "notify",
        format!(
            "destination {destination} failed {failures} deliveries in a row; its messages wait and are retried: {why}"
        ),
    )
}

pub(super) fn recovered(destination: &str) -> Notice {
    Notice::normal(
        "NotificationsDelivered",
        "notify",
        format!("destination {destination} accepts deliveries again"),
    )
}
