//! `streamsight serve`: the collector, composed.
//!
//! The layers below it (see `docs/architecture.md`): the base
//! ([`streamsight_node`]: configuration, services, the writer), HTTP plumbing
//! ([`streamsight_http`]), and the features above them — intake, the API,
//! the dashboard, alerts, journeys — each a crate that stands on the base and
//! never on another's insides. This crate builds a node with its features,
//! puts their routes together, and runs everything (see [`serve()`]).

mod features;
mod housekeeping;
mod polling;
pub mod routes;
mod serve;

pub use features::node;
pub use serve::{Running, ServeError, serve};
pub use streamsight_alerts as alerts;
pub use streamsight_api as api;
pub use streamsight_api::metrics;
pub use streamsight_http::{auth, fanout, tls};
pub use streamsight_intake as intake;
pub use streamsight_journeys as journeys;
pub use streamsight_node::{ServeConfig, config, deliveries, pathways, services, state, telemetry, writer};
