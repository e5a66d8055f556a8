//! The collector's one clock: unix milliseconds from the system.

use streamsight_core::Millis;

pub(crate) fn now() -> Millis {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Millis(ms)
}
