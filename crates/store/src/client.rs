//! Reaching the brokers of a `kafka://` log: its URL, client settings, topic
//! creation, and the few helpers every Kafka-backed part shares (the log, its
//! shards, their snapshots, the directory and the leases).

use crate::backend::StoreError;
use crate::codec;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use streamsight_core::Record;

const MAX_PARTITIONS: u32 = 10_000;

/// Where the log lives and how to reach it, from a `kafka://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaUrl {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: u32,
    /// `partitions` was written in the URL (not the default): a log topic
    /// that has another count is then a mistake, said, never used silently.
    pub partitions_given: bool,
    pub replication: i32,
    pub timeout: Duration,
    /// `mode=sharded`: each node holds only the shards Kafka's group protocol
    /// assigned it (see `shards`); `mode=replicated` (the default): every node
    /// holds everything.
    pub sharded: bool,
    /// On a sharded log, how often a shard's holder snapshots it
    /// (`snapshot_ms`, 60,000 by default; 0: never).
    pub snapshot_every: Option<Duration>,
    /// A snapshot larger than this (`max_snapshot_bytes`, 1 GiB) is not read:
    /// the shard is read from its start instead.
    pub max_snapshot_bytes: u64,
    /// `create=true`: make the log topic when it does not exist. Without it
    /// a missing log topic is an error: a misspelt name silently made a new,
    /// empty log that answered as a complete empty estate.
    pub create: bool,
    pub properties: BTreeMap<String, String>,
}

impl KafkaUrl {
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        // Each mistake names its part: one message for all of them left the
        // user to guess which (a topic with a space, `partitions=0`, `mode=shard`).
        let bad = |part: &str, why: &str| StoreError::BadUrlPart {
            url: url.to_owned(),
            part: part.to_owned(),
            why: why.to_owned(),
        };
        let rest = url
            .strip_prefix("kafka://")
            .ok_or_else(|| StoreError::BadUrl(url.to_owned()))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bootstrap, topic) = rest
            .split_once('/')
            .ok_or_else(|| bad("the log topic", "is missing: kafka://HOST:PORT[,HOST:PORT]/TOPIC"))?;
        if bootstrap.is_empty() {
            return Err(bad("the brokers", "are missing: kafka://HOST:PORT[,HOST:PORT]/TOPIC"));
        }
        if topic.is_empty() || topic.len() > 249 {
            return Err(bad(&format!("topic {topic:?}"), "must be 1 to 249 characters"));
        }
        if let Some(c) = topic
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c)))
        {
            return Err(bad(
                &format!("topic {topic:?}"),
                &format!("has {c:?}: a Kafka topic is letters, digits, '.', '_' and '-'"),
            ));
        }
        let mut parsed = KafkaUrl {
            bootstrap: bootstrap.to_owned(),
            topic: topic.to_owned(),
            partitions: 12,
            partitions_given: false,
            replication: 1,
            timeout: Duration::from_secs(10),
            sharded: false,
            snapshot_every: Some(Duration::from_secs(60)),
            max_snapshot_bytes: 1 << 30,
            create: false,
            properties: BTreeMap::new(),
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(&format!("{pair:?}"), "has no value: KEY=VALUE"))?;
            let number = |min: u64, max: u64| {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| {
                        bad(
                            &format!("{key}={value}"),
                            &format!("must be a whole number from {min} to {max}"),
                        )
                    })
            };
            match key {
                "partitions" => {
                    parsed.partitions = number(1, u64::from(MAX_PARTITIONS))? as u32;
                    parsed.partitions_given = true;
                }
                "replication" => parsed.replication = number(1, i32::MAX as u64)? as i32,
                "timeout_ms" => parsed.timeout = Duration::from_millis(number(1, u64::MAX)?),
                "snapshot_ms" => {
                    let ms = number(0, u64::MAX)?;
                    parsed.snapshot_every = (ms > 0).then(|| Duration::from_millis(ms));
                }
                "max_snapshot_bytes" => parsed.max_snapshot_bytes = number(0, u64::MAX)?,
                "create" => {
                    parsed.create = match value {
                        "true" => true,
                        "false" => false,
                        _ => return Err(bad(&format!("create={value}"), "must be true or false")),
                    }
                }
                "mode" => {
                    parsed.sharded = match value {
                        "sharded" => true,
                        "replicated" => false,
                        _ => return Err(bad(&format!("mode={value}"), "must be sharded or replicated")),
                    }
                }
                _ => {
                    parsed.properties.insert(key.to_owned(), value.to_owned());
                }
            }
        }
        Ok(parsed)
    }

    /// Where records every node needs whole (alerts, audit) go on a sharded log.
    pub fn global_topic(&self) -> String {
        format!("{}-global", self.topic)
    }

    /// Where the nodes of a sharded log say which shards they hold and where
    /// their API answers.
    pub fn nodes_topic(&self) -> String {
        format!("{}-nodes", self.topic)
    }

    /// The consumer group whose assignment says which node holds which shard.
    pub fn shards_group(&self) -> String {
        format!("{}-shards", self.topic)
    }

    /// The configuration of a producer writing the log (records or
    /// snapshots): idempotent, `acks=all`, each message failing after the
    /// URL's timeout rather than librdkafka's five minutes. Whoever holds one
    /// makes it afresh after a failed write: librdkafka bumps an idempotent
    /// producer's epoch on its own after a timeout, which a broker that never
    /// handed that epoch out may refuse for good (tansu 0.6.0 panics on it
    /// and stops serving: RELIABILITY.md, "Faults").
    pub(crate) fn log_producer(&self, max_message_bytes: usize) -> ClientConfig {
        let mut config = self.client();
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", self.timeout.as_millis().to_string())
            .set("message.max.bytes", max_message_bytes.to_string());
        config
    }

    /// A librdkafka configuration reaching the log's brokers with the URL's
    /// properties.
    pub fn client(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A name no other process or opening has: process id, time and a random seed.
pub(crate) fn node_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:016x}", std::process::id(), h.finish())
}

