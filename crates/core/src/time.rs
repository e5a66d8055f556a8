//! The engine's notion of time: a plain number handed in by the caller.
//!
//! The engine never reads a clock. The collector passes unix milliseconds, `replay`
//! passes milliseconds from the start of the scenario; both are just [`Millis`].

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A point in time, in milliseconds on the caller's clock.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub i64);

impl Millis {
    /// Converts seconds (as written in scenarios) to milliseconds, rounding to the
    /// nearest millisecond. `None` for NaN, infinities and values out of range.
    pub fn from_secs_f64(secs: f64) -> Option<Self> {
        let ms = (secs * 1000.0).round();
        if ms.is_finite() && ms >= i64::MIN as f64 && ms <= i64::MAX as f64 {
            Some(Self(ms as i64))
        } else {
            None
        }
    }

    /// ISO-8601 UTC to the second (`2026-12-07T05:04:39Z`), as people and
    /// tools read times; before 1970 reads as 1970.
    pub fn iso(self) -> String {
        let ms = u64::try_from(self.0).unwrap_or(0);
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Milliseconds from `earlier` to `self`, never negative.
    pub fn since(self, earlier: Millis) -> i64 {
        self.0.saturating_sub(earlier.0).max(0)
    }

    pub fn saturating_add(self, d: Duration) -> Millis {
        Millis(self.0.saturating_add(duration_ms(d)))
    }
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
