//! Keyspace events, on every server (Redis 6.2, 7.0, 8.6 and Valkey 9),
//! started with and without `--notify-keyspace-events`: a stream born after
//! the exporter started is watched at once when the server publishes events
//! (discovery runs once an hour here, the stream poll too, so only an
//! event-driven poll can see it), and a one-off fault on it, made and read
//! past within two seconds of its birth, is counted. Without notifications
//! the same scenario leaves the stream unwatched until discovery finds it,
//! after the fault: the first poll is the baseline and the ledger proves
//! nothing (0 on 7.0+, absent on 6.2, which has no entries-read).
//!
//! Each scenario prints one `EVENTS` line (server, scenario, notifications,
//! true loss, exported).

use crate::common;

use std::time::Duration;

use common::*;
use redis_streams_exporter::probe::ProbeKind;
use tokio_util::sync::CancellationToken;

/// Discovery waits an hour: a stream watched within the test was watched
/// on an event. The scheduled stream poll every 3 s finishes what events
/// start: reading past a gap publishes no event (the consumer exists), so a
/// loss is proven at the next poll against the baseline an event-driven
/// poll took before the fault.
const SLOW: &str = "[schedule]\ndiscovery = \"1h\"\nstream = \"3s\"\n";

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

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "absent".to_string(), |v| v.to_string())
}

fn active(m: &Metrics) -> Option<f64> {
    m.get(
        "redis_streams_exporter_keyspace_events_active",
        &[("target", "t")],
    )
}

fn received(m: &Metrics) -> Option<f64> {
    m.get(
        "redis_streams_exporter_keyspace_events_total",
        &[("target", "t")],
    )
}

fn length(m: &Metrics) -> Option<f64> {
    m.get(
        "redis_streams_stream_length",
        &[("target", "t"), ("stream", "q")],
    )
}

/// The fault, on a stream and group born now.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `XDEL` of 3 unread entries, read past.
    Delete,
    /// A trim of 10 unread entries, read past.
    Trim,
}

impl Fault {
    fn cause(self) -> &'static str {
        match self {
            Fault::Delete => "deleted",
            Fault::Trim => "trimmed",
        }
    }
}

/// Group `g` and its stream `q` born (MKSTREAM, entries-read 0 where the
/// server has it); 20 entries added and 5 read by a new consumer; the fault
/// 1.2 s later; the consumer reads past it 0.3 s after that: 1.8 s from
/// birth to loss. Returns the entries lost.
///
/// What events give the exporter here: `xgroup-create` watches the stream
/// and polls it (the baseline); the fault's own event (`xdel`, `xtrim`)
/// polls it at once, before the read past, and that poll finds the group
/// before the deleted entries or behind the trimming edge: the loss is
/// proven there, on every server. Without that poll, Redis 8 and Valkey
/// could not tell the read past from a cleanup after reading.
async fn born_and_faulted(c: &mut redis::Connection, kind: Server, fault: Fault) -> u64 {
    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
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
    pause(300).await;
    let ids = xadd_n(c, "q", 20);
    read_group(c, "q", "g", "c1", 5);
    pause(1200).await;
    let lost = match fault {
        Fault::Delete => {
            cmd(c, &["XDEL", "q", &ids[8], &ids[9], &ids[10]]);
            3
        }
        Fault::Trim => {
            // Entries 0..15 go: 5 read, 10 unread.
            cmd(c, &["XTRIM", "q", "MINID", &ids[15]]);
            10
        }
    };
    pause(300).await;
    read_group(c, "q", "g", "c1", 100);
    lost
}

