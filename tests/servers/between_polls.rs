//! Losses that start and heal between two polls, and the cleanup that must
//! never pass for one, on every server (Redis 6.2, 7.0, 8.6 and Valkey 9):
//! the rows of the decision table in docs/lag-and-losses.md on real
//! servers. Each scenario knows its truth (entries removed before the group
//! read them) and what the server's figures can prove: Redis 7.0 keeps a
//! skipped gap out of entries-read, Redis 8 and Valkey re-estimate it in,
//! Redis 6.2 has no counters at all.
//!
//! Each scenario prints one `BETWEEN` line (server, scenario, truth, lost,
//! possibly lost, status), so a run with `--nocapture` gives the table.

use crate::common;

use common::*;
use redis_streams_exporter::probe::ProbeKind;

const FAST: &str = "[schedule]\nstream = \"100ms\"\n[status]\nwindow = 3\n\
                    [limits]\ncommand_timeout = \"1s\"\n";

/// How the server's counters let losses be proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counters {
    /// Redis 6.2: no entries-added, nothing counted.
    None,
    /// Redis 7.0: entries-read keeps a skipped gap out.
    KeepsGaps,
    /// Redis 8.6, Valkey 9: entries-read is re-estimated past a gap.
    Reestimates,
}

fn counters(kind: Server) -> Counters {
    match kind {
        Server::Redis62 => Counters::None,
        Server::Redis70 => Counters::KeepsGaps,
        Server::Redis8 | Server::Valkey9 => Counters::Reestimates,
    }
}

/// What the exporter says of group `g` of stream `q`.
#[derive(Debug)]
struct Said {
    lost: Option<f64>,
    possible: Option<f64>,
    status: String,
}

fn by_cause(m: &Metrics, name: &str) -> Option<f64> {
    let at = |cause| {
        m.get(
            name,
            &[
                ("target", "t"),
                ("stream", "q"),
                ("group", "g"),
                ("cause", cause),
            ],
        )
    };
    Some(at("trimmed")? + at("deleted")? + at("trimmed_or_deleted")?)
}

/// The lost entries of group `g` of stream `q` by cause, as
/// `[trimmed, deleted, trimmed_or_deleted]` (full series: every cause
/// written).
fn lost_by_cause(h: &Harness) -> Option<[f64; 3]> {
    let m = h.metrics();
    let at = |cause| {
        m.get(
            "redis_streams_group_lost_entries_total",
            &[
                ("target", "t"),
                ("stream", "q"),
                ("group", "g"),
                ("cause", cause),
            ],
        )
    };
    Some([at("trimmed")?, at("deleted")?, at("trimmed_or_deleted")?])
}

fn said(h: &Harness) -> Said {
    let m = h.metrics();
    Said {
        lost: by_cause(&m, "redis_streams_group_lost_entries_total"),
        possible: by_cause(&m, "redis_streams_group_possibly_lost_entries_total"),
        status: m
            .status("q", "g")
            .map_or_else(|| "absent".into(), |(status, _)| status),
    }
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "absent".to_string(), |v| v.to_string())
}

/// Checks what was said against the truth and the expected proof, and
/// prints the table row. `lost` is what the server's figures prove; the
/// possible count may be any upper bound that covers the rest.
fn judge(kind: Server, h: &Harness, scenario: &str, truth: u64, lost: u64) {
    let s = said(h);
    println!(
        "BETWEEN | {kind:?} | {scenario} | truth {truth} | lost {} | possibly lost {} | status {}",
        fmt(s.lost),
        fmt(s.possible),
        s.status
    );
    if counters(kind) == Counters::None {
        assert_eq!(
            (s.lost, s.possible),
            (None, None),
            "6.2 cannot know: {}",
            h.text()
        );
        return;
    }
    let (got, possible) = (s.lost.unwrap_or(-1.0), s.possible.unwrap_or(-1.0));
    assert_eq!(got, lost as f64, "{scenario}: lost\n{}", h.text());
    assert!(
        got + possible >= truth as f64,
        "{scenario}: the truth {truth} is not covered by lost {got} + possible {possible}"
    );
    if lost > 0 {
        assert_eq!(s.status, "data_loss", "{scenario}");
    } else {
        assert_ne!(s.status, "data_loss", "{scenario}: a page without a loss");
    }
}

