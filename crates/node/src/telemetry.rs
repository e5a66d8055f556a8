//! The collector's own telemetry: every point is a typed event that logs and
//! counts in one place, with a fixed set of labels: what the intake took and
//! refused ([`IntakeEvent`]), every answer refused on any listener
//! ([`Refusal`]), and every failure of the collector's own work ([`Failure`]).

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use streamsight_core::{Limit, LimitCounts};
use streamsight_wire::dsm::payload::Counted;

/// Why a request to the intake was refused (the `kind` label).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IntakeError {
    BodyTooLarge,
    DecompressedTooLarge,
    BadGzip,
    BadMsgpack,
    UnsupportedEncoding,
    UnsupportedContentType,
    BadSketch,
    TimeOutOfRange,
    StorageFailed,
    Overloaded,
    RateLimited,
    /// Reading and decoding the request would take more memory than one may.
    RequestMemory,
    /// The memory for decoding is held by requests in flight.
    DecodeMemoryBusy,
    /// More of something than one payload may hold.
    TooMany(Counted),
}

impl IntakeError {
    pub const ALL: [IntakeError; 20] = [
        IntakeError::BodyTooLarge,
        IntakeError::DecompressedTooLarge,
        IntakeError::BadGzip,
        IntakeError::BadMsgpack,
        IntakeError::UnsupportedEncoding,
        IntakeError::UnsupportedContentType,
        IntakeError::BadSketch,
        IntakeError::TimeOutOfRange,
        IntakeError::StorageFailed,
        IntakeError::Overloaded,
        IntakeError::RateLimited,
        IntakeError::RequestMemory,
        IntakeError::DecodeMemoryBusy,
        IntakeError::TooMany(Counted::Buckets),
        IntakeError::TooMany(Counted::Backlogs),
        IntakeError::TooMany(Counted::StatsPoints),
        IntakeError::TooMany(Counted::FailedSends),
        IntakeError::TooMany(Counted::DeliveryFacts),
        IntakeError::TooMany(Counted::Tags),
        IntakeError::TooMany(Counted::TraceIds),
    ];

    fn index(self) -> usize {
        Self::ALL.iter().position(|&e| e == self).unwrap_or(0)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IntakeError::UnsupportedContentType => "unsupported_content_type",
            IntakeError::TimeOutOfRange => "time_out_of_range",
            IntakeError::Overloaded => "overloaded",
            IntakeError::RateLimited => "rate_limited",
            IntakeError::RequestMemory => "request_memory_exceeded",
            IntakeError::DecodeMemoryBusy => "decode_memory_busy",
            IntakeError::TooMany(Counted::Buckets) => "too_many_buckets",
            IntakeError::TooMany(Counted::Backlogs) => "too_many_backlogs",
            IntakeError::TooMany(Counted::StatsPoints) => "too_many_stats_points",
            IntakeError::TooMany(Counted::FailedSends) => "too_many_failed_sends",
            IntakeError::TooMany(Counted::DeliveryFacts) => "too_many_delivery_facts",
            IntakeError::TooMany(Counted::Tags) => "too_many_tags",
            IntakeError::TooMany(Counted::TraceIds) => "too_many_trace_ids",
            IntakeError::BodyTooLarge => "body_too_large",
            IntakeError::DecompressedTooLarge => "decompressed_too_large",
            IntakeError::BadGzip => "bad_gzip",
            IntakeError::BadMsgpack => "bad_msgpack",
            IntakeError::UnsupportedEncoding => "unsupported_encoding",
            IntakeError::BadSketch => "bad_sketch",
            IntakeError::StorageFailed => "storage_failed",
        }
    }
}

impl Serialize for IntakeError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Agent endpoints the intake answers without using their bodies yet.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DroppedEndpoint {
    Traces,
    Stats,
    Telemetry,
}

impl DroppedEndpoint {
    pub const ALL: [DroppedEndpoint; 3] = [
        DroppedEndpoint::Traces,
        DroppedEndpoint::Stats,
        DroppedEndpoint::Telemetry,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DroppedEndpoint::Traces => "traces",
            DroppedEndpoint::Stats => "stats",
            DroppedEndpoint::Telemetry => "telemetry",
        }
    }
}

#[derive(Debug)]
pub enum IntakeEvent<'a> {
    PayloadAccepted {
        bytes: usize,
        backlogs: usize,
        pathway_points: usize,
        failed_sends: usize,
    },
    PayloadRejected {
        error: IntakeError,
        detail: &'a str,
    },
    PointDropped {
        error: IntakeError,
        detail: &'a str,
    },
    BodyDropped {
        endpoint: DroppedEndpoint,
        bytes: usize,
    },
    /// A connection or request refused by a limit of the HTTP servers or writer.
    Limited {
        limit: Limit,
        listener: &'static str,
    },
}

