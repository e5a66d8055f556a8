//! `streamsight alerts`: a collector's alerts, worst first; its rules and
//! silences, and changes to them.

use std::io::Write;

/// The collector's `/api/v1/alerts`, as is.
pub async fn list(url: &str) -> Result<serde_json::Value, String> {
    crate::collector_client::get_json(url, "/api/v1/alerts")
        .await
        .map_err(|e| format!("collector at {url}: {e}"))
}

pub fn write_table(out: &mut impl Write, body: &serde_json::Value) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<9} {:<22} {:<10} {:>10}  SUMMARY",
        "STATE", "RULE", "SINCE", "VALUE"
    )?;
    let now = body["now_ms"].as_i64().unwrap_or(0);
    for a in body["alerts"].as_array().into_iter().flatten() {
        let since = a["since_ms"].as_i64().map_or_else(String::new, |t| {
            streamsight_core::explain::duration(now.saturating_sub(t)).replace(' ', "")
        });
        let value = a["value"]
            .as_f64()
            .map_or_else(|| "unknown".to_owned(), |v| format!("{v:.2}"));
        let silenced = if a["silenced"] == true { " (silenced)" } else { "" };
        writeln!(
            out,
            "{:<9} {:<22} {:<10} {:>10}  {}{silenced}",
            a["state"].as_str().unwrap_or("?").to_uppercase(),
            a["rule"].as_str().unwrap_or("?"),
            since,
            value,
            a["summary"].as_str().unwrap_or(""),
        )?;
    }
    // An empty table says what it means, and rules not evaluated say so.
    if body["alerts"].as_array().is_none_or(Vec::is_empty) {
        writeln!(out, "no alert: none firing, pending, without data or resolved lately")?;
    }
    if body["evaluated"] == false {
        writeln!(
            out,
            "the rules were NOT evaluated at the last round: {}",
            body["not_evaluated_because"].as_str().unwrap_or("no reason given")
        )?;
    }
    Ok(())
}

/// The collector's rules, as is.
pub async fn rules(url: &str) -> Result<serde_json::Value, String> {
    crate::collector_client::get_json(url, "/api/v1/rules")
        .await
        .map_err(|e| format!("collector at {url}: {e}"))
}

/// The rules of a collector's `/api/v1/rules` answer (each with its
/// `source`, which is not a rule's field).
pub fn parse_rules(body: &serde_json::Value) -> Result<Vec<streamsight_core::alerts::rule::Rule>, String> {
    let Some(rules) = body["rules"].as_array() else {
        return Err("the collector's answer has no rules".to_owned());
    };
    rules
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(o) = r.as_object_mut() {
                o.remove("source");
            }
            serde_json::from_value(r).map_err(|e| format!("a rule the collector sent: {e}"))
        })
        .collect()
}

pub fn write_rules(out: &mut impl Write, body: &serde_json::Value) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<26} {:<26} {:<8} {:<8} CONDITION",
        "RULE", "SIGNAL", "FROM", "ENABLED"
    )?;
    for r in body["rules"].as_array().into_iter().flatten() {
        let condition = if let Some(direction) = r["anomaly"].as_str() {
            // The threshold an anomaly must also pass (Rule::anomaly_passes_threshold).
            match (direction, r["above"].as_f64(), r["below"].as_f64()) {
                ("rise", Some(above), _) if above != 0.0 => format!("anomalous rise and above {above}"),
                ("drop", _, Some(below)) => format!("anomalous drop and below {below}"),
                _ => format!("anomalous {direction}"),
            }
        } else if let Some(below) = r["below"].as_f64() {
            format!("below {below}")
        } else {
            format!("above {}", r["above"].as_f64().unwrap_or(0.0))
        };
        writeln!(
            out,
            "{:<26} {:<26} {:<8} {:<8} {condition} for {}",
            r["name"].as_str().unwrap_or("?"),
            r["signal"].as_str().unwrap_or("?"),
            r["source"].as_str().unwrap_or("?"),
            if r["enabled"] == false { "no" } else { "yes" },
            r["for"].as_str().unwrap_or("0s"),
        )?;
    }
    Ok(())
}

