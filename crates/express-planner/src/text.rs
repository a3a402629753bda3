//! Short text forms every planner module may use: stable digests of identifiers and clock
//! times for messages.

/// A short, stable digest of a sequence of strings (FNV-1a, each part NUL-terminated): an
/// identity that survives restarts and releases, not a security boundary.
pub(crate) fn digest<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// Time of day (UTC) of an instant in milliseconds since the Unix epoch, to a tenth of a
/// second: "03:50:01.2 UTC". The date is left out: a settle wait lasts seconds.
pub(crate) fn clock(ms: i64) -> String {
    let tenths = ms.rem_euclid(86_400_000) / 100;
    let (seconds, tenth) = (tenths / 10, tenths % 10);
    format!(
        "{:02}:{:02}:{:02}.{tenth} UTC",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}
