//! Consumers: every message's trace and pathway context is extracted and a
//! checkpoint recorded; commits are tracked only when the broker accepted them,
//! with the offsets it accepted. Automatic commits arrive in the commit callback
//! (served while the consumer polls); manual ones go through the wrappers'
//! `commit` methods: librdkafka reports a manual asynchronous commit to
//! nobody, so those are made, in order, on a committer thread that tracks what
//! the broker accepted.

use crate::checkpoint::checkpoint;
use crate::context::{MessageContext, TraceContext, extract, trace_id_of};
use crate::delivery::Outcome;
use crate::telemetry::{Telemetry, now_ms};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::util::Timeout;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

type CommitHook = Box<dyn Fn(&KafkaResult<()>, &TopicPartitionList) + Send + Sync>;

/// The consumer context that tracks commits. rdkafka hands rebalance callbacks a
/// consumer typed by this context, so an application's own context cannot be
/// wrapped; its commit callback can be given as a hook.
pub struct TracingConsumerContext {
    telemetry: Telemetry,
    group: Arc<str>,
    on_commit: Option<CommitHook>,
}

impl std::fmt::Debug for TracingConsumerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingConsumerContext")
            .field("group", &&*self.group)
            .finish_non_exhaustive()
    }
}

impl TracingConsumerContext {
    /// A context that tracks `group`'s commits and rebalances into `telemetry`.
    pub fn new(telemetry: Telemetry, group: impl Into<String>) -> Self {
        let group: String = group.into();
        Self {
            telemetry,
            group: Arc::from(group),
            on_commit: None,
        }
    }

    /// Also calls `hook` with every commit result.
    pub fn with_commit_hook(
        mut self,
        hook: impl Fn(&KafkaResult<()>, &TopicPartitionList) + Send + Sync + 'static,
    ) -> Self {
        self.on_commit = Some(Box::new(hook));
        self
    }

    /// Extracts the message's contexts, records the consume checkpoint and counts
    /// the record for drop accounting.
    pub fn on_message(&self, msg: &BorrowedMessage<'_>) -> MessageContext {
        self.telemetry.consumed();
        let timestamp = msg.timestamp().to_millis().unwrap_or_else(now_ms);
        self.telemetry
            .received(&self.group, msg.topic(), msg.partition(), msg.offset(), timestamp);
        let (trace, path) = extract(msg.headers());
        let tags: [&[&str]; 4] = [
            &["direction:in"],
            &["group:", &self.group],
            &["topic:", msg.topic()],
            &["type:kafka"],
        ];
        let size = msg.payload().map_or(0, <[u8]>::len);
        let pathway = checkpoint(&self.telemetry, path, &tags, size, now_ms());
        MessageContext {
            trace: trace.map_or_else(TraceContext::new_root, |t| t.child()),
            pathway,
        }
    }
}

impl TracingConsumerContext {
    /// The consumer group this context counts for.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Records what the application did with `msg`: a record never marked counts
    /// as processed. A failed or dead-lettered record's trace id is kept.
    pub fn mark(&self, msg: &BorrowedMessage<'_>, outcome: Outcome) {
        if outcome == Outcome::Processed {
            return;
        }
        let timestamp = msg.timestamp().to_millis().unwrap_or_else(now_ms);
        let trace_id = trace_id_of(msg.headers());
        self.telemetry
            .outcome(&self.group, msg.topic(), msg.partition(), timestamp, outcome, trace_id);
    }

    /// Tracks the offsets of a commit that succeeded.
    fn track(&self, offsets: &TopicPartitionList) {
        for e in offsets.elements() {
            if let (Offset::Offset(o), Ok(())) = (e.offset(), e.error())
                && o >= 0
                && e.partition() >= 0
            {
                self.telemetry.committed(&self.group, e.topic(), e.partition(), o);
            }
        }
    }
}

/// Commits with tracking. librdkafka reports a synchronous commit only to its
/// caller, and a manual asynchronous one to nobody (only automatic commits reach
/// the commit callback). So a synchronous commit is tracked here once it returns,
/// and an asynchronous one is handed to a committer thread that commits
/// synchronously, in order, and tracks what succeeded: the caller still returns at
/// once.
struct Committer<C: Consumer<TracingConsumerContext> + Send + Sync + 'static> {
    consumer: Arc<C>,
    queue: OnceLock<Mutex<mpsc::Sender<TopicPartitionList>>>,
}

impl<C: Consumer<TracingConsumerContext> + Send + Sync + 'static> Committer<C> {
    fn new(consumer: C) -> Self {
        Self {
            consumer: Arc::new(consumer),
            queue: OnceLock::new(),
        }
    }

    fn commit(&self, offsets: &TopicPartitionList, mode: CommitMode) -> KafkaResult<()> {
        match mode {
            CommitMode::Sync => {
                self.consumer.commit(offsets, CommitMode::Sync)?;
                self.consumer.context().track(offsets);
                Ok(())
            }
            CommitMode::Async => {
                let queue = self.queue.get_or_init(|| Mutex::new(self.spawn()));
                let sent = queue.lock().unwrap_or_else(|p| p.into_inner()).send(offsets.clone());
                // The thread is gone only if it could not start: commit without tracking.
                if sent.is_err() {
                    self.consumer.commit(offsets, CommitMode::Async)?;
                }
                Ok(())
            }
        }
    }

    fn spawn(&self) -> mpsc::Sender<TopicPartitionList> {
        let (tx, rx) = mpsc::channel::<TopicPartitionList>();
        let consumer = Arc::clone(&self.consumer);
        let started = std::thread::Builder::new()
            .name("streamsight-commit".into())
            .spawn(move || {
                for offsets in rx {
                    if consumer.commit(&offsets, CommitMode::Sync).is_ok() {
                        consumer.context().track(&offsets);
                    }
                }
            });
        if let Err(e) = started {
            tracing::error!(error = %e, "streamsight-sdk: cannot start the committer thread; async commits are not tracked");
        }
        tx
    }
}