/// Work of the collector's own that did not happen: each logs at its level
/// and counts under its name, in [`IntakeTelemetry::failed`] alone.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The store refused a batch: requests are answered 503.
    StoreAppend,
    StorageCap,
    Retention,
    /// Reading a shared log failed (said once until it recovers).
    FollowLog,
    /// The keys file could not be read or parsed: the old keys stay.
    KeysReload,
    /// A TLS certificate could not be read or used: the old one is served.
    TlsReload,
    Accept,
    /// A node of a sharded log did not answer for its shards.
    Fanout,
    /// Alert changes, their delivery or the rewritten alert state not stored.
    AlertsNotStored,
    /// A poll's results not stored.
    PollNotStored,
    IdleExpiryNotStored,
    AuditNotStored,
    /// A polled cluster's metadata could not be read this round.
    ClusterUnreachable,
    /// The alert round did not evaluate the rules (a shard did not answer).
    RulesNotEvaluated,
    /// A notification not delivered after its retries, or dropped with the
    /// notifier's queue full.
    NotificationNotDelivered,
}

impl Failure {
    pub const ALL: [Failure; 15] = [
        Failure::StoreAppend,
        Failure::StorageCap,
        Failure::Retention,
        Failure::FollowLog,
        Failure::KeysReload,
        Failure::TlsReload,
        Failure::Accept,
        Failure::Fanout,
        Failure::AlertsNotStored,
        Failure::PollNotStored,
        Failure::IdleExpiryNotStored,
        Failure::AuditNotStored,
        Failure::ClusterUnreachable,
        Failure::RulesNotEvaluated,
        Failure::NotificationNotDelivered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Failure::StoreAppend => "store_append",
            Failure::StorageCap => "storage_cap",
            Failure::Retention => "retention",
            Failure::FollowLog => "follow_log",
            Failure::KeysReload => "keys_reload",
            Failure::TlsReload => "tls_reload",
            Failure::Accept => "accept",
            Failure::Fanout => "fanout",
            Failure::AlertsNotStored => "alerts_not_stored",
            Failure::PollNotStored => "poll_not_stored",
            Failure::IdleExpiryNotStored => "idle_expiry_not_stored",
            Failure::AuditNotStored => "audit_not_stored",
            Failure::ClusterUnreachable => "cluster_unreachable",
            Failure::RulesNotEvaluated => "rules_not_evaluated",
            Failure::NotificationNotDelivered => "notification_not_delivered",
        }
    }

    /// What the log says of it.
    fn message(self) -> &'static str {
        match self {
            Failure::StoreAppend => "store append failed",
            Failure::StorageCap => "storage cap failed",
            Failure::Retention => "retention failed",
            Failure::FollowLog => "following the shared log failed",
            Failure::KeysReload => "keys file unreadable or invalid; keeping the keys",
            Failure::TlsReload => "TLS reload failed; serving the previous certificate",
            Failure::Accept => "accept failed",
            Failure::Fanout => "a fan-out request failed",
            Failure::AlertsNotStored => "alert changes not stored; retried next round",
            Failure::PollNotStored => "poll results not stored",
            Failure::IdleExpiryNotStored => "idle expiry not stored",
            Failure::AuditNotStored => "audit record not stored",
            Failure::ClusterUnreachable => "cluster unreachable; polled again next round",
            Failure::RulesNotEvaluated => "alert rules not evaluated this round; alerts keep their state",
            Failure::NotificationNotDelivered => "notification not delivered",
        }
    }

    /// Failures that lose nothing (retried, or the old state kept) warn; the
    /// others are errors.
    fn is_error(self) -> bool {
        !matches!(
            self,
            Failure::FollowLog
                | Failure::Accept
                | Failure::Fanout
                | Failure::ClusterUnreachable
                | Failure::RulesNotEvaluated
        )
    }
}

/// An answer refused on a listener: its kind, as the client read it in `error`.
#[derive(Copy, Clone, Debug)]
pub struct Refusal<'a> {
    pub listener: &'static str,
    pub kind: &'static str,
    pub status: u16,
    /// The key the request named, when the keys file holds it (live or
    /// revoked): never an id a client made up.
    pub key_id: Option<&'a str>,
}

/// Refusals of one (listener, kind, key) at most: the kinds are the
/// collector's own (a fixed set) and the keys the keys file's, so this bounds
/// nothing a client chooses.
type RefusalCounts = std::sync::Mutex<std::collections::BTreeMap<(&'static str, &'static str, Option<String>), u64>>;