/// A stream of `n` entries and group `g` created at 0 (with `ENTRIESREAD 0`
/// where the server has it, so entries-read is valid from the start).
fn stream_with_group(c: &mut redis::Connection, kind: Server, n: usize) -> Vec<String> {
    let ids = if n > 0 { xadd_n(c, "q", n) } else { Vec::new() };
    let mut create = redis::cmd("XGROUP");
    create
        .arg("CREATE")
        .arg("q")
        .arg("g")
        .arg("0")
        .arg("MKSTREAM");
    if kind.has_lag() {
        create.arg("ENTRIESREAD").arg(0);
    }
    let _: () = create.query(c).unwrap();
    ids
}

/// The group's last-delivered-id.
fn position(c: &mut redis::Connection) -> String {
    let groups: Vec<std::collections::HashMap<String, redis::Value>> =
        redis::cmd("XINFO").arg("GROUPS").arg("q").query(c).unwrap();
    match &groups[0]["last-delivered-id"] {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        v => panic!("{v:?}"),
    }
}

/// The exporter starts, then the group reads 5 (its first advance).
async fn start(c: &mut redis::Connection, server: &RedisServer) -> Harness {
    read_group(c, "q", "g", "c1", 5);
    let h = Harness::new(config_for(server, FAST));
    h.collect().await;
    h
}

/// A trim takes 40 unread entries at the group's first advance since the
/// exporter started; the consumer reads past the gap before the next poll.
async fn trim_read_past_between_polls(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 105);
    let h = start(&mut c, &server).await;
    read_group(&mut c, "q", "g", "c1", 5);
    // 10 read; 95 unread; keep the newest 55: 40 unread are gone.
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "55"]);
    read_group(&mut c, "q", "g", "c1", 1000);
    h.probe(ProbeKind::Stream).await;
    let lost = if counters(kind) == Counters::KeepsGaps {
        40
    } else {
        0
    };
    judge(
        kind,
        &h,
        "trim of 40 unread, read past before the next poll",
        40,
        lost,
    );
}

/// The same trim, seen while the group is still behind it (the poll a
/// keyspace event starts): exact everywhere.
async fn trim_seen_behind(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 105);
    let h = start(&mut c, &server).await;
    read_group(&mut c, "q", "g", "c1", 5);
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "55"]);
    h.probe(ProbeKind::Stream).await;
    read_group(&mut c, "q", "g", "c1", 1000);
    h.probe(ProbeKind::Stream).await;
    judge(
        kind,
        &h,
        "trim of 40 unread, polled before the read past",
        40,
        40,
    );
}

/// `XDEL` of 3 unread entries mid-stream; the group reads past them, short
/// of the last entry. The order is not in the figures: all 3 possible.
async fn deletion_read_past_mid_stream(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = stream_with_group(&mut c, kind, 40);
    let h = start(&mut c, &server).await;
    cmd(&mut c, &["XDEL", "q", &ids[12], &ids[13], &ids[14]]);
    read_group(&mut c, "q", "g", "c1", 15);
    h.probe(ProbeKind::Stream).await;
    judge(kind, &h, "XDEL of 3 unread mid-stream, read past", 3, 0);
}

/// `XDEL` of the 3 entries right after the group's position, read past
/// with the next one: Redis 7.0 counts past the gap (proven).
async fn deletion_right_after_the_position(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = stream_with_group(&mut c, kind, 40);
    let h = start(&mut c, &server).await;
    cmd(&mut c, &["XDEL", "q", &ids[5], &ids[6], &ids[7]]);
    read_group(&mut c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Stream).await;
    let lost = if counters(kind) == Counters::KeepsGaps {
        3
    } else {
        0
    };
    judge(kind, &h, "XDEL of the next 3, read past", 3, lost);
}

/// `XTRIM MAXLEN 0` over 35 unread entries is a trim, seen at once.
async fn trimmed_to_zero(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 40);
    let h = start(&mut c, &server).await;
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "0"]);
    h.probe(ProbeKind::Stream).await;
    judge(kind, &h, "XTRIM MAXLEN 0 over 35 unread", 35, 35);
}

