//! Time to loss and time to drain on a real server. A producer
//! writes 400 entries/s into a stream capped at 2,000 entries while a slow
//! group reads 200/s: the trimming edge closes in on the group, and the
//! exporter's trim-overtake ETA appears and shrinks. We let the loss happen
//! to measure when it truly came: entries carry their sequence number, and
//! the first gap the group reads past is the loss (a sample of the first
//! entry and the group's position, two round trips apart, races the producer
//! and the consumer and can miss it for the whole run). Then the group
//! speeds up to 800/s: the drain ETA appears, the overtake ETA goes away,
//! and we measure when the lag truly reached 0. Each ETA the exporter
//! showed is printed next to the time that was left (`SIGNALS` lines); the
//! assertions are about presence, direction and accuracy (the ETA at the
//! middle of each phase against the phase's own average rate), not about
//! how long anything took.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use redis_streams_exporter::probe::ProbeKind;

const CAP: u64 = 2_000;

/// Polls the exporter's trends look back over (`trend::WINDOW` in the crate).
const TREND_WINDOW: usize = 8;

/// One poll's view: seconds since the start, and the figures shown.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: f64,
    overtake_eta: Option<f64>,
    drain_eta: Option<f64>,
    margin: Option<f64>,
    lag: Option<f64>,
}

/// Reads up to `count` new entries for the group `slow`: each one's ID and
/// sequence number (the producer's `n` field).
fn read_numbered(c: &mut redis::Connection, count: usize) -> Vec<(Vec<u8>, u64)> {
    let v: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("slow")
        .arg("c")
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg("sig")
        .arg(">")
        .query(c)
        .unwrap();
    let redis::Value::Array(streams) = v else {
        return Vec::new(); // Nil: nothing new.
    };
    let mut read = Vec::new();
    for stream in streams {
        let redis::Value::Array(mut parts) = stream else {
            panic!("a stream's reply: {stream:?}");
        };
        let Some(redis::Value::Array(entries)) = parts.pop() else {
            panic!("a stream's entries: {parts:?}");
        };
        for entry in entries {
            let redis::Value::Array(kv) = entry else {
                panic!("an entry: {entry:?}");
            };
            let [redis::Value::BulkString(id), redis::Value::Array(fields)] = &kv[..] else {
                panic!("an entry: {kv:?}");
            };
            let Some(redis::Value::BulkString(n)) = fields.get(1) else {
                panic!("an entry without its number: {fields:?}");
            };
            let n = std::str::from_utf8(n).unwrap().parse().unwrap();
            read.push((id.clone(), n));
        }
    }
    read
}

/// Asserts that the ETA shown at the middle of `phase` (polls that showed
/// one) is within 40 % of what the phase's own figures give: `figure` at
/// that poll over the average rate at which `figure` fell from the phase's
/// first poll to its last. Both rates are steady in this scenario (the
/// threads' 10 ms ticks catch up when late), so the average is the rate the
/// ETA estimates from its window of polls; 40 % leaves room for the window's
/// few polls (3 here) on a loaded machine, and still fails an ETA built on
/// the wrong rate (production or consumption alone is off by half or more).
fn assert_accurate(
    phase: &str,
    polls: &[&Seen],
    figure: impl Fn(&Seen) -> Option<f64>,
    eta: impl Fn(&Seen) -> Option<f64>,
    rows: &[String],
) {
    let (first, last) = (polls[0], polls[polls.len() - 1]);
    let mid = polls[polls.len() / 2];
    let (a, b, m) = (figure(first), figure(last), figure(mid));
    let (Some(a), Some(b), Some(m), Some(shown)) = (a, b, m, eta(mid)) else {
        panic!("{phase}: figures missing: {first:?} {mid:?} {last:?}");
    };
    let rate = (a - b) / (last.at - first.at);
    assert!(rate > 0.0, "{phase}: the figure did not fall: {rows:?}");
    let expected = m / rate;
    assert!(
        (shown - expected).abs() <= 0.4 * expected,
        "{phase}: ETA {shown:.2}s at t={:.1}s, the phase's average rate gives {expected:.2}s: {rows:?}",
        mid.at
    );
}

