//! Token buckets that bound how fast the exporter asks Redis for anything,
//! and who goes first when the budget is short.
//!
//! Every command sent to a target passes its command bucket, and the PEL scan
//! also passes an entries bucket. Over any window of `t` seconds at most
//! `burst + rate * t` tokens are spent. Callers that must wait are served by
//! priority: each probe runs in the scope of its rank ([`PRIORITY`]; the
//! stream poll first, then info, discovery, the pending summary, consumers,
//! and the PEL scan last, by default), and each rank keeps a minimum share
//! of the budget when others want it too, so the probes that alerts read
//! keep their cadence while the slow ones stretch, and none starves. The
//! arithmetic is a function of the clock, tested under paused tokio time.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Tokens the refill arithmetic may be short by (0.999… for 1).
const ROUNDING: f64 = 1e-9;

/// The bucket arithmetic, without any waiting.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    available: f64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` tokens per second up to `burst`.
    pub(crate) fn new(rate: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        TokenBucket {
            rate: rate.max(f64::MIN_POSITIVE),
            burst,
            available: burst,
            updated: now,
        }
    }

    /// Largest reservation that does not exceed the burst.
    pub(crate) fn burst(&self) -> f64 {
        self.burst
    }

    /// The tokens available at `now` (refilled up to the burst).
    pub(crate) fn level(&mut self, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.available = (self.available + elapsed * self.rate).min(self.burst);
        self.updated = now;
        self.available
    }

    /// Takes `n` tokens at `now`, into debt if need be.
    pub(crate) fn take(&mut self, n: f64, now: Instant) {
        self.level(now);
        self.available -= n;
    }

    /// True when `n` tokens are available (from the last refill), give or
    /// take the rounding of the refill arithmetic.
    pub(crate) fn has(&self, n: f64) -> bool {
        self.available + ROUNDING >= n
    }

    /// Time until `n` tokens are available (from the last refill); never a
    /// zero wait for tokens that are not there.
    pub(crate) fn time_until(&self, n: f64) -> Duration {
        if self.has(n) {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((n - self.available) / self.rate).max(Duration::from_micros(1))
        }
    }
}

tokio::task_local! {
    /// The priority rank the current task's commands are sent with (0 is
    /// the highest): the poller runs each probe in the scope of its rank.
    pub(crate) static PRIORITY: usize;
}

/// The rank of the current task's probe, 0 outside any probe (the one-shot
/// `check`, tests).
pub(crate) fn current_rank() -> usize {
    PRIORITY.try_with(|r| *r).unwrap_or(0)
}

/// Who gets the next tokens when callers wait: strict priority by rank,
/// except that a rank owed its minimum share goes first. While a rank
/// waits, every grant to another rank adds `share × tokens` to what it is
/// owed, and a grant to it pays that back; a rank that waits for nothing is
/// owed nothing (no banking). So under contention rank `r` gets at least
/// `shares[r]` of the tokens, and otherwise tokens go to the highest rank
/// that wants them: lower ranks stretch, never the other way round.
#[derive(Debug)]
struct Arbiter {
    bucket: TokenBucket,
    shares: Vec<f64>,
    queues: Vec<RankQueue>,
    next_ticket: u64,
    /// Time spent by waits that ended (served or given up).
    waited: Duration,
}

#[derive(Debug, Default)]
struct RankQueue {
    /// Ticket, tokens wanted and when the wait began, in arrival order.
    waiting: VecDeque<(u64, f64, Instant)>,
    owed: f64,
}

impl Arbiter {
    fn enqueue(&mut self, rank: usize, n: f64, since: Instant) -> u64 {
        self.next_ticket += 1;
        self.queues[rank]
            .waiting
            .push_back((self.next_ticket, n, since));
        self.next_ticket
    }

