//! Token buckets that bound how fast the exporter asks Redis for anything.
//!
//! Every command sent to a target passes its command bucket, and the PEL scan
//! also passes an entries bucket. A caller *reserves* tokens, possibly going
//! into debt, and then sleeps until the debt would be repaid; concurrent
//! callers therefore queue in order and, over any window of `t` seconds, at
//! most `burst + rate * t` tokens are spent. The arithmetic is a pure function
//! of the clock so it is tested under paused tokio time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The bucket arithmetic, without any waiting.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    available: f64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` tokens per second up to `burst`.
    pub fn new(rate: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        TokenBucket {
            rate: rate.max(f64::MIN_POSITIVE),
            burst,
            available: burst,
            updated: now,
        }
    }

    /// Largest reservation that does not exceed the burst.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Takes `n` tokens at `now` and returns how long the caller must wait
    /// before using them (zero when they were available).
    pub fn reserve(&mut self, n: f64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.available = (self.available + elapsed * self.rate).min(self.burst);
        self.updated = now;
        self.available -= n;
        if self.available >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.available / self.rate)
        }
    }
}

/// A shared bucket that callers wait on; it records the time spent waiting.
#[derive(Debug)]
pub struct RateLimiter {
    bucket: Mutex<TokenBucket>,
    waited_nanos: AtomicU64,
}

impl RateLimiter {
    /// A limiter of `rate` per second with bursts up to `burst`.
    pub fn new(rate: u32, burst: u32) -> Self {
        RateLimiter {
            bucket: Mutex::new(TokenBucket::new(
                f64::from(rate),
                f64::from(burst),
                Instant::now(),
            )),
            waited_nanos: AtomicU64::new(0),
        }
    }

    /// Largest single reservation that keeps within the burst.
    pub fn burst(&self) -> usize {
        self.lock().burst() as usize
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TokenBucket> {
        // A panic while holding this lock cannot leave the bucket in a state
        // worse than "slightly off", so poisoning is ignored.
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `n` tokens may be spent.
    pub async fn acquire(&self, n: usize) {
        let wait = self.lock().reserve(n as f64, Instant::now());
        if !wait.is_zero() {
            self.waited_nanos
                .fetch_add(wait.as_nanos() as u64, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
    }

    /// Total time callers were told to wait.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_nanos.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn reserve_is_free_within_burst_then_paced() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 5.0, t0);
        assert_eq!(b.reserve(5.0, t0), Duration::ZERO);
        // Five more tokens at 10/s: half a second of debt.
        assert_eq!(b.reserve(5.0, t0), Duration::from_millis(500));
        // After a second the debt is repaid and five tokens have refilled.
        assert_eq!(
            b.reserve(5.0, t0 + Duration::from_millis(1500)),
            Duration::ZERO
        );
    }

    #[test]
    fn refill_caps_at_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100.0, 10.0, t0);
        b.reserve(10.0, t0);
        // An hour idle refills only to the burst, never to 360 000 tokens.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(b.reserve(10.0, later), Duration::ZERO);
        assert!(b.reserve(1.0, later) > Duration::ZERO);
    }

    /// Under paused time, concurrent callers never spend more than
    /// `burst + rate * elapsed` tokens in any prefix of the run.
    #[tokio::test(start_paused = true)]
    async fn concurrent_acquires_never_exceed_rate() {
        let limiter = Arc::new(RateLimiter::new(50, 10));
        let start = Instant::now();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (limiter, log) = (limiter.clone(), log.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    limiter.acquire(4).await;
                    log.lock().unwrap().push((Instant::now() - start, 4.0));
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let mut log = log.lock().unwrap().clone();
        log.sort_by_key(|e| e.0);
        let mut spent = 0.0;
        for (at, n) in &log {
            spent += n;
            let allowed = 10.0 + 50.0 * at.as_secs_f64() + 1e-9;
            assert!(
                spent <= allowed,
                "spent {spent} tokens by {at:?}, allowed {allowed}"
            );
        }
        // 800 tokens at 50/s after a burst of 10 take 15.8 s of (virtual) time.
        assert_eq!(spent, 800.0);
        let last = log.last().unwrap().0.as_secs_f64();
        assert!((last - 15.8).abs() < 0.01, "finished at {last}");
        assert!(limiter.waited() > Duration::ZERO);
    }
}
