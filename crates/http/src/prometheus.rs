//! Prometheus' text exposition format: escaped label values and metric
//! families written whole, for every part of `/metrics`.

use std::fmt::Write;

/// Escapes a label value: backslash, double quote and newline.
pub fn esc(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").into()
}

/// A label of streamsight's as Prometheus names it: `cluster` is
/// `cluster_name` (kafka-lag-exporter's name, every series' here); a name
/// Prometheus would refuse (or reserves, `__…`) is `None`.
pub fn label_name(name: &str) -> Option<&str> {
    let valid = !name.is_empty()
        && !name.starts_with("__")
        && name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    match name {
        "cluster" => Some("cluster_name"),
        _ => valid.then_some(name),
    }
}

pub fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One metric family: its samples must be written together, after its header.
#[derive(Debug)]
pub struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    body: String,
}

impl Family {
    pub fn new(name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Self {
            name,
            kind,
            help,
            body: String::new(),
        }
    }

    pub fn sample(&mut self, labels: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.body, "{}{{{labels}}} {value}", self.name);
    }

    /// A sample of one of the family's series named with a suffix (a
    /// histogram's `_bucket`, `_sum` and `_count`).
    pub fn suffixed(&mut self, suffix: &str, labels: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.body, "{}{suffix}{{{labels}}} {value}", self.name);
    }

    pub fn write(&self, out: &mut String) {
        header(out, self.name, self.kind, self.help);
        out.push_str(&self.body);
    }
}