async fn scenario(kind: Server, fault: Fault, notify: Option<&str>) {
    let server = match notify {
        Some(flags) => RedisServer::start_with(kind, &["--notify-keyspace-events", flags]),
        None => RedisServer::start(kind),
    };
    let mut c = server.conn();
    let mut config = config_for(&server, SLOW);
    // Only `q` is matched: the test's other keys stay out.
    std::sync::Arc::make_mut(&mut config.targets[0]).patterns =
        vec![redis_streams_exporter::glob::Glob::new("q".to_string())];
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    // Subscribed (the subscription is healthy whether or not the server
    // publishes) and the first collection done, with nothing to watch.
    let m = wait_for(&h, |m| {
        active(m) == Some(1.0)
            && m.get(
                "redis_streams_exporter_probe_success",
                &[("target", "t"), ("probe", "stream")],
            ) == Some(1.0)
    })
    .await;
    assert_eq!(
        active(&m),
        Some(1.0),
        "{kind:?}: not subscribed:\n{}",
        m.text
    );
    assert_eq!(length(&m), None);
    let truth = born_and_faulted(&mut c, kind, fault).await;
    let m = if notify.is_some() {
        // Watched at once, with discovery an hour away, and polled before
        // the fault; the loss is proven by a later poll.
        // xgroup-create and the fault's own event at least (7.0+ adds
        // xgroup-createconsumer; xadd is not subscribed).
        let m = wait_for(&h, |m| {
            length(m).is_some()
                && received(m).unwrap_or(0.0) >= 2.0
                && (!kind.has_lag() || lost(m, fault.cause()) == Some(truth as f64))
        })
        .await;
        assert!(received(&m).unwrap_or(0.0) >= 2.0, "{}", m.text);
        assert_eq!(
            m.get("redis_streams_exporter_streams", &[("target", "t")]),
            Some(1.0),
            "{}",
            m.text
        );
        if kind.has_lag() {
            assert_eq!(lost(&m, fault.cause()), Some(truth as f64), "{}", m.text);
        } else {
            // Redis 6.2 has no entries-read: no loss can be proven.
            assert_eq!(lost(&m, fault.cause()), None, "{}", m.text);
        }
        m
    } else {
        // Nothing arrives: the stream waits for discovery (an hour away).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let m = h.metrics();
        assert_eq!(received(&m), Some(0.0), "{}", m.text);
        assert_eq!(length(&m), None, "watched without an event:\n{}", m.text);
        // Discovery finds it after the fault: that first poll is the
        // baseline, so the ledger has nothing to prove.
        h.probe(ProbeKind::Discovery).await;
        h.probe(ProbeKind::Stream).await;
        let m = h.metrics();
        assert!(length(&m).is_some(), "{}", m.text);
        let expected = kind.has_lag().then_some(0.0);
        assert_eq!(lost(&m, fault.cause()), expected, "{}", m.text);
        m
    };
    println!(
        "EVENTS | {kind:?} | {fault:?} unread, read past, within 2 s of the stream's birth | notifications {} | truth: {truth} {} | exported: {} {}, {} events received",
        notify.unwrap_or("off"),
        fault.cause(),
        fmt(lost(&m, fault.cause())),
        fault.cause(),
        fmt(received(&m)),
    );
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the poller and its subscription stop on the token")
        .unwrap();
}

async fn deleted_with_events(kind: Server) {
    scenario(kind, Fault::Delete, Some("KEA")).await;
}

async fn trimmed_with_events(kind: Server) {
    scenario(kind, Fault::Trim, Some("Etg")).await;
}

async fn deleted_without_events(kind: Server) {
    scenario(kind, Fault::Delete, None).await;
}

async fn trimmed_without_events(kind: Server) {
    scenario(kind, Fault::Trim, None).await;
}

per_server!(
    deleted_with_events,
    trimmed_with_events,
    deleted_without_events,
    trimmed_without_events
);

/// `XSETID … ENTRIESADDED` while a producer trims with `MAXLEN` in the same
/// interval: without events the figures are those of entries added and
/// trimmed; the `xsetid` event makes the next poll a new baseline, so the
/// entries it adds to entries-added are not counted lost.
async fn xsetid_with_events_is_no_loss(kind: Server) {
    if !kind.has_lag() {
        return;
    }
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
    let mut c = server.conn();
    let mut config = config_for(&server, SLOW);
    std::sync::Arc::make_mut(&mut config.targets[0]).patterns =
        vec![redis_streams_exporter::glob::Glob::new("q".to_string())];
    xadd_n(&mut c, "q", 10);
    cmd(&mut c, &["XGROUP", "CREATE", "q", "g", "$"]);
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    wait_for(&h, |m| {
        active(m) == Some(1.0) && lost(m, "trimmed") == Some(0.0)
    })
    .await;
    let mut last = String::new();
    for i in 0..20 {
        let v = cmd(
            &mut c,
            &["XADD", "q", "MAXLEN", "10", "*", "n", &i.to_string()],
        );
        if let redis::Value::BulkString(b) = v {
            last = String::from_utf8(b).unwrap();
        }
    }
    cmd(&mut c, &["XSETID", "q", &last, "ENTRIESADDED", "1030"]);
    read_group(&mut c, "q", "g", "c", 100);
    // The scheduled poll (3 s) comes after the event's poll.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    // The 20 adds trimmed the 10 old entries (read: the group was created
    // at their end) and 10 of its own that the group had not read; the
    // 1,000 XSETID added to entries-added are not lost.
    let counted = lost(&m, "trimmed").unwrap_or(0.0);
    println!(
        "EVENTS | {kind:?} | XSETID ENTRIESADDED +1000 amid XADD MAXLEN | notifications Etg | truth: 10 trimmed | exported: {counted} trimmed"
    );
    assert!(counted <= 10.0, "{}", m.text);
    stop.cancel();
    running.await.unwrap();
}

