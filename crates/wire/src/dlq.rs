//! Dead-letter provenance headers: where a dead-lettered record came from and
//! why it is there, in streamsight's own names and, when asked, in Spring
//! Kafka's (`kafka_dlt-*`) and Kafka Connect's (`__connect.errors.*`) so that
//! existing DLQ tooling reads them. [`Provenance::parse`] reads any of the three.

/// What a DLQ record says of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    pub source_timestamp_ms: Option<i64>,
    pub consumer_group: Option<String>,
    /// Where in the pipeline it failed (`validation`, `processing`, `transform`...).
    pub stage: Option<String>,
    /// A short class: `schema_violation`, `deserialization`, an exception class.
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub schema_id: Option<String>,
    pub trace_id: Option<String>,
    /// Which naming the headers used: `streamsight`, `spring` or `connect`.
    pub convention: Option<&'static str>,
}

/// streamsight's own header names.
pub mod names {
    pub const SOURCE_TOPIC: &str = "streamsight.dlq.source.topic";
    pub const SOURCE_PARTITION: &str = "streamsight.dlq.source.partition";
    pub const SOURCE_OFFSET: &str = "streamsight.dlq.source.offset";
    pub const SOURCE_TIMESTAMP: &str = "streamsight.dlq.source.timestamp";
    pub const CONSUMER_GROUP: &str = "streamsight.dlq.consumer.group";
    pub const STAGE: &str = "streamsight.dlq.stage";
    pub const ERROR_CLASS: &str = "streamsight.dlq.error.class";
    pub const ERROR_MESSAGE: &str = "streamsight.dlq.error.message";
    pub const SCHEMA_ID: &str = "streamsight.dlq.schema.id";
    pub const TRACE_ID: &str = "streamsight.dlq.trace.id";
}

/// Longest error message written into a header.
const MESSAGE_MAX: usize = 1_024;
/// Longest header value read as text: anything longer is cut there.
pub const VALUE_MAX: usize = 1_024;

/// A trace id as the SDK and tracers write it: 1 to 32 hex digits (W3C's 128
/// bits, or a Datadog id in hex). Anything else is not a trace id, and never goes
/// into a URL.
pub fn is_trace_id(id: &str) -> bool {
    (1..=32).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Which extra naming to write besides streamsight's.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Conventions {
    pub spring: bool,
    pub connect: bool,
}

fn text(v: &str) -> Vec<u8> {
    v.as_bytes().to_vec()
}

