//! OTLP/JSON: camelCase, hex ids, 64-bit integers as strings.

use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonTraces {
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) resource_spans: Vec<JsonResourceSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonResourceSpans {
    #[serde(default)]
    pub(super) resource: Option<JsonResource>,
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) scope_spans: Vec<JsonScopeSpans>,
}

#[derive(Deserialize, Default)]
pub(super) struct JsonResource {
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) attributes: Vec<JsonKeyValue>,
}

#[derive(Deserialize)]
pub(super) struct JsonScopeSpans {
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) spans: Vec<JsonSpan>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonSpan {
    #[serde(default)]
    pub(super) trace_id: String,
    #[serde(default)]
    pub(super) span_id: String,
    #[serde(default)]
    pub(super) parent_span_id: String,
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) kind: i32,
    #[serde(default)]
    pub(super) start_time_unix_nano: JsonU64,
    #[serde(default)]
    pub(super) end_time_unix_nano: JsonU64,
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) attributes: Vec<JsonKeyValue>,
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) events: Vec<JsonEvent>,
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) links: Vec<JsonLink>,
    #[serde(default)]
    pub(super) status: Option<JsonStatus>,
}

#[derive(Deserialize)]
pub(super) struct JsonEvent {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) attributes: Vec<JsonKeyValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonLink {
    #[serde(default)]
    pub(super) trace_id: String,
    #[serde(default)]
    pub(super) span_id: String,
}

#[derive(Deserialize)]
pub(super) struct JsonStatus {
    #[serde(default)]
    pub(super) message: String,
    #[serde(default)]
    pub(super) code: i32,
}

#[derive(Deserialize)]
pub(super) struct JsonKeyValue {
    pub(super) key: String,
    #[serde(default)]
    pub(super) value: JsonAnyValue,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonAnyValue {
    pub(super) string_value: Option<String>,
    pub(super) bool_value: Option<bool>,
    pub(super) int_value: Option<JsonU64>,
    pub(super) double_value: Option<f64>,
}

/// A 64-bit integer as JSON writes it: a string (proto3 JSON) or a number.
#[derive(Default, Clone, Copy)]
pub(super) struct JsonU64(pub(super) u64);

impl<'de> Deserialize<'de> for JsonU64 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum N {
            S(String),
            U(u64),
            I(i64),
            F(f64),
        }
        Ok(JsonU64(match N::deserialize(d)? {
            N::S(s) => s
                .parse::<u64>()
                .or_else(|_| s.parse::<i64>().map(|i| i as u64))
                .map_err(serde::de::Error::custom)?,
            N::U(u) => u,
            N::I(i) => i as u64,
            N::F(f) => f as u64,
        }))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonLogs {
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) resource_logs: Vec<JsonResourceLogs>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonResourceLogs {
    #[serde(default)]
    pub(super) resource: Option<JsonResource>,
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) scope_logs: Vec<JsonScopeLogs>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonScopeLogs {
    #[serde(default, deserialize_with = "crate::budget::vec")]
    pub(super) log_records: Vec<JsonLogRecord>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsonLogRecord {
    #[serde(default)]
    pub(super) time_unix_nano: JsonU64,
    #[serde(default)]
    pub(super) observed_time_unix_nano: JsonU64,
    #[serde(default)]
    pub(super) severity_text: String,
    #[serde(default)]
    pub(super) body: Option<JsonAnyValue>,
    #[serde(default)]
    pub(super) trace_id: String,
    #[serde(default)]
    pub(super) span_id: String,
}
