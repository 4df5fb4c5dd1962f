//! The truth when things move between two polls, on every server
//! (Redis 6.2, 7.0, 8.6 and Valkey 9): a loss that lasts one poll stays
//! counted, deletions inside a group's window are counted, an old server's
//! miscount is not exported as exact, bursts do not defeat the estimator,
//! rewinds and a group ahead of its stream are seen, and Redis 8.6's
//! idempotent producers are exported.
//!
//! Each scenario builds its truth on a real server, polls with the exporter's
//! own probes, and prints one `MOTION` line (server, scenario, truth,
//! exported) so a run with `--nocapture` gives a table of truth against export.

use crate::common;

use std::time::Duration;

use common::*;
use redis_streams_exporter::probe::ProbeKind;

const FAST: &str = "[schedule]\nstream = \"100ms\"\n[status]\nwindow = 3\n";

fn report(kind: Server, scenario: &str, truth: &str, exported: &str) {
    println!("MOTION | {kind:?} | {scenario} | truth: {truth} | exported: {exported}");
}

/// `XGROUP CREATE key group id`, with `ENTRIESREAD n` where the server has it.
fn create_group(
    c: &mut redis::Connection,
    kind: Server,
    key: &str,
    group: &str,
    id: &str,
    read: Option<u64>,
) {
    let mut cmd = redis::cmd("XGROUP");
    cmd.arg("CREATE")
        .arg(key)
        .arg(group)
        .arg(id)
        .arg("MKSTREAM");
    if let (Some(n), true) = (read, kind.has_lag()) {
        cmd.arg("ENTRIESREAD").arg(n);
    }
    let _: () = cmd.query(c).unwrap();
}

fn status_of(m: &Metrics, stream: &str, group: &str) -> String {
    m.status(stream, group)
        .unwrap_or_else(|| panic!("no status for {stream}/{group}:\n{}", m.text))
        .0
}

fn lost(m: &Metrics, stream: &str, group: &str, cause: &str) -> Option<f64> {
    m.get(
        "redis_streams_group_lost_entries_total",
        &[
            ("target", "t"),
            ("stream", stream),
            ("group", group),
            ("cause", cause),
        ],
    )
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "absent".to_string(), |v| v.to_string())
}

/// A trim overtakes a slow group and takes 40 of its unread entries; the
/// group then reads past the gap before the next poll. The loss lasted one
/// poll: the gauge falls back to 0, the counter keeps 40 and the status
/// holds `data_loss`.
async fn trim_then_catch_up(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "q", 200);
    create_group(&mut c, kind, "q", "slow", "0", Some(0));
    read_group(&mut c, "q", "slow", "c1", 100);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let g = tsg("q", "slow");
    let m = h.metrics();
    let baseline = lost(&m, "q", "slow", "trimmed");
    let _: u64 = redis::cmd("XTRIM")
        .arg("q")
        .arg("MAXLEN")
        .arg(60)
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::Stream).await;
    let during = h.metrics();
    assert_eq!(during.value("redis_streams_group_lag", &g), 60.0);
    assert_eq!(during.value("redis_streams_group_lag_estimated", &g), 0.0);
    read_group(&mut c, "q", "slow", "c1", 100);
    h.probe(ProbeKind::Stream).await;
    let after = h.metrics();
    assert_eq!(after.value("redis_streams_group_lag", &g), 0.0);
    let exported = lost(&after, "q", "slow", "trimmed");
    if kind.has_lag() {
        assert_eq!(baseline, Some(0.0));
        assert_eq!(
            during.get("redis_streams_group_trimmed_undelivered", &g),
            Some(40.0)
        );
        assert_eq!(lost(&during, "q", "slow", "trimmed"), Some(40.0));
        assert_eq!(exported, Some(40.0), "the counter keeps the loss");
        assert_eq!(lost(&after, "q", "slow", "deleted"), Some(0.0));
        assert_eq!(
            after.get("redis_streams_group_trimmed_undelivered", &g),
            Some(0.0)
        );
        assert_eq!(status_of(&after, "q", "slow"), "data_loss", "held");
    } else {
        // 6.2 has no counters: the loss cannot be known, so it is absent.
        assert_eq!(exported, None);
        assert_eq!(baseline, None);
    }
    report(
        kind,
        "trim then catch-up (loss visible for one poll)",
        "40 lost",
        &format!(
            "lost_entries_total{{trimmed}} {} (gauge {} during, {} after), status {}",
            fmt(exported),
            fmt(during.get("redis_streams_group_trimmed_undelivered", &g)),
            fmt(after.get("redis_streams_group_trimmed_undelivered", &g)),
            status_of(&after, "q", "slow")
        ),
    );
}

