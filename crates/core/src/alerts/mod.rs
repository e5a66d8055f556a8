//! Alert lifecycles where silence is not health. A rule sees, at each
//! evaluation, a set of series (labels and a value, `None` when the value is
//! unknown); each series has its own alert:
//!
//! ```text
//!   ok ──condition──▶ pending ──held for `for`──▶ firing ──not condition──▶ resolved
//!    │                   │                          │
//!    └──── no value for `no_data_after` (from any state, resolved included) ──▶ no_data
//! ```
//!
//! `no_data` never resolves by itself: only a value that says the condition no
//! longer holds resolves it (a value that says it holds makes it firing). A series
//! with no value for `forget_after` is forgotten. Pure: time is passed in.

pub mod rule;

use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

pub type Labels = BTreeMap<String, String>;
/// A series' labels, shared by every rule and alert that names the series
/// (cloning is a count, not a copy).
pub type SharedLabels = Arc<Labels>;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// Seen, condition not holding: kept only to notice when it goes silent.
    Ok,
    Pending,
    Firing,
    NoData,
    Resolved,
}

impl AlertState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Ok => "ok",
            AlertState::Pending => "pending",
            AlertState::Firing => "firing",
            AlertState::NoData => "no_data",
            AlertState::Resolved => "resolved",
        }
    }

    /// States a person is told about.
    pub fn notifies(self) -> bool {
        matches!(self, AlertState::Firing | AlertState::NoData | AlertState::Resolved)
    }
}

/// When a series' value makes the condition hold.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Above(f64),
    Below(f64),
}

