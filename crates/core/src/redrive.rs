//! Dead-letter redrive's ledger: which dead letters were sent back, where to,
//! and which a run claimed but may not have sent. Pure: replayed from the log's
//! [`Record::Redrive`](crate::Record::Redrive) records, so a redrive resumes
//! after a crash and never sends a dead letter twice.
//!
//! A run writes, for each batch, [`RedriveEvent::Claimed`] (the letters, and
//! where each destination partition ended) before it sends, then
//! [`RedriveEvent::Sent`] with the offsets the broker gave. A crash between
//! the two leaves the letters *in flight*: the next run reads each destination
//! from the claim's offsets for the letters' redrive header, records those it
//! finds as sent and releases the rest ([`RedriveEvent::Released`]).

use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// Dead letters the ledger remembers at most; a claim past it is refused
/// (they expire with the log's retention).
pub const MAX_LETTERS: usize = 250_000;
/// Letters one claim or one sent record holds at most.
pub const MAX_BATCH: usize = 1_000;
/// Runs remembered for `GET /api/v1/redrives`.
pub const RUNS_KEPT: usize = 100;

/// A dead letter: a record of a DLQ topic of a cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DlqTopic {
    pub cluster: String,
    pub dlq: String,
}

/// Where a redriven dead letter went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// One dead letter sent: its DLQ partition and offset, and where it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentLetter {
    pub partition: i32,
    pub offset: i64,
    pub to: Destination,
}

/// What a redrive run did, as recorded in the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RedriveEvent {
    /// A run began: by which key, with which selection.
    Started {
        run: String,
        #[serde(flatten)]
        of: DlqTopic,
        key: String,
        /// The selection, as the operator gave it.
        selection: String,
    },
    /// Letters about to be sent, and where each destination partition ended
    /// just before: what a later run reads from when this run did not say
    /// whether they were sent.
    Claimed {
        run: String,
        #[serde(flatten)]
        of: DlqTopic,
        /// (DLQ partition, offset).
        letters: Vec<(i32, i64)>,
        /// (topic, partition, end offset) of every partition they may go to.
        ends: Vec<(String, i32, i64)>,
    },
    /// Letters the broker acknowledged (or a later run found it had).
    Sent {
        run: String,
        #[serde(flatten)]
        of: DlqTopic,
        sent: Vec<SentLetter>,
    },
    /// Claimed letters a later run found never reached their destination:
    /// free to be sent again.
    Released {
        run: String,
        #[serde(flatten)]
        of: DlqTopic,
        letters: Vec<(i32, i64)>,
    },
    /// A run ended: done, or stopped with the error; how many letters its
    /// selection took.
    Finished {
        run: String,
        #[serde(flatten)]
        of: DlqTopic,
        selected: u64,
        error: Option<String>,
    },
}

impl RedriveEvent {
    pub fn run(&self) -> &str {
        match self {
            RedriveEvent::Started { run, .. }
            | RedriveEvent::Claimed { run, .. }
            | RedriveEvent::Sent { run, .. }
            | RedriveEvent::Released { run, .. }
            | RedriveEvent::Finished { run, .. } => run,
        }
    }

    pub fn of(&self) -> &DlqTopic {
        match self {
            RedriveEvent::Started { of, .. }
            | RedriveEvent::Claimed { of, .. }
            | RedriveEvent::Sent { of, .. }
            | RedriveEvent::Released { of, .. }
            | RedriveEvent::Finished { of, .. } => of,
        }
    }
}

/// (topic, partition, end offset) of every partition a claim's letters may
/// go to, as they were when it was made.
pub type Ends = Arc<Vec<(String, i32, i64)>>;

/// Where a dead letter stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LetterState {
    /// Claimed by `run`, not known to be sent: read the destinations from
    /// `ends` before sending it again.
    InFlight {
        run: String,
        #[serde(skip)]
        ends: Ends,
    },
    Sent {
        run: String,
        at: Millis,
        #[serde(flatten)]
        to: Destination,
    },
}

/// A run as the ledger knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    pub run: String,
    #[serde(flatten)]
    pub of: DlqTopic,
    pub key: String,
    pub selection: String,
    pub started_ms: Millis,
    /// Letters its selection took: known when it finished.
    pub selected: Option<u64>,
    pub sent: u64,
    pub finished_ms: Option<Millis>,
    pub error: Option<String>,
}

/// Why a claim was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("the redrive ledger holds {MAX_LETTERS} dead letters: no more until retention frees some")]
    Full,
    #[error("dead letter {0}/{1} is already {2}")]
    Taken(i32, i64, &'static str),
}

/// Every dead letter a redrive claimed or sent, by DLQ topic.
#[derive(Debug, Default)]
pub struct Ledger {
    letters: HashMap<DlqTopic, BTreeMap<(i32, i64), LetterState>>,
    count: usize,
    runs: VecDeque<RunSummary>,
}

