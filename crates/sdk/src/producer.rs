//! Producers: every send carries trace and pathway context; only a delivery the
//! broker acknowledged at a real position is produce progress (the guard from
//! seed 000: no error, partition >= 0, offset >= 0). Everything else is a
//! failure, counted by topic, partition (-1 when unassigned) and error.

use crate::checkpoint::checkpoint;
use crate::context::{MessageContext, TraceContext, extract, inject, trace_id_of};
use crate::telemetry::{Telemetry, now_ms};
use rdkafka::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::message::ToBytes;
use rdkafka::message::{Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, FutureProducer, FutureRecord, NoCustomPartitioner, ProducerContext,
};
use rdkafka::util::Timeout;

/// The error label of a failed send.
pub(crate) fn error_label(e: &KafkaError) -> String {
    e.rdkafka_error_code()
        .map_or_else(|| e.to_string(), |code| format!("{code:?}"))
}

/// Contexts for one outgoing message: the caller's parent if any (argument, else
/// the record's own headers), a new child span, and a pathway checkpoint.
fn outgoing(
    telemetry: &Telemetry,
    topic: &str,
    headers: Option<&OwnedHeaders>,
    payload_size: usize,
    parent: Option<&MessageContext>,
) -> OwnedHeaders {
    let (header_trace, header_path) = extract(headers);
    let parent_trace = parent.map(|p| p.trace).or(header_trace);
    let parent_path = parent.map(|p| p.pathway).or(header_path);
    let trace = parent_trace.map_or_else(TraceContext::new_root, |t| t.child());
    let tags: [&[&str]; 3] = [&["direction:out"], &["topic:", topic], &["type:kafka"]];
    let path = checkpoint(telemetry, parent_path, &tags, payload_size, now_ms());
    inject(headers, &trace, &path)
}

/// Counts a delivery report: progress only for a real success. The record's
/// timestamp places it in its accounting window; a failed one's trace id is kept
/// to follow it.
fn track<H: Headers>(
    telemetry: &Telemetry,
    topic: &str,
    timestamp: Option<i64>,
    result: Result<(i32, i64), (i32, &KafkaError)>,
    headers: Option<&H>,
) {
    let at = timestamp.unwrap_or_else(now_ms);
    let trace_id = || trace_id_of(headers);
    match result {
        Ok((partition, offset)) if partition >= 0 && offset >= 0 => telemetry.produced(topic, partition, offset, at),
        Ok((partition, _)) => telemetry.failed(topic, partition, "invalid_position", at, trace_id()),
        Err((partition, e)) => telemetry.failed(topic, partition, &error_label(e), at, trace_id()),
    }
}

const NO_HEADERS: Option<&OwnedHeaders> = None;

/// The timestamp a record is accounted under: the one consumers will see. A
/// broker that stamps records on append (LogAppendTime) reports its stamp; else
/// the record keeps the one it was sent with. librdkafka's mock reports a fixed,
/// implausible append time: then the sent one is used.
fn accounted_timestamp(delivered: Timestamp, sent: Option<i64>) -> Option<i64> {
    const PLAUSIBLE_MS: i64 = 1_000_000_000_000;
    match delivered {
        Timestamp::LogAppendTime(t) if t >= PLAUSIBLE_MS => Some(t),
        Timestamp::CreateTime(t) if t >= 0 => Some(t),
        _ => sent,
    }
}

/// A [`FutureProducer`] whose sends are traced and tracked.
pub struct TracedFutureProducer {
    inner: FutureProducer,
    telemetry: Telemetry,
}

impl std::fmt::Debug for TracedFutureProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracedFutureProducer").finish_non_exhaustive()
    }
}

impl TracedFutureProducer {
    /// Wraps `inner`, reporting into `telemetry`.
    pub fn new(inner: FutureProducer, telemetry: Telemetry) -> Self {
        Self { inner, telemetry }
    }

    /// The rdkafka producer underneath, for what the wrapper does not offer
    /// (flush, metadata, transactions). Untracked: a record sent through it carries
    /// no trace or pathway context and its acknowledgement is not produce progress.
    pub fn untracked(&self) -> &FutureProducer {
        &self.inner
    }