impl Provenance {
    /// The headers to add, in order, each (name, value).
    pub fn headers(&self, also: Conventions) -> Vec<(&'static str, Vec<u8>)> {
        use names::*;
        let mut h = Vec::new();
        let message = self.error_message.as_deref().map(|m| truncate(m, MESSAGE_MAX));
        let mut put = |name: &'static str, v: Option<Vec<u8>>| {
            if let Some(v) = v {
                h.push((name, v));
            }
        };
        put(SOURCE_TOPIC, self.source_topic.as_deref().map(text));
        put(SOURCE_PARTITION, self.source_partition.map(|p| text(&p.to_string())));
        put(SOURCE_OFFSET, self.source_offset.map(|o| text(&o.to_string())));
        put(SOURCE_TIMESTAMP, self.source_timestamp_ms.map(|t| text(&t.to_string())));
        put(CONSUMER_GROUP, self.consumer_group.as_deref().map(text));
        put(STAGE, self.stage.as_deref().map(text));
        put(ERROR_CLASS, self.error_class.as_deref().map(text));
        put(ERROR_MESSAGE, message.map(text));
        put(SCHEMA_ID, self.schema_id.as_deref().map(text));
        put(TRACE_ID, self.trace_id.as_deref().map(text));
        if also.spring {
            // Spring writes numbers as big-endian binary, strings as UTF-8.
            put("kafka_dlt-original-topic", self.source_topic.as_deref().map(text));
            put(
                "kafka_dlt-original-partition",
                self.source_partition.map(|p| p.to_be_bytes().to_vec()),
            );
            put(
                "kafka_dlt-original-offset",
                self.source_offset.map(|o| o.to_be_bytes().to_vec()),
            );
            put(
                "kafka_dlt-original-timestamp",
                self.source_timestamp_ms.map(|t| t.to_be_bytes().to_vec()),
            );
            put(
                "kafka_dlt-original-consumer-group",
                self.consumer_group.as_deref().map(text),
            );
            put("kafka_dlt-exception-fqcn", self.error_class.as_deref().map(text));
            put("kafka_dlt-exception-message", message.map(text));
        }
        if also.connect {
            put("__connect.errors.topic", self.source_topic.as_deref().map(text));
            put(
                "__connect.errors.partition",
                self.source_partition.map(|p| text(&p.to_string())),
            );
            put(
                "__connect.errors.offset",
                self.source_offset.map(|o| text(&o.to_string())),
            );
            put("__connect.errors.stage", self.stage.as_deref().map(text));
            put(
                "__connect.errors.exception.class.name",
                self.error_class.as_deref().map(text),
            );
            put("__connect.errors.exception.message", message.map(text));
        }
        h
    }

    /// Reads provenance from a record's headers in any of the three namings
    /// (streamsight's wins where several are present). `None` when there is none.
    pub fn parse<'a>(headers: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>) -> Option<Self> {
        let mut p = Provenance::default();
        let (mut own, mut spring, mut connect) = (false, false, false);
        let s =
            |v: &[u8]| Some(truncate(&String::from_utf8_lossy(&v[..v.len().min(VALUE_MAX + 4)]), VALUE_MAX).to_owned());
        let num = |v: &[u8]| std::str::from_utf8(v).ok().and_then(|t| t.trim().parse::<i64>().ok());
        // Spring's numbers are binary; a textual one (older versions) is read too.
        let spring_num = |v: &[u8]| match v.len() {
            8 => Some(i64::from_be_bytes(v.try_into().unwrap_or([0; 8]))),
            4 => Some(i64::from(i32::from_be_bytes(v.try_into().unwrap_or([0; 4])))),
            _ => num(v),
        };
        fn set<T>(slot: &mut Option<T>, v: Option<T>, strong: bool) {
            if strong || slot.is_none() {
                if let Some(v) = v {
                    *slot = Some(v);
                }
            }
        }
        for (name, value) in headers {
            let Some(v) = value else { continue };
            let part = |n: i64| i32::try_from(n).ok();
            if let Some(rest) = name.strip_prefix("streamsight.dlq.") {
                own = true;
                match rest {
                    "source.topic" => set(&mut p.source_topic, s(v), true),
                    "source.partition" => set(&mut p.source_partition, num(v).and_then(part), true),
                    "source.offset" => set(&mut p.source_offset, num(v), true),
                    "source.timestamp" => set(&mut p.source_timestamp_ms, num(v), true),
                    "consumer.group" => set(&mut p.consumer_group, s(v), true),
                    "stage" => set(&mut p.stage, s(v), true),
                    "error.class" => set(&mut p.error_class, s(v), true),
                    "error.message" => set(&mut p.error_message, s(v), true),
                    "schema.id" => set(&mut p.schema_id, s(v), true),
                    "trace.id" => set(&mut p.trace_id, s(v).filter(|id| is_trace_id(id)), true),
                    _ => {}
                }
            } else if let Some(rest) = name.strip_prefix("kafka_dlt-") {
                spring = true;
                match rest {
                    "original-topic" => set(&mut p.source_topic, s(v), false),
                    "original-partition" => set(&mut p.source_partition, spring_num(v).and_then(part), false),
                    "original-offset" => set(&mut p.source_offset, spring_num(v), false),
                    "original-timestamp" => set(&mut p.source_timestamp_ms, spring_num(v), false),
                    "original-consumer-group" => set(&mut p.consumer_group, s(v), false),
                    "exception-fqcn" => set(&mut p.error_class, s(v), false),
                    "exception-message" => set(&mut p.error_message, s(v), false),
                    _ => {}
                }
            } else if let Some(rest) = name.strip_prefix("__connect.errors.") {
                connect = true;
                match rest {
                    "topic" => set(&mut p.source_topic, s(v), false),
                    "partition" => set(&mut p.source_partition, num(v).and_then(part), false),
                    "offset" => set(&mut p.source_offset, num(v), false),
                    "stage" => set(&mut p.stage, s(v), false),
                    "exception.class.name" => set(&mut p.error_class, s(v), false),
                    "exception.message" => set(&mut p.error_message, s(v), false),
                    "connector.name" => set(&mut p.consumer_group, s(v).map(|c| format!("connect-{c}")), false),
                    _ => {}
                }
            }
        }
        // Spring's error handler names no stage: a letter it wrote is a
        // listener's failure, in deserializing (its exception says so) or in
        // processing; "unknown" said nothing a reader could use.
        if spring && !own && p.stage.is_none() {
            let deserializing = p.error_class.as_deref().is_some_and(|c| c.contains("Deserializ"));
            p.stage = Some(if deserializing { "deserialization" } else { "processing" }.to_owned());
        }
        p.convention = if own {
            Some("streamsight")
        } else if spring {
            Some("spring")
        } else if connect {
            Some("connect")
        } else {
            return None;
        };
        Some(p)
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A DLQ topic by naming convention: `<topic>.dlq`, `-dlq`, `.DLT`, `-dlt`.
/// Returns the source topic the name points at.
pub fn source_of_dlq_name(topic: &str) -> Option<&str> {
    [".dlq", "-dlq", ".DLT", "-dlt", ".DLQ", "-DLT"]
        .iter()
        .find_map(|suffix| topic.strip_suffix(suffix))
        .filter(|s| !s.is_empty())
}

