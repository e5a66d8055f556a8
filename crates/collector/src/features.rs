//! The features every node carries, installed in the order the writer hands
//! them records.

use std::sync::Arc;
use streamsight_core::EngineConfig;
use streamsight_node::ServeConfig;
use streamsight_node::Shared;

/// A node of one tenant with every feature installed: what `serve` runs, and
/// what tests and benches build to drive the services without a server.
pub fn node(config: ServeConfig, engine: EngineConfig) -> Result<Shared, streamsight_core::ConfigError> {
    let features: Vec<Arc<dyn streamsight_node::Feature>> = vec![
        Arc::new(streamsight_alerts::AlertService::new(&config.alerts)),
        Arc::new(streamsight_act::ActService::default()),
        // Last: it keeps the records' spans and lines without copying them.
        Arc::new(streamsight_journeys::JourneyService::new(&config.journeys)),
    ];
    Shared::with_features(config, engine, features)
}