per_server!(xsetid_with_events_is_no_loss);

/// The exporter's poller running as deployed on stream `q` alone, its
/// polls driven by events (discovery and the scheduled poll an hour away),
/// once the subscription delivers and `q` holds `entries`; and the
/// baseline poll taken.
async fn watching_q(
    server: &RedisServer,
    entries: f64,
) -> (Harness, CancellationToken, tokio::task::JoinHandle<()>) {
    let mut config = config_for(server, "[schedule]\ndiscovery = \"1h\"\nstream = \"1h\"\n");
    std::sync::Arc::make_mut(&mut config.targets[0]).patterns =
        vec![redis_streams_exporter::glob::Glob::new("q".to_string())];
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    wait_for(&h, |m| active(m) == Some(1.0) && length(m) == Some(entries)).await;
    h.probe(ProbeKind::Stream).await;
    (h, stop, running)
}

/// How the head of `q` goes in [`events_name_the_cause`].
#[derive(Clone, Copy, Debug)]
enum HeadRemoval {
    /// The faster group's worker `XACK`s and `XDEL`s each of the 8 head
    /// entries it read.
    AckThenDelete,
    /// One `XACKDEL … KEEPREF` of the 8 (Redis 8.2+).
    AckDel,
    /// `XTRIM MINID` of entries 0–4 and `XDEL` of 5–7 in one `MULTI`: a
    /// trim and deletions in one window.
    TrimAndDelete,
}

/// The cause of a loss, named by the keyevents where the figures cannot:
/// `g` has read 2 of 20 entries when the 8 head entries go. A faster
/// group's worker deleting what it processed leaves the figures of a trim
/// up to there and one deletion (`trimmed_or_deleted` without events, see
/// `between_polls`); with events, `xdel` and no `xtrim` between two reads
/// make it `deleted`: a ticket, never the critical trim page. A trim and
/// deletions in one window stay `trimmed_or_deleted`. The exporter runs as
/// in production (the event-driven polls, the scheduled poll an hour away).
async fn events_name_the_cause(kind: Server) {
    if !kind.has_lag() {
        return;
    }
    for how in [
        HeadRemoval::AckThenDelete,
        HeadRemoval::AckDel,
        HeadRemoval::TrimAndDelete,
    ] {
        if matches!(how, HeadRemoval::AckDel) && !kind.capabilities().xackdel {
            continue;
        }
        let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
        let mut c = server.conn();
        let ids = xadd_n(&mut c, "q", 20);
        for group in ["g", "fast"] {
            cmd(
                &mut c,
                &["XGROUP", "CREATE", "q", group, "0", "ENTRIESREAD", "0"],
            );
        }
        read_group(&mut c, "q", "g", "c1", 2);
        let (h, stop, running) = watching_q(&server, 20.0).await;
        let read = read_group(&mut c, "q", "fast", "w", 8);
        match how {
            HeadRemoval::AckThenDelete => {
                for id in &read {
                    cmd(&mut c, &["XACK", "q", "fast", id]);
                    cmd(&mut c, &["XDEL", "q", id]);
                }
            }
            HeadRemoval::AckDel => {
                let mut args = vec!["XACKDEL", "q", "fast", "KEEPREF", "IDS", "8"];
                args.extend(read.iter().map(String::as_str));
                cmd(&mut c, &args);
            }
            HeadRemoval::TrimAndDelete => {
                let _: () = redis::pipe()
                    .atomic()
                    .cmd("XTRIM")
                    .arg("q")
                    .arg("MINID")
                    .arg(&ids[5])
                    .ignore()
                    .cmd("XDEL")
                    .arg("q")
                    .arg(&ids[5])
                    .arg(&ids[6])
                    .arg(&ids[7])
                    .ignore()
                    .query(&mut c)
                    .unwrap();
            }
        }
        let total = |m: &Metrics| {
            ["trimmed", "deleted", "trimmed_or_deleted"]
                .iter()
                .map(|cause| lost(m, cause).unwrap_or(0.0))
                .sum::<f64>()
        };
        // The event-driven polls prove the 6 unread entries gone.
        let m = wait_for(&h, |m| total(m) >= 6.0).await;
        let by_cause = ["trimmed", "deleted", "trimmed_or_deleted"].map(|cause| lost(&m, cause));
        println!(
            "EVENTS | {kind:?} | {how:?} of the 8 head entries, 6 unread by g | notifications Etg | exported: {by_cause:?} (trimmed, deleted, trimmed_or_deleted)"
        );
        let want = match how {
            HeadRemoval::TrimAndDelete => [Some(0.0), Some(0.0), Some(6.0)],
            _ => [Some(0.0), Some(6.0), Some(0.0)],
        };
        assert_eq!(by_cause, want, "{how:?}\n{}", m.text);
        stop.cancel();
        running.await.unwrap();
    }
}