/// The header a redriven record carries in place of its provenance: which
/// redrive sent it, and which dead letter it was (`<run> <dlq>/<partition>/<offset>`;
/// a topic name holds neither a space nor a `/`).
pub const REDRIVE_HEADER: &str = "streamsight-redrive";

/// A [`REDRIVE_HEADER`] value.
pub fn redrive_header(run: &str, dlq: &str, partition: i32, offset: i64) -> String {
    format!("{run} {dlq}/{partition}/{offset}")
}

/// A [`REDRIVE_HEADER`] value read back: (run, DLQ topic, partition, offset).
pub fn parse_redrive_header(v: &[u8]) -> Option<(&str, &str, i32, i64)> {
    let v = std::str::from_utf8(v).ok()?;
    let (run, letter) = v.split_once(' ')?;
    let mut parts = letter.rsplitn(3, '/');
    let offset = parts.next()?.parse().ok()?;
    let partition = parts.next()?.parse().ok()?;
    let dlq = parts.next().filter(|t| !t.is_empty())?;
    Some((run, dlq, partition, offset))
}

/// Whether a header is provenance in one of the three namings: what a
/// redrive takes off a dead letter before sending it back.
pub fn is_provenance(name: &str) -> bool {
    name.starts_with("streamsight.dlq.") || name.starts_with("kafka_dlt-") || name.starts_with("__connect.errors.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redrive_headers_round_trip_and_name_provenance() {
        let v = redrive_header("0123abcd", "orders.dlq", 2, 41);
        assert_eq!(
            parse_redrive_header(v.as_bytes()),
            Some(("0123abcd", "orders.dlq", 2, 41))
        );
        for bad in ["", "run", "run orders.dlq/2", "run /2/3", "run t/x/3", "run t/2/y"] {
            assert_eq!(parse_redrive_header(bad.as_bytes()), None, "{bad}");
        }
        assert!(is_provenance(names::STAGE) && is_provenance("kafka_dlt-original-topic"));
        assert!(is_provenance("__connect.errors.topic") && !is_provenance("traceparent"));
    }

    fn full() -> Provenance {
        Provenance {
            source_topic: Some("orders".into()),
            source_partition: Some(2),
            source_offset: Some(41),
            source_timestamp_ms: Some(1_700_000_000_000),
            consumer_group: Some("billing".into()),
            stage: Some("validation".into()),
            error_class: Some("schema_violation".into()),
            error_message: Some("\"amount\" is a required property".into()),
            schema_id: Some("7".into()),
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            convention: Some("streamsight"),
        }
    }

    fn parse(h: &[(&'static str, Vec<u8>)]) -> Option<Provenance> {
        Provenance::parse(h.iter().map(|(k, v)| (*k, Some(v.as_slice()))))
    }

    #[test]
    fn spring_letters_have_a_stage() {
        let at = |fqcn: &str| {
            parse(&[
                ("kafka_dlt-original-topic", b"orders".to_vec()),
                ("kafka_dlt-exception-fqcn", fqcn.as_bytes().to_vec()),
            ])
            .unwrap()
            .stage
        };
        assert_eq!(at("java.lang.IllegalStateException").as_deref(), Some("processing"));
        assert_eq!(
            at("org.springframework.kafka.support.serializer.DeserializationException").as_deref(),
            Some("deserialization")
        );
    }

    #[test]
    fn each_convention_round_trips() {
        let p = full();
        let all = p.headers(Conventions {
            spring: true,
            connect: true,
        });
        assert_eq!(parse(&all), Some(p.clone()));
        let spring_only: Vec<_> = all
            .iter()
            .filter(|(k, _)| k.starts_with("kafka_dlt-"))
            .cloned()
            .collect();
        let s = parse(&spring_only).unwrap();
        assert_eq!(s.convention, Some("spring"));
        assert_eq!(
            (s.source_partition, s.source_offset, s.source_timestamp_ms),
            (Some(2), Some(41), p.source_timestamp_ms)
        );
        assert_eq!(
            (s.consumer_group.as_deref(), s.error_class.as_deref()),
            (Some("billing"), Some("schema_violation"))
        );
        let connect_only: Vec<_> = all
            .iter()
            .filter(|(k, _)| k.starts_with("__connect"))
            .cloned()
            .collect();
        let c = parse(&connect_only).unwrap();
        assert_eq!(
            (c.convention, c.source_topic.as_deref(), c.stage.as_deref()),
            (Some("connect"), Some("orders"), Some("validation"))
        );
    }

    #[test]
    fn records_without_provenance_and_garbage_values() {
        assert_eq!(parse(&[("traceparent", b"x".to_vec())]), None);
        let odd = parse(&[
            ("kafka_dlt-original-offset", vec![1, 2, 3]),
            ("__connect.errors.partition", b"x".to_vec()),
        ])
        .unwrap();
        assert_eq!((odd.source_offset, odd.source_partition), (None, None));
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let p = Provenance {
            error_message: Some("é".repeat(1_000)),
            ..Provenance::default()
        };
        let h = p.headers(Conventions::default());
        let (_, v) = h.iter().find(|(k, _)| *k == names::ERROR_MESSAGE).unwrap();
        assert!(v.len() <= MESSAGE_MAX && std::str::from_utf8(v).is_ok());
    }

    #[test]
    fn dlq_names() {
        assert_eq!(source_of_dlq_name("orders.dlq"), Some("orders"));
        assert_eq!(source_of_dlq_name("orders-dlt"), Some("orders"));
        assert_eq!(source_of_dlq_name("orders.DLT"), Some("orders"));
        assert_eq!(source_of_dlq_name("orders"), None);
        assert_eq!(source_of_dlq_name(".dlq"), None);
    }

    #[test]
    fn hostile_headers_are_cut_and_bad_trace_ids_dropped() {
        let huge = vec![b'x'; 1 << 20];
        let evil_id = b"\"><script>alert(1)</script>";
        let headers = [
            ("streamsight.dlq.error.message", Some(&huge[..])),
            ("streamsight.dlq.stage", Some(&huge[..])),
            ("streamsight.dlq.trace.id", Some(&evil_id[..])),
        ];
        let p = Provenance::parse(headers).unwrap();
        assert!(p.error_message.unwrap().len() <= VALUE_MAX);
        assert!(p.stage.unwrap().len() <= VALUE_MAX);
        assert_eq!(p.trace_id, None);
        let ok = Provenance::parse([(
            "streamsight.dlq.trace.id",
            Some(&b"0af7651916cd43dd8448eb211c80319c"[..]),
        )]);
        assert_eq!(
            ok.unwrap().trace_id.as_deref(),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
        assert!(!is_trace_id("") && !is_trace_id(&"a".repeat(33)) && is_trace_id("12ab"));
    }
}
