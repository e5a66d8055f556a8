//! The collector's one clock: unix milliseconds from the system. The engine
//! has none of its own: every reading of time outside tests starts here.

use std::time::Duration;
use streamsight_core::Millis;

pub fn now() -> Millis {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Millis(ms)
}

/// A duration from the configuration in milliseconds (saturating).
pub fn time_ms(d: Duration) -> i64 {
    streamsight_core::time::duration_ms(d)
}