per_server!(events_name_the_cause);

/// A producer cancels (`XDEL`) an entry it just added, ahead of a group that
/// read past an earlier deletion: the server reports the group's
/// entries-read and lag as nil, so no rank places the removal, but
/// max-deleted-entry-id moved past the group's position and the window
/// shows no `xgroup-setid`: 1 `deleted`, a ticket. A group that reads past
/// an entry, has it deleted and is set back behind it in one `MULTI` lost
/// nothing, and nothing more is counted.
async fn a_deletion_ahead_is_counted_without_entries_read(kind: Server) {
    if !kind.has_lag() {
        return;
    }
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "q", 30);
    cmd(
        &mut c,
        &["XGROUP", "CREATE", "q", "g", "0", "ENTRIESREAD", "0"],
    );
    read_group(&mut c, "q", "g", "c1", 5);
    cmd(&mut c, &["XDEL", "q", &ids[9]]);
    read_group(&mut c, "q", "g", "c1", 10);
    let (h, stop, running) = watching_q(&server, 29.0).await;
    let entries_read = |m: &Metrics| {
        m.get(
            "redis_streams_group_entries_read",
            &[("target", "t"), ("stream", "q"), ("group", "g")],
        )
    };
    assert_eq!(entries_read(&h.metrics()), None, "entries-read is nil");
    // The producer adds 6 and cancels the last; the group reads 2.
    let more = xadd_n(&mut c, "q", 6);
    cmd(&mut c, &["XDEL", "q", &more[5]]);
    read_group(&mut c, "q", "g", "c1", 2);
    let m = wait_for(&h, |m| lost(m, "deleted") == Some(1.0)).await;
    let cancelled = [
        lost(&m, "trimmed"),
        lost(&m, "deleted"),
        lost(&m, "trimmed_or_deleted"),
    ];
    // The group reads to the end; an entry it was delivered is deleted and
    // the group set back behind it, past where the last poll saw it: no loss.
    let _: () = redis::pipe()
        .atomic()
        .cmd("XREADGROUP")
        .arg(&["GROUP", "g", "c1", "COUNT", "100", "STREAMS", "q", ">"])
        .ignore()
        .cmd("XDEL")
        .arg("q")
        .arg(&more[1])
        .ignore()
        .cmd("XGROUP")
        .arg(&["SETID", "q", "g", &more[0]])
        .ignore()
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    let after = [
        lost(&m, "trimmed"),
        lost(&m, "deleted"),
        lost(&m, "trimmed_or_deleted"),
    ];
    println!(
        "EVENTS | {kind:?} | producer XDELs 1 entry ahead of a group without entries-read, then the group set back behind an entry deleted after delivery | notifications Etg | truth 1 deleted, then 0 | exported: {cancelled:?}, then {after:?} (trimmed, deleted, trimmed_or_deleted)"
    );
    assert_eq!(cancelled, [Some(0.0), Some(1.0), Some(0.0)], "{}", m.text);
    assert_eq!(after, cancelled, "{}", m.text);
    stop.cancel();
    running.await.unwrap();
}

per_server!(a_deletion_ahead_is_counted_without_entries_read);

/// `keyspace_events = "off"`: no subscription, and neither metric.
async fn off_subscribes_to_nothing(kind: Server) {
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "KEA"]);
    let config = config_for(&server, &format!("keyspace_events = \"off\"\n{SLOW}"));
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let m = wait_for(&h, |m| {
        m.get(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", "stream")],
        ) == Some(1.0)
    })
    .await;
    let subscribers: String = match server.cmd(&["PUBSUB", "NUMPAT"]) {
        redis::Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    };
    assert_eq!(subscribers, "0");
    assert_eq!(active(&m), None, "{}", m.text);
    assert_eq!(received(&m), None, "{}", m.text);
    stop.cancel();
    running.await.unwrap();
}

per_server!(off_subscribes_to_nothing);