impl Condition {
    pub fn holds(self, value: f64) -> bool {
        match self {
            Condition::Above(t) => value > t,
            Condition::Below(t) => value < t,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Timing {
    /// How long the condition must hold before firing.
    pub for_ms: i64,
    /// How long a series may have no value before it is `no_data`.
    pub no_data_after_ms: i64,
    /// How long a series may have no value before it is forgotten.
    pub forget_after_ms: i64,
}

/// One series' alert.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Shared with the rule's other alerts (a rule over 100,000 groups has
    /// 100,000 alerts).
    pub rule: Arc<str>,
    pub labels: SharedLabels,
    pub state: AlertState,
    /// When it entered `state`.
    #[serde(rename = "since_ms")]
    pub since: Millis,
    /// When the condition started holding (pending and firing).
    #[serde(rename = "active_since_ms")]
    pub active_since: Option<Millis>,
    pub value: Option<f64>,
    #[serde(rename = "last_value_at_ms")]
    pub last_value_at: Millis,
    /// The last notifying state a notifier was handed.
    pub notified: Option<AlertState>,
}

/// A change of state, as the log keeps it and notifiers hear it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub rule: String,
    pub labels: SharedLabels,
    pub from: AlertState,
    pub to: AlertState,
    #[serde(rename = "at_ms")]
    pub at: Millis,
    pub value: Option<f64>,
}

/// Every series' alert, by rule then labels. At most `max_series`: a new series
/// beyond that is counted in `refused`, never evicting one that is watched.
#[derive(Clone, Debug)]
pub struct Alerts {
    rules: BTreeMap<Arc<str>, BTreeMap<SharedLabels, Alert>>,
    count: usize,
    max_series: usize,
    pub refused: u64,
}

impl Alerts {
    pub fn new(max_series: usize) -> Self {
        Self {
            rules: BTreeMap::new(),
            count: 0,
            max_series,
            refused: 0,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Alert> {
        self.rules.values().flat_map(BTreeMap::values)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// One evaluation of `rule` at `now` over the series it sees; returns what
    /// changed (pending included; see [`AlertState::notifies`]).
    pub fn evaluate(
        &mut self,
        rule: &str,
        condition: Condition,
        timing: Timing,
        series: impl IntoIterator<Item = (SharedLabels, Option<f64>)>,
        now: Millis,
    ) -> Vec<Transition> {
        let mut series: Vec<(SharedLabels, Option<f64>)> = series.into_iter().collect();
        if !series.is_sorted_by(|a, b| a.0 <= b.0) {
            series.sort_by(|a, b| a.0.cmp(&b.0));
        }
        series.dedup_by(|later, first| later.0 == first.0);
        self.evaluate_sorted(rule, condition, timing, series.iter().map(|(l, v)| (l, *v)), now)
    }

    /// [`Self::evaluate`] for series sorted by labels with no label set twice
    /// (what a caller that sorts a signal once for many rules gives). The
    /// series are walked beside the rule's alerts, which are updated where
    /// they are: one comparison per series instead of a search, none when
    /// they share the alert's labels (the same `Arc`), and the map changes
    /// only for alerts made or forgotten. That is what a cycle over a
    /// million series costs.
    ///
    /// The series are borrowed: a rule's walk over a signal copies no labels,
    /// and an alert made takes a count of its series' labels.
    pub fn evaluate_sorted<'a>(
        &mut self,
        rule: &str,
        condition: Condition,
        timing: Timing,
        series: impl IntoIterator<Item = (&'a SharedLabels, Option<f64>)>,
        now: Millis,
    ) -> Vec<Transition> {
        let mut last: Option<&SharedLabels> = None;
        let name = self.rule_name(rule);
        let alerts = self.rules.get_mut(rule).expect("made by rule_name");
        let series = series.into_iter();
        let mut out = Vec::new();
        // A rule's first round makes an alert for each of its series: room
        // for them at once (at 100,000 groups, growing this vector step by
        // step was a fifth of that round).
        let mut made: Vec<(SharedLabels, Alert)> = Vec::with_capacity(if alerts.is_empty() {
            let (least, most) = series.size_hint();
            most.unwrap_or(least).min(self.max_series.saturating_sub(self.count))
        } else {
            0
        });
        let mut forgotten: Vec<SharedLabels> = Vec::new();
        let mut old = alerts.iter_mut().peekable();
        let order = |k: &SharedLabels, labels: &SharedLabels| {
            if Arc::ptr_eq(k, labels) {
                std::cmp::Ordering::Equal
            } else {
                k.cmp(labels)
            }
        };
        let mut silent = |k: &SharedLabels, alert: &mut Alert, out: &mut Vec<Transition>| {
            if !went_silent(alert, timing, now, out) {
                forgotten.push(k.clone());
            }
        };
        for (labels, value) in series {
            debug_assert!(last.is_none_or(|l| **l < **labels), "sorted, no label set twice");
            last = Some(labels);
            let mut existing = None;
            while let Some((k, _)) = old.peek() {
                match order(k, labels) {
                    std::cmp::Ordering::Less => {
                        let (k, a) = old.next().expect("peeked");
                        silent(k, a, &mut out);
                    }
                    std::cmp::Ordering::Equal => {
                        existing = old.next();
                        break;
                    }
                    std::cmp::Ordering::Greater => break,
                }
            }
            match (existing, value) {
                (Some((k, a)), None) => silent(k, a, &mut out),
                (Some((_, alert)), Some(v)) => {
                    alert.value = Some(v);
                    alert.last_value_at = now;
                    step_with_value(alert, condition.holds(v), timing, now, &mut out);
                }
                // Nothing known of it yet, so nothing to miss.
                (None, None) => {}
                (None, Some(_)) if self.count + made.len() >= self.max_series => {
                    self.refused = self.refused.saturating_add(1);
                }
                (None, Some(v)) => {
                    let mut alert = Alert {
                        rule: name.clone(),
                        labels: labels.clone(),
                        state: AlertState::Ok,
                        since: now,
                        active_since: None,
                        value: Some(v),
                        last_value_at: now,
                        notified: None,
                    };
                    step_with_value(&mut alert, condition.holds(v), timing, now, &mut out);
                    made.push((labels.clone(), alert));
                }
            }
        }
        for (k, a) in old {
            silent(k, a, &mut out);
        }
        for k in &forgotten {
            alerts.remove(k);
        }
        self.count = self.count + made.len() - forgotten.len();
        if alerts.is_empty() {
            // Made in order, with no label set twice.
            *alerts = made.into_iter().collect();
        } else if made.len() <= alerts.len() / 8 {
            alerts.extend(made);
        } else {
            // Many at once (a rule's first cycle): built again in one pass
            // from both sorted sides rather than inserted one by one.
            let mut kept = std::mem::take(alerts).into_iter().peekable();
            let mut merged = Vec::with_capacity(kept.len() + made.len());
            for (k, a) in made {
                while let Some(older) = kept.next_if(|(o, _)| *o < k) {
                    merged.push(older);
                }
                merged.push((k, a));
            }
            merged.extend(kept);
            *alerts = merged.into_iter().collect();
        }
        out
    }

    /// Replays a logged transition (at start-up): the state it left, with the
    /// notification it records.
    pub fn replay(&mut self, t: &Transition, notified: bool) {
        // Mostly an alert this process just moved (its own change, stored and
        // applied back): found with one search per map, then nothing to insert.
        let found = self.rules.get_mut(t.rule.as_str()).and_then(|m| m.get_mut(&t.labels));
        let alert = match found {
            Some(a) => a,
            None if self.count >= self.max_series => {
                self.refused = self.refused.saturating_add(1);
                return;
            }
            None => {
                self.count += 1;
                let name = self.rule_name(&t.rule);
                let alerts = self.rules.get_mut(&*name).expect("made by rule_name");
                alerts.entry(t.labels.clone()).or_insert_with(|| Alert {
                    rule: name.clone(),
                    labels: t.labels.clone(),
                    state: t.to,
                    since: t.at,
                    active_since: None,
                    value: t.value,
                    last_value_at: t.at,
                    notified: None,
                })
            }
        };
        if notified {
            alert.notified = Some(t.to);
            return;
        }
        alert.state = t.to;
        alert.since = t.at;
        alert.value = t.value.or(alert.value);
        alert.last_value_at = alert.last_value_at.max(t.at);
        if matches!(t.to, AlertState::Pending | AlertState::Firing) && alert.active_since.is_none() {
            alert.active_since = Some(t.at);
        }
    }

    /// `rule`'s shared name, its map made if it had none.
    fn rule_name(&mut self, rule: &str) -> Arc<str> {
        if let Some((name, _)) = self.rules.get_key_value(rule) {
            return name.clone();
        }
        let name: Arc<str> = rule.into();
        self.rules.insert(name.clone(), BTreeMap::new());
        name
    }

    /// The rules that have alerts.
    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        self.rules.keys().map(|r| &**r)
    }

    /// Winds down a rule that no longer exists: its firing and no-data alerts
    /// resolve (people were told they fire; they must hear it is over), pending
    /// ones go quiet, and each is forgotten once quiet, or once told it
    /// resolved and shown so for `keep_resolved_ms`.
    pub fn retire(&mut self, rule: &str, now: Millis, keep_resolved_ms: i64) -> Vec<Transition> {
        let mut out = Vec::new();
        let Some(alerts) = self.rules.get_mut(rule) else {
            return out;
        };
        let before = alerts.len();
        alerts.retain(|_, alert| match alert.state {
            AlertState::Firing | AlertState::NoData => {
                out.push(change(alert, AlertState::Resolved, now));
                alert.active_since = None;
                true
            }
            AlertState::Resolved => {
                alert.notified != Some(AlertState::Resolved) || now.since(alert.since) < keep_resolved_ms
            }
            AlertState::Ok | AlertState::Pending => false,
        });
        self.count -= before - alerts.len();
        if alerts.is_empty() {
            self.rules.remove(rule);
        }
        out
    }

    /// Alerts whose notifying state no notifier was handed yet.
    pub fn unnotified(&self) -> impl Iterator<Item = &Alert> {
        self.iter()
            .filter(|a| a.state.notifies() && a.notified != Some(a.state))
    }

    /// Records that `rule`/`labels` was notified in `state`.
    pub fn mark_notified(&mut self, rule: &str, labels: &Labels, state: AlertState) {
        if let Some(a) = self.rules.get_mut(rule).and_then(|m| m.get_mut(labels)) {
            a.notified = Some(state);
        }
    }
}

fn change(alert: &mut Alert, to: AlertState, now: Millis) -> Transition {
    let t = Transition {
        rule: alert.rule.to_string(),
        labels: alert.labels.clone(),
        from: alert.state,
        to,
        at: now,
        value: alert.value,
    };
    alert.state = to;
    alert.since = now;
    t
}

/// A known alert without a value this round: `no_data` once silent for
/// `no_data_after`. False when silent long enough to be forgotten.
fn went_silent(alert: &mut Alert, timing: Timing, now: Millis, out: &mut Vec<Transition>) -> bool {
    let silent_for = now.since(alert.last_value_at);
    if silent_for >= timing.forget_after_ms {
        return false;
    }
    if silent_for >= timing.no_data_after_ms && alert.state != AlertState::NoData {
        out.push(change(alert, AlertState::NoData, now));
        alert.active_since = None;
    }
    true
}

fn step_with_value(alert: &mut Alert, holds: bool, timing: Timing, now: Millis, out: &mut Vec<Transition>) {
    use AlertState::*;
    if holds {
        let active = *alert.active_since.get_or_insert(now);
        let due = now.since(active) >= timing.for_ms;
        match alert.state {
            Ok | Resolved if due => out.push(change(alert, Firing, now)),
            Ok | Resolved => out.push(change(alert, Pending, now)),
            Pending if due => out.push(change(alert, Firing, now)),
            // Data again, and it says the condition holds: firing (after `for`
            // counted from now, as the silence proved nothing).
            NoData if due => out.push(change(alert, Firing, now)),
            NoData => out.push(change(alert, Pending, now)),
            Pending | Firing => {}
        }
    } else {
        alert.active_since = None;
        match alert.state {
            Firing | NoData => out.push(change(alert, Resolved, now)),
            Pending => out.push(change(alert, Ok, now)),
            Ok | Resolved => {}
        }
    }
}

/// Globs as alert scopes and silences write them ([`crate::glob`]).
pub use crate::glob::matches as glob_match;

/// A silence: alerts whose labels match every matcher (globs) are not notified
/// until it ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    pub id: String,
    pub matchers: Labels,
    #[serde(rename = "until_ms")]
    pub until: Millis,
    #[serde(default)]
    pub comment: String,
}

impl Silence {
    pub fn silences(&self, alert: &Alert, now: Millis) -> bool {
        now < self.until
            && self.matchers.iter().all(|(k, pattern)| {
                let value = if k == "alertname" {
                    Some(&*alert.rule)
                } else {
                    alert.labels.get(k).map(String::as_str)
                };
                value.is_some_and(|v| glob_match(pattern, v))
            })
    }
}

/// `{name}` in `template` replaced by the label's value, `{value}` by the value.
pub fn render(template: &str, labels: &Labels, value: Option<f64>) -> String {
    let mut out = template.to_owned();
    for (k, v) in labels {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    let value = value.map_or_else(|| "unknown".to_owned(), |v| format!("{}", (v * 100.0).round() / 100.0));
    out.replace("{value}", &value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_rule_resolves_what_fires_and_is_forgotten_once_told() {
        let timing = Timing {
            for_ms: 0,
            no_data_after_ms: 60_000,
            forget_after_ms: 3_600_000,
        };
        let mut alerts = Alerts::new(10);
        let l = |g: &str| SharedLabels::new(Labels::from([("group".to_owned(), g.to_owned())]));
        let series = vec![(l("a"), Some(5.0)), (l("b"), Some(0.0))];
        alerts.evaluate("r", Condition::Above(1.0), timing, series, Millis(0));
        assert_eq!(alerts.len(), 2);
        let t = alerts.retire("r", Millis(1_000), 10_000);
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].from, t[0].to), (AlertState::Firing, AlertState::Resolved));
        assert_eq!(alerts.len(), 1, "the quiet one is forgotten at once");
        assert_eq!(alerts.unnotified().count(), 1);
        assert!(alerts.retire("r", Millis(20_000), 10_000).is_empty());
        assert_eq!(alerts.len(), 1, "kept until told it resolved");
        alerts.mark_notified("r", &l("a"), AlertState::Resolved);
        alerts.retire("r", Millis(3_000), 10_000);
        assert_eq!(alerts.len(), 1, "and shown resolved for a while");
        alerts.retire("r", Millis(11_000), 10_000);
        assert!(alerts.is_empty());
        assert_eq!(alerts.rule_names().count(), 0);
    }
    use proptest::prelude::*;