/// The partition count of `topic`, None when it does not exist. Never makes
/// it: the broker's auto-creation (`auto.create.topics.enable`, on by default
/// in Apache Kafka) is asked off, or a lookup would make the topic it checks.
pub fn topic_partitions(url: &KafkaUrl, topic: &str) -> Result<Option<u32>, StoreError> {
    lookup(url, topic, false)
}

/// A client context that keeps what librdkafka last said went wrong: a
/// failed request says only "transport failure", where the error callback
/// had said why (authentication failed, a certificate refused).
#[derive(Default)]
struct Said(Mutex<Option<String>>);

impl rdkafka::ClientContext for Said {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(%error, reason, "kafka client error");
        // "All brokers are down" follows the cause; the cause is kept.
        let consequence = error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::AllBrokersDown);
        let mut said = lock(&self.0);
        if !consequence || said.is_none() {
            *said = Some(reason.chars().take(512).collect());
        }
    }
}

impl rdkafka::producer::ProducerContext for Said {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::producer::DeliveryResult<'_>, (): Self::DeliveryOpaque) {}
}

/// The partition count of `topic`; with `auto_create`, a broker that makes
/// topics when asked of them does so now (with its own partition count).
/// A log that cannot be reached is an error naming its brokers and what
/// they said (a wrong password: "SASL authentication error: …").
fn lookup(url: &KafkaUrl, topic: &str, auto_create: bool) -> Result<Option<u32>, StoreError> {
    // A producer: its poll serves the error callback (an admin client's
    // thread does not).
    let client: rdkafka::producer::BaseProducer<Said> = url
        .client()
        .set("allow.auto.create.topics", auto_create.to_string())
        .create_with_context(Said::default())
        .map_err(kafka)?;
    use rdkafka::producer::Producer as _;
    let metadata = client.client().fetch_metadata(Some(topic), url.timeout).map_err(|e| {
        for _ in 0..10 {
            client.poll(Duration::from_millis(20));
        }
        let said = lock(&client.context().0).clone();
        StoreError::Kafka(match said {
            Some(why) => format!("the log's brokers {} did not answer ({e}): {why}", url.bootstrap),
            None => format!("the log's brokers {} did not answer: {e}", url.bootstrap),
        })
    })?;
    Ok(metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().len() as u32)
        .filter(|n| *n > 0))
}

