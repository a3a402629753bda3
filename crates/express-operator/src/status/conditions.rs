//! Kubernetes-convention conditions (lastTransitionTime moves only on a transition) and the
//! comparison that decides whether a status write is needed at all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// A condition, reusing the previous lastTransitionTime when the status did not change.
pub fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_owned();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Whether two statuses differ only in timestamps (then no write is needed). Equal ones are
/// told apart field by field first: most statuses a reconcile computes are the ones it read,
/// and serializing both to compare them was a tenth of the operator's CPU in an upgrade.
pub fn same_ignoring_time<T: serde::Serialize + PartialEq>(a: &T, b: &T) -> bool {
    if a == b {
        return true;
    }
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for key in ["lastTransitionTime", "startedAt", "finishedAt"] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let (Ok(mut a), Ok(mut b)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return false;
    };
    strip(&mut a);
    strip(&mut b);
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("time"))
    }

    #[test]
    fn transition_time_moves_only_on_a_transition() {
        let first = condition(
            &[],
            "Ready",
            true,
            "PodReady",
            "ok".into(),
            Some(1),
            &time(100),
        );
        let same = condition(
            std::slice::from_ref(&first),
            "Ready",
            true,
            "PodReady",
            "still ok".into(),
            Some(2),
            &time(200),
        );
        assert_eq!(same.last_transition_time, time(100));
        let flipped = condition(
            std::slice::from_ref(&same),
            "Ready",
            false,
            "PodNotReady",
            "down".into(),
            Some(2),
            &time(300),
        );
        assert_eq!(flipped.last_transition_time, time(300));
    }

    #[test]
    fn comparison_ignores_timestamps_only() {
        let a = condition(&[], "Ready", true, "R", "m".into(), None, &time(1));
        let b = condition(&[], "Ready", true, "R", "m".into(), None, &time(2));
        assert!(same_ignoring_time(&a, &b));
        let c = condition(&[], "Ready", false, "R", "m".into(), None, &time(1));
        assert!(!same_ignoring_time(&a, &c));
    }
}
