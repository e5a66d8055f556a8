//! `[serve.records]`: reading one record of a polled cluster
//! (`GET /api/v1/records/...`, `streamsight record`): how much of it is shown
//! and which fields are masked.

use serde::{Deserialize, Serialize};

/// `[serve.records]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordsConfig {
    /// Field paths masked in JSON keys and values, dotted (`card.number`);
    /// `*` matches any one field name, array elements are passed through.
    pub redact: Vec<String>,
    /// A key or value larger than this is shown as a preview, not decoded.
    pub max_value_bytes: usize,
    /// Bytes of a value shown as text or hex when it is not decoded.
    pub preview_bytes: usize,
    /// Record reads at once per tenant; more wait their turn.
    pub max_concurrent_reads: usize,
}

impl Default for RecordsConfig {
    fn default() -> Self {
        Self {
            redact: Vec::new(),
            max_value_bytes: 256 * 1024,
            preview_bytes: 4 * 1024,
            max_concurrent_reads: 4,
        }
    }
}
