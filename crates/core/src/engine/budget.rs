//! Whether an engine configuration holds together, and how many history
//! points a partition's byte budget buys once its fixed state is paid for:
//! the engine's own sizes decide, so it lives beside them.

use super::state::PARTITION_FIXED_BYTES;
use crate::config::{ConfigError, EngineConfig};
use crate::history::{Compaction, HistoryParams, OffsetHistory};

impl EngineConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let points = history_capacity(self.history_bytes, self.history_compaction);
        if points < HistoryParams::MIN_CAPACITY {
            return Err(ConfigError::HistoryTooSmall {
                given: self.history_bytes,
                points,
                min: HistoryParams::MIN_CAPACITY,
                needed: PARTITION_FIXED_BYTES
                    + HistoryParams::MIN_CAPACITY * OffsetHistory::point_bytes(self.history_compaction),
            });
        }
        if !(self.history_precision.is_finite() && self.history_precision > 0.0) {
            return Err(ConfigError::BadPrecision(self.history_precision));
        }
        if self.reset_confirmations == 0 {
            return Err(ConfigError::NoResetConfirmations);
        }
        Ok(())
    }

    pub(crate) fn history_params(&self) -> HistoryParams {
        HistoryParams {
            capacity: history_capacity(self.history_bytes, self.history_compaction),
            min_resolution_ms: crate::time::duration_ms(self.min_resolution),
            initial_precision: self.history_precision,
            compaction: self.history_compaction,
        }
    }
}

/// Points that fit in the budget once the partition's fixed state is paid for.
fn history_capacity(history_bytes: usize, compaction: Compaction) -> usize {
    history_bytes.saturating_sub(PARTITION_FIXED_BYTES) / OffsetHistory::point_bytes(compaction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_fits_the_budget() {
        let c = EngineConfig::default();
        c.validate().unwrap();
        let p = c.history_params();
        assert!(p.capacity >= 180, "only {} points", p.capacity);
        let by_age = EngineConfig {
            history_compaction: Compaction::ByAge,
            ..c
        };
        assert!(by_age.history_params().capacity >= 230);
    }

    #[test]
    fn too_small_a_budget_is_refused() {
        let c = EngineConfig {
            history_bytes: 64,
            ..EngineConfig::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::HistoryTooSmall { .. })));
    }
}