/// A group created at `$` (no entries-read) that does not read while
/// `XADD … MAXLEN 10` adds 100: its position was the last ID when the
/// exporter first saw it, so the 90 it lost are proven.
async fn group_at_dollar_overtaken(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "q", 20);
    cmd(&mut c, &["XGROUP", "CREATE", "q", "g", "$"]);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    for i in 0..100 {
        cmd(
            &mut c,
            &["XADD", "q", "MAXLEN", "10", "*", "n", &i.to_string()],
        );
    }
    h.probe(ProbeKind::Stream).await;
    judge(kind, &h, "group at $, 100 added with MAXLEN 10", 90, 90);
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// A trim of 5 unread entries, then the server stops (SIGSTOP) for longer
/// than the command timeout: the target is down. The same server goes on,
/// the consumer reads past the gap; the ledger kept across the outage
/// compares with the poll before it.
async fn loss_across_an_outage(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 40);
    let h = start(&mut c, &server).await;
    read_group(&mut c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Stream).await;
    // 10 read, 30 unread; keep the newest 25: 5 unread are gone.
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "25"]);
    signal(server.pid(), "STOP");
    h.probe(ProbeKind::Stream).await;
    let down = h.metrics();
    signal(server.pid(), "CONT");
    assert_eq!(
        down.get("redis_streams_exporter_target_up", &[("target", "t")]),
        Some(0.0),
        "the poll during the stop failed"
    );
    read_group(&mut c, "q", "g", "c1", 1000);
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    let lost = if counters(kind) == Counters::KeepsGaps {
        5
    } else {
        0
    };
    judge(
        kind,
        &h,
        "trim of 5 unread during an outage, read past",
        5,
        lost,
    );
}

/// A restart of the server from its own data (`SAVE`, killed, started on
/// the same directory: a new `run_id`) continues the last poll's figures:
/// 20 unread entries trimmed just before it are counted after it, exactly,
/// since the first poll after shows the group behind the first entry.
async fn a_restart_from_its_own_data_keeps_the_interval(kind: Server) {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap().to_string();
    let mut server = RedisServer::start_fixed(kind, port, &["--dir", &dir_arg]);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 50);
    read_group(&mut c, "q", "g", "c1", 10);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "20"]);
    cmd(&mut c, &["SAVE"]);
    server.kill();
    drop(c);
    h.probe(ProbeKind::Stream).await;
    let _server = RedisServer::start_fixed(kind, port, &["--dir", &dir_arg]);
    // The first run on the new connection stops at the other run_id (it must
    // not mix two servers); the daemon wakes the info poll as the target
    // answers again, which shows which server it is.
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    judge(
        kind,
        &h,
        "20 unread trimmed, SAVE, restarted on its data",
        20,
        20,
    );
    if kind.has_lag() {
        assert_eq!(lost_by_cause(&h), Some([20.0, 0.0, 0.0]), "{}", h.text());
    }
}

/// Another dataset behind the address after a restart (the server started
/// on an empty directory, the stream made again and trimmed) starts a new
/// baseline: nothing of the old stream is compared with the new one.
async fn other_data_after_a_restart_is_a_new_baseline(kind: Server) {
    let port = free_port();
    let (old, new) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut server = RedisServer::start_fixed(kind, port, &["--dir", old.path().to_str().unwrap()]);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 40);
    let h = start(&mut c, &server).await;
    server.kill();
    drop(c);
    h.probe(ProbeKind::Stream).await;
    let server = RedisServer::start_fixed(kind, port, &["--dir", new.path().to_str().unwrap()]);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 30);
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "10"]);
    read_group(&mut c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    h.probe(ProbeKind::Stream).await;
    let s = said(&h);
    assert_eq!(s.lost, kind.has_lag().then_some(0.0), "{}", h.text());
    assert_ne!(s.status, "data_loss");
}