/// The demo's one-off faults (`scripts/demo.sh` starts its redis-server with
/// `--notify-keyspace-events Etg`), driven by the simulator against an
/// exporter started first, on the demo's schedule (discovery every 10 s,
/// stream poll every 5 s): each stream is created after the exporter's
/// first discovery and faulted 8 s later, before the next one. The events
/// watch each stream at once, so the faults are counted: 3 entries deleted
/// unread (`delete-unread`), the 40 trimmed unread (`trim-catchup`; both
/// 7.0+), and the replay of `rewind` (every server).
async fn demo_faults_counted_with_events(kind: Server) {
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\npatterns = [\"demo:*\"]\n\
         [schedule]\ndiscovery = \"10s\"\nstream = \"5s\"\n",
        server.url()
    );
    let config =
        redis_streams_exporter::config::from_str("demo.toml", &text, &Default::default()).unwrap();
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    wait_for(&h, |m| active(m) == Some(1.0)).await;
    let mut simulator = std::process::Command::new(env!("CARGO_BIN_EXE_redis-streams-simulator"))
        .args([
            "--url",
            &server.url(),
            "--prefix",
            "demo:",
            "--duration",
            "40s",
            "delete-unread",
            "trim-catchup",
            "rewind",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lost_in = |m: &Metrics, stream: &str, cause: &str| {
        m.get(
            "redis_streams_group_lost_entries_total",
            &[
                ("target", "t"),
                ("stream", stream),
                ("group", "workers"),
                ("cause", cause),
            ],
        )
    };
    let rewinds = |m: &Metrics| {
        m.get(
            "redis_streams_group_rewinds_total",
            &[
                ("target", "t"),
                ("stream", "demo:rewind"),
                ("group", "replay"),
            ],
        )
    };
    // trim-catchup is held to "at least the 40 lost": with or without
    // events, the ledger exports a few more here (44 to 46 measured on 7.0,
    // Valkey 9 and 8.6, the stream watched before the fault either way), a
    // matter of the ledger's arithmetic under the consumer's reads after the
    // catch-up, not of how timely the polls are.
    let trim_counted =
        |m: &Metrics| lost_in(m, "demo:trimcatchup", "trimmed").is_some_and(|n| n >= 40.0);
    let counted = |m: &Metrics| {
        rewinds(m) == Some(1.0)
            && (!kind.has_lag()
                || lost_in(m, "demo:deleteunread", "deleted") == Some(3.0) && trim_counted(m))
    };
    // The faults come 8 s after the streams, and are read past within 2 s.
    let mut m = h.metrics();
    for _ in 0..60 {
        if counted(&m) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        m = h.metrics();
    }
    let _ = simulator.kill();
    let _ = simulator.wait();
    println!(
        "EVENTS | {kind:?} | demo faults, notifications Etg | truth: delete-unread 3 deleted, trim-catchup 40 trimmed, rewind 1 | exported: {} deleted, {} trimmed, {} rewinds, {} events received",
        fmt(lost_in(&m, "demo:deleteunread", "deleted")),
        fmt(lost_in(&m, "demo:trimcatchup", "trimmed")),
        fmt(rewinds(&m)),
        fmt(received(&m)),
    );
    assert_eq!(rewinds(&m), Some(1.0), "{}", m.text);
    if kind.has_lag() {
        assert_eq!(
            lost_in(&m, "demo:deleteunread", "deleted"),
            Some(3.0),
            "{}",
            m.text
        );
        assert!(trim_counted(&m), "{}", m.text);
    }
    stop.cancel();
    running.await.unwrap();
}

per_server!(demo_faults_counted_with_events);

/// A subscription whose server goes away reports inactive, and subscribes
/// again (with its backoff) when a server answers on the port again; events
/// from the new server are received.
async fn resubscribes_after_the_server_comes_back(kind: Server) {
    let mut server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
    let port = server.port;
    let h = Harness::new(config_for(&server, SLOW));
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let m = wait_for(&h, |m| active(m) == Some(1.0)).await;
    assert_eq!(active(&m), Some(1.0), "{}", m.text);
    server.kill();
    let m = wait_for(&h, |m| active(m) == Some(0.0)).await;
    assert_eq!(active(&m), Some(0.0), "{}", m.text);
    let server = RedisServer::start_fixed(kind, port, &["--notify-keyspace-events", "Etg"]);
    let m = wait_for(&h, |m| active(m) == Some(1.0)).await;
    assert_eq!(active(&m), Some(1.0), "not subscribed again:\n{}", m.text);
    let before = received(&m).unwrap_or(0.0);
    let mut c = server.conn();
    // A queue is born with its group (xadd is not subscribed).
    cmd(&mut c, &["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]);
    let m = wait_for(&h, |m| {
        received(m).unwrap_or(0.0) > before && length(m).is_some()
    })
    .await;
    assert!(received(&m).unwrap_or(0.0) > before, "{}", m.text);
    assert!(
        length(&m).is_some(),
        "the new stream is watched:\n{}",
        m.text
    );
    stop.cancel();
    running.await.unwrap();
}

per_server!(resubscribes_after_the_server_comes_back);

/// In a cluster, one subscription per primary: active only when all three
/// are subscribed, and a stream born on any primary is watched at once
/// (discovery an hour away). The test turns the nodes' notifications on
/// itself; the exporter never does.
#[tokio::test]
async fn a_cluster_subscribes_on_every_primary() {
    let cluster = cluster::RedisCluster::start(Server::Redis70, 3);
    for n in &cluster.nodes {
        n.server
            .cmd(&["CONFIG", "SET", "notify-keyspace-events", "Etg"]);
    }
    let text = format!("{}{SLOW}", cluster.target_toml("t"));
    let config =
        redis_streams_exporter::config::from_str("cluster.toml", &text, &Default::default())
            .unwrap();
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let m = wait_for(&h, |m| active(m) == Some(1.0)).await;
    assert_eq!(active(&m), Some(1.0), "{}", m.text);
    for n in &cluster.nodes {
        assert_eq!(
            n.server.cmd(&["PUBSUB", "NUMSUB", "__keyevent@0__:xtrim"]),
            redis::Value::Array(vec![
                redis::Value::BulkString(b"__keyevent@0__:xtrim".to_vec()),
                redis::Value::Int(1)
            ]),
            "the keyevent channels on {}",
            n.addr()
        );
        assert_eq!(
            n.server.cmd(&["PUBSUB", "NUMPAT"]),
            redis::Value::Int(0),
            "no pattern on {}",
            n.addr()
        );
    }
    // One new stream per primary.
    let mut names: Vec<String> = Vec::new();
    let mut owners = std::collections::BTreeSet::new();
    for i in 0..1000 {
        let name = format!("born:{i}");
        if owners.insert(cluster.owner(&name)) {
            names.push(name);
        }
        if owners.len() == 3 {
            break;
        }
    }
    assert_eq!(names.len(), 3);
    for name in &names {
        let mut c = cluster.conn_for(name);
        cmd(&mut c, &["XGROUP", "CREATE", name, "g", "$", "MKSTREAM"]);
        xadd_n(&mut c, name, 2);
    }
    let watched = |m: &Metrics| m.get("redis_streams_exporter_streams", &[("target", "t")]);
    let m = wait_for(&h, |m| watched(m) == Some(3.0)).await;
    assert_eq!(watched(&m), Some(3.0), "{}", m.text);
    for name in &names {
        assert_eq!(
            m.get(
                "redis_streams_stream_length",
                &[("target", "t"), ("stream", name)]
            ),
            Some(2.0),
            "{}",
            m.text
        );
    }
    stop.cancel();
    running.await.unwrap();
    for n in &cluster.nodes {
        assert_eq!(
            n.server.cmd(&["PUBSUB", "NUMPAT"]),
            redis::Value::Int(0),
            "unsubscribed on stop from {}",
            n.addr()
        );
    }
}

/// A flood of events cannot starve the schedule: 20 capped streams written
/// with `XADD … MAXLEN ~ 100` as fast as two clients can for 8 s, with
/// notifications on (`~` trimming publishes `xtrim` every few dozen
/// entries on each stream), against a budget of 100 commands a second. The
/// extra polls spend at most their fifth of it, the rest wait for their
/// scheduled poll and are counted, and the stream poll keeps its 1 s
/// schedule throughout. Prints one `FLOOD` line (events received, extra
/// polls run and skipped, the stream poll's longest staleness).
async fn flood_keeps_the_schedule(kind: Server) {
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Et"]);
    let mut c = server.conn();
    let streams: Vec<String> = (0..20).map(|i| format!("f:{i}")).collect();
    for s in &streams {
        cmd(&mut c, &["XGROUP", "CREATE", s, "g", "$", "MKSTREAM"]);
    }
    let config = config_for(
        &server,
        "[schedule]\ndiscovery = \"1h\"\nstream = \"1s\"\n[limits]\ncommands_per_second = 100\n",
    );
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    wait_for(&h, |m| {
        active(m) == Some(1.0)
            && m.get("redis_streams_exporter_streams", &[("target", "t")]) == Some(20.0)
    })
    .await;
    let flooding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let mut c = server.conn();
            let streams = streams.clone();
            let flooding = flooding.clone();
            std::thread::spawn(move || {
                let mut added = 0u64;
                while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut pipe = redis::pipe();
                    for s in streams.iter().skip(w).step_by(2) {
                        for _ in 0..10 {
                            pipe.cmd("XADD")
                                .arg(s)
                                .arg("MAXLEN")
                                .arg("~")
                                .arg(100)
                                .arg("*")
                                .arg("n")
                                .arg(1);
                        }
                    }
                    let _: () = pipe.query(&mut c).unwrap();
                    added += 100;
                }
                added
            })
        })
        .collect();
    let last_stream_success = |m: &Metrics| {
        m.get(
            "redis_streams_exporter_probe_last_success_timestamp_seconds",
            &[("target", "t"), ("probe", "stream")],
        )
    };
    let now_s = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let started = std::time::Instant::now();
    let mut stalest: f64 = 0.0;
    while started.elapsed() < Duration::from_secs(8) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some(at) = last_stream_success(&h.metrics()) {
            stalest = stalest.max(now_s() - at);
        }
    }
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    let added: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let m = h.metrics();
    let got = |name: &str| m.get(name, &[("target", "t")]).unwrap_or(0.0);
    let (events, run, skipped) = (
        got("redis_streams_exporter_keyspace_events_total"),
        got("redis_streams_exporter_extra_polls_total"),
        got("redis_streams_exporter_extra_polls_skipped_total"),
    );
    println!(
        "FLOOD | {kind:?} | 20 streams, XADD MAXLEN ~ 100 by 2 clients for 8 s ({added} entries), commands_per_second 100 | events received {events}, extra polls run {run}, skipped {skipped} | stream poll staleness at most {stalest:.1} s (interval 1 s)"
    );
    assert!(events > 100.0, "the flood published: {}", m.text);
    assert!(run > 0.0, "extra polls ran: {}", m.text);
    assert!(skipped > 0.0, "the share capped them: {}", m.text);
    // A stream poll of 20 streams, once a second: never more than 3 s
    // stale, however many events arrive.
    assert!(stalest <= 3.0, "stream poll {stalest:.1} s stale");
    stop.cancel();
    running.await.unwrap();
}