/// Redis 7.0.15's miscount: 20 entries, the group reads 10, `XTRIM MAXLEN
/// 8` removes 2 of its unread entries, the group reads 3 more, all between
/// two polls. 7.0 then reports lag 7 where 5 remain.
async fn small_trim_miscount(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "m", 20);
    create_group(&mut c, kind, "m", "g", "0", Some(0));
    read_group(&mut c, "m", "g", "c", 10);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let _: u64 = redis::cmd("XTRIM")
        .arg("m")
        .arg("MAXLEN")
        .arg(8)
        .query(&mut c)
        .unwrap();
    read_group(&mut c, "m", "g", "c", 3);
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    let g = tsg("m", "g");
    let redis_lag = group_field(&mut c, "m", "g", "lag");
    assert_eq!(
        m.value("redis_streams_group_lag", &g),
        5.0,
        "never Redis's 7"
    );
    let exported_lost = lost(&m, "m", "g", "trimmed");
    if kind.old_lag_algorithm() && kind != Server::Valkey9 {
        // 7.0 keeps the 2 in its count: the exporter counts the truth and
        // the difference is the loss.
        assert_eq!(redis_lag.as_deref(), Some("7"));
        assert_eq!(exported_lost, Some(2.0));
    }
    if kind.has_lag() {
        // Never more than the truth.
        assert!(exported_lost.unwrap() <= 2.0);
    } else {
        assert_eq!(exported_lost, None);
    }
    // A later poll carries the proof forward: still the truth.
    xadd_n(&mut c, "m", 10);
    h.probe(ProbeKind::Stream).await;
    let later = h.metrics();
    assert_eq!(later.value("redis_streams_group_lag", &g), 15.0);
    report(
        kind,
        "7.0 small-trim miscount (2 unread trimmed, then 3 read, between polls)",
        "lag 5, 2 lost",
        &format!(
            "lag {} (Redis said {}), lag_estimated {}, lost {}; after 10 more: lag {} (Redis said {})",
            m.value("redis_streams_group_lag", &g),
            redis_lag.as_deref().unwrap_or("none"),
            m.value("redis_streams_group_lag_estimated", &g),
            fmt(exported_lost),
            later.value("redis_streams_group_lag", &g),
            group_field(&mut c, "m", "g", "lag")
                .as_deref()
                .unwrap_or("none"),
        ),
    );
}

/// One field of a group's `XINFO GROUPS` entry, as text (`None` for nil or
/// absent).
fn group_field(c: &mut redis::Connection, key: &str, group: &str, field: &str) -> Option<String> {
    let v: redis::Value = redis::cmd("XINFO").arg("GROUPS").arg(key).query(c).unwrap();
    let redis::Value::Array(groups) = v else {
        return None;
    };
    for g in groups {
        let pairs: Vec<redis::Value> = match g {
            redis::Value::Array(p) => p,
            redis::Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            _ => continue,
        };
        let text = |v: &redis::Value| match v {
            redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            redis::Value::SimpleString(s) => Some(s.clone()),
            redis::Value::Int(i) => Some(i.to_string()),
            _ => None,
        };
        let fields: Vec<(Option<String>, Option<String>)> = pairs
            .chunks(2)
            .map(|kv| (text(&kv[0]), kv.get(1).and_then(text)))
            .collect();
        if fields
            .iter()
            .any(|(k, v)| k.as_deref() == Some("name") && v.as_deref() == Some(group))
        {
            return fields
                .into_iter()
                .find(|(k, _)| k.as_deref() == Some(field))
                .and_then(|(_, v)| v);
        }
    }
    None
}

