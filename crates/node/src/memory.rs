//! The memory and threads every request's decode draws from, one pool for the
//! whole process: listeners, tenants and threads share it, so that however
//! many requests arrive at once on however many cores, what they decode
//! together stays under `[serve.limits] decode_memory_bytes` (a request that
//! finds it spent is answered 503 with `Retry-After`), and at most one fewer
//! decode runs at once than there are cores (the others wait their turn, their
//! bodies charged): probes and light requests are still answered, and a burst
//! does not spread over a blocking thread each, whose allocator heaps would
//! each keep their own peak. See `streamsight_wire::budget`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use streamsight_wire::budget::{Meter, Pool};

#[derive(Debug)]
pub struct DecodeMemory {
    left: AtomicUsize,
    total: usize,
    threads: tokio::sync::Semaphore,
}

impl DecodeMemory {
    pub fn new(total: usize) -> Arc<Self> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
        Arc::new(Self {
            left: AtomicUsize::new(total),
            total,
            threads: tokio::sync::Semaphore::new(threads),
        })
    }

    /// A turn to decode on a blocking thread, once one of the process's
    /// decoders is free; `None` when shutting down.
    pub async fn turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.threads.acquire().await.ok()
    }

    /// Bytes held by decodes in flight now.
    pub fn in_use(&self) -> usize {
        self.total.saturating_sub(self.left.load(Ordering::Acquire))
    }

    /// A meter for one request: at most `request_limit` bytes, from this pool.
    pub fn meter(self: &Arc<Self>, request_limit: usize) -> Meter {
        Meter::new(request_limit, Some(self.clone() as Arc<dyn Pool>))
    }
}

impl Pool for DecodeMemory {
    fn take(&self, bytes: usize) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(bytes))
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        self.left.fetch_add(bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_wire::budget::Spent;

    #[test]
    fn requests_share_the_pool_and_give_it_back() {
        let pool = DecodeMemory::new(100);
        let mut a = pool.meter(80);
        let mut b = pool.meter(80);
        a.charge(70).unwrap();
        assert_eq!(b.charge(40), Err(Spent::Shared));
        assert_eq!(pool.in_use(), 70);
        drop(a);
        b.charge(1).unwrap_err(); // refused once, refused for good
        let mut c = pool.meter(80);
        assert_eq!(c.charge(81), Err(Spent::Request { limit: 80 }));
        let mut d = pool.meter(80);
        d.charge(80).unwrap();
        assert_eq!(pool.in_use(), 80);
        drop((b, c, d));
        assert_eq!(pool.in_use(), 0);
    }
}