#[derive(Debug, Default)]
pub struct IntakeTelemetry {
    payloads: AtomicU64,
    bytes: AtomicU64,
    backlogs: AtomicU64,
    pathway_points: AtomicU64,
    failed_sends: AtomicU64,
    errors: [AtomicU64; IntakeError::ALL.len()],
    dropped_bodies: [AtomicU64; DroppedEndpoint::ALL.len()],
    dropped_bytes: [AtomicU64; DroppedEndpoint::ALL.len()],
    limited: [AtomicU64; Limit::ALL.len()],
    corrupt_batches: AtomicU64,
    failures: [AtomicU64; Failure::ALL.len()],
    refusals: RefusalCounts,
    /// Each TLS listener's served certificate's end (unix seconds).
    tls_expiry: std::sync::Mutex<std::collections::BTreeMap<&'static str, i64>>,
    log_gate: LogGate,
    refusal_gate: LogGate,
}

/// Lets one warning through per second.
#[derive(Debug, Default)]
struct LogGate {
    last_second: AtomicU64,
}

impl LogGate {
    fn open(&self) -> bool {
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.last_second.swap(second, Relaxed) != second
    }
}

#[derive(Debug, Serialize)]
pub struct IntakeStats {
    pub payloads: u64,
    pub bytes: u64,
    pub backlogs: u64,
    pub pathway_points: u64,
    pub failed_send_reports: u64,
    pub errors: Vec<(IntakeError, u64)>,
    pub dropped: Vec<(DroppedEndpoint, u64, u64)>,
    /// Every failure of the collector's own work, by name.
    pub failures: Vec<(Failure, u64)>,
    /// Every refused answer, by listener and kind.
    pub refusals: Vec<RefusalCount>,
    /// Each TLS listener's served certificate's end (unix seconds).
    pub tls_expiry: Vec<(&'static str, i64)>,
}

#[derive(Debug, Serialize)]
pub struct RefusalCount {
    pub listener: &'static str,
    pub kind: &'static str,
    /// The key refused, when the request named one the keys file holds.
    pub key_id: Option<String>,
    pub count: u64,
}

impl IntakeTelemetry {
    pub fn emit(&self, event: IntakeEvent<'_>) {
        match event {
            IntakeEvent::PayloadAccepted {
                bytes,
                backlogs,
                pathway_points,
                failed_sends,
            } => {
                self.payloads.fetch_add(1, Relaxed);
                self.bytes.fetch_add(bytes as u64, Relaxed);
                self.backlogs.fetch_add(backlogs as u64, Relaxed);
                self.pathway_points.fetch_add(pathway_points as u64, Relaxed);
                self.failed_sends.fetch_add(failed_sends as u64, Relaxed);
                tracing::debug!(bytes, backlogs, pathway_points, failed_sends, "payload accepted");
            }
            IntakeEvent::PayloadRejected { error, detail } => {
                self.errors[error.index()].fetch_add(1, Relaxed);
                // A flood of bad requests must not become a flood of log lines.
                if self.log_gate.open() {
                    tracing::warn!(
                        kind = error.as_str(),
                        detail,
                        "payload rejected (more are counted, not logged, for a second)"
                    );
                } else {
                    tracing::debug!(kind = error.as_str(), detail, "payload rejected");
                }
            }
            IntakeEvent::PointDropped { error, detail } => {
                self.errors[error.index()].fetch_add(1, Relaxed);
                tracing::debug!(kind = error.as_str(), detail, "point dropped");
            }
            IntakeEvent::Limited { limit, listener } => {
                self.limited[limit as usize].fetch_add(1, Relaxed);
                tracing::debug!(limit = limit.as_str(), listener, "refused by a limit");
            }
            IntakeEvent::BodyDropped { endpoint, bytes } => {
                self.dropped_bodies[endpoint as usize].fetch_add(1, Relaxed);
                self.dropped_bytes[endpoint as usize].fetch_add(bytes as u64, Relaxed);
                tracing::trace!(endpoint = endpoint.as_str(), bytes, "body counted and dropped");
            }
        }
    }

    /// Work of the collector's own that failed: logged at its level and counted.
    pub fn failed(&self, failure: Failure, error: &dyn std::fmt::Display) {
        self.failures[failure as usize].fetch_add(1, Relaxed);
        if failure.is_error() {
            tracing::error!(failure = failure.as_str(), error = %error, "{}", failure.message());
        } else {
            tracing::warn!(failure = failure.as_str(), error = %error, "{}", failure.message());
        }
    }

    /// How often `failure` happened.
    pub fn failures(&self, failure: Failure) -> u64 {
        self.failures[failure as usize].load(Relaxed)
    }