/// XDEL of three unread entries inside the group's window.
async fn xdel_unread(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "d", 20);
    create_group(&mut c, kind, "d", "g", "0", Some(0));
    read_group(&mut c, "d", "g", "c", 5);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let _: u64 = redis::cmd("XDEL")
        .arg("d")
        .arg(&ids[7])
        .arg(&ids[8])
        .arg(&ids[11])
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    let g = tsg("d", "g");
    assert_eq!(m.value("redis_streams_group_lag", &g), 12.0);
    let deleted = lost(&m, "d", "g", "deleted");
    if kind.has_lag() {
        assert_eq!(deleted, Some(3.0));
        assert_eq!(lost(&m, "d", "g", "trimmed"), Some(0.0));
        assert_eq!(status_of(&m, "d", "g"), "data_loss");
    } else {
        assert_eq!(deleted, None);
    }
    report(
        kind,
        "XDEL of 3 unread entries",
        "lag 12, 3 lost (deleted)",
        &format!(
            "lag {}, lost_entries_total{{deleted}} {}",
            m.value("redis_streams_group_lag", &g),
            fmt(deleted)
        ),
    );
}

/// `XDELEX` (default KEEPREF) of two unread entries, and `XACKDEL` by a
/// group that read ten entries another group had not: on every server that
/// has both (asked of the server, see `common::Capabilities`).
async fn xdelex_and_xackdel(kind: Server) {
    let caps = kind.capabilities();
    if !(caps.xdelex && caps.xackdel) {
        report(
            kind,
            "XDELEX / XACKDEL",
            "n/a",
            "commands unknown to this server",
        );
        return;
    }
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "x", 30);
    create_group(&mut c, kind, "x", "fast", "0", Some(0));
    create_group(&mut c, kind, "x", "slow", "0", Some(0));
    read_group(&mut c, "x", "slow", "c", 5);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let _: redis::Value = redis::cmd("XDELEX")
        .arg("x")
        .arg("IDS")
        .arg(2)
        .arg(&ids[6])
        .arg(&ids[7])
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    assert_eq!(lost(&m, "x", "slow", "deleted"), Some(2.0));
    assert_eq!(lost(&m, "x", "fast", "deleted"), Some(2.0));
    let after_xdelex = (
        lost(&m, "x", "slow", "deleted"),
        lost(&m, "x", "fast", "deleted"),
    );
    // The fast group reads ten more and acknowledges them with deletion;
    // the slow group (at entry 5) had not read entries 10..19.
    let read = read_group(&mut c, "x", "fast", "c", 20);
    let acked: Vec<&String> = read.iter().skip(8).take(10).collect();
    let mut cmd = redis::cmd("XACKDEL");
    cmd.arg("x").arg("fast").arg("IDS").arg(acked.len());
    for id in &acked {
        cmd.arg(id.as_str());
    }
    let _: redis::Value = cmd.query(&mut c).unwrap();
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    assert_eq!(lost(&m, "x", "slow", "deleted"), Some(12.0));
    assert_eq!(
        lost(&m, "x", "fast", "deleted"),
        Some(2.0),
        "it read them first"
    );
    report(
        kind,
        "XDELEX of 2 unread, then XACKDEL of 10 by another group",
        "slow: 2 then 12 lost; fast: 2",
        &format!(
            "slow {} then {}; fast {} then {}",
            fmt(after_xdelex.0),
            fmt(lost(&m, "x", "slow", "deleted")),
            fmt(after_xdelex.1),
            fmt(lost(&m, "x", "fast", "deleted"))
        ),
    );
}

