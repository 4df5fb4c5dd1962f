//! Time the test process was not running at all: a stalled VM, a host that
//! paused the machine. CI's VMs stall for seconds now and then, and a stall
//! freezes the exporter and the test that watches it together, so a bound
//! on how fast the exporter reacts must not count it. A thread of its own
//! wakes every [`TICK`]; a wake-up later than [`LATE`] past its time is a
//! stall. A busy machine is not excused: the scheduler wakes a thread that
//! slept well within [`LATE`] even when every core is busy, and the bounds
//! carry their own slack for that. Nor is the exporter: a tokio runtime
//! thread that spins or blocks does not make this thread late, so it is
//! counted as running time and fails the bounds (faults.rs has that negative
//! control). What is discounted is capped at [`MAX_DISCOUNT`] per interval: a
//! longer stall fails the bound it sat in rather than hide whatever else
//! went slow around it.

use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(10);
const LATE: Duration = Duration::from_millis(50);
/// The most of one interval counted as stalled. The stalls of CI's VMs seen
/// so far lasted a few seconds; anything longer than this is not excused.
pub const MAX_DISCOUNT: Duration = Duration::from_secs(10);

struct Stalls {
    /// The stalls seen so far, `(from, to)`.
    spans: Mutex<Vec<(Instant, Instant)>>,
    /// When the watching thread last woke.
    last_wake: Mutex<Instant>,
}

fn stalls() -> &'static Stalls {
    static STALLS: OnceLock<Stalls> = OnceLock::new();
    static WATCHER: Once = Once::new();
    let stalls = STALLS.get_or_init(|| Stalls {
        spans: Mutex::new(Vec::new()),
        last_wake: Mutex::new(Instant::now()),
    });
    WATCHER.call_once(|| {
        std::thread::Builder::new()
            .name("stall-watch".into())
            .spawn(move || {
                loop {
                    let asleep = Instant::now();
                    std::thread::sleep(TICK);
                    let woke = Instant::now();
                    if woke - asleep > TICK + LATE {
                        stalls.spans.lock().unwrap().push((asleep + TICK, woke));
                    }
                    *stalls.last_wake.lock().unwrap() = woke;
                }
            })
            .unwrap();
    });
    stalls
}

/// Starts watching (the fixtures that start servers and daemons call it, so
/// it is running before anything a test times).
pub fn watch() {
    stalls();
}

/// How long, of `from..to`, the process was stalled. A stall still going on
/// at `to` as far as the watching thread knows (it has not woken since)
/// counts too: after a stall, the test may run before that thread does.
/// At most [`MAX_DISCOUNT`].
pub fn stalled(from: Instant, to: Instant) -> Duration {
    let s = stalls();
    let spans = s.spans.lock().unwrap().clone();
    let last_wake = *s.last_wake.lock().unwrap();
    discounted(spans, last_wake, from, to)
}

/// Of `from..to`, the time within the stalls `spans` (and since `last_wake`,
/// when the watching thread is overdue), at most [`MAX_DISCOUNT`].
pub fn discounted(
    mut spans: Vec<(Instant, Instant)>,
    last_wake: Instant,
    from: Instant,
    to: Instant,
) -> Duration {
    if to > last_wake + TICK + LATE {
        spans.push((last_wake + TICK, to));
    }
    let total: Duration = spans
        .iter()
        .map(|&(a, b)| b.min(to).saturating_duration_since(a.max(from)))
        .sum();
    total.min(MAX_DISCOUNT)
}

/// The time since `since` that the process was running.
pub fn awake_since(since: Instant) -> Duration {
    let now = Instant::now();
    (now - since).saturating_sub(stalled(since, now))
}
