//! Losses that start and heal between two polls, on every server (Redis
//! 6.2, 7.0, 8.6 and Valkey 9): unread entries deleted or trimmed and read
//! past before the next poll, a trim that empties the stream, a loss while
//! the server is stopped longer than the command timeout (the same server
//! comes back: its ledgers are kept), a restart (a new server: a new
//! baseline, no false loss), and the ordinary traffic that must never pass
//! for a loss (consumers that delete what they read, a window that turns
//! over within one poll).
//!
//! Each scenario prints one `BETWEEN` line (server, scenario, truth,
//! exported) so a run with `--nocapture` gives the table of these cases.

use crate::common;

use common::*;
use redis_streams_exporter::probe::ProbeKind;

const FAST: &str = "[schedule]\nstream = \"100ms\"\n[status]\nwindow = 3\n\
                    [limits]\ncommand_timeout = \"1s\"\n";

fn report(kind: Server, scenario: &str, truth: &str, exported: &str) {
    println!("BETWEEN | {kind:?} | {scenario} | truth: {truth} | exported: {exported}");
}

fn lost(m: &Metrics, cause: &str) -> Option<f64> {
    m.get(
        "redis_streams_group_lost_entries_total",
        &[
            ("target", "t"),
            ("stream", "q"),
            ("group", "g"),
            ("cause", cause),
        ],
    )
}

fn unproven(m: &Metrics, reason: &str) -> f64 {
    m.get(
        "redis_streams_group_loss_unproven_total",
        &[
            ("target", "t"),
            ("stream", "q"),
            ("group", "g"),
            ("reason", reason),
        ],
    )
    .unwrap_or(0.0)
}

fn status(m: &Metrics) -> String {
    let prefix = "redis_streams_group_status{target=\"t\",stream=\"q\",group=\"g\",status=\"";
    m.family("redis_streams_group_status")
        .iter()
        .find(|(k, v)| k.starts_with(prefix) && *v == 1.0)
        .map(|(k, _)| k[prefix.len()..k.len() - 2].to_string())
        .unwrap_or_else(|| "absent".into())
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "absent".to_string(), |v| v.to_string())
}

fn cmd(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap()
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

/// The exporter's first polls, with a clean advance of the group between
/// them (a range the group passed over with nothing removed).
async fn start_with_a_clean_advance(c: &mut redis::Connection, server: &RedisServer) -> Harness {
    read_group(c, "q", "g", "c1", 5);
    let h = Harness::new(config_for(server, FAST));
    h.collect().await;
    read_group(c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Stream).await;
    h
}

/// XDEL of 3 unread entries; the consumer reads past them before the next
/// poll. Deleted 3, proven from the range the group advanced over.
async fn deleted_and_read_past(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = stream_with_group(&mut c, kind, 20);
    let h = start_with_a_clean_advance(&mut c, &server).await;
    assert_eq!(lost(&h.metrics(), "deleted"), kind.has_lag().then_some(0.0));
    cmd(&mut c, &["XDEL", "q", &ids[12], &ids[13], &ids[14]]);
    read_group(&mut c, "q", "g", "c1", 100);
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    if kind.has_lag() {
        assert_eq!(lost(&m, "deleted"), Some(3.0), "{}", h.text());
        assert_eq!(lost(&m, "trimmed"), Some(0.0));
        assert_eq!(status(&m), "data_loss");
    } else {
        assert_eq!(lost(&m, "deleted"), None, "6.2 cannot know");
    }
    report(
        kind,
        "XDEL 3 unread, read past between polls",
        "3 deleted",
        &format!(
            "deleted {}, trimmed {}, status {}",
            fmt(lost(&m, "deleted")),
            fmt(lost(&m, "trimmed")),
            status(&m)
        ),
    );
}

/// A trim takes 40 unread entries; the consumer reads past the gap before
/// the next poll. Counted on 7.0 by its counters, on Valkey and Redis 8
/// (which re-estimate entries-read) from the range the group advanced over.
async fn trimmed_and_read_past(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 110);
    let h = start_with_a_clean_advance(&mut c, &server).await;
    // 10 read; 100 unread; keep the newest 60: 40 unread are gone.
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "60"]);
    read_group(&mut c, "q", "g", "c1", 1000);
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    if kind.has_lag() {
        assert_eq!(lost(&m, "trimmed"), Some(40.0), "{}", h.text());
        assert_eq!(lost(&m, "deleted"), Some(0.0));
        assert_eq!(status(&m), "data_loss");
    } else {
        assert_eq!(lost(&m, "trimmed"), None);
    }
    report(
        kind,
        "trim 40 unread, read past between polls",
        "40 trimmed",
        &format!(
            "trimmed {}, deleted {}, status {}",
            fmt(lost(&m, "trimmed")),
            fmt(lost(&m, "deleted")),
            status(&m)
        ),
    );
}