/// The partition count of `topic`, created with `partitions` (and the URL's
/// replication) when it is missing.
pub fn ensure_topic(url: &KafkaUrl, topic: &str, partitions: u32) -> Result<u32, StoreError> {
    ensure_topic_with(url, topic, partitions, &[])
}

/// The same, with topic configuration (`cleanup.policy`, …) when it is created.
pub fn ensure_topic_with(
    url: &KafkaUrl,
    topic: &str,
    partitions: u32,
    config: &[(&str, &str)],
) -> Result<u32, StoreError> {
    if let Some(n) = topic_partitions(url, topic)? {
        return Ok(n);
    }
    // Brokers without CreateTopics (librdkafka's mock cluster: the request
    // waits out its timeout) make topics only when asked of them: once that
    // worked for a bootstrap, its next topics are made so at once.
    static ASK_TO_CREATE: Mutex<std::collections::BTreeSet<String>> = Mutex::new(std::collections::BTreeSet::new());
    if lock(&ASK_TO_CREATE).contains(&url.bootstrap)
        && let Some(n) = lookup(url, topic, true)?
    {
        return Ok(n);
    }
    let admin: AdminClient<DefaultClientContext> = url.client().create().map_err(kafka)?;
    let new = config.iter().fold(
        NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(url.replication)),
        |new, (k, v)| new.set(k, v),
    );
    let options = AdminOptions::new()
        .operation_timeout(Some(url.timeout))
        .request_timeout(Some(url.timeout));
    // The admin API is async; its callers are not, and may run inside a
    // runtime, so the request gets a thread and a runtime of its own.
    let created = std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .map_err(|e| StoreError::Kafka(e.to_string()))?;
            rt.block_on(admin.create_topics([&new], &options)).map_err(kafka)
        })
        .join()
        .unwrap_or_else(|_| Err(StoreError::Kafka("topic creation panicked".into())))
    });
    let created = match created {
        Err(StoreError::Kafka(why)) if why.contains("OperationTimedOut") || why.contains("nsupported") => {
            if let Some(n) = lookup(url, topic, true)? {
                tracing::warn!(
                    topic,
                    partitions = n,
                    "the broker answered no CreateTopics; it made the topic when asked of it, with its own partition count"
                );
                lock(&ASK_TO_CREATE).insert(url.bootstrap.clone());
                return Ok(n);
            }
            return Err(StoreError::Kafka(format!("creating topic {topic}: {why}")));
        }
        other => other?,
    };
    for result in created {
        match result {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => return Err(StoreError::Kafka(format!("creating topic {name}: {code}"))),
        }
    }
    tracing::info!(topic, partitions, "topic created");
    let deadline = Instant::now() + url.timeout;
    loop {
        if let Some(n) = topic_partitions(url, topic)? {
            return Ok(n);
        }
        if Instant::now() > deadline {
            return Err(StoreError::Kafka(format!(
                "topic {topic} was created but has no partitions yet"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn kafka(e: KafkaError) -> StoreError {
    StoreError::Kafka(e.to_string())
}

/// The records of a log message; none (and a warning) when it is corrupt.
pub(crate) fn decode(m: &rdkafka::message::BorrowedMessage<'_>) -> Vec<Record> {
    codec::decode(m.payload().unwrap_or_default()).unwrap_or_else(|why| {
        tracing::warn!(partition = m.partition(), offset = m.offset(), %why, "skipped a corrupt log message");
        Vec::new()
    })
}