/// A worker of another, faster group `XACK`s and `XDEL`s the 8 head
/// entries it processed while `g` had read 2 of them: `g` lost 6. A trim
/// of the first 7 and a deletion of the 8th leave the same figures, so the
/// cause is `trimmed_or_deleted` (paged as a trim), never `trimmed` alone.
/// With `XACKDEL` (8.2+) the same.
async fn head_deleted_by_another_groups_worker(kind: Server) {
    for xackdel in [false, true] {
        if xackdel && !kind.capabilities().xackdel {
            continue;
        }
        let server = RedisServer::start(kind);
        let mut c = server.conn();
        stream_with_group(&mut c, kind, 20);
        cmd(&mut c, &["XGROUP", "CREATE", "q", "fast", "0"]);
        read_group(&mut c, "q", "g", "c1", 2);
        let h = Harness::new(config_for(&server, FAST));
        h.collect().await;
        let ids = read_group(&mut c, "q", "fast", "w", 8);
        if xackdel {
            let mut args = vec!["XACKDEL", "q", "fast", "KEEPREF", "IDS", "8"];
            args.extend(ids.iter().map(String::as_str));
            cmd(&mut c, &args);
        } else {
            for id in &ids {
                cmd(&mut c, &["XACK", "q", "fast", id]);
                cmd(&mut c, &["XDEL", "q", id]);
            }
        }
        h.probe(ProbeKind::Stream).await;
        let how = if xackdel { "XACKDEL" } else { "XACK+XDEL" };
        judge(
            kind,
            &h,
            &format!("{how} of 8 head entries by a faster group"),
            6,
            6,
        );
        if kind.has_lag() {
            assert_eq!(
                lost_by_cause(&h),
                Some([0.0, 0.0, 6.0]),
                "{how}\n{}",
                h.text()
            );
        }
    }
}

/// `XSETID … ENTRIESADDED` raising entries-added by 1,000 while a producer
/// adds entries in the same interval: no trim, no deletion behind the rise,
/// so nothing lost.
async fn xsetid_beside_a_producer(kind: Server) {
    if !kind.has_lag() {
        return;
    }
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 30);
    let h = start(&mut c, &server).await;
    let ids = xadd_n(&mut c, "q", 3);
    let added: u64 = match cmd(&mut c, &["XINFO", "STREAM", "q"]) {
        redis::Value::Array(fields) => fields
            .chunks(2)
            .find(|f| matches!(&f[0], redis::Value::BulkString(k) if k == b"entries-added"))
            .and_then(|f| match f[1] {
                redis::Value::Int(n) => u64::try_from(n).ok(),
                _ => None,
            })
            .unwrap(),
        v => panic!("{v:?}"),
    };
    let bumped = (added + 1000).to_string();
    cmd(&mut c, &["XSETID", "q", &ids[2], "ENTRIESADDED", &bumped]);
    xadd_n(&mut c, "q", 3);
    read_group(&mut c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Stream).await;
    h.probe(ProbeKind::Stream).await;
    judge(
        kind,
        &h,
        "XSETID ENTRIESADDED +1000 beside a producer",
        0,
        0,
    );
}

/// A retention job trims what the group has read (`XTRIM MINID` its
/// last-delivered-id) while a consumer reads and acknowledges: nothing
/// lost, no page. Redis 7.0 proves it; on 8.x and Valkey the trimmed
/// entries the group passed since the last poll stay possible.
async fn retention_job(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 50);
    let h = start(&mut c, &server).await;
    for _ in 0..6 {
        xadd_n(&mut c, "q", 20);
        for id in read_group(&mut c, "q", "g", "c1", 15) {
            cmd(&mut c, &["XACK", "q", "g", &id]);
        }
        let at = position(&mut c);
        cmd(&mut c, &["XTRIM", "q", "MINID", &at]);
        h.probe(ProbeKind::Stream).await;
    }
    judge(
        kind,
        &h,
        "retention job XTRIM MINID to the group, 6 polls",
        0,
        0,
    );
    if counters(kind) == Counters::KeepsGaps {
        assert_eq!(
            said(&h).possible,
            Some(0.0),
            "7.0 proves the trims harmless"
        );
    }
}

