//! The collector's own telemetry: every point is a typed event that logs and
//! counts in one place, with a fixed set of labels.

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
    /// More of something than one payload may hold.
    TooMany(Counted),
}

impl IntakeError {
    pub const ALL: [IntakeError; 18] = [
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
    log_gate: LogGate,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