per_server!(flood_keeps_the_schedule);

/// While the subscription covers every event, discovery walks the keyspace
/// on one run in six: a queue born meanwhile is watched on its
/// `xgroup-create` event, a stream without groups at the next walk, and an
/// interrupted subscription makes the next run walk. Without events, or
/// subscribed to a server that publishes none, every run walks.
async fn walks_are_rarer_while_events_cover(kind: Server) {
    let fast = "[schedule]\ndiscovery = \"1s\"\nstream = \"1s\"\n";
    let silent = RedisServer::start(kind);
    cmd(
        &mut silent.conn(),
        &["XGROUP", "CREATE", "first", "g", "$", "MKSTREAM"],
    );
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
    let mut c = server.conn();
    cmd(&mut c, &["XADD", "first", "*", "n", "1"]);
    let scans = |m: &Metrics| {
        m.get(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "scan")],
        )
        .unwrap_or(0.0)
    };
    let watched = |m: &Metrics, s: &str| {
        m.get(
            "redis_streams_stream_length",
            &[("target", "t"), ("stream", s)],
        )
        .is_some()
    };
    // Without events, and subscribed where nothing is published: a walk
    // every run (1 s).
    let mut walks_off = Vec::new();
    for (server, keys) in [(&server, "keyspace_events = \"off\"\n"), (&silent, "")] {
        let off = Harness::new(config_for(server, &format!("{keys}{fast}")));
        let stop = CancellationToken::new();
        let running = tokio::spawn(off.poller.clone().run(stop.clone()));
        let m = wait_for(&off, |m| watched(m, "first")).await;
        // The silent server's subscription is healthy all the same.
        let m = if keys.is_empty() {
            wait_for(&off, |m| active(m) == Some(1.0)).await
        } else {
            m
        };
        assert_eq!(active(&m), keys.is_empty().then_some(1.0), "{}", m.text);
        let before = scans(&m);
        tokio::time::sleep(Duration::from_millis(4500)).await;
        let walks = scans(&off.metrics()) - before;
        stop.cancel();
        running.await.unwrap();
        assert!(walks >= 3.0, "{walks} walks in 4.5 s ({keys})");
        walks_off.push(walks);
    }

    let h = Harness::new(config_for(&server, fast));
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let m = wait_for(&h, |m| active(m) == Some(1.0) && watched(m, "first")).await;
    assert_eq!(active(&m), Some(1.0), "{}", m.text);
    // A queue born now (its xgroup-create is the first stream event: the
    // walks are covered from the next one on).
    cmd(&mut c, &["XGROUP", "CREATE", "queue", "g", "$", "MKSTREAM"]);
    let m = wait_for(&h, |m| watched(m, "queue")).await;
    assert!(watched(&m, "queue"), "{}", m.text);
    // The event showed the server publishes: from the next walk on, the
    // walks are covered.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = scans(&h.metrics());
    cmd(&mut c, &["XADD", "loner", "*", "n", "1"]);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let m = h.metrics();
    let walks_on = scans(&m) - before;
    assert!(walks_on <= 1.0, "{walks_on} walks in 4.5 s with events");
    // The stream without groups waits for the sixth run's walk.
    let m = wait_for(&h, |m| watched(m, "loner")).await;
    assert!(watched(&m, "loner"), "{}", m.text);
    // An interrupted subscription: the next run walks.
    let before = scans(&m);
    cmd(&mut c, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    let m = wait_for(&h, |m| scans(m) > before).await;
    assert!(scans(&m) > before, "no walk after the interruption");
    println!(
        "DISCOVERY | {kind:?} | walks in 4.5 s at discovery = 1s: {} without events, {} subscribed to a server that publishes none, {walks_on} with events",
        walks_off[0], walks_off[1]
    );
    stop.cancel();
    running.await.unwrap();
}