/// XTRIM MAXLEN 0 over 20 unread entries is a trim (critical), not a
/// deletion.
async fn trimmed_to_zero(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 30);
    let h = start_with_a_clean_advance(&mut c, &server).await;
    cmd(&mut c, &["XTRIM", "q", "MAXLEN", "0"]);
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    if kind.has_lag() {
        assert_eq!(lost(&m, "trimmed"), Some(20.0), "{}", h.text());
        assert_eq!(lost(&m, "deleted"), Some(0.0));
    } else {
        assert_eq!(lost(&m, "trimmed"), None);
    }
    report(
        kind,
        "XTRIM MAXLEN 0 over 20 unread",
        "20 trimmed",
        &format!(
            "trimmed {}, deleted {}",
            fmt(lost(&m, "trimmed")),
            fmt(lost(&m, "deleted"))
        ),
    );
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
/// than the command timeout: the exporter marks the target down. The same
/// server continues; the consumer reads past the gap. The ledger kept
/// across the outage counts the 5.
async fn loss_across_an_outage(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 40);
    let h = start_with_a_clean_advance(&mut c, &server).await;
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
    // Back: the server is identified first (same run_id), then polled.
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    if kind.has_lag() {
        assert_eq!(lost(&m, "trimmed"), Some(5.0), "{}", h.text());
        assert_eq!(status(&m), "data_loss");
    } else {
        assert_eq!(lost(&m, "trimmed"), None);
    }
    report(
        kind,
        "trim 5 unread, SIGSTOP past the command timeout, read past",
        "5 trimmed",
        &format!(
            "trimmed {}, status {}",
            fmt(lost(&m, "trimmed")),
            status(&m)
        ),
    );
}

/// A restart is another server (a new run_id): the first figures after it
/// are a new baseline, and what the restart changed is no loss.
async fn a_restart_is_a_new_baseline(kind: Server) {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap().to_string();
    let mut server = RedisServer::start_fixed(kind, port, &["--dir", &dir_arg]);
    let mut c = server.conn();
    stream_with_group(&mut c, kind, 40);
    let h = start_with_a_clean_advance(&mut c, &server).await;
    cmd(&mut c, &["SAVE"]);
    server.kill();
    drop(c);
    h.probe(ProbeKind::Stream).await;
    let server = RedisServer::start_fixed(kind, port, &["--dir", &dir_arg]);
    let mut c = server.conn();
    read_group(&mut c, "q", "g", "c1", 5);
    h.probe(ProbeKind::Info).await;
    h.probe(ProbeKind::Stream).await;
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    let expected = kind.has_lag().then_some(0.0);
    assert_eq!(lost(&m, "trimmed"), expected, "{}", h.text());
    assert_eq!(lost(&m, "deleted"), expected);
    assert_ne!(status(&m), "data_loss");
}

/// Consumers that acknowledge and delete what they read (XACK + XDEL, the
/// XACKDEL pattern) remove entries from every range the group advances
/// over: no loss, and the removals are said unproven, not lost.
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
    let m = h.metrics();
    let expected = kind.has_lag().then_some(0.0);
    assert_eq!(lost(&m, "deleted"), expected, "{}", h.text());
    assert_eq!(lost(&m, "trimmed"), expected);
    assert_ne!(status(&m), "data_loss");
    if kind.has_lag() {
        assert!(unproven(&m, "routine_removal") >= 4.0, "{}", h.text());
    }
    report(
        kind,
        "consumers XACK+XDEL what they read (5 polls)",
        "0 lost",
        &format!(
            "deleted {}, unproven routine_removal {}",
            fmt(lost(&m, "deleted")),
            unproven(&m, "routine_removal")
        ),
    );
}

/// A consumer that keeps up with a stream whose MAXLEN window turns over
/// within one poll: everything trimmed was read first. No loss.
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
    let m = h.metrics();
    let expected = kind.has_lag().then_some(0.0);
    assert_eq!(lost(&m, "trimmed"), expected, "{}", h.text());
    assert_eq!(lost(&m, "deleted"), expected);
    assert_ne!(status(&m), "data_loss");
}

per_server!(
    deleted_and_read_past,
    trimmed_and_read_past,
    trimmed_to_zero,
    loss_across_an_outage,
    a_restart_is_a_new_baseline,
    consumers_that_delete_what_they_read,
    a_window_that_turns_over_within_a_poll,
);
