//! The collector's own telemetry: every point is a typed event that logs and
//! counts in one place, with a fixed set of labels.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a request to the intake was refused (the `kind` label).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntakeError {
    BodyTooLarge,
    DecompressedTooLarge,
    BadGzip,
    BadMsgpack,
    UnsupportedEncoding,
    BadSketch,
    StorageFailed,
}

impl IntakeError {
    pub const ALL: [IntakeError; 7] = [
        IntakeError::BodyTooLarge,
        IntakeError::DecompressedTooLarge,
        IntakeError::BadGzip,
        IntakeError::BadMsgpack,
        IntakeError::UnsupportedEncoding,
        IntakeError::BadSketch,
        IntakeError::StorageFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
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
                self.errors[error as usize].fetch_add(1, Relaxed);
                tracing::warn!(kind = error.as_str(), detail, "payload rejected");
            }
            IntakeEvent::PointDropped { error, detail } => {
                self.errors[error as usize].fetch_add(1, Relaxed);
                tracing::debug!(kind = error.as_str(), detail, "point dropped");
            }
            IntakeEvent::BodyDropped { endpoint, bytes } => {
                self.dropped_bodies[endpoint as usize].fetch_add(1, Relaxed);
                self.dropped_bytes[endpoint as usize].fetch_add(bytes as u64, Relaxed);
                tracing::trace!(endpoint = endpoint.as_str(), bytes, "body counted and dropped");
            }
        }
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
                .map(|&e| (e, self.errors[e as usize].load(Relaxed)))
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