    fn cancel(&mut self, rank: usize, ticket: u64, now: Instant) {
        let q = &mut self.queues[rank];
        if let Some(i) = q.waiting.iter().position(|(t, ..)| *t == ticket) {
            if let Some((_, _, since)) = q.waiting.remove(i) {
                self.waited += now.saturating_duration_since(since);
            }
        }
        if self.queues[rank].waiting.is_empty() {
            self.queues[rank].owed = 0.0;
        }
    }

    /// Time spent waiting so far, the waits still under way included: a
    /// wait of half a minute then shows as half a minute spread over it,
    /// not as one step when it ends, so a rate over a window shorter than
    /// the longest wait does not read zero while callers wait.
    fn waited(&self, now: Instant) -> Duration {
        self.waited
            + self
                .queues
                .iter()
                .flat_map(|q| q.waiting.iter())
                .map(|&(_, _, since)| now.saturating_duration_since(since))
                .sum::<Duration>()
    }

    fn need(&self, n: f64) -> f64 {
        n.min(self.bucket.burst())
    }

    /// The rank and ticket to serve next.
    fn chosen(&self) -> Option<(usize, u64, f64)> {
        let head = |r: usize| self.queues[r].waiting.front().map(|&(t, n, _)| (r, t, n));
        let ranks = 0..self.queues.len();
        ranks
            .clone()
            .filter_map(head)
            .find(|&(r, _, n)| self.queues[r].owed >= self.need(n))
            .or_else(|| ranks.filter_map(head).next())
    }

    fn grant(&mut self, rank: usize, n: f64, now: Instant) {
        self.bucket.take(n, now);
        if let Some((_, _, since)) = self.queues[rank].waiting.pop_front() {
            self.waited += now.saturating_duration_since(since);
        }
        // Every waiting rank is owed its share of every grant, its own
        // included, so under contention rank r gets shares[r] of the total.
        for (r, q) in self.queues.iter_mut().enumerate() {
            if q.waiting.is_empty() && r != rank {
                q.owed = 0.0;
            } else {
                q.owed += self.shares[r] * n;
            }
        }
        let q = &mut self.queues[rank];
        q.owed = (q.owed - n).max(0.0);
    }

    fn idle(&self) -> bool {
        self.queues.iter().all(|q| q.waiting.is_empty())
    }
}

/// A shared token bucket that callers wait on, served by priority (see
/// [`Arbiter`]); it records the time spent waiting.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    arbiter: Mutex<Arbiter>,
    changed: Notify,
    /// Tokens spent, by rank.
    spent: Vec<AtomicU64>,
}

/// Removes a waiter that gave up (its future dropped) from its queue, so it
/// cannot hold the others back.
struct Ticket<'a> {
    limiter: &'a RateLimiter,
    rank: usize,
    ticket: u64,
    served: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.served {
            self.limiter
                .lock()
                .cancel(self.rank, self.ticket, Instant::now());
            self.limiter.changed.notify_waiters();
        }
    }
}

impl RateLimiter {
    /// A limiter of `rate` per second with bursts up to `burst`, one rank.
    pub(crate) fn new(rate: u32, burst: u32) -> Self {
        Self::with_shares(rate, burst, &[0.0])
    }

    /// A limiter whose callers are served by rank (the task's
    /// [`PRIORITY`]), rank `r` keeping at least `shares[r]` of the tokens
    /// when others want them too. Ranks past the end share the last one.
    pub(crate) fn with_shares(rate: u32, burst: u32, shares: &[f64]) -> Self {
        let shares = if shares.is_empty() {
            vec![0.0]
        } else {
            shares.to_vec()
        };
        RateLimiter {
            spent: shares.iter().map(|_| AtomicU64::new(0)).collect(),
            arbiter: Mutex::new(Arbiter {
                bucket: TokenBucket::new(f64::from(rate), f64::from(burst), Instant::now()),
                queues: shares.iter().map(|_| RankQueue::default()).collect(),
                shares,
                next_ticket: 0,
                waited: Duration::ZERO,
            }),
            changed: Notify::new(),
        }
    }

