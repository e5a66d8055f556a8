//! `streamsight serve`: the collector, composed.
//!
//! The layers below it (see `docs/architecture.md`): the base
//! ([`streamsight_node`]: configuration, services, the writer), HTTP plumbing
//! ([`streamsight_http`]), and the features above them — intake, the API,
//! the dashboard, alerts, journeys — each a crate that stands on the base and
//! never on another's insides. This crate builds a node with its features,
//! puts their routes together, and runs everything (see [`serve()`]).

mod housekeeping;
mod polling;
pub mod routes;
mod serve;

pub use serve::{Running, ServeError, serve};
pub use streamsight_alerts as alerts;
pub use streamsight_api as api;
pub use streamsight_api::metrics;
pub use streamsight_http::{auth, fanout, tls};
pub use streamsight_intake as intake;
pub use streamsight_journeys as journeys;
pub use streamsight_node::{ServeConfig, config, deliveries, pathways, services, state, telemetry, writer};

use std::sync::Arc;
use streamsight_core::EngineConfig;
use streamsight_node::Shared;

/// A node of one tenant with every feature installed: what `serve` runs, and
/// what tests and benches build to drive the services without a server.
pub fn node(config: ServeConfig, engine: EngineConfig) -> Result<Shared, streamsight_core::ConfigError> {
    let features: Vec<Arc<dyn streamsight_node::Feature>> = vec![
        Arc::new(streamsight_alerts::AlertService::new(&config.alerts)),
        // Last: it keeps the records' spans and lines without copying them.
        Arc::new(streamsight_journeys::JourneyService::new(&config.journeys)),
    ];
    Shared::with_features(config, engine, features)
}
