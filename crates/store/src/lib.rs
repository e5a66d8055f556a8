//! Durable storage of what the collector accepted.
//!
//! The store keeps the log ([`Record`], a core type) in arrival order: every
//! observation handed to the engine, every rejection, every pathway point and
//! delivery fact. The collector's state is a function of that log, so a restart
//! replays it (within retention). A store only serializes and reads batches: what
//! one writer batch accepted is appended as one unit. One trait, implementations
//! picked by URL scheme: `sqlite://PATH` (the default, durable), `kafka://` (the
//! log in a Kafka topic, shared by collectors) and `memory://` (tests).

use std::path::PathBuf;
pub use streamsight_core::Record;

mod backend;
pub mod client;
pub mod codec;
pub mod directory;
pub mod kafka;
pub mod leases;
pub mod pause;
pub mod shards;
pub mod snapshots;
mod sqlite;

pub use backend::{Follow, Followed, MemoryStore, Scanned, Store, StoreError};
pub use client::KafkaUrl;
pub use kafka::{KafkaFollow, KafkaStore};
pub use sqlite::SqliteStore;
/// Opens the store a URL names: `sqlite://PATH`, `kafka://HOSTS/TOPIC` or `memory://`.
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            return Err(StoreError::BadUrl(url.to_owned()));
        }
        return Ok(Box::new(SqliteStore::open(PathBuf::from(path))?));
    }
    if url.starts_with("kafka://") {
        return Ok(Box::new(KafkaStore::open(KafkaUrl::parse(url)?)?));
    }
    if url == "memory://" {
        return Ok(Box::new(MemoryStore));
    }
    Err(StoreError::BadUrl(url.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_core::Millis;
    use streamsight_core::delivery::Fact;
    use streamsight_core::pathway::PathwayPoint;
    use streamsight_core::shard::ShardState;
    use streamsight_core::sketch::Sketch;
    use streamsight_core::{EndOffsetSource, Observation, OwnedObservation, PartitionRef, RejectReason};

    fn p(partition: i32) -> PartitionRef<'static> {
        PartitionRef {
            cluster: "c",
            topic: "t",
            partition,
        }
    }

    fn observation(at: i64, o: Observation<'_>) -> Record {
        Record::Observation {
            at: Millis(at),
            observation: o.to_owned(),
        }
    }

    fn records() -> Vec<Record> {
        vec![
            observation(
                1,
                Observation::Produced {
                    partition: p(0),
                    offset: 9,
                },
            ),
            Record::Rejected {
                at: Millis(2),
                reason: RejectReason::NegativePartition,
            },
            Record::Pathway {
                at: Millis(3),
                point: Box::new(PathwayPoint {
                    bucket_start_ms: 0,
                    bucket_ms: 10_000,
                    hash: u64::MAX,
                    parent_hash: 7,
                    service: "svc".into(),
                    env: "prod".into(),
                    edge_tags: vec!["topic:t".into()],
                    edge_latency: Sketch::from_bins(vec![(0.5, 2.0)]),
                    pathway_latency: Sketch::default(),
                    payload_size: Sketch::default(),
                }),
            },
        ]
    }

    /// One of every kind, for the codec.
    fn every_kind() -> Vec<Record> {
        let mut all = records();
        let g = "g";
        all.push(Record::Audit {
            at: Millis(9),
            event: streamsight_core::AuditEvent::KeyCreated {
                id: "0123456789ab".into(),
                tenant: "default".into(),
                scope: "read".into(),
            },
        });
        let mut rule = streamsight_core::alerts::rule::Rule::new(
            "lag_high",
            streamsight_core::alerts::rule::Signal::GroupStatus,
            60,
            "{group} is stuck",
        );
        rule.statuses = vec![streamsight_core::Status::Stall];
        rule.scope.insert("cluster".into(), "prod-*".into());
        all.push(Record::Alert {
            at: Millis(10),
            event: Box::new(streamsight_core::AlertEvent::RuleSet(rule)),
        });
        all.push(Record::Alert {
            at: Millis(11),
            event: Box::new(streamsight_core::AlertEvent::RuleRemoved { name: "ü".into() }),
        });
        use streamsight_core::journey::{LogLine, Messaging, Operation, Source, Span, TraceId};
        let full = Span {
            trace_id: TraceId(u128::MAX),
            span_id: u64::MAX,
            parent_id: 1,
            name: "orders process".into(),
            service: "billing".into(),
            start_ns: i64::MIN,
            duration_ns: i64::MAX,
            error: Some("CardDeclined".into()),
            messaging: Some(Messaging {
                cluster: "prod".into(),
                topic: "orders".into(),
                partition: Some(i32::MIN),
                offset: Some(-1),
                group: Some("billing".into()),
                operation: Some(Operation::Process),
            }),
            links: vec![(TraceId(7), 8), (TraceId(u128::MAX), 0)],
            source: Source::Datadog,
        };
        let bare = Span {
            error: None,
            messaging: None,
            links: Vec::new(),
            source: Source::Otlp,
            ..full.clone()
        };
        let some_fields = Span {
            messaging: Some(Messaging {
                topic: "orders".into(),
                ..Messaging::default()
            }),
            source: Source::FluentBit,
            ..bare.clone()
        };
        for (i, span) in [full, bare, some_fields].into_iter().enumerate() {
            all.push(Record::Span {
                at: Millis(12 + i as i64),
                span: Box::new(span),
            });
        }
        all.push(Record::Log {
            at: Millis(20),
            line: Box::new(LogLine {
                trace_id: TraceId(3),
                span_id: Some(4),
                at: Millis(19),
                severity: "ERROR".into(),
                body: "card declined".into(),
                service: "billing".into(),
                source: Source::FluentBit,
            }),
        });
        use streamsight_core::redrive::{Destination, DlqTopic, RedriveEvent, SentLetter};
        all.push(Record::Redrive {
            at: Millis(21),
            event: Box::new(RedriveEvent::Sent {
                run: "r".into(),
                of: DlqTopic {
                    cluster: "prod".into(),
                    dlq: "orders.dlq".into(),
                },
                sent: vec![SentLetter {
                    partition: 1,
                    offset: 2,
                    to: Destination {
                        topic: "orders".into(),
                        partition: 3,
                        offset: 4,
                    },
                }],
            }),
        });
        all.extend([
            observation(
                -5,
                Observation::ProduceFailed {
                    partition: p(-1),
                    error: "MSG_SIZE_TOO_LARGE",
                },
            ),
            observation(
                4,
                Observation::Committed {
                    group: g,
                    partition: p(2),
                    offset: i64::MAX,
                },
            ),
            observation(
                4,
                Observation::EndOffset {
                    partition: p(2),
                    offset: 0,
                    source: EndOffsetSource::ClientHighWatermark,
                },
            ),
            observation(
                i64::MAX,
                Observation::LogStart {
                    partition: p(3),
                    offset: -1,
                },
            ),
            observation(
                9,
                Observation::OffsetsReset {
                    group: "g",
                    partition: p(2),
                    offset: 40,
                },
            ),
            observation(
                9,
                Observation::Assigned {
                    group: "g",
                    partition: p(2),
                },
            ),
            observation(
                9,
                Observation::TopicRetention {
                    cluster: "c",
                    topic: "t",
                    retention_ms: 604_800_000,
                },
            ),
            observation(
                i64::MIN,
                Observation::ControlMarker {
                    partition: p(i32::MAX),
                    offset: 5,
                },
            ),
            observation(
                6,
                Observation::TopicRecreated {
                    cluster: "c",
                    topic: "t",
                },
            ),
            observation(6, Observation::Unreachable { partition: p(i32::MIN) }),
            observation(
                6,
                Observation::Unreadable {
                    partition: p(4),
                    from: 15,
                    to: i64::MAX,
                },
            ),
            observation(
                6,
                Observation::TransactionHolder {
                    partition: p(2),
                    producer_id: i64::MAX,
                    producer_epoch: i32::MIN,
                    transactional_id: Some("tx-ü"),
                    timeout_ms: Some(i32::MAX),
                },
            ),
            observation(
                6,
                Observation::TransactionHolder {
                    partition: p(3),
                    producer_id: 0,
                    producer_epoch: 0,
                    transactional_id: None,
                    timeout_ms: None,
                },
            ),
            observation(
                6,
                Observation::GroupDeleted {
                    cluster: "c",
                    group: "ü",
                },
            ),
            observation(
                6,
                Observation::TopicDeleted {
                    cluster: "",
                    topic: "t",
                },
            ),
            Record::Delivery {
                at: Millis(7),
                fact: Box::new(Fact::Skipped {
                    cluster: "c".into(),
                    group: "g".into(),
                    topic: "t".into(),
                    partition: 0,
                    first_offset: 3,
                    last_offset: 9,
                }),
            },
        ]);
        all
    }

    /// The same body for every implementation; `durable` ones give back what
    /// they were given, the others nothing.
    fn exercise(store: &mut dyn Store, durable: bool) {
        let kept = |r: &[Record]| if durable { r.to_vec() } else { Vec::new() };
        store.append(&records()[..2]).unwrap();
        store.append(&records()[2..]).unwrap();
        assert_eq!(store.load(Millis(0)).unwrap(), kept(&records()));
        assert_eq!(store.load(Millis(2)).unwrap(), kept(&records()[1..]));
        assert_eq!(store.delete_before(Millis(3)).unwrap(), if durable { 2 } else { 0 });
        assert_eq!(store.load(Millis(0)).unwrap(), kept(&records()[2..]));
    }

    #[test]
    fn memory_store_keeps_nothing() {
        exercise(open("memory://").unwrap().as_mut(), false);
    }

    #[test]
    fn sqlite_store_and_reopen() {
        let dir = std::env::temp_dir().join(format!("streamsight-store-{}", std::process::id()));
        let path = dir.join("nested").join("s.db");
        let url = format!("sqlite://{}", path.display());
        exercise(open(&url).unwrap().as_mut(), true);
        let mut reopened = open(&url).unwrap();
        assert_eq!(reopened.load(Millis(0)).unwrap(), records()[2..].to_vec());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The same body for every store that keeps the log across a reopening:
    /// each topic's records come back in the order appended (a topic is one
    /// shard, and shards are read one after another), `since` filters, and
    /// appends after a reopening add to what was there.
    fn survives_reopening(url: &str) {
        let appended: Vec<Record> = every_kind().into_iter().chain(records()).collect();
        {
            let mut store = open(url).unwrap();
            store.append(&every_kind()).unwrap();
            store.append(&records()).unwrap();
        }
        let in_order_per_topic = |got: &[Record], want: &[Record]| {
            let topics: std::collections::BTreeSet<_> = want.iter().map(Record::topic).collect();
            for topic in topics {
                let of = |all: &[Record]| all.iter().filter(|r| r.topic() == topic).cloned().collect::<Vec<_>>();
                assert_eq!(of(got), of(want), "records of topic {topic:?}");
            }
            assert_eq!(got.len(), want.len());
        };
        let since = |at: i64, all: &[Record]| all.iter().filter(|r| r.at() >= Millis(at)).cloned().collect::<Vec<_>>();
        let mut reopened = open(url).unwrap();
        in_order_per_topic(&reopened.load(Millis(i64::MIN)).unwrap(), &appended);
        in_order_per_topic(&reopened.load(Millis(3)).unwrap(), &since(3, &appended));
        reopened.append(&records()).unwrap();
        let more: Vec<Record> = appended.iter().cloned().chain(records()).collect();
        in_order_per_topic(&open(url).unwrap().load(Millis(0)).unwrap(), &since(0, &more));
    }

    #[test]
    fn sqlite_survives_reopening() {
        let dir = std::env::temp_dir().join(format!("streamsight-store-reopen-{}", std::process::id()));
        survives_reopening(&format!("sqlite://{}/log.db", dir.display()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The log in a topic of tansu, a Kafka-compatible broker run as its own
    /// process (its SQLite engine: watermarks and group joins as Kafka's).
    #[test]
    fn kafka_survives_reopening() {
        let dir = std::env::temp_dir().join(format!("streamsight-store-kafka-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut broker =
            streamsight_testkit::Tansu::start_on(streamsight_testkit::free_port(), "sqlite://tansu.db", &dir, &[]);
        let url = format!(
            "kafka://{}/streamsight-log?partitions=4&timeout_ms=3000&create=true",
            broker.bootstrap
        );
        // A log topic that does not exist (misspelt) is an error naming it,
        // and is not made; create=true makes it.
        let misspelt = url
            .replace("streamsight-log?", "streamsight-logs?")
            .replace("&create=true", "");
        let err = KafkaStore::open(KafkaUrl::parse(&misspelt).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the log topic \"streamsight-logs\" does not exist") && err.contains("create=true"),
            "{err}"
        );
        let parsed = KafkaUrl::parse(&misspelt).unwrap();
        assert_eq!(
            client::topic_partitions(&parsed, "streamsight-logs").unwrap(),
            None,
            "not made"
        );
        survives_reopening(&url);
        let mut store = KafkaStore::open(KafkaUrl::parse(&url).unwrap()).unwrap();
        assert_eq!(store.partitions(), 4, "the stated partition count");
        // A log that cannot be reached fails the append, within the timeout.
        broker.kill();
        let started = std::time::Instant::now();
        assert!(matches!(store.append(&records()), Err(StoreError::Kafka(_))));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        drop(broker);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kafka_urls_are_parsed_and_bounded() {
        let url =
            KafkaUrl::parse("kafka://a:9092,b:9092/log?partitions=32&replication=3&security.protocol=ssl").unwrap();
        assert_eq!((url.bootstrap.as_str(), url.topic.as_str()), ("a:9092,b:9092", "log"));
        assert_eq!((url.partitions, url.replication), (32, 3));
        assert_eq!(url.properties.get("security.protocol").map(String::as_str), Some("ssl"));
        assert!(!url.sharded, "replicated unless asked");
        let sharded = KafkaUrl::parse("kafka://a:9092/log?mode=sharded").unwrap();
        assert!(sharded.sharded);
        assert_eq!(
            (sharded.global_topic(), sharded.nodes_topic(), sharded.shards_group()),
            ("log-global".into(), "log-nodes".into(), "log-shards".into())
        );
        for bad in [
            "kafka://a:9092",
            "kafka:///log",
            "kafka://a:9092/",
            "kafka://a:9092/bad topic",
            "kafka://a:9092/log?partitions=0",
            "kafka://a:9092/log?partitions=1000000",
            "kafka://a:9092/log?timeout_ms=x",
            "kafka://a:9092/log?novalue",
            "kafka://a:9092/log?mode=other",
            "kafka://a:9092/log?create=yes",
        ] {
            assert!(
                matches!(
                    KafkaUrl::parse(bad),
                    Err(StoreError::BadUrl(_) | StoreError::BadUrlPart { .. })
                ),
                "{bad}"
            );
        }
    }

    /// Each mistake in a `kafka://` URL names the part that is wrong.
    #[test]
    fn a_bad_kafka_url_names_its_wrong_part() {
        for (url, said) in [
            ("kafka://a:9092/streamsight logs", "topic \"streamsight logs\" has ' '"),
            (
                "kafka://a:9092/log?partitions=0",
                "partitions=0 must be a whole number from 1 to 10000",
            ),
            (
                "kafka://a:9092/log?mode=shard",
                "mode=shard must be sharded or replicated",
            ),
            ("kafka://a:9092/log?timeout_ms=x", "timeout_ms=x must be a whole number"),
            ("kafka://a:9092/log?novalue", "\"novalue\" has no value"),
            ("kafka:///log", "the brokers are missing"),
            ("kafka://a:9092", "the log topic is missing"),
        ] {
            let err = KafkaUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(said) && err.contains(url), "{url}: {err}");
        }
    }

    #[test]
    fn records_are_sharded_by_topic() {
        let all = every_kind();
        for r in &all {
            let shard = r.shard(8);
            assert!(shard < 8);
            match r.topic() {
                None => assert_eq!(shard, 0),
                Some(t) => assert_eq!(shard, streamsight_core::record::shard_of(t, 8)),
            }
        }
        assert_eq!(streamsight_core::record::shard_of("orders", 1), 0);
    }

    #[test]
    fn a_snapshot_survives_its_encoding() {
        let mut engine = streamsight_core::Engine::new(streamsight_core::EngineConfig::default()).unwrap();
        for r in every_kind() {
            r.apply(&mut engine);
        }
        let mut ledger = streamsight_core::delivery::Ledger::new(Default::default());
        ledger.consumed("c", "g", "t", 0, 10_000, 5, 1, 0, &["a1".into()]);
        let state = ShardState {
            engine: engine.export(&|_| true),
            deliveries: streamsight_core::shard::DeliveryShard {
                ledger: ledger.export(&|_| true),
                ..Default::default()
            },
            records: every_kind(),
        };
        let bytes = snapshots::encode(&state).unwrap();
        let back = snapshots::decode(&bytes, 1 << 20).unwrap();
        assert_eq!(back.records, state.records);
        assert_eq!(format!("{:?}", back.engine), format!("{:?}", state.engine));
        assert_eq!(format!("{:?}", back.deliveries), format!("{:?}", state.deliveries));
        assert!(snapshots::decode(&bytes[..bytes.len() / 2], 1 << 20).is_err());
        // A snapshot that inflates beyond the bound is refused, not held.
        let bomb = {
            use std::io::Write;
            let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            d.write_all(&vec![0u8; 64 << 20]).unwrap();
            d.finish().unwrap()
        };
        assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
        let refused = snapshots::decode(&bomb, 1 << 20).unwrap_err();
        assert!(refused.contains("once inflated"), "{refused}");
    }

    #[test]
    fn every_kind_survives_the_codec() {
        let all = every_kind();
        let mut bytes = Vec::new();
        codec::encode(&all, &mut bytes);
        assert_eq!(codec::decode(&bytes).unwrap(), all);
        // Names are stored once a batch: a thousand commits cost a few bytes each.
        let commits: Vec<Record> = (0..1_000)
            .map(|i| {
                observation(
                    1_000 + i,
                    Observation::Committed {
                        group: "billing",
                        partition: p((i % 6) as i32),
                        offset: 5_000 + i,
                    },
                )
            })
            .collect();
        let mut bytes = Vec::new();
        codec::encode(&commits, &mut bytes);
        assert!(bytes.len() < 10 * commits.len(), "{} bytes", bytes.len());
    }

    #[test]
    fn a_corrupt_batch_is_an_error_not_a_panic() {
        let mut bytes = Vec::new();
        codec::encode(&every_kind(), &mut bytes);
        for cut in 0..bytes.len() {
            assert!(codec::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0xff;
            let _ = codec::decode(&flipped);
        }
        assert_eq!(codec::decode(&[9]), Err(codec::CodecError::Version(9)));
    }

    #[test]
    fn observations_round_trip() {
        let o = Observation::Committed {
            group: "g",
            partition: p(3),
            offset: 7,
        };
        let owned: OwnedObservation = o.to_owned();
        assert_eq!(owned.borrowed(), o);
    }

    #[test]
    fn bad_urls_are_refused() {
        for url in ["postgres://x", "sqlite://", "memory://x", ""] {
            assert!(matches!(open(url), Err(StoreError::BadUrl(_))), "{url}");
        }
    }
}
