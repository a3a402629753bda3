//! An instant as a view keeps it ([`ApiTime`]): eight bytes, and eight as an `Option` too.

use std::num::NonZeroI64;

use k8s_openapi::jiff::Timestamp;

/// An instant as the API server writes a `Time` (creation, deletion, a condition's transition,
/// a `managedFields` entry): whole seconds since the epoch. A jiff `Timestamp` takes 16 bytes
/// and 24 as an `Option`; views keep four per node and three per pod, which at a fleet's
/// size moved nodes and pods into the allocator's next size class. A fraction of a second
/// (which the API server never writes in a `Time`) is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ApiTime(
    /// The seconds with their sign bit flipped, which is never zero: no `Timestamp` is at
    /// `i64::MIN` seconds.
    NonZeroI64,
);

impl ApiTime {
    /// The instant `time` names, to the second.
    pub fn new(time: Timestamp) -> Option<ApiTime> {
        NonZeroI64::new(time.as_second() ^ i64::MIN).map(ApiTime)
    }

    pub fn seconds(self) -> i64 {
        self.0.get() ^ i64::MIN
    }

    pub fn timestamp(self) -> Timestamp {
        // Every value was made from a Timestamp's seconds, which are in its range.
        Timestamp::from_second(self.seconds()).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

impl PartialOrd for ApiTime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ApiTime {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.seconds().cmp(&other.seconds())
    }
}

/// The instant an optional API time names, to the second.
pub(crate) fn api_time(time: Option<Timestamp>) -> Option<ApiTime> {
    time.and_then(ApiTime::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_time_keeps_the_second_in_eight_bytes_and_orders_as_time_does() {
        assert_eq!(size_of::<Option<ApiTime>>(), 8);
        let seconds = [
            Timestamp::MIN.as_second(),
            -1,
            0,
            1,
            1_795_000_000,
            Timestamp::MAX.as_second(),
        ];
        let times: Vec<ApiTime> = seconds
            .iter()
            .map(|&s| ApiTime::new(Timestamp::from_second(s).unwrap()).unwrap())
            .collect();
        for (time, s) in times.iter().zip(seconds) {
            assert_eq!(time.seconds(), s);
            assert_eq!(time.timestamp(), Timestamp::from_second(s).unwrap());
        }
        assert!(times.is_sorted(), "ordered as the instants are");
        let fraction = Timestamp::new(1_795_000_000, 999_999_999).unwrap();
        assert_eq!(ApiTime::new(fraction).unwrap().seconds(), 1_795_000_000);
    }
}