    /// Sends like [`FutureProducer::send`], continuing `parent` (a consumed
    /// message's context) or the record's own `traceparent` when there is one.
    /// The result is returned unchanged: the caller sees every success and failure.
    pub async fn send<K, P>(
        &self,
        record: FutureRecord<'_, K, P>,
        queue_timeout: impl Into<Timeout>,
        parent: Option<&MessageContext>,
    ) -> OwnedDeliveryResult
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let topic = record.topic;
        let size = record.payload.map_or(0, |p| p.to_bytes().len());
        let headers = outgoing(&self.telemetry, topic, record.headers.as_ref(), size, parent);
        // Stamped here (as librdkafka would) so that sender and receivers agree on it.
        let sent_at = record.timestamp.unwrap_or_else(now_ms);
        let result = self
            .inner
            .send(record.headers(headers).timestamp(sent_at), queue_timeout)
            .await;
        match &result {
            Ok(d) => track(
                &self.telemetry,
                topic,
                accounted_timestamp(d.timestamp, Some(sent_at)),
                Ok((d.partition, d.offset)),
                NO_HEADERS,
            ),
            Err((e, msg)) => track(
                &self.telemetry,
                topic,
                accounted_timestamp(msg.timestamp(), Some(sent_at)),
                Err((msg.partition(), e)),
                msg.headers(),
            ),
        }
        result
    }
}

/// Wraps an application's [`ProducerContext`]: delivery reports are tracked, then
/// handed to the application's own callback, every one of them.
#[derive(Debug)]
pub struct TracingProducerContext<C> {
    inner: C,
    telemetry: Telemetry,
}

impl<C> TracingProducerContext<C> {
    /// Wraps `inner`, reporting into `telemetry`.
    pub fn new(inner: C, telemetry: Telemetry) -> Self {
        Self { inner, telemetry }
    }
}

impl<C: ClientContext> ClientContext for TracingProducerContext<C> {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.inner.log(level, fac, log_message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.inner.error(error, reason);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.inner.stats_raw(statistics);
    }
}

impl<C: ProducerContext<NoCustomPartitioner>> ProducerContext for TracingProducerContext<C> {
    type DeliveryOpaque = C::DeliveryOpaque;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Self::DeliveryOpaque) {
        match result {
            Ok(m) => track(
                &self.telemetry,
                m.topic(),
                accounted_timestamp(m.timestamp(), None),
                Ok((m.partition(), m.offset())),
                NO_HEADERS,
            ),
            Err((e, m)) => track(
                &self.telemetry,
                m.topic(),
                accounted_timestamp(m.timestamp(), None),
                Err((m.partition(), e)),
                m.headers(),
            ),
        }
        self.inner.delivery(result, opaque);
    }
}

/// A [`BaseProducer`] whose sends are traced and tracked.
pub struct TracedBaseProducer<C: ProducerContext<NoCustomPartitioner> + 'static> {
    inner: BaseProducer<TracingProducerContext<C>>,
    telemetry: Telemetry,
}

impl<C: ProducerContext<NoCustomPartitioner>> std::fmt::Debug for TracedBaseProducer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracedBaseProducer").finish_non_exhaustive()
    }
}

impl<C: ProducerContext<NoCustomPartitioner>> TracedBaseProducer<C> {
    /// `producer` must have been created with a [`TracingProducerContext`] on the
    /// same telemetry (see [`crate::Sdk::base_producer`]).
    pub fn new(inner: BaseProducer<TracingProducerContext<C>>, telemetry: Telemetry) -> Self {
        Self { inner, telemetry }
    }

    /// The rdkafka producer underneath, for what the wrapper does not offer.
    /// Untracked: a record sent through it carries no trace or pathway context.
    pub fn untracked(&self) -> &BaseProducer<TracingProducerContext<C>> {
        &self.inner
    }

    /// Enqueues like [`BaseProducer::send`]. A record the client refuses at once
    /// (too large, queue full) is a failed send too; the error is returned as is.
    // The same error, record returned, as rdkafka's own `send`.
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    pub fn send<'a, K, P>(
        &self,
        record: BaseRecord<'a, K, P, C::DeliveryOpaque>,
        parent: Option<&MessageContext>,
    ) -> Result<(), (KafkaError, BaseRecord<'a, K, P, C::DeliveryOpaque>)>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let size = record.payload.map_or(0, |p| p.to_bytes().len());
        let headers = outgoing(&self.telemetry, record.topic, record.headers.as_ref(), size, parent);
        // Stamped here (as librdkafka would) so that sender and receivers agree on it.
        let sent_at = record.timestamp.unwrap_or_else(now_ms);
        let record = record.headers(headers).timestamp(sent_at);
        let result = self.inner.send(record);
        if let Err((e, r)) = &result {
            track(
                &self.telemetry,
                r.topic,
                r.timestamp,
                Err((r.partition.unwrap_or(-1), e)),
                r.headers.as_ref(),
            );
        }
        result
    }

    /// Serves delivery reports (rdkafka's `poll`): each is tracked, then
    /// handed to your context.
    pub fn poll(&self, timeout: impl Into<Timeout>) {
        self.inner.poll(timeout);
    }

    /// Waits up to `timeout` for every send in flight (blocking the caller).
    pub fn flush(&self, timeout: impl Into<Timeout>) -> rdkafka::error::KafkaResult<()> {
        use rdkafka::producer::Producer;
        self.inner.flush(timeout)
    }
}