/// The offsets that commit `msg`: the next one to read.
fn offsets_after(msg: &BorrowedMessage<'_>) -> KafkaResult<TopicPartitionList> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(msg.topic(), msg.partition(), Offset::Offset(msg.offset() + 1))?;
    Ok(tpl)
}

impl ClientContext for TracingConsumerContext {}

impl ConsumerContext for TracingConsumerContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            let revoked = partitions
                .elements()
                .into_iter()
                .map(|e| (e.topic().to_owned(), e.partition()));
            self.telemetry.revoked(&self.group, revoked);
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        if result.is_ok() {
            self.track(offsets);
        }
        if let Some(hook) = &self.on_commit {
            hook(&result, offsets);
        }
    }
}

/// What both traced consumers offer, written once: the two differ only in how
/// messages are received (`recv` or `poll`).
macro_rules! traced_consumer {
    ($name:ident, $consumer:ident, $what:literal) => {
        #[doc = $what]
        pub struct $name {
            inner: Committer<$consumer<TracingConsumerContext>>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }

        impl $name {
            /// Wraps a consumer made with a [`TracingConsumerContext`].
            pub fn new(inner: $consumer<TracingConsumerContext>) -> Self {
                Self {
                    inner: Committer::new(inner),
                }
            }

            /// Records what the application did with `msg` (unmarked = processed).
            pub fn mark(&self, msg: &BorrowedMessage<'_>, outcome: Outcome) {
                self.inner.consumer.context().mark(msg, outcome);
            }

            /// Commits `msg` (the next offset to read), tracked once the broker accepted it.
            pub fn commit_message(&self, msg: &BorrowedMessage<'_>, mode: CommitMode) -> KafkaResult<()> {
                self.inner.commit(&offsets_after(msg)?, mode)
            }

            /// Commits `offsets`, tracked once the broker accepted them.
            pub fn commit(&self, offsets: &TopicPartitionList, mode: CommitMode) -> KafkaResult<()> {
                self.inner.commit(offsets, mode)
            }

            /// Commits the consumer's current position (rdkafka's
            /// `commit_consumer_state`), tracked once the broker accepted it.
            pub fn commit_consumer_state(&self, mode: CommitMode) -> KafkaResult<()> {
                let position = self.inner.consumer.position()?;
                self.inner.commit(&position, mode)
            }

            /// The offsets the consumer will read next, per assigned partition.
            pub fn position(&self) -> KafkaResult<TopicPartitionList> {
                self.inner.consumer.position()
            }

            /// Moves the consumer to `offset` of `topic`/`partition` (what it
            /// skips or reads again shows in lag once committed).
            pub fn seek(
                &self,
                topic: &str,
                partition: i32,
                offset: Offset,
                timeout: impl Into<rdkafka::util::Timeout>,
            ) -> KafkaResult<()> {
                self.inner.consumer.seek(topic, partition, offset, timeout)
            }

            /// Subscribes to `topics` (a group subscription).
            pub fn subscribe(&self, topics: &[&str]) -> KafkaResult<()> {
                self.inner.consumer.subscribe(topics)
            }

            /// Assigns partitions by hand.
            pub fn assign(&self, assignment: &TopicPartitionList) -> KafkaResult<()> {
                self.inner.consumer.assign(assignment)
            }

            /// The context: the SDK's telemetry and the group, for a dead-letter queue.
            pub fn context(&self) -> &TracingConsumerContext {
                self.inner.consumer.context()
            }

            /// The rdkafka consumer underneath, for what the wrapper does not offer
            /// (pause, metadata, watermarks). Untracked: a commit made through it is
            /// invisible to lag and drop accounting, so commit through the wrapper.
            pub fn untracked(&self) -> &$consumer<TracingConsumerContext> {
                &self.inner.consumer
            }
        }
    };
}

traced_consumer!(
    TracedStreamConsumer,
    StreamConsumer,
    "A [`StreamConsumer`] whose messages come with their context."
);
traced_consumer!(
    TracedBaseConsumer,
    BaseConsumer,
    "A [`BaseConsumer`] whose messages come with their context."
);

impl TracedStreamConsumer {
    /// The next message, with its context: the continued trace and the
    /// pathway after the consume checkpoint (pass it as `parent` to a
    /// downstream send). Errors are rdkafka's, unchanged.
    pub async fn recv(&self) -> Result<(BorrowedMessage<'_>, MessageContext), KafkaError> {
        let msg = self.inner.consumer.recv().await?;
        let ctx = self.inner.consumer.context().on_message(&msg);
        Ok((msg, ctx))
    }
}

impl TracedBaseConsumer {
    /// The next message within `timeout`, with its context, as
    /// [`TracedStreamConsumer::recv`]; `None` when none came.
    pub fn poll(&self, timeout: impl Into<Timeout>) -> Option<KafkaResult<(BorrowedMessage<'_>, MessageContext)>> {
        let msg = self.inner.consumer.poll(timeout)?;
        Some(msg.map(|m| {
            let ctx = self.inner.consumer.context().on_message(&m);
            (m, ctx)
        }))
    }
}
