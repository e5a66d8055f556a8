//! Message journeys: spans and log lines from every source, indexed so that one
//! trace id (or a topic, partition and offset) finds the message everywhere.
//!
//! Sources name the same message differently: OpenTelemetry carries 128-bit W3C
//! trace ids and links a consumer's span to the producer's; Datadog tracers send
//! 64-bit trace ids (the upper half in `_dd.p.tid` when they have one). A trace
//! is kept under its 128-bit id; a 64-bit id finds the 128-bit trace whose lower
//! half it is. Pure: time is passed in; bounded by [`JourneyLimits`].

mod store;
pub mod verdict;

pub use store::{Journey, JourneyLimits, Journeys, JourneysStats, Kept};

use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// A trace id: 128 bits (a 64-bit Datadog id is its lower half, upper 0).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TraceId(pub u128);

impl TraceId {
    /// The lower 64 bits: what a Datadog tracer without 128-bit ids sends.
    pub fn low(self) -> u64 {
        self.0 as u64
    }

    pub fn is_short(self) -> bool {
        self.0 >> 64 == 0
    }

    /// 32 lowercase hex digits, as W3C `traceparent` writes it.
    pub fn hex(self) -> String {
        format!("{:032x}", self.0)
    }

    /// From 32 hex digits (W3C), 16 hex digits, or a decimal 64-bit id (Datadog);
    /// `None` for anything else, and for the all-zero id (invalid in W3C).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let id = if s.len() == 32 || (s.len() == 16 && s.bytes().any(|b| b.is_ascii_alphabetic())) {
            u128::from_str_radix(s, 16).ok()?
        } else if !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()) {
            u128::from(s.parse::<u64>().ok()?)
        } else if s.len() == 16 {
            u128::from_str_radix(s, 16).ok()?
        } else {
            return None;
        };
        (id != 0).then_some(TraceId(id))
    }
}

impl Serialize for TraceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for TraceId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TraceId::parse(&s).ok_or_else(|| serde::de::Error::custom("not a trace id"))
    }
}

/// What a messaging span did to its message (OTel `messaging.operation`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Sent to the broker (OTel `publish`/`send`/`create`, Datadog `kafka.produce`).
    Send,
    /// Taken from the broker (OTel `receive`, Datadog `kafka.consume`).
    Receive,
    /// Handled by the application (OTel `process`).
    Process,
}

/// Where a messaging span's message is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Messaging {
    /// The cluster when the span names one (OTel `messaging.kafka.cluster.id`),
    /// else empty: offsets are then matched on topic and partition alone.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub topic: String,
    #[serde(default)]
    pub partition: Option<i32>,
    #[serde(default)]
    pub offset: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
}

/// Which kind of client sent a span or line.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Otlp,
    Datadog,
    FluentBit,
}

/// One span, as every source becomes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: u64,
    #[serde(default)]
    pub parent_id: u64,
    pub name: String,
    #[serde(default)]
    pub service: String,
    /// Unix nanoseconds.
    pub start_ns: i64,
    pub duration_ns: i64,
    /// The error's type or message when the span failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messaging: Option<Messaging>,
    /// Spans this one is linked to (an OTel consumer links to the producer's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<(TraceId, u64)>,
    pub source: Source,
}

impl Span {
    pub fn start(&self) -> Millis {
        Millis(self.start_ns.div_euclid(1_000_000))
    }
}

/// A log line that names a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub trace_id: TraceId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<u64>,
    #[serde(rename = "at_ms")]
    pub at: Millis,
    #[serde(default)]
    pub severity: String,
    pub body: String,
    #[serde(default)]
    pub service: String,
    pub source: Source,
}

/// Longest name, service, topic, group or error kept (longer are cut at a
/// character boundary): a span costs at most a few KiB however it was sent.
pub const MAX_TEXT: usize = 256;
/// Longest log body kept.
pub const MAX_BODY: usize = 2048;
/// Links kept per span.
pub const MAX_LINKS: usize = 16;

/// `s` cut to at most `max` bytes at a character boundary.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_from_every_source_agree() {
        let w3c = TraceId::parse("0af7651916cd43dd8448eb211c80319c").unwrap();
        assert_eq!(w3c.hex(), "0af7651916cd43dd8448eb211c80319c");
        let dd = TraceId::parse(&u64::from_str_radix("8448eb211c80319c", 16).unwrap().to_string()).unwrap();
        assert_eq!(dd.low(), w3c.low());
        assert!(dd.is_short() && !w3c.is_short());
        assert_eq!(TraceId::parse("8448eb211c80319c"), Some(dd));
        for bad in [
            "",
            "0",
            "00000000000000000000000000000000",
            "xyz",
            "1234567890123456789012345",
            "g".repeat(32).as_str(),
        ] {
            assert_eq!(TraceId::parse(bad), None, "{bad:?}");
        }
        let json = serde_json::to_string(&w3c).unwrap();
        assert_eq!(serde_json::from_str::<TraceId>(&json).unwrap(), w3c);
    }

    #[test]
    fn cut_keeps_characters_whole() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 5), "abc");
    }
}