/// Consumers that acknowledge and delete what they read: nothing lost.
async fn consumers_that_delete_what_they_read(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 0);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    for _ in 0..5 {
        xadd_n(&mut c, "q", 10);
        for id in read_group(&mut c, "q", "g", "c1", 100) {
            cmd(&mut c, &["XACK", "q", "g", &id]);
            cmd(&mut c, &["XDEL", "q", &id]);
        }
        h.probe(ProbeKind::Stream).await;
    }
    judge(
        kind,
        &h,
        "consumers XACK+XDEL what they read, 5 polls",
        0,
        0,
    );
}

/// A worker that deletes in batches what the group read, a poll or so later.
async fn worker_deletes_in_batches(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 20);
    let h = start(&mut c, &server).await;
    let mut done: Vec<String> = Vec::new();
    for round in 0..6 {
        xadd_n(&mut c, "q", 10);
        let read = read_group(&mut c, "q", "g", "c1", 12);
        for id in &read {
            cmd(&mut c, &["XACK", "q", "g", id]);
        }
        if round % 2 == 1 {
            let mut args = vec!["XDEL", "q"];
            args.extend(done.iter().map(String::as_str));
            if !done.is_empty() {
                cmd(&mut c, &args);
            }
            done.clear();
        }
        done.extend(read);
        h.probe(ProbeKind::Stream).await;
    }
    judge(
        kind,
        &h,
        "worker XDELs what it processed, every other poll",
        0,
        0,
    );
}

/// `XSETID … ENTRIESADDED` raises entries-added with nothing added or
/// removed: a new baseline, not 1,000 lost.
async fn xsetid_entries_added(kind: Server) {
    if !kind.has_lag() {
        return;
    }
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 30);
    let h = start(&mut c, &server).await;
    let last: Vec<redis::Value> = redis::cmd("XREVRANGE")
        .arg("q")
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let last = match &last[0] {
        redis::Value::Array(e) => match &e[0] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            v => panic!("{v:?}"),
        },
        v => panic!("{v:?}"),
    };
    cmd(&mut c, &["XSETID", "q", &last, "ENTRIESADDED", "1030"]);
    read_group(&mut c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Stream).await;
    h.probe(ProbeKind::Stream).await;
    judge(kind, &h, "XSETID ENTRIESADDED +1000", 0, 0);
}

/// A consumer that keeps up with a stream whose MAXLEN window turns over
/// within one poll: everything trimmed was read first.
async fn a_window_that_turns_over_within_a_poll(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 0);
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    for _ in 0..5 {
        for _ in 0..4 {
            let mut pipe = redis::pipe();
            for i in 0..10 {
                pipe.cmd("XADD")
                    .arg("q")
                    .arg("MAXLEN")
                    .arg(15)
                    .arg("*")
                    .arg("n")
                    .arg(i);
            }
            let _: Vec<String> = pipe.query(&mut c).unwrap();
            read_group(&mut c, "q", "g", "c1", 100);
        }
        h.probe(ProbeKind::Stream).await;
    }
    judge(
        kind,
        &h,
        "MAXLEN 15 window turning over, consumer keeping up",
        0,
        0,
    );
}

/// Redis 8.2+: `XACKDEL … ACKED` and `XDELEX … ACKED` delete only what every
/// group acknowledged, and `XADD … ACKED MAXLEN` trims only that.
async fn acked_cleanup(kind: Server) {
    let caps = kind.capabilities();
    if !(caps.xdelex && caps.xackdel && caps.trim_refs) {
        return;
    }
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 20);
    let h = start(&mut c, &server).await;
    for round in 0..5 {
        for i in 0..10 {
            cmd(
                &mut c,
                &[
                    "XADD",
                    "q",
                    "ACKED",
                    "MAXLEN",
                    "12",
                    "*",
                    "n",
                    &i.to_string(),
                ],
            );
        }
        let read = read_group(&mut c, "q", "g", "c1", 8);
        let verb = if round % 2 == 0 { "XACKDEL" } else { "XDELEX" };
        for id in &read {
            if verb == "XACKDEL" {
                cmd(&mut c, &["XACKDEL", "q", "g", "ACKED", "IDS", "1", id]);
            } else {
                cmd(&mut c, &["XACK", "q", "g", id]);
                cmd(&mut c, &["XDELEX", "q", "ACKED", "IDS", "1", id]);
            }
        }
        h.probe(ProbeKind::Stream).await;
    }
    judge(kind, &h, "XADD ACKED MAXLEN, XACKDEL/XDELEX ACKED", 0, 0);
}

