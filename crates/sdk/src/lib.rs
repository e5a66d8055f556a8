#![deny(missing_docs)]
//! Instrument rdkafka producers and consumers for streamsight (and any Datadog
//! Data Streams backend):
//!
//! - produce offsets are reported only for real successes; failed sends are
//!   counted by topic, partition and error and shipped as a signal of their own;
//! - every message carries W3C `traceparent` and `dd-pathway-ctx-base64`
//!   (byte-compatible with Datadog tracers);
//! - consumers checkpoint every message and report commits the broker accepted;
//! - telemetry ships every 10 s on its own thread; the application never waits.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use rdkafka::{ClientConfig, producer::FutureRecord};
//! let sdk = streamsight_sdk::Sdk::start(streamsight_sdk::SdkConfig::from_env("checkout"));
//! let producer = sdk.future_producer(ClientConfig::new().set("bootstrap.servers", "localhost:9092"))?;
//! producer.send(FutureRecord::to("orders").payload("hi").key("k"), std::time::Duration::from_secs(5), None).await.ok();
//! sdk.shutdown();
//! # Ok(()) }
//! ```

mod checkpoint;
pub mod config;
pub mod consumer;
pub mod context;
pub mod delivery;
pub mod dlq;
mod http;
pub mod producer;
pub mod telemetry;
pub mod validate;

pub use config::{ApiKey, SdkConfig};
pub use consumer::{TracedBaseConsumer, TracedStreamConsumer, TracingConsumerContext};
pub use context::{MessageContext, TraceContext};
pub use delivery::Outcome;
pub use producer::{TracedBaseProducer, TracedFutureProducer, TracingProducerContext};
/// Types of the wire formats the SDK's signatures use, so that a caller
/// names them from this crate alone.
pub use streamsight_wire::dlq::{Conventions, Provenance};
pub use streamsight_wire::dsm::payload::Payload;
pub use streamsight_wire::pathway::PathwayContext;
pub use telemetry::{SdkCounters, SdkStats, Telemetry};

/// docs/sdk.md's examples, compiled as doc tests: the docs cannot drift
/// from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/sdk.md")]
pub struct SdkMd;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::producer::{NoCustomPartitioner, ProducerContext};

/// The entry point: one per service.
#[derive(Clone, Debug)]
pub struct Sdk {
    telemetry: Telemetry,
}

fn group_of(config: &ClientConfig) -> KafkaResult<String> {
    config
        .get("group.id")
        .map(str::to_owned)
        .ok_or_else(|| KafkaError::ClientCreation("a consumer needs group.id".into()))
}

impl Sdk {
    /// Starts shipping telemetry to `config.collector_url` every flush interval.
    pub fn start(config: SdkConfig) -> Self {
        Self {
            telemetry: Telemetry::start(config),
        }
    }

    /// Around existing telemetry (tests use [`Telemetry::unshipped`]).
    pub fn with_telemetry(telemetry: Telemetry) -> Self {
        Self { telemetry }
    }

    /// The telemetry every wrapper reports into: counters, last error, flush.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// A `FutureProducer` that injects trace and pathway headers on every
    /// send and reports progress only for real successes.
    pub fn future_producer(&self, config: &ClientConfig) -> KafkaResult<TracedFutureProducer> {
        Ok(TracedFutureProducer::new(config.create()?, self.telemetry.clone()))
    }

    /// A base producer whose delivery reports reach `context` after tracking.
    pub fn base_producer<C: ProducerContext<NoCustomPartitioner>>(
        &self,
        config: &ClientConfig,
        context: C,
    ) -> KafkaResult<TracedBaseProducer<C>> {
        let ctx = TracingProducerContext::new(context, self.telemetry.clone());
        Ok(TracedBaseProducer::new(
            config.create_with_context(ctx)?,
            self.telemetry.clone(),
        ))
    }

    /// A `StreamConsumer` (needs `group.id`) whose messages come with their
    /// context and whose accepted commits are reported.
    pub fn stream_consumer(&self, config: &ClientConfig) -> KafkaResult<TracedStreamConsumer> {
        let ctx = TracingConsumerContext::new(self.telemetry.clone(), group_of(config)?);
        Ok(TracedStreamConsumer::new(config.create_with_context(ctx)?))
    }

    /// A `BaseConsumer`, as [`Sdk::stream_consumer`], polled.
    pub fn base_consumer(&self, config: &ClientConfig) -> KafkaResult<TracedBaseConsumer> {
        let ctx = TracingConsumerContext::new(self.telemetry.clone(), group_of(config)?);
        Ok(TracedBaseConsumer::new(config.create_with_context(ctx)?))
    }

    /// Ships what is left and stops the shipper. **Blocks** the calling
    /// thread for one last HTTP request to the collector (2 s at most); from
    /// async code, await [`Sdk::shutdown_async`]. Dropping the `Sdk` without
    /// it loses what was aggregated since the last flush (up to one
    /// `flush_interval` of telemetry; never a message).
    pub fn shutdown(&self) {
        self.telemetry.shutdown();
    }

    /// [`Sdk::shutdown`] without blocking an async runtime's worker.
    pub async fn shutdown_async(&self) {
        self.telemetry.shutdown_async().await;
    }
}
