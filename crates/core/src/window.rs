//! The recent commits of one group on one partition, with the lag each one left.
//!
//! Kept as three fixed arrays (no heap) so that a group-partition stays small; the
//! lag at commit saturates at `u32::MAX`, which only the "lag never zero" and
//! "lag never decreased" rules read.

use crate::time::Millis;

/// How many commits the health rules look at (Burrow's default window).
pub const WINDOW: usize = 10;

#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Commit {
    pub offset: i64,
    #[serde(rename = "at_ms")]
    pub at: Millis,
    pub lag: u32,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct CommitWindow {
    offsets: [i64; WINDOW],
    times: [i64; WINDOW],
    lags: [u32; WINDOW],
    len: u8,
}

/// What [`CommitWindow::record`] did with a commit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    Appended,
    /// Closer than the minimum distance to the previous commit: it replaced it.
    Replaced,
    /// Older than the newest commit already known: ignored.
    OutOfOrder,
}

impl CommitWindow {
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Commit {
        Commit {
            offset: self.offsets[i],
            at: Millis(self.times[i]),
            lag: self.lags[i],
        }
    }

    pub fn first(&self) -> Option<Commit> {
        (!self.is_empty()).then(|| self.get(0))
    }

    pub fn last(&self) -> Option<Commit> {
        (!self.is_empty()).then(|| self.get(self.len() - 1))
    }

    pub fn iter(&self) -> impl Iterator<Item = Commit> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn record(&mut self, commit: Commit, min_distance_ms: i64) -> Recorded {
        let n = self.len();
        if let Some(last) = self.last() {
            if commit.at < last.at {
                return Recorded::OutOfOrder;
            }
            if commit.at.since(last.at) < min_distance_ms {
                self.set(n - 1, commit);
                return Recorded::Replaced;
            }
        }
        if n == WINDOW {
            self.offsets.copy_within(1.., 0);
            self.times.copy_within(1.., 0);
            self.lags.copy_within(1.., 0);
            self.set(WINDOW - 1, commit);
        } else {
            self.set(n, commit);
            self.len += 1;
        }
        Recorded::Appended
    }

    fn set(&mut self, i: usize, c: Commit) {
        self.offsets[i] = c.offset;
        self.times[i] = c.at.0;
        self.lags[i] = c.lag;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(offset: i64, at: i64) -> Commit {
        Commit {
            offset,
            at: Millis(at),
            lag: 1,
        }
    }

    #[test]
    fn keeps_the_last_window_of_commits() {
        let mut w = CommitWindow::default();
        for i in 0..25 {
            assert_eq!(w.record(commit(i, i * 1_000), 1_000), Recorded::Appended);
        }
        assert_eq!(w.len(), WINDOW);
        assert_eq!(w.first().map(|c| c.offset), Some(15));
        assert_eq!(w.last().map(|c| c.offset), Some(24));
    }

    #[test]
    fn close_commits_replace_the_previous_one() {
        let mut w = CommitWindow::default();
        w.record(commit(1, 0), 1_000);
        assert_eq!(w.record(commit(2, 500), 1_000), Recorded::Replaced);
        assert_eq!(w.len(), 1);
        assert_eq!(w.last(), Some(commit(2, 500)));
    }

    #[test]
    fn older_commits_are_ignored() {
        let mut w = CommitWindow::default();
        w.record(commit(5, 5_000), 1_000);
        assert_eq!(w.record(commit(4, 1_000), 1_000), Recorded::OutOfOrder);
        assert_eq!(w.last(), Some(commit(5, 5_000)));
    }
}
