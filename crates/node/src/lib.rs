//! One collector node's base: its configuration, the services that hold what
//! it knows, and the one writer that changes them.
//!
//! Everything above it — HTTP plumbing, intake, the API, the dashboard,
//! alerts, journeys — reads the services and hands records to the writer;
//! nothing here knows of them (features plug in through [`state::Feature`]).
//! See `docs/architecture.md`.

pub mod clock;
pub mod config;
pub mod deliveries;
pub mod memory;
pub mod pathways;
pub mod secrets;
pub mod services;
pub mod signals;
pub mod state;
pub mod sync;
pub mod telemetry;
pub mod timings;
pub mod writer;

pub use config::ServeConfig;
pub use state::{Feature, Shared};
pub use writer::{AppendError, Writer, WriterError};
