//! streamsight's pure core: domain types and the lag engine.
//!
//! No I/O, no async, no clock: every method that depends on time takes it as an
//! argument. Adapters (intake, poller, store, API) feed [`Engine::observe`] and read
//! [`Engine::evaluate`].

pub mod alerts;
pub mod anomaly;
mod chunked;
pub mod config;
pub mod delivery;
pub mod engine;
pub mod explain;
pub mod failures;
pub mod glob;
pub mod health;
pub mod history;
pub mod journey;
pub mod model;
pub mod pathway;
pub mod probe;
pub mod record;
pub mod redrive;
pub mod reset;
pub mod shard;
pub mod sketch;
pub mod time;
pub mod window;

pub use config::{ConfigError, EngineConfig};
pub use engine::{
    Engine, EngineStats, GroupFold, GroupId, GroupPartitionId, GroupPartitionNames, GroupReport, Idle, MemoryUsage,
    PartitionId, PartitionReport,
};
pub use model::{
    Consumer, EndOffsetSource, EngineEvent, LagReport, LagRow, Limit, LimitCounts, Observation, ObservationOf,
    OpenTransaction, OwnedObservation, Partition, PartitionRef, RejectCounts, RejectReason, ResetEvidence, SharedNames,
    Status,
};
pub use record::{AlertEvent, AuditEvent, Record, Route};
pub use time::Millis;