    /// An answer refused on a listener: counted by listener and kind, logged
    /// at debug (a 5xx at warn, once a second: a flood of bad requests never
    /// becomes a flood of log lines).
    pub fn refused(&self, r: Refusal<'_>) {
        *crate::sync::lock(&self.refusals)
            .entry((r.listener, r.kind, r.key_id.map(str::to_owned)))
            .or_default() += 1;
        if r.status >= 500 && self.refusal_gate.open() {
            tracing::warn!(
                listener = r.listener,
                kind = r.kind,
                status = r.status,
                "request refused"
            );
        } else {
            tracing::debug!(
                listener = r.listener,
                kind = r.kind,
                status = r.status,
                "request refused"
            );
        }
    }

    /// How often `listener` refused with `kind`.
    pub fn refusals(&self, listener: &str, kind: &str) -> u64 {
        crate::sync::lock(&self.refusals)
            .iter()
            .filter(|((l, k, _), _)| *l == listener && *k == kind)
            .map(|(_, n)| *n)
            .sum()
    }

    /// The certificate `listener` serves ends at `not_after_s` (unix seconds).
    pub fn tls_certificate(&self, listener: &'static str, not_after_s: i64) {
        crate::sync::lock(&self.tls_expiry).insert(listener, not_after_s);
    }

    /// Stored batches a replay could not decode and skipped.
    pub fn stored_batches_skipped(&self, n: u64) {
        self.corrupt_batches.fetch_add(n, Relaxed);
    }

    pub fn corrupt_batches(&self) -> u64 {
        self.corrupt_batches.load(Relaxed)
    }

    /// Connections and requests refused by the servers' and writer's limits.
    pub fn limited(&self) -> LimitCounts {
        let mut counts = LimitCounts::default();
        for l in Limit::ALL {
            counts.add_n(l, self.limited[l as usize].load(Relaxed));
        }
        counts
    }

    pub fn snapshot(&self) -> IntakeStats {
        IntakeStats {
            payloads: self.payloads.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            backlogs: self.backlogs.load(Relaxed),
            pathway_points: self.pathway_points.load(Relaxed),
            failed_send_reports: self.failed_sends.load(Relaxed),
            errors: IntakeError::ALL
                .iter()
                .map(|&e| (e, self.errors[e.index()].load(Relaxed)))
                .collect(),
            dropped: DroppedEndpoint::ALL
                .iter()
                .map(|&e| {
                    (
                        e,
                        self.dropped_bodies[e as usize].load(Relaxed),
                        self.dropped_bytes[e as usize].load(Relaxed),
                    )
                })
                .collect(),
            failures: Failure::ALL
                .iter()
                .map(|&f| (f, self.failures[f as usize].load(Relaxed)))
                .collect(),
            refusals: crate::sync::lock(&self.refusals)
                .iter()
                .map(|((listener, kind, key_id), &count)| RefusalCount {
                    listener,
                    kind,
                    key_id: key_id.clone(),
                    count,
                })
                .collect(),
            tls_expiry: crate::sync::lock(&self.tls_expiry)
                .iter()
                .map(|(&l, &t)| (l, t))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_and_a_refusal_count_where_they_are_said() {
        let t = IntakeTelemetry::default();
        t.failed(Failure::StoreAppend, &"disk full");
        t.failed(Failure::StoreAppend, &"disk full");
        t.refused(Refusal {
            listener: "api",
            kind: "bad_query",
            status: 400,
            key_id: None,
        });
        assert_eq!(t.failures(Failure::StoreAppend), 2);
        assert_eq!(t.failures(Failure::Retention), 0);
        assert_eq!(t.refusals("api", "bad_query"), 1);
        let s = t.snapshot();
        assert!(s.failures.contains(&(Failure::StoreAppend, 2)));
        assert_eq!(s.refusals.len(), 1);
        for f in Failure::ALL {
            assert_eq!(Failure::ALL[f as usize], f, "ALL is in declaration order");
        }
    }

    #[test]
    fn events_are_counted_under_their_labels() {
        let t = IntakeTelemetry::default();
        t.emit(IntakeEvent::PayloadAccepted {
            bytes: 10,
            backlogs: 2,
            pathway_points: 1,
            failed_sends: 0,
        });
        t.emit(IntakeEvent::PayloadRejected {
            error: IntakeError::BadGzip,
            detail: "x",
        });
        t.emit(IntakeEvent::BodyDropped {
            endpoint: DroppedEndpoint::Traces,
            bytes: 5,
        });
        let s = t.snapshot();
        assert_eq!((s.payloads, s.bytes, s.backlogs), (1, 10, 2));
        assert!(s.errors.contains(&(IntakeError::BadGzip, 1)));
        assert!(s.dropped.contains(&(DroppedEndpoint::Traces, 1, 5)));
    }
}
