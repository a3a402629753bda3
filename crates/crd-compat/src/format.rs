//! The string formats a stored value can be checked against here. The API server knows more
//! (`hostname`, `uri`, `email`, `duration`, ...); those are left unjudged rather than guessed.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Whether `text` is in `format`; `None` when this format is not checked here.
pub(crate) fn conforms(format: &str, text: &str) -> Option<bool> {
    let ok = match format {
        "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<Ipv6Addr>().is_ok(),
        "uuid" => is_uuid(text),
        "byte" => is_base64(text),
        "date" => is_date(text),
        "date-time" => is_date_time(text),
        _ => return None,
    };
    Some(ok)
}

fn all_hex(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_hexdigit())
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    lengths == [8, 4, 4, 4, 12] && groups.iter().all(|g| all_hex(g))
}

fn is_base64(text: &str) -> bool {
    let body = text.trim_end_matches('=');
    text.len().is_multiple_of(4)
        && text.len() - body.len() <= 2
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
}

fn digits(text: &str, count: usize) -> Option<u32> {
    if text.len() == count && text.chars().all(|c| c.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// `YYYY-MM-DD` with a month and a day in range (not checked against the month's length).
fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    match parts.as_slice() {
        [year, month, day] => {
            digits(year, 4).is_some()
                && digits(month, 2).is_some_and(|m| (1..=12).contains(&m))
                && digits(day, 2).is_some_and(|d| (1..=31).contains(&d))
        }
        _ => false,
    }
}

/// RFC 3339: a date, `T`, `hh:mm:ss` with optional fraction, and `Z` or an offset.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    let (clock, zone_ok) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, true)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let zone: Vec<&str> = time[at + 1..].split(':').collect();
        let ok =
            matches!(zone.as_slice(), [h, m] if digits(h, 2).is_some() && digits(m, 2).is_some());
        (&time[..at], ok)
    } else {
        return false;
    };
    let whole = clock.split('.').next().unwrap_or_default();
    let hms: Vec<&str> = whole.split(':').collect();
    let clock_ok = matches!(hms.as_slice(), [h, m, s]
        if digits(h, 2).is_some_and(|h| h < 24) && digits(m, 2).is_some_and(|m| m < 60) && digits(s, 2).is_some_and(|s| s <= 60));
    is_date(date) && zone_ok && clock_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_formats() {
        assert_eq!(conforms("ipv4", "10.0.0.1"), Some(true));
        assert_eq!(conforms("ipv4", "10.0.0"), Some(false));
        assert_eq!(conforms("ipv6", "::1"), Some(true));
        assert_eq!(
            conforms("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            Some(true)
        );
        assert_eq!(conforms("uuid", "123e4567"), Some(false));
        assert_eq!(conforms("byte", "aGVsbG8="), Some(true));
        assert_eq!(conforms("byte", "a!"), Some(false));
        assert_eq!(conforms("date", "2024-02-29"), Some(true));
        assert_eq!(conforms("date", "2024-13-01"), Some(false));
        assert_eq!(conforms("date-time", "2024-02-29T10:00:00Z"), Some(true));
        assert_eq!(
            conforms("date-time", "2024-02-29T10:00:00.5+02:00"),
            Some(true)
        );
        assert_eq!(conforms("date-time", "yesterday"), Some(false));
        assert_eq!(conforms("hostname", "x"), None);
    }
}
