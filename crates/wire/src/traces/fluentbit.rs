//! Fluent Bit's `http` output with `format json_lines`: one JSON object per
//! line. The trace id is whichever of the configured fields the parser
//! produced (a flat key such as `dd.trace_id`, or the same path nested);
//! W3C hex and Datadog decimal ids are both understood.

use super::{DecodeError, Decoded, Limits};
use crate::budget;
use serde_json::Value;
use streamsight_core::Millis;
use streamsight_core::journey::{LogLine, MAX_BODY, MAX_TEXT, Source, TraceId, cut};

/// Where a field is: the flat key, else the dotted path through objects.
fn field<'a>(line: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(v) = line.get(name) {
        return Some(v);
    }
    let mut parts = name.split('.');
    let mut v = line.get(parts.next()?)?;
    for p in parts {
        v = v.as_object()?.get(p)?;
    }
    Some(v)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The lines of a `json_lines` body that name a trace; `received` dates lines
/// that carry no time of their own (`date`, `time` or `timestamp`, in seconds
/// or milliseconds).
pub fn decode(body: &[u8], trace_fields: &[String], received: Millis, limits: Limits) -> Result<Decoded, DecodeError> {
    let mut out = Decoded::default();
    for (n, raw) in body.split(|b| *b == b'\n').enumerate() {
        let raw = raw.trim_ascii();
        if raw.is_empty() {
            continue;
        }
        if out.logs.len() >= limits.max_items {
            return Err(DecodeError::TooMany(limits.max_items));
        }
        // A line is built whole as a `Value`: its values are counted and
        // charged first, and stay charged while it lives (`[0,0,…]` is 2 bytes
        // a value, over a hundred once built).
        let mark = budget::charged();
        match budget::charge_json(raw, budget::JSON_VALUE_BYTES) {
            Ok(_) => {}
            Err(budget::JsonCharge::Json(_)) => {
                budget::release_to(mark);
                out.skip(|| format!("line {}: not JSON", n + 1));
                continue;
            }
            Err(budget::JsonCharge::Memory(spent)) => return Err(DecodeError::Memory(spent)),
        }
        budget::charge(raw.len()).map_err(DecodeError::Memory)?;
        let parsed = serde_json::from_slice::<Value>(raw);
        let Ok(Value::Object(line)) = parsed else {
            budget::release_to(mark);
            out.skip(|| format!("line {}: not a JSON object", n + 1));
            continue;
        };
        let Some(trace_id) = trace_fields
            .iter()
            .find_map(|f| field(&line, f).and_then(text))
            .and_then(|t| TraceId::parse(&t))
        else {
            out.skip(|| format!("line {}: no trace id in {trace_fields:?}", n + 1));
            continue;
        };
        let at = ["date", "time", "timestamp"]
            .iter()
            .find_map(|k| line.get(*k).and_then(Value::as_f64))
            .map_or(received, |t| {
                // Seconds (Fluent Bit's `date`) or milliseconds.
                Millis(if t < 1e11 { (t * 1000.0) as i64 } else { t as i64 })
            });
        let pick = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| field(&line, k).and_then(text))
                .unwrap_or_default()
        };
        let kept = LogLine {
            trace_id,
            span_id: pick(&["span_id", "dd.span_id", "spanId"]).parse().ok(),
            at,
            severity: cut(&pick(&["level", "severity", "status"]), 32),
            body: cut(&pick(&["log", "message", "msg"]), MAX_BODY),
            service: cut(&pick(&["service", "service.name", "dd.service"]), MAX_TEXT),
            source: Source::FluentBit,
        };
        drop(line);
        budget::release_to(mark);
        out.admit(limits)?;
        out.logs.push(kept);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<String> {
        ["trace_id", "dd.trace_id", "traceId"].map(String::from).to_vec()
    }

    #[test]
    fn lines_with_a_trace_id_in_any_of_the_fields() {
        let body = concat!(
            r#"{"date":1700000000.5,"log":"charging","level":"info","trace_id":"0af7651916cd43dd8448eb211c80319c"}"#,
            "\n",
            r#"{"date":1700000001,"message":"failed","dd":{"trace_id":"9532127138774266268","span_id":"5"}}"#,
            "\n",
            r#"{"log":"no trace here"}"#,
            "\nnot json\n\n"
        );
        let d = decode(body.as_bytes(), &fields(), Millis(7), Limits::default()).unwrap();
        assert_eq!(d.logs.len(), 2);
        assert_eq!(d.skipped, 2);
        assert_eq!(d.logs[0].at, Millis(1_700_000_000_500));
        assert_eq!(d.logs[0].trace_id.hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(d.logs[1].trace_id.low(), 0x8448_eb21_1c80_319c);
        assert_eq!(d.logs[1].body, "failed");
    }

    #[test]
    fn a_line_is_charged_while_it_lives_and_refused_before_it_is_built() {
        let wide = format!(
            r#"{{"trace_id":"0af7651916cd43dd8448eb211c80319c","x":[{}0]}}"#,
            "0,".repeat(100_000)
        );
        let mut meter = budget::Meter::unbounded();
        let counted = budget::metered(&mut meter, || budget::charge_json(wide.as_bytes(), 10));
        assert_eq!((counted.unwrap(), meter.charged()), (100_004, 1_000_040));
        let body = format!("{wide}\n{wide}");
        let mut meter = budget::Meter::new(32 << 20, None);
        let d = budget::metered(&mut meter, || {
            decode(body.as_bytes(), &fields(), Millis(0), Limits::default())
        });
        // Each line fits alone; only the lines kept stay charged.
        assert_eq!(d.unwrap().logs.len(), 2);
        assert!(meter.charged() < 4096, "{} bytes still charged", meter.charged());
        let mut small = budget::Meter::new(4 << 20, None);
        let refused = budget::metered(&mut small, || {
            decode(body.as_bytes(), &fields(), Millis(0), Limits::default())
        });
        assert!(matches!(
            refused,
            Err(DecodeError::Memory(budget::Spent::Request { .. }))
        ));
    }

    #[test]
    fn the_count_is_bounded() {
        let line = r#"{"trace_id":"0af7651916cd43dd8448eb211c80319c"}"#;
        let body = [line; 11].join("\n");
        let limits = Limits {
            max_items: 10,
            ..Limits::default()
        };
        assert!(matches!(
            decode(body.as_bytes(), &fields(), Millis(0), limits),
            Err(DecodeError::TooMany(10))
        ));
    }
}
