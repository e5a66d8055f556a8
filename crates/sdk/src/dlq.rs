//! Dead-letter queues as a signal: a record that fails (a schema violation, a
//! processing error) goes to its DLQ topic with its original key, value and
//! headers unchanged (its trace context survives) plus provenance headers
//! ([`streamsight_wire::dlq`]). A DLQ send is retried; one that still fails is
//! never silent: the record is counted as failed in processing (a drop with its
//! cause) and the error returned.

use crate::consumer::TracingConsumerContext;
use crate::context::trace_id_of;
use crate::delivery::Outcome;
use crate::telemetry::Telemetry;
use crate::validate::Violation;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use streamsight_wire::dlq::{Conventions, Provenance};

/// Why a record is being dead-lettered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Where it failed: `validation`, `processing`, ...
    pub stage: String,
    /// What kind of failure (`schema_violation`, an error type's name, ...).
    pub class: String,
    /// The failure in words.
    pub message: String,
    /// The schema a validation failure was checked against.
    pub schema: Option<String>,
}

impl Failure {
    /// A record that failed its schema.
    pub fn validation(v: &Violation) -> Self {
        Self {
            stage: "validation".into(),
            class: v.class.into(),
            message: v.message.clone(),
            schema: Some(v.schema.clone()),
        }
    }

    /// A record the application could not process.
    pub fn processing(class: &str, message: &str) -> Self {
        Self {
            stage: "processing".into(),
            class: class.into(),
            message: message.into(),
            schema: None,
        }
    }
}

/// Sends failed records to their DLQ topic (`<topic>.dlq` unless configured).
pub struct DeadLetterQueue {
    producer: FutureProducer,
    telemetry: Telemetry,
    topics: HashMap<String, String>,
    also: Conventions,
    attempts: u32,
    backoff: Duration,
}

impl std::fmt::Debug for DeadLetterQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetterQueue")
            .field("topics", &self.topics)
            .field("also", &self.also)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl DeadLetterQueue {
    /// A DLQ producer from the application's client config (security settings
    /// and all); `acks=all` so that a record acknowledged is a record kept.
    pub fn new(config: &ClientConfig, telemetry: Telemetry) -> KafkaResult<Self> {
        let producer = config.clone().set("acks", "all").create()?;
        Ok(Self {
            producer,
            telemetry,
            topics: HashMap::new(),
            also: Conventions::default(),
            attempts: 3,
            backoff: Duration::from_millis(100),
        })
    }

    /// Routes `source`'s failures to `dlq` instead of `<source>.dlq`.
    pub fn topic(mut self, source: &str, dlq: &str) -> Self {
        self.topics.insert(source.to_owned(), dlq.to_owned());
        self
    }

    /// Also writes Spring Kafka's and/or Kafka Connect's header names.
    pub fn conventions(mut self, also: Conventions) -> Self {
        self.also = also;
        self
    }

    /// Tries a DLQ send this many times, `backoff` apart (doubling).
    pub fn retries(mut self, attempts: u32, backoff: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.backoff = backoff;
        self
    }

    /// Where dead letters of `source` go: its configured DLQ, else the
    /// convention's name for it.
    pub fn dlq_topic(&self, source: &str) -> String {
        self.topics
            .get(source)
            .cloned()
            .unwrap_or_else(|| format!("{source}.dlq"))
    }

    /// Sends `msg` to its DLQ and marks it dead-lettered; when every attempt
    /// fails, marks it failed (a drop, counted) and returns the last error.
    pub async fn route(
        &self,
        ctx: &TracingConsumerContext,
        msg: &BorrowedMessage<'_>,
        failure: &Failure,
    ) -> KafkaResult<()> {
        if failure.stage == "validation" {
            self.telemetry.stats().schema_violations.fetch_add(1, Relaxed);
        }
        let trace_id = trace_id_of(msg.headers());
        let provenance = Provenance {
            source_topic: Some(msg.topic().to_owned()),
            source_partition: Some(msg.partition()),
            source_offset: Some(msg.offset()),
            source_timestamp_ms: msg.timestamp().to_millis(),
            consumer_group: Some(ctx.group().to_owned()),
            stage: Some(failure.stage.clone()),
            error_class: Some(failure.class.clone()),
            error_message: Some(failure.message.clone()),
            schema_id: failure.schema.clone(),
            trace_id,
            convention: None,
        };
        let mut headers = OwnedHeaders::new();
        if let Some(original) = msg.headers() {
            for h in original.iter() {
                headers = headers.insert(Header {
                    key: h.key,
                    value: h.value,
                });
            }
        }
        for (key, value) in provenance.headers(self.also) {
            headers = headers.insert(Header {
                key,
                value: Some(&value),
            });
        }
        let topic = self.dlq_topic(msg.topic());
        let mut backoff = self.backoff;
        let mut last = None;
        for attempt in 0..self.attempts {
            if attempt > 0 {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            let mut record = FutureRecord::to(&topic).headers(headers.clone());
            if let Some(k) = msg.key() {
                record = record.key(k);
            }
            if let Some(v) = msg.payload() {
                record = record.payload(v);
            }
            if let Some(t) = msg.timestamp().to_millis() {
                record = record.timestamp(t);
            }
            match self.producer.send(record, Duration::from_secs(5)).await {
                Ok(_) => {
                    self.telemetry.stats().dead_lettered.fetch_add(1, Relaxed);
                    ctx.mark(msg, Outcome::DeadLettered);
                    return Ok(());
                }
                Err((e, _)) => last = Some(e),
            }
        }
        self.telemetry.stats().dead_letter_failures.fetch_add(1, Relaxed);
        ctx.mark(msg, Outcome::Failed);
        Err(last.unwrap_or(KafkaError::Canceled))
    }
}