    /// Largest single reservation that keeps within the burst.
    pub(crate) fn burst(&self) -> usize {
        self.lock().bucket.burst() as usize
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Arbiter> {
        // A panic while holding this lock cannot leave the bucket in a state
        // worse than "slightly off", so poisoning is ignored.
        self.arbiter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `n` tokens may be spent by the current task's rank.
    pub(crate) async fn acquire(&self, n: usize) {
        let started = Instant::now();
        let n = n as f64;
        let (rank, ticket) = {
            let mut a = self.lock();
            let rank = current_rank().min(a.queues.len() - 1);
            let need = a.need(n);
            a.bucket.level(started);
            if a.idle() && a.bucket.has(need) {
                a.bucket.take(n, started);
                self.spent[rank].fetch_add(n as u64, Ordering::Relaxed);
                return;
            }
            (rank, a.enqueue(rank, n, started))
        };
        let mut guard = Ticket {
            limiter: self,
            rank,
            ticket,
            served: false,
        };
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let wait = {
                let mut a = self.lock();
                let now = Instant::now();
                a.bucket.level(now);
                match a.chosen() {
                    Some((r, t, n)) if t == ticket => {
                        let need = a.need(n);
                        if a.bucket.has(need) {
                            a.grant(r, n, now);
                            self.spent[r].fetch_add(n as u64, Ordering::Relaxed);
                            guard.served = true;
                            drop(a);
                            self.changed.notify_waiters();
                            return;
                        }
                        a.bucket.time_until(need)
                    }
                    // Another waiter goes first; it wakes us when it is
                    // served (or gives up).
                    _ => Duration::from_secs(3600),
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut changed => {}
            }
        }
    }

    /// Tokens spent by callers of `rank` so far.
    pub(crate) fn spent(&self, rank: usize) -> u64 {
        self.spent
            .get(rank.min(self.spent.len() - 1))
            .map_or(0, |s| s.load(Ordering::Relaxed))
    }

    /// Total time callers waited, the waits under way included.
    pub(crate) fn waited(&self) -> Duration {
        self.lock().waited(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn take_is_free_within_burst_then_paced() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 5.0, t0);
        assert!(b.has(5.0));
        b.take(5.0, t0);
        assert!(b.has(0.0) && !b.has(1.0));
        // Five more tokens at 10/s: half a second of debt.
        b.take(5.0, t0);
        assert_eq!(b.time_until(0.0), Duration::from_millis(500));
        // After a second the debt is repaid and five tokens have refilled.
        assert_eq!(b.level(t0 + Duration::from_millis(1500)), 5.0);
    }

    #[test]
    fn refill_caps_at_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100.0, 10.0, t0);
        b.take(10.0, t0);
        // An hour idle refills only to the burst, never to 360 000 tokens.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(b.level(later), 10.0);
        b.take(10.0, later);
        assert!(b.time_until(1.0) > Duration::ZERO);
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

    /// Under paused time: the time waited grows while a long wait is under
    /// way (one reservation of 61 tokens at 2/s leaves 30 s of debt, and a
    /// counter read during the next caller's wait must not stay flat), and a
    /// wait given up counts the time it waited.
    #[tokio::test(start_paused = true)]
    async fn waits_under_way_count_as_they_go() {
        let limiter = Arc::new(RateLimiter::new(2, 2));
        limiter.acquire(61).await;
        assert_eq!(limiter.waited(), Duration::ZERO, "served within the burst");
        let next = {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.acquire(1).await })
        };
        tokio::time::sleep(Duration::from_secs(10)).await;
        let mid = limiter.waited().as_secs_f64();
        assert!((mid - 10.0).abs() < 0.01, "waited {mid} s after 10 s");
        next.await.unwrap();
        let served = limiter.waited().as_secs_f64();
        assert!((served - 30.0).abs() < 0.01, "served after {served} s");
        // The bucket is empty: two tokens take 1 s; this caller gives up
        // after half of it.
        let gave_up = tokio::time::timeout(Duration::from_millis(500), limiter.acquire(2)).await;
        assert!(gave_up.is_err(), "two tokens are not back in 0.5 s");
        let after = limiter.waited().as_secs_f64();
        assert!(
            (after - served - 0.5).abs() < 0.01,
            "gave up after 0.5 s: {served} then {after}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(limiter.waited().as_secs_f64(), after, "nobody waits");
    }

