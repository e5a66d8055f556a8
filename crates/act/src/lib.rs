//! Acting on what streamsight shows, tied to its accounting: an offset reset
//! says what it would skip before it runs, refuses a group with live members,
//! and is recorded as the group's own reset (skipped offsets counted as
//! `skipped`, never as data loss); a dead-letter redrive sends each dead
//! letter back once, its progress in the collector's log. See docs/act.md.
//!
//! Every action is a dry run unless told otherwise, and only on a cluster the
//! tenant polls, never on the collector's own log topics.

pub mod api;
pub mod record;
pub mod redrive;
pub mod reset;

/// What acting keeps per node: the redrives running in this process (their
/// progress is in the log; see [`streamsight_core::redrive`]).
#[derive(Debug, Default)]
pub struct ActService {
    pub redrives: redrive::Running,
}

impl streamsight_node::Feature for ActService {
    fn name(&self) -> &'static str {
        "act"
    }

    fn apply(&self, _records: &[streamsight_core::Record]) {}

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Why an action was not done: one type for the CLI and the API, mapped to a
/// status in one place ([`api`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    UnknownCluster(String),
    #[error("{0}")]
    UnknownTopic(String),
    /// Nothing there (an offset outside the log).
    #[error("{0}")]
    NotFound(String),
    /// The state forbids it (live members, the collector's own topics).
    #[error("{0}")]
    Refused(String),
    /// The cluster failed or refused.
    #[error("{0}")]
    Broker(String),
}