impl Ledger {
    pub fn apply(&mut self, at: Millis, event: &RedriveEvent) {
        match event {
            RedriveEvent::Started {
                run,
                of,
                key,
                selection,
            } => {
                if self.runs.len() == RUNS_KEPT {
                    self.runs.pop_front();
                }
                self.runs.push_back(RunSummary {
                    run: run.clone(),
                    of: of.clone(),
                    key: key.clone(),
                    selection: selection.clone(),
                    started_ms: at,
                    selected: None,
                    sent: 0,
                    finished_ms: None,
                    error: None,
                });
            }
            RedriveEvent::Claimed { run, of, letters, ends } => {
                let ends = Arc::new(ends.clone());
                let topic = self.letters.entry(of.clone()).or_default();
                for l in letters {
                    // A letter already sent stays sent, whatever a claim says.
                    if matches!(topic.get(l), Some(LetterState::Sent { .. })) {
                        continue;
                    }
                    if self.count >= MAX_LETTERS && !topic.contains_key(l) {
                        continue;
                    }
                    let fresh = topic
                        .insert(
                            *l,
                            LetterState::InFlight {
                                run: run.clone(),
                                ends: Arc::clone(&ends),
                            },
                        )
                        .is_none();
                    self.count += usize::from(fresh);
                }
            }
            RedriveEvent::Sent { run, of, sent } => {
                let topic = self.letters.entry(of.clone()).or_default();
                let mut n = 0;
                for s in sent {
                    let key = (s.partition, s.offset);
                    if matches!(topic.get(&key), Some(LetterState::Sent { .. })) {
                        continue;
                    }
                    if self.count >= MAX_LETTERS && !topic.contains_key(&key) {
                        continue;
                    }
                    let state = LetterState::Sent {
                        run: run.clone(),
                        at,
                        to: s.to.clone(),
                    };
                    self.count += usize::from(topic.insert(key, state).is_none());
                    n += 1;
                }
                if let Some(r) = self.run_mut(run) {
                    r.sent += n;
                }
            }
            RedriveEvent::Released { of, letters, .. } => {
                if let Some(topic) = self.letters.get_mut(of) {
                    for l in letters {
                        if matches!(topic.get(l), Some(LetterState::InFlight { .. })) {
                            topic.remove(l);
                            self.count -= 1;
                        }
                    }
                }
            }
            RedriveEvent::Finished {
                run, selected, error, ..
            } => {
                if let Some(r) = self.run_mut(run) {
                    r.finished_ms = Some(at);
                    r.selected = Some(*selected);
                    r.error = error.clone();
                }
            }
        }
    }

    fn run_mut(&mut self, run: &str) -> Option<&mut RunSummary> {
        self.runs.iter_mut().rev().find(|r| r.run == run)
    }

    /// Where the dead letter stands; `None`: never claimed, free to send.
    pub fn state(&self, of: &DlqTopic, partition: i32, offset: i64) -> Option<&LetterState> {
        self.letters.get(of)?.get(&(partition, offset))
    }

    /// Where a dead letter of `dlq` was sent: on `cluster`, else on the one
    /// other cluster with a DLQ of that name. (cluster, destination, when, run).
    pub fn sent(
        &self,
        cluster: &str,
        dlq: &str,
        partition: i32,
        offset: i64,
    ) -> Option<(&str, &Destination, Millis, &str)> {
        let sent_of = |of: &DlqTopic| {
            let (of, letters) = self.letters.get_key_value(of)?;
            match letters.get(&(partition, offset))? {
                LetterState::Sent { run, at, to } => Some((of.cluster.as_str(), to, *at, run.as_str())),
                LetterState::InFlight { .. } => None,
            }
        };
        let mine = DlqTopic {
            cluster: cluster.to_owned(),
            dlq: dlq.to_owned(),
        };
        sent_of(&mine).or_else(|| {
            let mut others = self.letters.keys().filter(|of| of.dlq == dlq);
            match (others.next(), others.next()) {
                (Some(only), None) => sent_of(only),
                _ => None,
            }
        })
    }

    /// The letters of `of` in flight: claimed by a run that never said
    /// whether it sent them.
    pub fn in_flight(&self, of: &DlqTopic) -> Vec<((i32, i64), String, Ends)> {
        self.letters.get(of).map_or_else(Vec::new, |t| {
            t.iter()
                .filter_map(|(k, s)| match s {
                    LetterState::InFlight { run, ends } => Some((*k, run.clone(), Arc::clone(ends))),
                    LetterState::Sent { .. } => None,
                })
                .collect()
        })
    }