async fn time_to_loss_and_drain(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "sig", 1);
    let mut create = redis::cmd("XGROUP");
    create.arg("CREATE").arg("sig").arg("slow").arg("$");
    if kind.has_lag() {
        create.arg("ENTRIESREAD").arg(1);
    }
    let _: () = create.query(&mut c).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    // Entries the consumer reads per 10 ms tick.
    let reads_per_tick = Arc::new(AtomicU32::new(2));
    // When the group first read past a gap in the numbers: the moment an
    // entry it had not read was trimmed away (seen by the consumer within
    // one 10 ms tick of the trim).
    let lost_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let producer = {
        let (stop, mut p) = (stop.clone(), server.conn());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut tick = 0u64;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut pipe = redis::pipe();
                for _ in 0..4 {
                    pipe.cmd("XADD")
                        .arg("sig")
                        .arg("MAXLEN")
                        .arg("=")
                        .arg(CAP)
                        .arg("*")
                        .arg("n")
                        .arg(n)
                        .ignore();
                    n += 1;
                }
                let _: () = pipe.query(&mut p).unwrap();
                tick += 1;
                let due = started + Duration::from_millis(10 * tick);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        })
    };
    let consumer = {
        let (stop, rate, lost_at, mut k) = (
            stop.clone(),
            reads_per_tick.clone(),
            lost_at.clone(),
            server.conn(),
        );
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut tick = 0u64;
            let mut next = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let count = rate.load(Ordering::Relaxed) as usize;
                let read = read_numbered(&mut k, count);
                if let Some(&(_, first)) = read.first() {
                    if first != next {
                        lost_at.lock().unwrap().get_or_insert_with(Instant::now);
                    }
                    next = read.last().map_or(next, |&(_, n)| n + 1);
                    let mut ack = redis::cmd("XACK");
                    ack.arg("sig").arg("slow");
                    for (id, _) in &read {
                        ack.arg(id.as_slice());
                    }
                    let _: u64 = ack.query(&mut k).unwrap();
                }
                tick += 1;
                let due = started + Duration::from_millis(10 * tick);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        })
    };

    let h = Harness::new(config_for(
        &server,
        "[schedule]\nstream = \"250ms\"\n[status]\nwindow = 3\n",
    ));
    h.probe(ProbeKind::Discovery).await;
    h.probe(ProbeKind::Info).await;
    let g = tsg("sig", "slow");
    let started = Instant::now();
    let mut seen: Vec<Seen> = Vec::new();
    let mut drained_at: Option<f64> = None;
    let mut sped_up_at: Option<f64> = None;
    while started.elapsed() < Duration::from_secs(40) {
        h.probe(ProbeKind::Stream).await;
        let at = started.elapsed().as_secs_f64();
        let m = h.metrics();
        seen.push(Seen {
            at,
            overtake_eta: m.get("redis_streams_group_trim_overtake_eta_seconds", &g),
            drain_eta: m.get("redis_streams_group_drain_eta_seconds", &g),
            margin: m.get("redis_streams_group_retention_margin_seconds", &g),
            lag: m.get("redis_streams_group_lag", &g),
        });
        let loss_at = lost_at
            .lock()
            .unwrap()
            .map(|t| t.saturating_duration_since(started).as_secs_f64());
        if loss_at.is_some_and(|l| at > l + 1.0) && sped_up_at.is_none() {
            reads_per_tick.store(8, Ordering::Relaxed);
            sped_up_at = Some(at);
        }
        if sped_up_at.is_some() && drained_at.is_none() && seen.last().unwrap().lag == Some(0.0) {
            drained_at = Some(at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    consumer.join().unwrap();

    let loss_at = lost_at
        .lock()
        .unwrap()
        .map(|t| t.saturating_duration_since(started).as_secs_f64())
        .expect("the trim overtook the slow group");
    let sped_up_at = sped_up_at.unwrap();
    let drained_at = drained_at.expect("the backlog drained after the speed-up");
    let before_loss: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.at < loss_at && s.overtake_eta.is_some())
        .collect();
    assert!(
        before_loss.len() >= 3,
        "the overtake ETA showed before the loss: {seen:#?}"
    );
    // Three points spread over the approach: ETA shown against time left.
    let picks = [
        before_loss[0],
        before_loss[before_loss.len() / 2],
        before_loss[before_loss.len() - 1],
    ];
    let rows: Vec<String> = picks
        .iter()
        .map(|s| {
            format!(
                "t={:.1}s: ETA {:.1}s, truly {:.1}s left (margin {:.2}s)",
                s.at,
                s.overtake_eta.unwrap(),
                loss_at - s.at,
                s.margin.unwrap_or(f64::NAN)
            )
        })
        .collect();
    println!("SIGNALS | {kind:?} | time to loss | {}", rows.join("; "));
    assert!(
        picks[2].overtake_eta.unwrap() < picks[0].overtake_eta.unwrap(),
        "the ETA shrinks as the edge closes in: {rows:?}"
    );
    // Accuracy: the margin shrinks at a steady rate in this scenario (the
    // trimming edge follows production, the group its consumption), so the
    // time left at the middle of the approach is its margin over the
    // margin's average rate of fall over the whole approach.
    assert_accurate(
        "time to loss",
        &before_loss,
        |s| s.margin,
        |s| s.overtake_eta,
        &rows,
    );
    // After the speed-up: a drain ETA, and no overtake ETA once the margin
    // grows again.
    let draining: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.at > sped_up_at && s.at < drained_at && s.drain_eta.is_some())
        .collect();
    assert!(
        draining.len() >= 3,
        "the drain ETA showed while draining: {seen:#?}"
    );
    let picks = [
        draining[0],
        draining[draining.len() / 2],
        draining[draining.len() - 1],
    ];
    let rows: Vec<String> = picks
        .iter()
        .map(|s| {
            format!(
                "t={:.1}s: ETA {:.1}s, truly {:.1}s left (lag {})",
                s.at,
                s.drain_eta.unwrap(),
                drained_at - s.at,
                s.lag.unwrap_or(f64::NAN)
            )
        })
        .collect();
    println!("SIGNALS | {kind:?} | time to drain | {}", rows.join("; "));
    // Likewise the lag falls at a steady rate once the group reads faster
    // than production.
    assert_accurate(
        "time to drain",
        &draining,
        |s| s.lag,
        |s| s.drain_eta,
        &rows,
    );
    let last = seen.last().unwrap();
    assert_eq!(
        last.overtake_eta, None,
        "nothing left to overtake: {last:?}"
    );
    // Once the group is ahead of the edge again (a margin above 0), the
    // trend's window of polls renews and the ETA goes: counted in polls, not
    // seconds, as a loaded machine stretches the polls. The test's consumer
    // thread may fall behind for a moment (its lag 8, then 28 a poll later,
    // on a busy machine), which shrinks the margin for real: one poll may
    // show an ETA, never two in a row.
    let after: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.at > sped_up_at)
        .skip_while(|s| !s.margin.is_some_and(|m| m > 0.0))
        .skip(TREND_WINDOW)
        .collect();
    assert!(
        after
            .windows(2)
            .all(|w| w[0].overtake_eta.is_none() || w[1].overtake_eta.is_none()),
        "the overtake ETA goes away once the group outruns the trimming: {after:#?}"
    );
}

per_server!(time_to_loss_and_drain);