/// A change to a collector's rules or silences.
#[derive(Debug)]
pub enum Change {
    /// A rule in TOML, as in `[[serve.alerts.rules]]`.
    SetRule {
        name: String,
        toml: String,
    },
    RemoveRule {
        name: String,
    },
    /// `label=glob` matchers.
    Silence {
        matchers: Vec<String>,
        duration: String,
        comment: String,
    },
    EndSilence {
        id: String,
    },
}

/// Sends `change`; the collector's answer (or "done" for one without a body).
pub async fn change(url: &str, change: Change) -> Result<String, String> {
    use reqwest::Method;
    let enc = crate::collector_client::segment;
    let (method, path, body) = match change {
        Change::SetRule { name, toml } => {
            let rule: toml::Table = toml::from_str(&toml).map_err(|e| format!("the rule file: {e}"))?;
            let body = serde_json::to_value(rule).map_err(|e| e.to_string())?;
            (Method::PUT, format!("/api/v1/rules/{}", enc(&name)), Some(body))
        }
        Change::RemoveRule { name } => (Method::DELETE, format!("/api/v1/rules/{}", enc(&name)), None),
        Change::Silence {
            matchers,
            duration,
            comment,
        } => {
            let mut m = serde_json::Map::new();
            for x in matchers {
                let (k, v) = x
                    .split_once('=')
                    .ok_or_else(|| format!("a matcher is label=glob, not {x:?}"))?;
                m.insert(k.trim().to_owned(), serde_json::Value::String(v.trim().to_owned()));
            }
            let body = serde_json::json!({ "matchers": m, "duration": duration, "comment": comment });
            (Method::POST, "/api/v1/silences".to_owned(), Some(body))
        }
        Change::EndSilence { id } => (Method::DELETE, format!("/api/v1/silences/{}", enc(&id)), None),
    };
    let text = crate::collector_client::send(method, url, &path, &[], body.as_ref())
        .await
        .map_err(|e| format!("collector at {url}: {e}"))?;
    Ok(if text.is_empty() { "done".to_owned() } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An anomaly rule's floor is shown with it: the default lag_growth pages
    /// only above a minute, and says so.
    #[test]
    fn an_anomaly_rules_floor_is_in_its_condition() {
        let rules: Vec<serde_json::Value> = streamsight_node::config::alerts::default_rules()
            .iter()
            .map(|r| serde_json::to_value(r).expect("a rule serializes"))
            .collect();
        let mut out = Vec::new();
        write_rules(&mut out, &serde_json::json!({ "rules": rules })).expect("written to memory");
        let out = String::from_utf8(out).expect("text");
        let line = |name: &str| {
            out.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{out}"))
                .to_owned()
        };
        assert!(line("lag_growth").contains("anomalous rise and above 60"), "{out}");
        // Rule::new's 0 says nothing for a rise, and a drop rule has no floor.
        assert!(line("dlq_spike").contains("anomalous rise for"), "{out}");
        assert!(line("produce_rate_drop").contains("anomalous drop for"), "{out}");
    }

    /// Nothing to show is said, and rules nobody evaluated are never an
    /// empty, quiet table.
    #[test]
    fn an_empty_table_and_unevaluated_rules_are_said() {
        let mut out = Vec::new();
        let body = serde_json::json!({
            "now_ms": 0, "alerts": [], "evaluated": false,
            "not_evaluated_because": "a shard's holder did not answer"
        });
        write_table(&mut out, &body).expect("written to memory");
        let out = String::from_utf8(out).expect("text");
        assert!(
            out.contains("no alert:") && out.contains("NOT evaluated") && out.contains("did not answer"),
            "{out}"
        );
    }
}
