//! The query strings the API's reads share.

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LagFilter {
    pub(crate) cluster: Option<String>,
    pub(crate) group: Option<String>,
    pub(crate) topic: Option<String>,
    /// Another node of a sharded log asks for these shards' rows (see [`fanout`]).
    pub(crate) shards: Option<String>,
}

impl LagFilter {
    pub(crate) fn keeps(&self, cluster: &str, group: &str, topic: &str) -> bool {
        let wants = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        wants(&self.cluster, cluster) && wants(&self.group, group) && wants(&self.topic, topic)
    }
}

/// Only `shards=` (another node of a sharded log asking for its part).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShardsOnly {
    pub(crate) shards: Option<String>,
}
