//! Who holds which shard of a sharded log, and where its API answers: each node
//! announces itself every second on a compacted topic beside the log
//! (`TOPIC-nodes`, keyed by node) and reads everyone's announcements. A node
//! announces a shard only once it has caught up with it. An announcement older
//! than [`STALE_AFTER_MS`] (by the announcer's clock: nodes' clocks must agree
//! within a second or so, as NTP keeps them) is a node gone.

use crate::backend::StoreError;
use crate::client::{KafkaUrl, ensure_topic_with, kafka, lock};
use crate::pause::PauseWatch;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// An announcement older than this is of a node that is gone.
pub const STALE_AFTER_MS: i64 = 5_000;
/// Announcements larger than this are ignored (10,000 shards fit in ~60 KB).
const MAX_ANNOUNCEMENT_BYTES: usize = 128 << 10;
const MAX_API_URL: usize = 512;

/// What a node says of itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Announcement {
    pub node: String,
    /// Where its API answers, e.g. `http://10.0.0.5:7411`.
    pub api: String,
    /// Shards it holds and has caught up with.
    pub held: BTreeSet<u32>,
    /// When it said so (ms since the epoch, its clock).
    pub at_ms: i64,
    /// SHA-256 (hex) of the key it presents to the other nodes' APIs when it
    /// asks them itself (the alert rules' evaluator): they take it for a
    /// read-only peer of this log while the announcement is fresh.
    #[serde(default)]
    pub peer_key_sha256: String,
    /// False for a node of a replicated log (it announces only so that a
    /// node of the other mode is refused: it holds no shard and answers for
    /// none). Written only when false, so that a sharded node's announcement
    /// reads as before.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub sharded: bool,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if hands a reference
fn is_true(b: &bool) -> bool {
    *b
}

impl Announcement {
    /// Parses one from the nodes topic; None (and a warning) for anything malformed.
    fn parse(bytes: &[u8], shards: u32) -> Option<Self> {
        if bytes.len() > MAX_ANNOUNCEMENT_BYTES {
            tracing::warn!(bytes = bytes.len(), "ignored an oversized node announcement");
            return None;
        }
        let a: Announcement = serde_json::from_slice(bytes)
            .inspect_err(|e| tracing::warn!(error = %e, "ignored a malformed node announcement"))
            .ok()?;
        let api_ok = a.api.len() <= MAX_API_URL
            && (a.api.starts_with("http://") || a.api.starts_with("https://") || (!a.sharded && a.api.is_empty()));
        let key_ok = a.peer_key_sha256.is_empty()
            || (a.peer_key_sha256.len() == 64 && a.peer_key_sha256.bytes().all(|b| b.is_ascii_hexdigit()));
        let ok = api_ok
            && key_ok
            && a.node.len() <= 256
            && a.held.iter().all(|s| *s < shards)
            && (a.sharded || a.held.is_empty());
        if !ok {
            tracing::warn!(node = %a.node.chars().take(64).collect::<String>(), "ignored an invalid node announcement");
        }
        ok.then_some(a)
    }

    fn fresh(&self, now_ms: i64) -> bool {
        (now_ms - self.at_ms).abs() <= STALE_AFTER_MS
    }
}

/// Who answers for one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// This node.
    Local,
    /// Another node, at its API address.
    Peer { node: String, api: String },
}

#[derive(Debug)]
struct Inner {
    node: String,
    api: String,
    sharded: bool,
    peer_key_sha256: String,
    shards: u32,
    held: Mutex<BTreeSet<u32>>,
    peers: Mutex<BTreeMap<String, Announcement>>,
    changed: AtomicBool,
    /// When this node's own announcement last came back from the log (at
    /// first, when it joined): the log is out of reach when that gets old.
    echoed_ms: std::sync::atomic::AtomicI64,
    /// The newest `at_ms` of this node's own announcements read back.
    echoed_sent_ms: std::sync::atomic::AtomicI64,
    /// The pauses of this process after which `held` was emptied.
    pauses_acted_on: std::sync::atomic::AtomicU64,
}