    const TIMING: Timing = Timing {
        for_ms: 60_000,
        no_data_after_ms: 120_000,
        forget_after_ms: 3_600_000,
    };

    fn labels(group: &str) -> SharedLabels {
        SharedLabels::new([("group".to_owned(), group.to_owned())].into())
    }

    fn states(ts: &[Transition]) -> Vec<AlertState> {
        ts.iter().map(|t| t.to).collect()
    }

    #[test]
    fn fires_after_for_and_resolves_when_data_says_so() {
        let mut a = Alerts::new(100);
        let cond = Condition::Above(300.0);
        let mut eval = |v: f64, t: i64| a.evaluate("lag", cond, TIMING, [(labels("g"), Some(v))], Millis(t));
        assert!(eval(10.0, 0).is_empty());
        assert_eq!(states(&eval(400.0, 10_000)), [AlertState::Pending]);
        assert!(eval(500.0, 60_000).is_empty(), "held 50 s of 60");
        assert_eq!(states(&eval(600.0, 70_000)), [AlertState::Firing]);
        assert!(eval(700.0, 80_000).is_empty());
        assert_eq!(states(&eval(5.0, 90_000)), [AlertState::Resolved]);
    }

    #[test]
    fn silence_is_no_data_and_never_resolves_by_itself() {
        let mut a = Alerts::new(100);
        let cond = Condition::Above(300.0);
        a.evaluate("lag", cond, TIMING, [(labels("g"), Some(1.0))], Millis(0));
        // The series disappears: ok is not assumed.
        assert!(a.evaluate("lag", cond, TIMING, [], Millis(60_000)).is_empty());
        let t = a.evaluate("lag", cond, TIMING, [], Millis(120_000));
        assert_eq!(states(&t), [AlertState::NoData]);
        assert_eq!(t[0].from, AlertState::Ok);
        // An unknown value is no value either.
        for s in 0..100 {
            let t = a.evaluate("lag", cond, TIMING, [(labels("g"), None)], Millis(130_000 + s * 10_000));
            assert!(t.is_empty(), "stays no_data: {t:?}");
        }
        assert_eq!(a.iter().next().unwrap().state, AlertState::NoData);
        // Data that says all is well resolves it.
        let t = a.evaluate("lag", cond, TIMING, [(labels("g"), Some(1.0))], Millis(2_000_000));
        assert_eq!(states(&t), [AlertState::Resolved]);
        // And a series silent for an hour is forgotten.
        a.evaluate("lag", cond, TIMING, [], Millis(2_000_000 + 3_600_000));
        assert!(a.is_empty());
    }

