//! Changes that are stored before they take effect (silences, rules made
//! through the API), and the state written again so that the log's retention
//! never forgets it.

use crate::service::{AlertService, ChangeError, MAX_API_RULES};
use streamsight_core::alerts::rule::Rule;
use streamsight_core::alerts::{AlertState, Silence};
use streamsight_core::{AlertEvent, Millis, Record};
use streamsight_node::sync::lock;

impl AlertService {
    /// What the log must hold for a restart to find this state again, written
    /// anew at most every `every` (under half the store's retention): API
    /// rules, active silences, and every alert that is not quiet with what was
    /// notified of it. Replaying these is idempotent.
    pub fn rewrite_due(&self, now: Millis, every: i64) -> Vec<Record> {
        let mut at = lock(&self.rewritten_at);
        if at.is_some_and(|t| now.since(t) < every) {
            return Vec::new();
        }
        *at = Some(now);
        let book = lock(&self.book);
        let event = |event| Record::Alert {
            at: now,
            event: Box::new(event),
        };
        let mut out: Vec<Record> = book
            .api_rules
            .values()
            .map(|r| event(AlertEvent::RuleSet(r.clone())))
            .collect();
        out.extend(
            book.silences
                .iter()
                .filter(|s| now < s.until)
                .map(|s| event(AlertEvent::Silenced(s.clone()))),
        );
        for a in book.alerts.iter().filter(|a| a.state != AlertState::Ok) {
            out.push(event(AlertEvent::Changed(streamsight_core::alerts::Transition {
                rule: a.rule.to_string(),
                labels: a.labels.clone(),
                from: a.state,
                to: a.state,
                at: a.since,
                value: a.value,
            })));
            if let Some(state) = a.notified {
                out.push(event(AlertEvent::Notified {
                    rule: a.rule.to_string(),
                    labels: a.labels.clone(),
                    state,
                }));
            }
        }
        out
    }

    /// Stores a change; it takes effect once stored. The caller holds `changes`.
    async fn store(&self, event: AlertEvent, now: Millis) -> Result<(), streamsight_node::AppendError> {
        let writer = lock(&self.writer)
            .clone()
            .ok_or(streamsight_node::AppendError::Stopped)?;
        writer
            .append(vec![Record::Alert {
                at: now,
                event: Box::new(event),
            }])
            .await
    }

    /// Writes the state the log must keep again when due (see [`Self::rewrite_due`]).
    pub(crate) async fn rewrite(
        &self,
        writer: &streamsight_node::Writer,
        now: Millis,
        every: i64,
    ) -> Result<(), streamsight_node::AppendError> {
        let _changes = self.changes.lock().await;
        let records = self.rewrite_due(now, every);
        if !records.is_empty()
            && let Err(e) = writer.append(records).await
        {
            // Retried next round.
            *lock(&self.rewritten_at) = None;
            return Err(e);
        }
        Ok(())
    }

    pub(crate) async fn silence(&self, silence: Silence, now: Millis) -> Result<(), ChangeError> {
        let _changes = self.changes.lock().await;
        Ok(self.store(AlertEvent::Silenced(silence), now).await?)
    }

    /// Ends an active silence now.
    pub(crate) async fn expire_silence(&self, id: &str, now: Millis) -> Result<Silence, ChangeError> {
        let _changes = self.changes.lock().await;
        let mut silence = self
            .silences(now)
            .into_iter()
            .find(|s| s.id == id)
            .ok_or(ChangeError::NotFound("active silence"))?;
        silence.until = now;
        self.store(AlertEvent::Silenced(silence.clone()), now).await?;
        Ok(silence)
    }

    /// Makes or replaces a rule through the API.
    pub(crate) async fn set_rule(&self, rule: Rule, now: Millis) -> Result<(), ChangeError> {
        rule.validate()?;
        let _changes = self.changes.lock().await;
        {
            let book = lock(&self.book);
            if !book.api_rules.contains_key(&rule.name) && book.api_rules.len() >= MAX_API_RULES {
                return Err(ChangeError::TooManyRules);
            }
        }
        Ok(self.store(AlertEvent::RuleSet(rule), now).await?)
    }

    /// Removes a rule made through the API (the configuration's of that name,
    /// if any, applies again).
    pub(crate) async fn remove_rule(&self, name: &str, now: Millis) -> Result<(), ChangeError> {
        let _changes = self.changes.lock().await;
        if !lock(&self.book).api_rules.contains_key(name) {
            return Err(ChangeError::NotFound("rule made through the API"));
        }
        let name = name.to_owned();
        Ok(self.store(AlertEvent::RuleRemoved { name }, now).await?)
    }
}
