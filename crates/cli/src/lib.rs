//! The `streamsight` binary's pieces, as a library so that tests drive them directly.

pub mod alerts;
pub mod cli;
pub mod collector_client;
pub mod commands;
pub mod config;
pub mod demo;
pub mod dlq;
pub mod journey;
pub mod lag;
pub mod output;
pub mod replay;
pub mod scenario;