    #[test]
    fn a_firing_alert_that_goes_silent_is_no_data_then_firing_again() {
        let mut a = Alerts::new(100);
        let cond = Condition::Above(0.0);
        let zero = Timing { for_ms: 0, ..TIMING };
        assert_eq!(
            states(&a.evaluate("p", cond, zero, [(labels("g"), Some(1.0))], Millis(0))),
            [AlertState::Firing]
        );
        assert_eq!(
            states(&a.evaluate("p", cond, zero, [], Millis(200_000))),
            [AlertState::NoData]
        );
        assert_eq!(
            states(&a.evaluate("p", cond, zero, [(labels("g"), Some(1.0))], Millis(210_000))),
            [AlertState::Firing]
        );
    }

    #[test]
    fn series_beyond_the_cap_are_refused_not_evicting() {
        let mut a = Alerts::new(2);
        let series = (0..5).map(|i| (labels(&format!("g{i}")), Some(1.0)));
        a.evaluate("r", Condition::Above(0.0), TIMING, series, Millis(0));
        assert_eq!((a.len(), a.refused), (2, 3));
    }

    #[test]
    fn replay_restores_state_and_what_was_notified() {
        let mut a = Alerts::new(100);
        let t = Transition {
            rule: "r".into(),
            labels: labels("g"),
            from: AlertState::Pending,
            to: AlertState::Firing,
            at: Millis(5),
            value: Some(9.0),
        };
        a.replay(&t, false);
        assert_eq!(
            a.unnotified().count(),
            1,
            "a crash before notifying notifies after the restart"
        );
        a.replay(&t, true);
        assert_eq!(a.unnotified().count(), 0, "and never twice");
        // Still firing: the next evaluation changes nothing.
        let out = a.evaluate(
            "r",
            Condition::Above(0.0),
            TIMING,
            [(labels("g"), Some(9.0))],
            Millis(10),
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn globs_silences_and_templates() {
        assert!(glob_match("prod-*", "prod-eu"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b", "ac"));
        let alert = Alert {
            rule: "lag".into(),
            labels: labels("billing"),
            state: AlertState::Firing,
            since: Millis(0),
            active_since: None,
            value: Some(321.456),
            last_value_at: Millis(0),
            notified: None,
        };
        let s = Silence {
            id: "s1".into(),
            matchers: [
                ("alertname".to_owned(), "lag".to_owned()),
                ("group".to_owned(), "bill*".to_owned()),
            ]
            .into(),
            until: Millis(100),
            comment: String::new(),
        };
        assert!(s.silences(&alert, Millis(99)));
        assert!(!s.silences(&alert, Millis(100)), "a silence ends");
        assert_eq!(
            render("{group} behind by {value} s ({nope})", &alert.labels, alert.value),
            "billing behind by 321.46 s ({nope})"
        );
    }

    proptest! {
        /// Whatever the values, an alert only fires after the condition held for
        /// `for`, only resolves on a value where it does not hold, and is no_data
        /// exactly when it has had no value for `no_data_after`.
        #[test]
        fn the_lifecycle_keeps_its_promises(steps in proptest::collection::vec((0i64..40_000, proptest::option::of(0.0f64..10.0)), 1..200)) {
            let mut a = Alerts::new(10);
            let cond = Condition::Above(5.0);
            let mut now = 0i64;
            let mut held_since: Option<i64> = None;
            let mut last_value = 0i64;
            let mut seen = false;
            for (dt, value) in steps {
                now += dt;
                let out = a.evaluate("r", cond, TIMING, [(labels("g"), value)], Millis(now));
                if value.is_some() { seen = true; last_value = now; }
                match value {
                    Some(v) if v > 5.0 => { held_since.get_or_insert(now); }
                    Some(_) => held_since = None,
                    None => {}
                }
                for t in &out {
                    match t.to {
                        AlertState::Firing => {
                            let since = held_since.expect("fires only while the condition holds");
                            prop_assert!(now - since >= TIMING.for_ms);
                        }
                        AlertState::Resolved => prop_assert!(matches!(value, Some(v) if v <= 5.0)),
                        AlertState::NoData => prop_assert!(value.is_none() && now - last_value >= TIMING.no_data_after_ms),
                        _ => {}
                    }
                }
                if seen && now - last_value < TIMING.forget_after_ms {
                    let state = a.iter().next().map(|x| x.state);
                    if now - last_value >= TIMING.no_data_after_ms {
                        prop_assert_eq!(state, Some(AlertState::NoData));
                    } else {
                        prop_assert_ne!(state, Some(AlertState::NoData));
                    }
                }
            }
        }

        /// Many series at once are each judged alone: their order does not
        /// matter, nor do the others, and the count is the alerts kept.
        #[test]
        fn series_are_judged_alone_in_any_order(
            cycles in proptest::collection::vec(
                (0i64..200_000, proptest::collection::vec(proptest::option::of(0.0f64..10.0), 6)),
                1..60,
            ),
            shuffle in any::<u64>(),
        ) {
            let mut together = Alerts::new(100);
            let mut reversed = Alerts::new(100);
            let mut alone: Vec<Alerts> = (0..6).map(|_| Alerts::new(100)).collect();
            let cond = Condition::Above(5.0);
            let mut now = 0i64;
            for (dt, values) in cycles {
                now += dt;
                let series: Vec<(SharedLabels, Option<f64>)> = values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (labels(&format!("g{i}")), *v))
                    .collect();
                let mut rotated = series.clone();
                rotated.rotate_left((shuffle % 6) as usize);
                rotated.reverse();
                let mut a = together.evaluate("r", cond, TIMING, series.clone(), Millis(now));
                let mut b = reversed.evaluate("r", cond, TIMING, rotated, Millis(now));
                let mut c: Vec<Transition> = alone
                    .iter_mut()
                    .zip(&series)
                    .flat_map(|(one, s)| one.evaluate("r", cond, TIMING, [s.clone()], Millis(now)))
                    .collect();
                for t in [&mut a, &mut b, &mut c] {
                    t.sort_by(|x, y| x.labels.cmp(&y.labels));
                }
                prop_assert_eq!(&a, &b);
                prop_assert_eq!(&a, &c);
                let states: Vec<Alert> = together.iter().cloned().collect();
                prop_assert_eq!(states, alone.iter().flat_map(|x| x.iter().cloned()).collect::<Vec<_>>());
                prop_assert_eq!(together.len(), together.iter().count());
            }
        }
    }
}