    /// Whether `letters` may be claimed now: each free, and room for them.
    pub fn may_claim(&self, of: &DlqTopic, letters: &[(i32, i64)]) -> Result<(), LedgerError> {
        if self.count + letters.len() > MAX_LETTERS {
            return Err(LedgerError::Full);
        }
        for &(p, o) in letters {
            match self.state(of, p, o) {
                None => {}
                Some(LetterState::InFlight { .. }) => return Err(LedgerError::Taken(p, o, "in flight")),
                Some(LetterState::Sent { .. }) => return Err(LedgerError::Taken(p, o, "sent")),
            }
        }
        Ok(())
    }

    /// Dead letters remembered, of every topic.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The runs remembered, newest last.
    pub fn runs(&self) -> impl Iterator<Item = &RunSummary> {
        self.runs.iter()
    }

    pub fn run(&self, run: &str) -> Option<&RunSummary> {
        self.runs.iter().rev().find(|r| r.run == run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dlq() -> DlqTopic {
        DlqTopic {
            cluster: "prod".into(),
            dlq: "orders.dlq".into(),
        }
    }

    fn claim(run: &str, letters: &[(i32, i64)]) -> RedriveEvent {
        RedriveEvent::Claimed {
            run: run.into(),
            of: dlq(),
            letters: letters.to_vec(),
            ends: vec![("orders".into(), 0, 100)],
        }
    }

    fn sent(run: &str, letters: &[(i32, i64)]) -> RedriveEvent {
        RedriveEvent::Sent {
            run: run.into(),
            of: dlq(),
            sent: letters
                .iter()
                .map(|&(partition, offset)| SentLetter {
                    partition,
                    offset,
                    to: Destination {
                        topic: "orders".into(),
                        partition: 0,
                        offset: 100 + offset,
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn a_claim_is_in_flight_until_sent_or_released() {
        let mut l = Ledger::default();
        l.apply(Millis(1), &claim("a", &[(0, 1), (0, 2)]));
        assert!(matches!(l.state(&dlq(), 0, 1), Some(LetterState::InFlight { .. })));
        assert_eq!(l.in_flight(&dlq()).len(), 2);
        assert!(l.may_claim(&dlq(), &[(0, 1)]).is_err());
        l.apply(Millis(2), &sent("a", &[(0, 1)]));
        l.apply(
            Millis(3),
            &RedriveEvent::Released {
                run: "b".into(),
                of: dlq(),
                letters: vec![(0, 2), (0, 1)],
            },
        );
        // The sent one stays sent; the released one is free again.
        assert!(matches!(l.state(&dlq(), 0, 1), Some(LetterState::Sent { .. })));
        assert_eq!(l.state(&dlq(), 0, 2), None);
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn runs_count_what_they_sent() {
        let mut l = Ledger::default();
        l.apply(
            Millis(1),
            &RedriveEvent::Started {
                run: "a".into(),
                of: dlq(),
                key: "k".into(),
                selection: "all".into(),
            },
        );
        l.apply(Millis(2), &claim("a", &[(0, 1), (0, 2)]));
        l.apply(Millis(3), &sent("a", &[(0, 1), (0, 2)]));
        // Sent twice (a recovered claim): counted once.
        l.apply(Millis(4), &sent("a", &[(0, 2)]));
        l.apply(
            Millis(5),
            &RedriveEvent::Finished {
                run: "a".into(),
                of: dlq(),
                selected: 3,
                error: None,
            },
        );
        let r = l.run("a").unwrap();
        assert_eq!((r.sent, r.selected, r.finished_ms), (2, Some(3), Some(Millis(5))));
    }

    proptest! {
        /// Whatever order claims, sends and releases come in, a letter once
        /// sent stays sent (to where it was first sent), and the count is the
        /// letters held.
        #[test]
        fn sent_is_forever_and_counted_once(ops in proptest::collection::vec((0u8..3, 0i64..20), 0..200)) {
            let mut l = Ledger::default();
            let mut first_sent: HashMap<i64, i64> = HashMap::new();
            for (i, (op, offset)) in ops.into_iter().enumerate() {
                let run = format!("r{i}");
                let e = match op {
                    0 => claim(&run, &[(0, offset)]),
                    1 => {
                        let mut e = sent(&run, &[(0, offset)]);
                        if let RedriveEvent::Sent { sent, .. } = &mut e {
                            sent[0].to.offset = i as i64;
                        }
                        first_sent.entry(offset).or_insert(i as i64);
                        e
                    }
                    _ => RedriveEvent::Released { run, of: dlq(), letters: vec![(0, offset)] },
                };
                l.apply(Millis(i as i64), &e);
            }
            for (offset, to) in &first_sent {
                match l.state(&dlq(), 0, *offset) {
                    Some(LetterState::Sent { to: d, .. }) => prop_assert_eq!(d.offset, *to),
                    other => prop_assert!(false, "{offset}: {other:?}"),
                }
            }
            let held = l.letters.values().map(BTreeMap::len).sum::<usize>();
            prop_assert_eq!(l.len(), held);
        }
    }
}