/// Entries per millisecond of the densest millisecond among `ids`.
fn densest_ms(ids: &[String]) -> usize {
    let mut per: std::collections::BTreeMap<u64, usize> = Default::default();
    for id in ids {
        *per.entry(id_ms(id)).or_default() += 1;
    }
    per.values().copied().max().unwrap_or(0)
}

/// A burst: 1,000 entries pipelined in a few milliseconds, 100
/// delivered, 90 of the rest deleted. Truth 810; 7.0+ counters prove
/// 810..=900.
async fn burst_with_deletions(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "b", 1000);
    let densest = densest_ms(&ids);
    create_group(&mut c, kind, "b", "g", "0", Some(0));
    read_group(&mut c, "b", "g", "c", 100);
    let mut del = redis::cmd("XDEL");
    del.arg("b");
    for id in ids[100..].iter().step_by(10) {
        del.arg(id.as_str());
    }
    let _: u64 = del.query(&mut c).unwrap();
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let m = h.metrics();
    let g = tsg("b", "g");
    let lag = m.value("redis_streams_group_lag", &g);
    let error = (lag - 810.0).abs() / 810.0;
    assert!(error <= 0.10, "lag {lag} vs 810 ({densest}/ms)");
    if kind.has_lag() {
        assert!(
            (810.0..=900.0).contains(&lag),
            "outside the counters' bounds: {lag}"
        );
    }
    assert_eq!(m.value("redis_streams_group_lag_estimated", &g), 1.0);
    report(
        kind,
        &format!("1,000-entry burst ({densest}/ms at most), 100 read, 90 deleted"),
        "lag 810 (counters: 810..=900)",
        &format!("lag {lag} ({:.1} % off), lag_estimated 1", error * 100.0),
    );
}

/// Positions in a stream written by `produce`, each set with `XGROUP CREATE`
/// at an entry (no ENTRIESREAD: Redis has no lag for them), estimated within
/// 10%. With `poll_while_producing` the exporter polls every 100 ms while the
/// producer runs (its anchors then pin the bursts); without, it sees the
/// stream for the first time afterwards. The exporter runs at the default
/// schedule: the estimator's walks may spend a tenth of what the rate limit
/// allows over one stream interval, so the figures are those of the
/// defaults (at a 100 ms stream interval a walk would get its 200-command
/// floor, capped at the 50 commands 500/s allow in 100 ms) unless `limits`
/// says otherwise. `bounds` are the largest errors allowed
/// after each stream poll, one poll per bound.
async fn estimate_positions(
    kind: Server,
    scenario: &str,
    poll_while_producing: bool,
    limits: &str,
    bounds: &[f64],
    produce: impl FnOnce(&mut redis::Connection) -> Vec<String> + Send + 'static,
) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let h = Harness::new(config_for(&server, limits));
    let mut producer_conn = server.conn();
    let producer = tokio::task::spawn_blocking(move || produce(&mut producer_conn));
    if poll_while_producing {
        while !producer.is_finished() {
            h.probe(ProbeKind::Discovery).await;
            h.probe(ProbeKind::Info).await;
            h.probe(ProbeKind::Stream).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let ids = producer.await.unwrap();
    let n = ids.len();
    let positions = [n / 10, n / 3, n / 2, 2 * n / 3, 9 * n / 10];
    for (i, &p) in positions.iter().enumerate() {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("p")
            .arg(format!("g{i}"))
            .arg(&ids[p - 1])
            .query(&mut c)
            .unwrap();
    }
    h.probe(ProbeKind::Discovery).await;
    h.probe(ProbeKind::Info).await;
    for (poll, &bound) in bounds.iter().enumerate() {
        h.probe(ProbeKind::Stream).await;
        let m = h.metrics();
        let mut rows = Vec::new();
        let mut worst: f64 = 0.0;
        for (i, &p) in positions.iter().enumerate() {
            let group = format!("g{i}");
            let truth = (n - p) as f64;
            let lag = m.value("redis_streams_group_lag", &tsg("p", &group));
            let error = (lag - truth).abs() / truth;
            worst = worst.max(error);
            rows.push(format!("{truth}→{lag} ({:.1} %)", error * 100.0));
        }
        let polled = match (poll_while_producing, poll) {
            (true, _) => "polled while producing".to_string(),
            (false, 0) => "first poll after".to_string(),
            (false, k) => format!("poll {} after", k + 1),
        };
        report(
            kind,
            &format!(
                "{scenario}, {polled} ({n} entries, {}/ms at most)",
                densest_ms(&ids)
            ),
            "lag of 5 groups created at entries",
            &rows.join(", "),
        );
        assert!(worst <= bound, "{scenario}, {polled}: {rows:?}");
    }
}

fn steady(c: &mut redis::Connection) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..1500 {
        ids.extend(xadd_n(c, "p", 1));
        std::thread::sleep(Duration::from_micros(900));
    }
    ids
}