per_server!(walks_are_rarer_while_events_cover);

/// A quiet stream (nothing undelivered, nothing pending) is checked with
/// `XREVRANGE … COUNT 1` while keyspace events alone cover every event
/// (`client_tracking = "off"`; with tracking it costs nothing, see
/// `client_tracking`): its last
/// full read stands as long as its last entry is the same. An `XADD`, which
/// publishes nothing we subscribe to, is seen at the next poll all the
/// same; once read and acknowledged, the stream is quiet again. Redis 6.2
/// (no entries-added) reads every stream in full.
async fn quiet_streams_are_checked_by_their_last_entry(kind: Server) {
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "Etg"]);
    let mut c = server.conn();
    xadd_n(&mut c, "q", 3);
    cmd(&mut c, &["XGROUP", "CREATE", "q", "g", "0"]);
    let ids = read_group(&mut c, "q", "g", "c", 10);
    for id in &ids {
        cmd(&mut c, &["XACK", "q", "g", id]);
    }
    let h = Harness::new(config_for(
        &server,
        "client_tracking = \"off\"\n[schedule]\ndiscovery = \"1h\"\nstream = \"1s\"\n",
    ));
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let command = |m: &Metrics, c: &str| {
        m.get(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", c)],
        )
        .unwrap_or(0.0)
    };
    let qg = tsg("q", "g");
    let m = wait_for(&h, |m| {
        active(m) == Some(1.0) && m.get("redis_streams_group_lag", &qg) == Some(0.0)
    })
    .await;
    assert_eq!(active(&m), Some(1.0), "{}", m.text);
    // A stream event: the server is seen to publish them.
    cmd(&mut c, &["XGROUP", "CREATECONSUMER", "q", "g", "other"]);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let m0 = h.metrics();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let m1 = h.metrics();
    let full = command(&m1, "xinfo_stream") - command(&m0, "xinfo_stream");
    let checks = command(&m1, "xrevrange") - command(&m0, "xrevrange");
    println!(
        "QUIET | {kind:?} | in 3 s at stream = 1s: {full} full reads, {checks} last-entry checks"
    );
    if kind == Server::Redis62 {
        assert!(
            full >= 2.0 && checks == 0.0,
            "6.2 reads in full: {full}, {checks}"
        );
    } else {
        assert!(full <= 1.0, "{full} full reads of a quiet stream");
        assert!(checks >= 2.0, "{checks} checks");
    }
    // XADD publishes nothing we subscribe to: seen at the next poll.
    xadd_n(&mut c, "q", 1);
    let m = wait_for(&h, |m| m.get("redis_streams_group_lag", &qg) == Some(1.0)).await;
    assert_eq!(
        m.get("redis_streams_group_lag", &qg),
        Some(1.0),
        "{}",
        m.text
    );
    assert_eq!(
        m.get(
            "redis_streams_stream_length",
            &[("target", "t"), ("stream", "q")]
        ),
        Some(4.0)
    );
    // Read, then acknowledged: pending, then quiet again.
    let id = read_group(&mut c, "q", "g", "c", 10);
    let m = wait_for(&h, |m| {
        m.get("redis_streams_group_pending", &qg) == Some(1.0)
    })
    .await;
    assert_eq!(
        m.get("redis_streams_group_pending", &qg),
        Some(1.0),
        "{}",
        m.text
    );
    cmd(&mut c, &["XACK", "q", "g", &id[0]]);
    let m = wait_for(&h, |m| {
        m.get("redis_streams_group_pending", &qg) == Some(0.0)
            && m.get("redis_streams_group_lag", &qg) == Some(0.0)
    })
    .await;
    assert_eq!(
        m.get("redis_streams_group_pending", &qg),
        Some(0.0),
        "{}",
        m.text
    );
    if kind != Server::Redis62 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let m0 = h.metrics();
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let m1 = h.metrics();
        let full = command(&m1, "xinfo_stream") - command(&m0, "xinfo_stream");
        assert!(full <= 1.0, "quiet again: {full} full reads");
    }
    stop.cancel();
    running.await.unwrap();
}

per_server!(quiet_streams_are_checked_by_their_last_entry);
