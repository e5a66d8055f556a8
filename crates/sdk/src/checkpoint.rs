//! A pathway checkpoint: where a message is now, and how long it took to get here.

use crate::telemetry::{Checkpoint, Telemetry};
use streamsight_wire::pathway::{self, PathwayContext};

/// Records a checkpoint after `parent` (none: a new pathway starts here) and
/// returns the context to pass on. `edge_tags` are in sorted order, each as
/// pieces to concatenate, so that the hot path allocates nothing.
pub(crate) fn checkpoint(
    telemetry: &Telemetry,
    parent: Option<PathwayContext>,
    edge_tags: &[&[&str]],
    payload_size: usize,
    now_ms: i64,
) -> PathwayContext {
    let c = telemetry.config();
    let node = pathway::node_hash_sorted(&c.service, &c.env, &c.primary_tag, edge_tags);
    let parent_hash = parent.map_or(0, |p| p.hash);
    let hash = pathway::pathway_hash(node, parent_hash);
    let (pathway_start_ms, edge_start_ms) = parent.map_or((now_ms, now_ms), |p| (p.pathway_start_ms, p.edge_start_ms));
    let secs = |since: i64| now_ms.saturating_sub(since) as f64 / 1000.0;
    telemetry.checkpoint(&Checkpoint {
        now_ms,
        hash,
        parent_hash,
        edge_tags,
        edge_latency: secs(edge_start_ms),
        pathway_latency: secs(pathway_start_ms),
        payload_size: payload_size as f64,
    });
    PathwayContext {
        hash,
        pathway_start_ms,
        edge_start_ms: now_ms,
    }
}