fn bursty(c: &mut redis::Connection) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.extend(xadd_n(c, "p", 500));
        std::thread::sleep(Duration::from_millis(3));
    }
    ids
}

/// Explicit IDs in the shape auto-generated ones take (a millisecond's
/// entries numbered from 0), so that a layout does not depend on how fast
/// the machine runs the producer: under load its sleeps stretch, the
/// singles spread out, and the estimate is that of another layout.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Milliseconds from one single entry to the next.
    spacing: u64,
    /// Milliseconds a 200-entry burst spreads over.
    burst_ms: u64,
    /// Whether a burst begins in the millisecond of the single before it.
    burst_joins_single: bool,
}

impl Layout {
    /// A producer for [`estimate_positions`].
    fn producer(self) -> impl FnOnce(&mut redis::Connection) -> Vec<String> + Send + 'static {
        move |c| self.produce(c)
    }

    /// 30 rounds of 20 singles, a 200-entry burst before every third: 2,600
    /// entries, their milliseconds ending a minute ago.
    fn produce(self, c: &mut redis::Connection) -> Vec<String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let mut ms = now - 60_000 - 30 * (20 * self.spacing + self.burst_ms);
        let mut ids = Vec::new();
        let mut last_single = None;
        for round in 0..30 {
            if round % 3 == 0 {
                let per_ms = 200 / self.burst_ms;
                let (mut at, mut seq) = match last_single {
                    Some(single) if self.burst_joins_single => (single, 1),
                    _ => (ms, 0),
                };
                let mut burst = Vec::new();
                for _ in 0..200 {
                    burst.push(format!("{at}-{seq}"));
                    seq += 1;
                    if seq == per_ms {
                        (at, seq) = (at + 1, 0);
                    }
                }
                ms = at + 1;
                ids.extend(xadd_ids(c, "p", &burst));
            }
            for _ in 0..20 {
                ids.extend(xadd_ids(c, "p", &[format!("{ms}-0")]));
                last_single = Some(ms);
                ms += self.spacing;
            }
        }
        ids
    }
}

fn xadd_ids(c: &mut redis::Connection, key: &str, ids: &[String]) -> Vec<String> {
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.cmd("XADD").arg(key).arg(id).arg("n").arg(1);
    }
    pipe.query(c).unwrap()
}

/// Steady for a while, one large burst, steady again: the burst sits where
/// no sample or probe of a cold start can see it, so only the anchors of
/// polls taken while it was written place it.
fn phases(c: &mut redis::Connection) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..600 {
        ids.extend(xadd_n(c, "p", 1));
        std::thread::sleep(Duration::from_micros(900));
    }
    ids.extend(xadd_n(c, "p", 3000));
    for _ in 0..600 {
        ids.extend(xadd_n(c, "p", 1));
        std::thread::sleep(Duration::from_micros(900));
    }
    ids
}

async fn steady_producer(kind: Server) {
    estimate_positions(kind, "steady producer", false, "", &[0.10], steady).await;
}

