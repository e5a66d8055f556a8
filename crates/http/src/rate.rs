//! Ingest rates: a token bucket per tenant, taken per request.

/// Records per second with bursts: refilled continuously, taken per payload.
#[derive(Debug)]
pub struct TokenBucket {
    per_second: f64,
    capacity: f64,
    tokens: f64,
    at: std::time::Instant,
}

impl TokenBucket {
    pub fn new(per_second: u64) -> Self {
        let per_second = per_second as f64;
        Self {
            per_second,
            capacity: per_second * 10.0,
            tokens: per_second * 10.0,
            at: std::time::Instant::now(),
        }
    }

    /// Takes `n`, or says in how many seconds there will be room. A payload
    /// larger than the burst goes through when the bucket is full.
    pub fn take(&mut self, n: usize, now: std::time::Instant) -> Result<(), u64> {
        if self.per_second <= 0.0 {
            return Ok(());
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = now;
        let n = n as f64;
        if self.tokens >= n.min(self.capacity) {
            self.tokens -= n;
            Ok(())
        } else {
            Err(((n.min(self.capacity) - self.tokens) / self.per_second)
                .ceil()
                .clamp(1.0, 3600.0) as u64)
        }
    }
}

/// A tenant's ingest rate, shared by every intake of it: spans, lines and
/// Data Streams points draw on one bucket.
pub type SharedRate = std::sync::Arc<std::sync::Mutex<TokenBucket>>;

/// A bucket of `per_second` records a second, to share.
pub fn shared(per_second: u64) -> SharedRate {
    std::sync::Arc::new(std::sync::Mutex::new(TokenBucket::new(per_second)))
}

#[cfg(test)]
mod tests {
    use super::TokenBucket;
    use std::time::{Duration, Instant};

    #[test]
    fn the_bucket_refills_with_time_and_says_when_to_come_back() {
        let start = Instant::now();
        let mut b = TokenBucket::new(100);
        assert_eq!(b.take(1_000, start), Ok(()), "a full burst");
        assert_eq!(b.take(100, start), Err(1));
        assert_eq!(b.take(300, start), Err(3));
        assert_eq!(b.take(100, start + Duration::from_secs(1)), Ok(()));
        // Larger than the burst: through once the bucket is full again.
        assert!(b.take(5_000, start + Duration::from_secs(2)).is_err());
        assert_eq!(b.take(5_000, start + Duration::from_secs(20)), Ok(()));
        let mut off = TokenBucket::new(0);
        assert_eq!(off.take(usize::MAX, start), Ok(()));
    }
}
