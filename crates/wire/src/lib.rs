//! Wire formats shared by the SDK and the collector.
//!
//! Each format turns bytes or tags into the core's domain types and says precisely
//! what was wrong with input it cannot use. Nothing here does I/O.

pub mod budget;
pub mod dlq;
pub mod dsm;
pub mod kafka_admin;
pub mod pathway;
pub mod traces;