async fn bursty_producer(kind: Server) {
    estimate_positions(kind, "bursty producer", false, "", &[0.10], bursty).await;
}

/// 200-entry bursts in a millisecond of their own between singles a
/// millisecond apart: the walks read every millisecond they need within
/// their default budget.
async fn mixed_producer(kind: Server) {
    let layout = Layout {
        spacing: 1,
        burst_ms: 1,
        burst_joins_single: false,
    };
    estimate_positions(
        kind,
        "mixed producer",
        false,
        "",
        &[0.10],
        layout.producer(),
    )
    .await;
}

/// Singles 2 ms apart and bursts over 2 ms that begin beside a single: the
/// walks spend a command on every empty millisecond they read, and their
/// default budget (750 commands, a tenth of what 500 commands/s allow over
/// 15 s) runs out before the gaps are read, so on a first poll the rest is
/// modelled evenly (measured 12.8 to 14.1 % off on 6.2, 1.3 % on 7.0+). What
/// they read is kept, and the second poll's walks go on from there (measured
/// exact). Twice the budget counts them on the first poll (measured exact):
/// `limits.commands_per_second` is the knob.
async fn sparse_mixed_producer(kind: Server) {
    let layout = Layout {
        spacing: 2,
        burst_ms: 2,
        burst_joins_single: true,
    };
    let scenario = "mixed producer, singles 2 ms apart";
    estimate_positions(
        kind,
        scenario,
        false,
        "",
        &[0.15, 0.10, 0.10],
        layout.producer(),
    )
    .await;
    let scenario = "mixed producer, singles 2 ms apart, commands_per_second 1000";
    let limits = "[limits]\ncommands_per_second = 1000\n";
    estimate_positions(kind, scenario, false, limits, &[0.10], layout.producer()).await;
}

async fn phased_producer_polled(kind: Server) {
    let scenario = "steady, 3000-entry burst, steady";
    estimate_positions(kind, scenario, true, "", &[0.10], phases).await;
}

/// XGROUP SETID backwards (a replay) and into the future.
async fn setid_back_and_forward(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "s", 100);
    create_group(&mut c, kind, "s", "g", "0", Some(0));
    read_group(&mut c, "s", "g", "c", 50);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let g = tsg("s", "g");
    let m = h.metrics();
    assert_eq!(m.value("redis_streams_group_rewinds_total", &g), 0.0);
    assert_eq!(m.value("redis_streams_group_ahead_of_stream", &g), 0.0);
    let _: () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg("s")
        .arg("g")
        .arg(&ids[9])
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::Stream).await;
    let back = h.metrics();
    assert_eq!(back.value("redis_streams_group_rewinds_total", &g), 1.0);
    assert_eq!(back.value("redis_streams_group_lag", &g), 90.0);
    // A replay is not a loss.
    if kind.has_lag() {
        assert_eq!(lost(&back, "s", "g", "deleted"), Some(0.0));
        assert_eq!(lost(&back, "s", "g", "trimmed"), Some(0.0));
    }
    let future = format!("{}-0", id_ms(&ids[99]) + 3_600_000);
    let _: () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg("s")
        .arg("g")
        .arg(&future)
        .query(&mut c)
        .unwrap();
    xadd_n(&mut c, "s", 5);
    h.probe(ProbeKind::Stream).await;
    let ahead = h.metrics();
    assert_eq!(ahead.value("redis_streams_group_ahead_of_stream", &g), 1.0);
    assert_eq!(ahead.value("redis_streams_group_lag", &g), 0.0);
    assert_eq!(ahead.value("redis_streams_group_rewinds_total", &g), 1.0);
    report(
        kind,
        "SETID back 40 entries, then 1 h into the future + 5 adds",
        "1 rewind, lag 90; ahead of stream, 5 entries never delivered",
        &format!(
            "rewinds_total {}, lag {}; ahead_of_stream {}, lag {}",
            back.value("redis_streams_group_rewinds_total", &g),
            back.value("redis_streams_group_lag", &g),
            ahead.value("redis_streams_group_ahead_of_stream", &g),
            ahead.value("redis_streams_group_lag", &g)
        ),
    );
}

