//! The Kafka poller: lag, health and data loss for consumers nobody
//! instrumented, straight from the brokers.
//!
//! [`ClusterClient::poll`] asks a cluster for everything in a few batched
//! requests and returns a [`Snapshot`]; a [`Tracker`] turns successive snapshots
//! into engine observations (only changes are durable) and decides when groups
//! and topics are gone; a [`Membership`] follows each group's rebalances.

pub mod client;
pub mod config;
pub mod membership;
pub mod sasl;
pub mod snapshot;
pub mod tls;
pub mod tracker;

pub use client::{ClusterClient, KafkaError};
pub use config::{ClusterConfig, ClusterConfigError, SecurityProtocol};
pub use membership::{Membership, Rebalances};
pub use snapshot::Snapshot;
pub use tracker::{Tracker, Update};
