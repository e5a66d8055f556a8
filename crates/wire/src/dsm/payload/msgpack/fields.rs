//! The payload's structs, field by field, on the reader's primitives.

use super::{Reader, Result};
use crate::dsm::payload::{
    Backlog, Bucket, ConsumeStart, ConsumedCount, Counted, Delivery, FailedSends, Payload, ProducedCount, SkippedRange,
    StatsPoint, Text,
};

impl<'a, S: Text<'a>> Reader<'a, S> {
    pub(super) fn payload(&mut self) -> Result<Payload<S>> {
        let mut p = Payload::default();
        const NAMES: &[&str] = &[
            "Env",
            "Service",
            "Lang",
            "TracerVersion",
            "Version",
            "Stats",
            "ProcessTags",
            "ProductMask",
            "PrimaryTag",
            "Hostname",
            "StreamsightFailedSends",
            "StreamsightDelivery",
        ];
        self.fields("payload", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => p.env = r.nullable_string(field)?,
                1 => p.service = r.nullable_string(field)?,
                2 => p.lang = r.nullable_string(field)?,
                3 => p.tracer_version = r.nullable_string(field)?,
                4 => p.version = r.nullable_string(field)?,
                5 => p.stats = r.list(Counted::Buckets, field, Self::bucket)?,
                6 => p.process_tags = r.strings(Counted::Tags, field)?,
                7 => p.product_mask = r.flexible_u64(field)?,
                8 => p.primary_tag = r.nullable_string(field)?,
                9 => p.hostname = r.nullable_string(field)?,
                10 => p.failed_sends = r.list(Counted::FailedSends, field, Self::failed_sends)?,
                _ => p.delivery = r.delivery()?,
            }
            Ok(())
        })?;
        Ok(p)
    }

    fn bucket(&mut self) -> Result<Bucket<S>> {
        let mut b = Bucket::default();
        const NAMES: &[&str] = &["Start", "Duration", "Stats", "Backlogs"];
        self.fields("bucket", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => b.start = r.flexible_u64(field)?,
                1 => b.duration = r.flexible_u64(field)?,
                2 => b.stats = r.list(Counted::StatsPoints, field, Self::stats_point)?,
                _ => b.backlogs = r.list(Counted::Backlogs, field, Self::backlog)?,
            }
            Ok(())
        })?;
        Ok(b)
    }

    fn stats_point(&mut self) -> Result<StatsPoint<S>> {
        let mut s = StatsPoint::default();
        const NAMES: &[&str] = &[
            "EdgeTags",
            "Hash",
            "ParentHash",
            "PathwayLatency",
            "EdgeLatency",
            "PayloadSize",
            "TimestampType",
        ];
        self.fields("stats point", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => s.edge_tags = r.strings(Counted::Tags, field)?,
                1 => s.hash = r.flexible_u64(field)?,
                2 => s.parent_hash = r.flexible_u64(field)?,
                3 => s.pathway_latency = r.nullable_bytes(field)?,
                4 => s.edge_latency = r.nullable_bytes(field)?,
                5 => s.payload_size = r.nullable_bytes(field)?,
                _ => s.timestamp_type = r.nullable_string(field)?,
            }
            Ok(())
        })?;
        Ok(s)
    }

    fn backlog(&mut self) -> Result<Backlog<S>> {
        let mut b = Backlog::default();
        self.fields("backlog", &["Tags", "Value"], |r, i| {
            match i {
                0 => b.tags = r.strings(Counted::Tags, "Tags")?,
                _ => b.value = r.flexible_i64("Value")?,
            }
            Ok(())
        })?;
        Ok(b)
    }

    fn failed_sends(&mut self) -> Result<FailedSends<S>> {
        let mut f = FailedSends::default();
        const NAMES: &[&str] = &[
            "Topic",
            "Partition",
            "Error",
            "Count",
            "KafkaClusterId",
            "WindowMs",
            "TraceIds",
            "Recovered",
        ];
        self.fields("failed sends", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => f.topic = r.nullable_string(field)?,
                1 => f.partition = r.i32(field)?,
                2 => f.error = r.nullable_string(field)?,
                3 => f.count = r.flexible_u64(field)?,
                4 => f.cluster = r.nullable_string(field)?,
                5 => f.window_ms = r.flexible_i64(field)?,
                6 => f.trace_ids = r.strings(Counted::TraceIds, field)?,
                _ => f.recovered = r.bool(field)?,
            }
            Ok(())
        })?;
        Ok(f)
    }

    fn delivery(&mut self) -> Result<Delivery<S>> {
        let mut d = Delivery::default();
        if self.nil()? {
            return Ok(d);
        }
        const NAMES: &[&str] = &["KafkaClusterId", "Produced", "Consumed", "Skipped", "Started"];
        self.fields("delivery", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => d.cluster = r.nullable_string(field)?,
                1 => d.produced = r.list(Counted::DeliveryFacts, field, Self::produced)?,
                2 => d.consumed = r.list(Counted::DeliveryFacts, field, Self::consumed)?,
                3 => d.skipped = r.list(Counted::DeliveryFacts, field, Self::skipped)?,
                _ => d.started = r.list(Counted::DeliveryFacts, field, Self::started)?,
            }
            Ok(())
        })?;
        Ok(d)
    }

    fn produced(&mut self) -> Result<ProducedCount<S>> {
        let mut c = ProducedCount::default();
        const NAMES: &[&str] = &["Topic", "Partition", "WindowMs", "Count", "FirstOffset", "LastOffset"];
        self.fields("produced count", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => c.topic = r.nullable_string(field)?,
                1 => c.partition = r.i32(field)?,
                2 => c.window_ms = r.flexible_i64(field)?,
                3 => c.count = r.flexible_u64(field)?,
                4 => c.first_offset = r.flexible_i64(field)?,
                _ => c.last_offset = r.flexible_i64(field)?,
            }
            Ok(())
        })?;
        Ok(c)
    }

    fn consumed(&mut self) -> Result<ConsumedCount<S>> {
        let mut c = ConsumedCount::default();
        const NAMES: &[&str] = &[
            "Group",
            "Topic",
            "Partition",
            "WindowMs",
            "Received",
            "Failed",
            "DeadLettered",
            "TraceIds",
        ];
        self.fields("consumed count", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => c.group = r.nullable_string(field)?,
                1 => c.topic = r.nullable_string(field)?,
                2 => c.partition = r.i32(field)?,
                3 => c.window_ms = r.flexible_i64(field)?,
                4 => c.received = r.flexible_u64(field)?,
                5 => c.failed = r.flexible_u64(field)?,
                6 => c.dead_lettered = r.flexible_u64(field)?,
                _ => c.trace_ids = r.strings(Counted::TraceIds, field)?,
            }
            Ok(())
        })?;
        Ok(c)
    }

    fn skipped(&mut self) -> Result<SkippedRange<S>> {
        let mut s = SkippedRange::default();
        const NAMES: &[&str] = &["Group", "Topic", "Partition", "FirstOffset", "LastOffset", "AtMs"];
        self.fields("skipped range", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => s.group = r.nullable_string(field)?,
                1 => s.topic = r.nullable_string(field)?,
                2 => s.partition = r.i32(field)?,
                3 => s.first_offset = r.flexible_i64(field)?,
                4 => s.last_offset = r.flexible_i64(field)?,
                _ => s.at_ms = r.flexible_i64(field)?,
            }
            Ok(())
        })?;
        Ok(s)
    }

    fn started(&mut self) -> Result<ConsumeStart<S>> {
        let mut s = ConsumeStart::default();
        const NAMES: &[&str] = &["Group", "Topic", "Partition", "FirstOffset", "AtMs"];
        self.fields("consume start", NAMES, |r, i| {
            let field = NAMES[i];
            match i {
                0 => s.group = r.nullable_string(field)?,
                1 => s.topic = r.nullable_string(field)?,
                2 => s.partition = r.i32(field)?,
                3 => s.first_offset = r.flexible_i64(field)?,
                _ => s.at_ms = r.flexible_i64(field)?,
            }
            Ok(())
        })?;
        Ok(s)
    }
}