/// Idempotent producers (Redis 8.6, wherever the server has them): one
/// producer adds 3 entries, retries one of them twice.
async fn idempotent_duplicates(kind: Server) {
    let idmp = kind.capabilities().idmp;
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "i", 1);
    if idmp {
        for iid in ["a", "b", "c", "b", "b"] {
            let _: String = redis::cmd("XADD")
                .arg("i")
                .arg("IDMP")
                .arg("p1")
                .arg(iid)
                .arg("*")
                .arg("f")
                .arg("v")
                .query(&mut c)
                .unwrap();
        }
    }
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let m = h.metrics();
    let s = ts("i");
    let got = |name: &str| m.get(name, &s);
    if idmp {
        assert_eq!(
            got("redis_streams_stream_idempotent_ids_added_total"),
            Some(3.0)
        );
        assert_eq!(
            got("redis_streams_stream_idempotent_duplicates_total"),
            Some(2.0)
        );
        assert_eq!(got("redis_streams_stream_idempotent_producers"), Some(1.0));
        assert_eq!(got("redis_streams_stream_idempotent_ids"), Some(3.0));
        assert_eq!(got("redis_streams_stream_length"), Some(4.0));
    } else {
        for name in [
            "redis_streams_stream_idempotent_ids_added_total",
            "redis_streams_stream_idempotent_duplicates_total",
            "redis_streams_stream_idempotent_producers",
            "redis_streams_stream_idempotent_ids",
        ] {
            assert_eq!(got(name), None, "{name} absent without IDMP");
        }
    }
    report(
        kind,
        "IDMP: 3 ids, 2 duplicate retries",
        if idmp {
            "3 added, 2 duplicates, 1 producer, 3 tracked"
        } else {
            "absent (no IDMP)"
        },
        &format!(
            "added {}, duplicates {}, producers {}, tracked {}",
            fmt(got("redis_streams_stream_idempotent_ids_added_total")),
            fmt(got("redis_streams_stream_idempotent_duplicates_total")),
            fmt(got("redis_streams_stream_idempotent_producers")),
            fmt(got("redis_streams_stream_idempotent_ids"))
        ),
    );
}

/// A poison entry shows at the first pending-summary run (every 30 s at the
/// defaults), without waiting for the 5-minute PEL scan: it stays among the
/// oldest pending entries, and the summary reads the oldest entries of
/// every group with entries pending.
async fn poison_before_the_scan(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "pz", 5);
    create_group(&mut c, kind, "pz", "g", "0", Some(0));
    read_group(&mut c, "pz", "g", "c1", 5);
    for _ in 0..24 {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg("pz")
            .arg("g")
            .arg("c1")
            .arg(0)
            .arg(&ids[0])
            .query(&mut c)
            .unwrap();
    }
    let h = Harness::new(config_for(
        &server,
        "[[streams]]\nmatch = \"pz\"\npoison_delivery_count = 20\n",
    ));
    for probe in [ProbeKind::Discovery, ProbeKind::Info, ProbeKind::Stream] {
        h.probe(probe).await;
    }
    let g = tsg("pz", "g");
    assert_eq!(
        h.metrics().get("redis_streams_group_pending_poison", &g),
        None,
        "no pending summary and no scan ran yet"
    );
    h.probe(ProbeKind::PendingSummary).await;
    let m = h.metrics();
    assert_eq!(m.get("redis_streams_group_pending_poison", &g), Some(1.0));
    assert_eq!(
        m.get("redis_streams_group_pending_scan_timestamp_seconds", &g),
        None,
        "no PEL scan ran"
    );
    // Acknowledged: the next run clears it.
    let _: u64 = redis::cmd("XACK")
        .arg("pz")
        .arg("g")
        .arg(&ids[0])
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::PendingSummary).await;
    // The four others stay pending: their head is read, and holds none.
    assert_eq!(
        h.metrics().get("redis_streams_group_pending_poison", &g),
        Some(0.0)
    );
    report(
        kind,
        "poison entry (25 deliveries), pending summary only",
        "1 poison after one summary run",
        "1 after the first run, 0 after XACK",
    );
}

