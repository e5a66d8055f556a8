//! Pathway statistics as tracers report them (Data Streams Monitoring): one
//! stats point per bucket, pathway hash and reporting service.

use crate::sketch::Sketch;
use serde::{Deserialize, Serialize};

/// One stats point of one bucket, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathwayPoint {
    pub bucket_start_ms: i64,
    pub bucket_ms: i64,
    pub hash: u64,
    pub parent_hash: u64,
    pub service: String,
    pub env: String,
    pub edge_tags: Vec<String>,
    pub edge_latency: Sketch,
    pub pathway_latency: Sketch,
    pub payload_size: Sketch,
}

impl PathwayPoint {
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.edge_tags
            .iter()
            .find_map(|t| t.strip_prefix(key)?.strip_prefix(':'))
    }

    /// The topic of the edge the point is about, if any.
    pub fn topic(&self) -> Option<&str> {
        self.tag("topic")
    }

    /// Checkpoints counted in this bucket.
    pub fn count(&self) -> f64 {
        self.pathway_latency.count().max(self.edge_latency.count())
    }
}