/// A Lua script keeps the server busy through a poll: every command of it
/// is refused (`BUSY`). The ledger and the status window outlive it, so a
/// loss before, during and after it counts in full.
async fn a_busy_server_keeps_the_ledgers(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 105);
    let h = start(&mut c, &server).await;
    let threshold = if kind == Server::Redis62 {
        "lua-time-limit"
    } else {
        "busy-reply-threshold"
    };
    cmd(&mut c, &["CONFIG", "SET", threshold, "50"]);
    // 100 unread; keep the newest 60: 40 lost, seen behind.
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "60"]);
    h.probe(ProbeKind::Stream).await;
    let mut busy = server.conn();
    let script = std::thread::spawn(move || {
        let _: redis::Value = redis::cmd("EVAL")
            .arg("local s = tonumber(redis.call('TIME')[1]) while tonumber(redis.call('TIME')[1]) - s < 2 do end return 1")
            .arg(0)
            .query(&mut busy)
            .unwrap();
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    let during = h.metrics();
    script.join().unwrap();
    assert_eq!(
        during.get(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", "stream")]
        ),
        Some(0.0),
        "the poll during the script was refused"
    );
    // 5 more lost after the script, the group still behind.
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "55"]);
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    judge(
        kind,
        &h,
        "trims before and after a BUSY script during a poll",
        45,
        45,
    );
}

/// A stream trimmed with `XADD … ACKED MAXLEN` and a consumer slower than
/// the producer: the edge waits at the group instead of overtaking it. With
/// `trimming = "acked"` no retention margin or overtake ETA is exported
/// (nothing for `RedisStreamsTrimOvertakingGroup` to page on), and nothing
/// is lost either way.
async fn acked_trimming_never_overtakes(kind: Server) {
    if !kind.capabilities().trim_refs {
        return;
    }
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 0);
    let acked = format!("{FAST}[[streams]]\nmatch = \"q\"\ntrimming = \"acked\"\n");
    let h = Harness::new(config_for(&server, &acked));
    h.collect().await;
    for _ in 0..8 {
        for i in 0..20 {
            cmd(
                &mut c,
                &[
                    "XADD",
                    "q",
                    "ACKED",
                    "MAXLEN",
                    "10",
                    "*",
                    "n",
                    &i.to_string(),
                ],
            );
        }
        for id in read_group(&mut c, "q", "g", "c1", 5) {
            cmd(&mut c, &["XACK", "q", "g", &id]);
        }
        h.probe(ProbeKind::Stream).await;
    }
    let m = h.metrics();
    let g = [("target", "t"), ("stream", "q"), ("group", "g")];
    assert_eq!(
        m.get("redis_streams_group_retention_margin_seconds", &g),
        None,
        "{}",
        m.text
    );
    assert_eq!(
        m.get("redis_streams_group_trim_overtake_eta_seconds", &g),
        None
    );
    judge(
        kind,
        &h,
        "XADD ACKED MAXLEN 10, a slower consumer, trimming = acked",
        0,
        0,
    );
}

per_server!(
    acked_trimming_never_overtakes,
    a_busy_server_keeps_the_ledgers,
    trim_read_past_between_polls,
    trim_seen_behind,
    deletion_read_past_mid_stream,
    deletion_right_after_the_position,
    trimmed_to_zero,
    group_at_dollar_overtaken,
    loss_across_an_outage,
    a_restart_from_its_own_data_keeps_the_interval,
    other_data_after_a_restart_is_a_new_baseline,
    head_deleted_by_another_groups_worker,
    xsetid_beside_a_producer,
    retention_job,
    consumers_that_delete_what_they_read,
    worker_deletes_in_batches,
    xsetid_entries_added,
    a_window_that_turns_over_within_a_poll,
    acked_cleanup,
);