fn xrange_calls(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_xrange:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The age of the first undelivered entry as exported, against the truth
/// taken on the server's clock around the poll.
async fn age_checked(h: &Harness, c: &mut redis::Connection, first_ms: u64) -> f64 {
    let before = server_ms(c);
    h.probe(ProbeKind::Stream).await;
    let after = server_ms(c);
    let age = h
        .metrics()
        .value("redis_streams_group_lag_seconds", &tsg("s", "g"));
    let (low, high) = (
        (before - first_ms) as f64 / 1000.0,
        (after - first_ms) as f64 / 1000.0,
    );
    assert!(
        (low - 0.002..=high + 0.002).contains(&age),
        "lag_seconds {age}, truly between {low} and {high}"
    );
    age
}

/// A stopped group behind a producer that goes on: its first undelivered
/// entry is read once, and its age stays right while later polls send no
/// XRANGE (two commands a stream, so 3,000 streams fit 15 s). Deleting that entry makes
/// the next poll read again and age the one after it.
async fn stopped_group_reads_its_first_undelivered_once(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.extend(xadd_n(&mut c, "s", 1));
        std::thread::sleep(Duration::from_millis(30));
    }
    create_group(&mut c, kind, "s", "g", "0", Some(0));
    read_group(&mut c, "s", "g", "c", 4);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let g = tsg("s", "g");
    let first_ms = id_ms(&ids[4]);
    age_checked(&h, &mut c, first_ms).await;
    let after_first = xrange_calls(&mut c);
    let mut ages = Vec::new();
    for round in 0..3 {
        xadd_n(&mut c, "s", 2);
        tokio::time::sleep(Duration::from_millis(50)).await;
        ages.push(age_checked(&h, &mut c, first_ms).await);
        assert_eq!(
            h.metrics().value("redis_streams_group_lag", &g),
            (6 + 2 * (round + 1)) as f64
        );
    }
    let reads_while_stopped = xrange_calls(&mut c) - after_first;
    if kind.has_lag() {
        assert_eq!(reads_while_stopped, 0, "reused while the group sat still");
    } else {
        // 6.2 has no lag or deletion counters: it counts each poll.
        assert_eq!(reads_while_stopped, 3);
    }
    assert!(ages.windows(2).all(|w| w[1] > w[0]), "{ages:?}");
    let _: u64 = redis::cmd("XDEL")
        .arg("s")
        .arg(&ids[4])
        .query(&mut c)
        .unwrap();
    let before_delete = xrange_calls(&mut c);
    age_checked(&h, &mut c, id_ms(&ids[5])).await;
    assert!(
        xrange_calls(&mut c) > before_delete,
        "read again after XDEL"
    );
    assert_eq!(h.metrics().value("redis_streams_group_lag", &g), 11.0);
    report(
        kind,
        "stopped group, producer goes on (3 polls), then its first undelivered entry deleted",
        "the same first undelivered entry, aged; then the next one",
        &format!(
            "lag_seconds right each poll; XRANGE calls while stopped {reads_while_stopped}; read again after XDEL"
        ),
    );
}

per_server!(
    stopped_group_reads_its_first_undelivered_once,
    poison_before_the_scan,
    trim_then_catch_up,
    small_trim_miscount,
    xdel_unread,
    xdelex_and_xackdel,
    burst_with_deletions,
    steady_producer,
    bursty_producer,
    mixed_producer,
    sparse_mixed_producer,
    phased_producer_polled,
    setid_back_and_forward,
    idempotent_duplicates
);