    /// Runs `tasks` callers per rank, each taking `n` tokens in a loop for
    /// `secs` of paused time, and returns the tokens each rank got.
    async fn contend(limiter: Arc<RateLimiter>, ranks: &[usize], n: usize, secs: u64) -> Vec<f64> {
        let got: Arc<Mutex<Vec<f64>>> = Arc::new(Mutex::new(vec![0.0; ranks.len()]));
        let stop = Instant::now() + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for (i, &rank) in ranks.iter().enumerate() {
            let (limiter, got) = (limiter.clone(), got.clone());
            tasks.push(tokio::spawn(PRIORITY.scope(rank, async move {
                while Instant::now() < stop {
                    limiter.acquire(n).await;
                    if Instant::now() <= stop {
                        got.lock().unwrap()[i] += n as f64;
                    }
                }
            })));
        }
        for t in tasks {
            t.await.unwrap();
        }
        got.lock().unwrap().clone()
    }

    /// Under paused time: a saturated budget goes to the higher rank, and the
    /// lower rank keeps its minimum share; neither waits when alone.
    #[tokio::test(start_paused = true)]
    async fn priority_with_minimum_shares() {
        let shares = [0.0, 0.10, 0.05];
        let limiter = Arc::new(RateLimiter::with_shares(100, 10, &shares));
        let got = contend(limiter.clone(), &[0, 1, 2], 5, 100).await;
        let total: f64 = got.iter().sum();
        // About 100 tokens a second for 100 s, plus the first burst.
        assert!((total - 10_010.0).abs() <= 15.0, "{got:?}");
        let share = |i: usize| got[i] / total;
        assert!(
            share(1) >= 0.095 && share(1) <= 0.12,
            "rank 1 kept its 10 %: {got:?}"
        );
        assert!(
            share(2) >= 0.045 && share(2) <= 0.07,
            "rank 2 kept its 5 %: {got:?}"
        );
        assert!(share(0) >= 0.80, "rank 0 got the rest: {got:?}");
        // Rank 2 alone gets the whole rate: lower ranks stretch only when
        // higher ones want the tokens.
        let alone = contend(limiter, &[2], 5, 10).await;
        assert!((alone[0] - 1000.0).abs() <= 15.0, "{alone:?}");
    }

    /// The priority order holds even without shares, and a waiter that gives
    /// up does not hold the others back.
    #[tokio::test(start_paused = true)]
    async fn strict_order_and_cancelled_waiters() {
        let limiter = Arc::new(RateLimiter::with_shares(10, 1, &[0.0, 0.0]));
        let got = contend(limiter.clone(), &[0, 1], 1, 20).await;
        assert!(
            got[1] <= 2.0,
            "rank 1 waits while rank 0 wants everything: {got:?}"
        );
        // A rank-0 waiter that is dropped before being served.
        limiter.acquire(1).await;
        let waiting = {
            let limiter = limiter.clone();
            tokio::spawn(PRIORITY.scope(0, async move { limiter.acquire(50).await }))
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        waiting.abort();
        let _ = waiting.await;
        let started = Instant::now();
        PRIORITY.scope(1, limiter.acquire(1)).await;
        assert!(
            started.elapsed() <= Duration::from_millis(200),
            "the aborted waiter's 50 tokens were not held: {:?}",
            started.elapsed()
        );
    }
}
