//! The metrics of notifications (DESIGN section 21): occurrences sent, failed and dropped, by
//! trigger and destination, and which destinations are failing.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotificationLabel {
    pub trigger: String,
    pub destination: String,
    /// `sent`, `failed` (an attempt refused or unanswered) or `dropped` (given up).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DestinationLabel {
    pub destination: String,
}

#[derive(Default)]
pub struct NotifyMetrics {
    pub notifications: Family<NotificationLabel, Counter>,
    pub failing: Family<DestinationLabel, Gauge>,
}

impl NotifyMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "notifications",
            "Notifications by trigger, destination and outcome: sent, failed (an attempt refused or unanswered) or dropped (given up before a destination accepted it)",
            self.notifications.clone(),
        );
        registry.register(
            "notification_destination_failing",
            "1 while a notifications destination has refused or not answered three deliveries in a row",
            self.failing.clone(),
        );
    }

    /// Counts `count` occurrences of `trigger` with `outcome` at `destination`.
    pub fn count(&self, trigger: &str, destination: &str, outcome: &str, count: u64) {
        self.notifications
            .get_or_create(&NotificationLabel {
                trigger: trigger.into(),
                destination: destination.into(),
                outcome: outcome.into(),
            })
            .inc_by(count);
    }

    pub fn set_failing(&self, destination: &str, failing: bool) {
        self.failing
            .get_or_create(&DestinationLabel {
                destination: destination.into(),
            })
            .set(i64::from(failing));
    }
}