impl Inner {
    /// The shards held and caught up with; none while this node may have
    /// just resumed from a pause (see `pause`), nor once the watch has woken
    /// until `held` is emptied of what was held before it.
    fn held_now(&self) -> BTreeSet<u32> {
        if !PauseWatch::get().trusts(self.pauses_acted_on.load(Ordering::Acquire)) {
            return BTreeSet::new();
        }
        lock(&self.held).clone()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// This node's entry in the directory, and its reading of everyone's; leaving
/// (dropping it) says so at once instead of after [`STALE_AFTER_MS`].
#[derive(Debug)]
pub struct Directory {
    inner: Arc<Inner>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Directory {
    /// Joins the directory of the log at `url` as a node whose API answers at
    /// `api` (on a replicated log it may be empty: nobody asks it). Refused,
    /// once the nodes topic is read to its end, when a live node of the other
    /// mode shares the log, or (sharded) a live node advertises the same API;
    /// warns when the log has fewer partitions than its nodes.
    pub fn join(url: &KafkaUrl, api: String, peer_key_sha256: String) -> Result<Self, StoreError> {
        let shards = crate::client::ensure_topic(url, &url.topic, url.partitions)?;
        let node = crate::client::node_name();
        let topic = url.nodes_topic();
        ensure_topic_with(url, &topic, 1, &[("cleanup.policy", "compact")])?;
        let producer: BaseProducer = url.client().set("message.timeout.ms", "5000").create().map_err(kafka)?;
        let consumer: BaseConsumer = url
            .client()
            .set("group.id", "streamsight-directory")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(kafka)?;
        let mut start = TopicPartitionList::new();
        start
            .add_partition_offset(&topic, 0, Offset::Beginning)
            .map_err(kafka)?;
        consumer.assign(&start).map_err(kafka)?;
        let peers = catch_up(&consumer, &topic, shards, url.timeout)?;
        let peers = refuse_disagreeing(url, &api, &consumer, shards, peers)?;
        let live_sharded = peers.values().filter(|a| a.sharded && a.fresh(now_ms())).count();
        if url.sharded && live_sharded + 1 > shards as usize {
            tracing::warn!(
                topic = %url.topic,
                partitions = shards,
                nodes = live_sharded + 1,
                "the log has fewer partitions than the nodes sharing it: at least one node holds no shard and only \
                 asks the others (a log's partitions are its shards; give it more, or run fewer nodes)"
            );
        }
        let inner = Arc::new(Inner {
            node,
            api,
            sharded: url.sharded,
            peer_key_sha256,
            shards,
            held: Mutex::new(BTreeSet::new()),
            peers: Mutex::new(peers),
            changed: AtomicBool::new(true),
            echoed_ms: std::sync::atomic::AtomicI64::new(now_ms()),
            echoed_sent_ms: std::sync::atomic::AtomicI64::new(0),
            pauses_acted_on: std::sync::atomic::AtomicU64::new(PauseWatch::get().pauses()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (inner, stop) = (inner.clone(), stop.clone());
            std::thread::Builder::new()
                .name("streamsight-directory".into())
                .spawn(move || run(&inner, &stop, &producer, &consumer, &topic))
                .map_err(|e| StoreError::Kafka(e.to_string()))?
        };
        Ok(Self {
            inner,
            stop,
            thread: Some(thread),
        })
    }

    /// When the newest announcement of this node that came back from the
    /// log was made (unix ms, by this node's clock): the log took an append
    /// made then, and served it to a read.
    pub fn echoed_sent_at_ms(&self) -> i64 {
        self.inner.echoed_sent_ms.load(Ordering::Acquire)
    }

    /// How long this node's announcements have not come back from the log,
    /// once that is longer than a peer waits before taking a node for gone:
    /// then this node cannot reach the log, and the others no longer ask it.
    pub fn unreachable_for(&self) -> Option<Duration> {
        let age = now_ms().saturating_sub(self.inner.echoed_ms.load(Ordering::Acquire));
        (age > STALE_AFTER_MS).then(|| Duration::from_millis(age as u64))
    }

    pub fn node(&self) -> &str {
        &self.inner.node
    }

    pub fn shards(&self) -> u32 {
        self.inner.shards
    }

    /// Changes the shards this node holds and has caught up with; announced at once.
    pub fn update_held(&self, change: impl FnOnce(&mut BTreeSet<u32>)) {
        change(&mut lock(&self.inner.held));
        self.inner.changed.store(true, Ordering::Release);
    }

    /// The shards this node holds and has caught up with; none while it may
    /// have just resumed from a pause (see `pause`).
    pub fn held(&self) -> BTreeSet<u32> {
        self.inner.held_now()
    }

    /// The live nodes (this one included) with the SHA-256 of the peer key
    /// each announced, for those that announced one.
    pub fn peer_keys(&self) -> Vec<(String, String)> {
        let this = (self.inner.node.clone(), self.inner.peer_key_sha256.clone());
        let peers = self.peers().into_iter().map(|a| (a.node, a.peer_key_sha256));
        std::iter::once(this)
            .chain(peers)
            .filter(|(_, sha)| !sha.is_empty())
            .collect()
    }

    /// Every other node whose announcement is fresh.
    pub fn peers(&self) -> Vec<Announcement> {
        let now = now_ms();
        lock(&self.inner.peers)
            .values()
            .filter(|a| a.fresh(now) && a.sharded && a.node != self.inner.node)
            .cloned()
            .collect()
    }

    /// Who answers for each shard, by index: this node for those it holds, else
    /// the freshest node that says it holds it; None when nobody does.
    pub fn owners(&self) -> Vec<Option<Owner>> {
        let mut owners: Vec<Option<(i64, Owner)>> = vec![None; self.inner.shards as usize];
        for a in self.peers() {
            for &s in &a.held {
                let slot = &mut owners[s as usize];
                if slot.as_ref().is_none_or(|(at, _)| a.at_ms > *at) {
                    let peer = Owner::Peer {
                        node: a.node.clone(),
                        api: a.api.clone(),
                    };
                    *slot = Some((a.at_ms, peer));
                }
            }
        }
        for s in self.held() {
            owners[s as usize] = Some((i64::MAX, Owner::Local));
        }
        owners.into_iter().map(|o| o.map(|(_, owner)| owner)).collect()
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(inner: &Inner, stop: &AtomicBool, producer: &BaseProducer, consumer: &BaseConsumer, topic: &str) {
    let mut announced = std::time::Instant::now() - ANNOUNCE_EVERY;
    let watch = PauseWatch::get();
    while !stop.load(Ordering::Acquire) {
        // After a pause, the shards held are the follower's to gain again
        // (it lets them all go): none is served or announced from before it.
        let pauses = watch.pauses();
        if pauses != inner.pauses_acted_on.load(Ordering::Acquire) {
            lock(&inner.held).clear();
            inner.pauses_acted_on.store(pauses, Ordering::Release);
            inner.changed.store(true, Ordering::Release);
        }
        if announced.elapsed() >= ANNOUNCE_EVERY || inner.changed.swap(false, Ordering::AcqRel) {
            let a = Announcement {
                node: inner.node.clone(),
                api: inner.api.clone(),
                held: inner.held_now(),
                at_ms: now_ms(),
                peer_key_sha256: inner.peer_key_sha256.clone(),
                sharded: inner.sharded,
            };
            let body = serde_json::to_vec(&a).unwrap_or_default();
            if let Err((e, _)) = producer.send(BaseRecord::to(topic).key(&inner.node).payload(&body)) {
                tracing::warn!(error = %e, "node announcement not sent");
            }
            announced = std::time::Instant::now();
        }
        producer.poll(Duration::ZERO);
        match read(consumer, inner.shards, Duration::from_millis(100)) {
            Some((node, None)) => {
                lock(&inner.peers).remove(&node);
            }
            Some((node, Some(a))) => {
                if node == inner.node {
                    inner.echoed_ms.fetch_max(now_ms(), Ordering::AcqRel);
                    inner.echoed_sent_ms.fetch_max(a.at_ms, Ordering::AcqRel);
                }
                lock(&inner.peers).insert(node, a);
            }
            None => {}
        }
    }
    // Leaving: a tombstone, so that others stop asking at once.
    let _ = producer.send(BaseRecord::<_, [u8]>::to(topic).key(&inner.node));
    let _ = producer.flush(Duration::from_secs(2));
}

/// One message of the nodes topic: a node and its announcement (None: a
/// tombstone, the node left). None when nothing valid came within `wait`.
fn read(consumer: &BaseConsumer, shards: u32, wait: Duration) -> Option<(String, Option<Announcement>)> {
    match consumer.poll(wait)? {
        Ok(m) => {
            let node = String::from_utf8_lossy(m.key()?).into_owned();
            match m.payload() {
                None => Some((node, None)),
                Some(body) => {
                    let a = Announcement::parse(body, shards).filter(|a| a.node == node)?;
                    Some((node, Some(a)))
                }
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "reading the nodes topic");
            None
        }
    }
}

/// Every node's last announcement, read to the end the nodes topic had when
/// asked (within `timeout`): a joining node knows who is live before it says
/// anything.
fn catch_up(
    consumer: &BaseConsumer,
    topic: &str,
    shards: u32,
    timeout: Duration,
) -> Result<BTreeMap<String, Announcement>, StoreError> {
    let (_, end) = consumer.fetch_watermarks(topic, 0, timeout).map_err(kafka)?;
    let deadline = std::time::Instant::now() + timeout;
    let mut peers = BTreeMap::new();
    loop {
        let position = consumer
            .position()
            .ok()
            .and_then(|p| p.find_partition(topic, 0).map(|e| e.offset()));
        if matches!(position, Some(Offset::Offset(at)) if at >= end) || end == 0 {
            return Ok(peers);
        }
        if std::time::Instant::now() > deadline {
            return Err(StoreError::Kafka(format!(
                "reading the nodes topic {topic} to its end ({end}) took longer than the URL's timeout"
            )));
        }
        match read(consumer, shards, Duration::from_millis(100)) {
            Some((node, None)) => {
                peers.remove(&node);
            }
            Some((node, Some(a))) => {
                peers.insert(node, a);
            }
            None => {}
        }
    }
}

/// What would make this node disagree with a live one: one of the other mode,
/// or (sharded) one advertising the same API address.
fn disagreement(url: &KafkaUrl, api: &str, a: &Announcement) -> Option<String> {
    let mode = |sharded: bool| {
        if sharded {
            "mode=sharded"
        } else {
            "mode=replicated (the default)"
        }
    };
    if a.sharded != url.sharded {
        return Some(format!(
            "node {} runs {} on it, and this node's URL says {}: every node of one log runs one mode",
            a.node,
            mode(a.sharded),
            mode(url.sharded)
        ));
    }
    (url.sharded && a.api == api).then(|| {
        format!(
            "node {} advertises the same API address, {api}: each node needs its own (advertise_api), or the \
             others ask one node for both nodes' shards",
            a.node
        )
    })
}

/// The announcements read, once no live node disagrees with this one. A
/// disagreeing announcement may be a node just killed (a restart with the
/// same address): it is live only if it announces again within
/// [`STALE_AFTER_MS`]; if it goes stale instead, the join goes on.
fn refuse_disagreeing(
    url: &KafkaUrl,
    api: &str,
    consumer: &BaseConsumer,
    shards: u32,
    mut peers: BTreeMap<String, Announcement>,
) -> Result<BTreeMap<String, Announcement>, StoreError> {
    let refused = |why: String| StoreError::JoinRefused {
        topic: url.topic.clone(),
        why,
    };
    let suspects: BTreeMap<String, i64> = peers
        .values()
        .filter(|a| a.fresh(now_ms()) && disagreement(url, api, a).is_some())
        .map(|a| (a.node.clone(), a.at_ms))
        .collect();
    if suspects.is_empty() {
        return Ok(peers);
    }
    let started = std::time::Instant::now();
    let wait = Duration::from_millis(STALE_AFTER_MS as u64 + ANNOUNCE_EVERY.as_millis() as u64);
    while started.elapsed() < wait {
        match read(consumer, shards, Duration::from_millis(100)) {
            Some((node, None)) => {
                peers.remove(&node);
            }
            Some((node, Some(a))) => {
                if suspects.get(&node).is_some_and(|seen| a.at_ms > *seen)
                    && let Some(why) = disagreement(url, api, &a)
                {
                    return Err(refused(why));
                }
                peers.insert(node, a);
            }
            None => {}
        }
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_are_bounded_and_checked() {
        let good = br#"{"node":"a","api":"http://10.0.0.1:7411","held":[0,3],"at_ms":5}"#;
        assert_eq!(Announcement::parse(good, 4).unwrap().held, BTreeSet::from([0, 3]));
        for bad in [
            &br#"{"node":"a","api":"http://x","held":[4],"at_ms":5}"#[..],
            br#"{"node":"a","api":"ftp://x","held":[],"at_ms":5}"#,
            br#"{"node":"a","api":"http://x","held":[],"at_ms":5,"more":1}"#,
            br#"not json"#,
            br#"{"node":"a","api":"http://x","held":[],"at_ms":5,"peer_key_sha256":"zz"}"#,
        ] {
            assert_eq!(Announcement::parse(bad, 4), None);
        }
        let huge = vec![b' '; MAX_ANNOUNCEMENT_BYTES + 1];
        assert_eq!(Announcement::parse(&huge, 4), None);
    }

    #[test]
    fn an_old_announcement_is_a_node_gone() {
        let a = Announcement {
            node: "a".into(),
            api: "http://x".into(),
            held: BTreeSet::new(),
            at_ms: 10_000,
            peer_key_sha256: String::new(),
            sharded: true,
        };
        assert!(a.fresh(10_000 + STALE_AFTER_MS));
        assert!(!a.fresh(10_001 + STALE_AFTER_MS));
    }

    #[test]
    fn a_node_disagrees_with_one_of_the_other_mode_or_with_its_address() {
        let sharded = KafkaUrl::parse("kafka://a:9092/log?mode=sharded").unwrap();
        let replicated = KafkaUrl::parse("kafka://a:9092/log").unwrap();
        let peer = |api: &str, sharded: bool| Announcement {
            node: "n1".into(),
            api: api.into(),
            held: BTreeSet::new(),
            at_ms: 0,
            peer_key_sha256: String::new(),
            sharded,
        };
        assert_eq!(disagreement(&sharded, "http://b:1", &peer("http://a:1", true)), None);
        let same = disagreement(&sharded, "http://a:1", &peer("http://a:1", true)).unwrap();
        assert!(
            same.contains("node n1 advertises the same API address, http://a:1"),
            "{same}"
        );
        let mode = disagreement(&replicated, "", &peer("http://a:1", true)).unwrap();
        assert!(
            mode.contains("runs mode=sharded on it, and this node's URL says mode=replicated"),
            "{mode}"
        );
        assert!(disagreement(&sharded, "http://b:1", &peer("", false)).is_some());
        // Replicated nodes share no address: nobody asks them.
        assert_eq!(disagreement(&replicated, "", &peer("", false)), None);
        // A replicated node's announcement reads back; one holding shards does not.
        let body = serde_json::to_vec(&peer("", false)).unwrap();
        assert!(String::from_utf8_lossy(&body).contains("\"sharded\":false"));
        assert!(Announcement::parse(&body, 4).is_some_and(|a| !a.sharded));
        let holding = br#"{"node":"a","api":"","held":[1],"at_ms":5,"sharded":false}"#;
        assert_eq!(Announcement::parse(holding, 4), None);
        let sharded_body = serde_json::to_vec(&peer("http://a:1", true)).unwrap();
        assert!(
            !String::from_utf8_lossy(&sharded_body).contains("sharded"),
            "read as before by older nodes"
        );
    }
}
