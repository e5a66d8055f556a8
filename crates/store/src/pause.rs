//! Noticing that this process was paused: SIGSTOP, a VM frozen, a stall of
//! the whole machine. A node sharing a log holds things by the grace of a
//! consumer group (shards, leases), and a node stopped for longer than the
//! group's session has been replaced; on resuming, it still believes what it
//! believed until librdkafka hears of the change, and answering or acting on
//! that would be answering from before the pause.
//!
//! A thread does nothing but wake every [`TICK`] and note when
//! ([`Ticks`]): no work of the process's own delays it, so a wake later than
//! [`FENCE_AFTER`] after the last is a pause, and a snapshot restore or a
//! long apply on another thread is not. Between resuming and that thread's
//! next wake, [`PauseWatch::awake`] is already false: the last wake is old.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often the watching thread wakes.
pub const TICK: Duration = Duration::from_millis(100);
/// A gap this long since the last wake is a pause: half the groups' 6 s
/// session, so that a node stops trusting what it holds before the group can
/// hand it to another.
pub const FENCE_AFTER: Duration = Duration::from_millis(3_000);

/// The watching thread's wakes. Pure: time is passed in.
#[derive(Debug, Clone)]
pub struct Ticks {
    last: Instant,
    pauses: u64,
}

impl Ticks {
    pub fn new(now: Instant) -> Self {
        Self { last: now, pauses: 0 }
    }

    /// A wake at `now`; true when it ends a pause.
    pub fn tick(&mut self, now: Instant) -> bool {
        let gap = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        let paused = gap >= FENCE_AFTER;
        if paused {
            self.pauses += 1;
        }
        paused
    }

    /// Whether the last wake is recent enough at `now` that no pause can
    /// have begun since, unnoticed.
    pub fn awake(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last) < FENCE_AFTER
    }

    /// Pauses seen so far.
    pub fn pauses(&self) -> u64 {
        self.pauses
    }
}

/// The process's watch, its thread started on first use.
#[derive(Debug)]
pub struct PauseWatch {
    ticks: Mutex<Ticks>,
}

impl PauseWatch {
    /// The process's watch (one per process: a pause stops every thread).
    pub fn get() -> &'static PauseWatch {
        static WATCH: OnceLock<&'static PauseWatch> = OnceLock::new();
        WATCH.get_or_init(|| {
            let watch: &'static PauseWatch = Box::leak(Box::new(PauseWatch {
                ticks: Mutex::new(Ticks::new(Instant::now())),
            }));
            let spawned = std::thread::Builder::new()
                .name("streamsight-pause-watch".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(TICK);
                        watch.tick(Instant::now());
                    }
                });
            if let Err(e) = spawned {
                // Without it every wake looks old: nothing is trusted to be held.
                tracing::error!(error = %e, "the pause watch did not start: shards and leases are never held");
            }
            watch
        })
    }

    fn ticks(&self) -> std::sync::MutexGuard<'_, Ticks> {
        self.ticks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tick(&self, now: Instant) {
        if self.ticks().tick(now) {
            tracing::warn!(
                after_ms = FENCE_AFTER.as_millis() as u64,
                "this process did not run for longer than a group's session allows: what it held is let go"
            );
        }
    }

    /// Pauses seen so far: a holder that saw fewer lets go of what it holds.
    pub fn pauses(&self) -> u64 {
        self.ticks().pauses()
    }

    /// Whether this process can be sure it was not paused since the watch
    /// last woke (false from the moment it resumes until then).
    pub fn awake(&self) -> bool {
        self.ticks().awake(Instant::now())
    }

    /// Whether a holder that has acted on `acted_on` pauses may trust what
    /// it holds: awake, and no pause since.
    pub fn trusts(&self, acted_on: u64) -> bool {
        let ticks = self.ticks();
        ticks.awake(Instant::now()) && ticks.pauses() == acted_on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_past_the_fence_is_a_pause_and_until_it_nothing_is_awake() {
        let t0 = Instant::now();
        let mut ticks = Ticks::new(t0);
        // Wakes every 100 ms, one of them 2.9 s late (a busy machine): no pause.
        assert!(!ticks.tick(t0 + TICK));
        assert!(!ticks.tick(t0 + Duration::from_millis(3_000)));
        assert_eq!(ticks.pauses(), 0);
        // 20 s stopped: before the next wake nothing is awake, and the wake
        // counts one pause.
        let resumed = t0 + Duration::from_secs(23);
        assert!(!ticks.awake(resumed));
        assert!(ticks.tick(resumed + Duration::from_millis(5)));
        assert!(ticks.awake(resumed + Duration::from_millis(10)));
        assert_eq!(ticks.pauses(), 1);
        // A wake stamped earlier than the last (threads racing) is no pause.
        assert!(!ticks.tick(resumed));
        assert_eq!(ticks.pauses(), 1);
    }

    #[test]
    fn the_process_watch_is_awake_while_it_runs() {
        let watch = PauseWatch::get();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !watch.awake() {
            assert!(Instant::now() < deadline, "the watch never woke");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(watch.pauses(), 0);
    }
}
