//! Client tracking, on every server (Redis 6.2, 7.0, 8.6 and Valkey 9), with
//! the servers' default `notify-keyspace-events` (empty): a quiet stream
//! costs no command until it is written to; a trim that a group reads past
//! 0.3 s later is counted exactly, the invalidation having polled the
//! stream in between; a server or ACL that refuses tracking leaves polling
//! as it was; a lost subscriber, a killed poll connection, a deleted key and
//! a flush each make the streams read again.
//!
//! Each scenario prints one `TRACKING` line (server, scenario, figures).

use crate::common;

use std::time::Duration;

use common::*;
use tokio_util::sync::CancellationToken;

fn target(m: &Metrics, family: &str) -> Option<f64> {
    m.get(family, &[("target", "t")])
}

fn tracking(m: &Metrics) -> Option<f64> {
    target(m, "redis_streams_exporter_client_tracking_active")
}

fn sent(m: &Metrics, command: &str) -> f64 {
    m.get(
        "redis_streams_exporter_redis_commands_total",
        &[("target", "t"), ("command", command)],
    )
    .unwrap_or(0.0)
}

/// The commands of `commands` sent between two expositions.
fn between(m0: &Metrics, m1: &Metrics, commands: &[&str]) -> f64 {
    commands.iter().map(|c| sent(m1, c) - sent(m0, c)).sum()
}

/// Stream `q` with group `g` that read and acknowledged its 3 entries.
fn quiet_stream(c: &mut redis::Connection) {
    xadd_n(c, "q", 3);
    cmd(c, &["XGROUP", "CREATE", "q", "g", "0"]);
    for id in read_group(c, "q", "g", "c", 10) {
        cmd(c, &["XACK", "q", "g", &id]);
    }
}

const EVERY_SECOND: &str = "[schedule]\ndiscovery = \"1h\"\nstream = \"1s\"\n";

/// Waits until tracking is on and the stream has been read by a poll that
/// began after it (so the stream's last read is tracked), and `until`
/// holds.
async fn tracked(h: &Harness, until: impl Fn(&Metrics) -> bool) -> Metrics {
    let m = wait_for(h, |m| tracking(m) == Some(1.0)).await;
    assert_eq!(tracking(&m), Some(1.0), "{}", m.text);
    let before = sent(&m, "xinfo_stream");
    wait_for(h, |m| sent(m, "xinfo_stream") > before && until(m)).await
}

/// A quiet stream is not read while tracking vouches for it: no `XINFO`,
/// no `XREVRANGE`, nothing but the poll's `TIME`. An `XADD` invalidates it
/// and the next poll reads it; once read and acknowledged it is quiet
/// again; `DEL` invalidates it too and it vanishes. Redis 6.2 (no
/// entries-added) reads every stream in full.
async fn quiet_streams_cost_nothing_until_written(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    quiet_stream(&mut c);
    let h = Harness::new(config_for(&server, EVERY_SECOND));
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let qg = tsg("q", "g");
    tracked(&h, |m| m.get("redis_streams_group_lag", &qg) == Some(0.0)).await;
    let reads = ["xinfo_stream", "xinfo_groups", "xrevrange", "multi"];
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m0 = h.metrics();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let m1 = h.metrics();
    let quiet = between(&m0, &m1, &reads);
    let polls = between(&m0, &m1, &["time"]);
    println!("TRACKING | {kind:?} | quiet: {quiet} reads, {polls} polls in 3 s");
    assert!(polls >= 2.0, "{polls} polls in 3 s at stream = 1s");
    if kind == Server::Redis62 {
        assert!(quiet >= 4.0, "6.2 reads in full: {quiet}");
    } else {
        assert_eq!(
            quiet, 0.0,
            "a quiet stream read {quiet} times:\n{}",
            m1.text
        );
    }
    // An XADD: invalidated, read at the next poll.
    xadd_n(&mut c, "q", 1);
    let m = wait_for(&h, |m| m.get("redis_streams_group_lag", &qg) == Some(1.0)).await;
    assert_eq!(
        m.get("redis_streams_group_lag", &qg),
        Some(1.0),
        "{}",
        m.text
    );
    assert_eq!(m.value("redis_streams_stream_length", &ts("q")), 4.0);
    if kind != Server::Redis62 {
        let invalidations = target(
            &m,
            "redis_streams_exporter_client_tracking_invalidations_total",
        );
        assert!(invalidations >= Some(1.0), "{invalidations:?}");
    }
    // Read and acknowledged: quiet again, and costs nothing again.
    for id in read_group(&mut c, "q", "g", "c", 10) {
        cmd(&mut c, &["XACK", "q", "g", &id]);
    }
    wait_for(&h, |m| {
        m.get("redis_streams_group_lag", &qg) == Some(0.0)
            && m.get("redis_streams_group_pending", &qg) == Some(0.0)
    })
    .await;
    if kind != Server::Redis62 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let m0 = h.metrics();
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let again = between(&m0, &h.metrics(), &reads);
        assert_eq!(again, 0.0, "quiet again: {again} reads");
    }
    // DEL: invalidated; the stream is gone at the next poll.
    cmd(&mut c, &["DEL", "q"]);
    let m = wait_for(&h, |m| {
        m.get("redis_streams_stream_length", &ts("q")).is_none()
    })
    .await;
    assert_eq!(
        m.get("redis_streams_stream_length", &ts("q")),
        None,
        "{}",
        m.text
    );
    stop.cancel();
    running.await.unwrap();
}

per_server!(quiet_streams_cost_nothing_until_written);

/// Group `g` of stream `q` has read 10 of 60 entries, a poll saw it there;
/// then `XTRIM MAXLEN 10` takes 40 entries it never read, and 0.3 s later
/// it reads past the trim. The scheduled poll comes every 10 s; the
/// invalidation of the trim polls the stream in between, so Redis 8 and
/// Valkey count the 40 exactly without keyspace events (7.0's arithmetic
/// counts them at any later poll; 6.2 has no entries-read). With
/// `client_tracking = "off"` the same run on Redis 8 and Valkey proves a
/// loss only when a scheduled poll happens to fall in the 0.3 s (printed).
async fn a_trim_read_past_at_once_is_counted_without_notifications(kind: Server) {
    let mut exported = Vec::new();
    for mode in ["auto", "off"] {
        let server = RedisServer::start(kind);
        let mut c = server.conn();
        let ids = xadd_n(&mut c, "q", 60);
        cmd(&mut c, &["XGROUP", "CREATE", "q", "g", "0"]);
        for id in read_group(&mut c, "q", "g", "c", 10) {
            cmd(&mut c, &["XACK", "q", "g", &id]);
        }
        let config = format!(
            "client_tracking = \"{mode}\"\n[schedule]\ndiscovery = \"1h\"\nstream = \"10s\"\n"
        );
        let h = Harness::new(config_for(&server, &config));
        let stop = CancellationToken::new();
        let running = tokio::spawn(h.poller.clone().run(stop.clone()));
        if mode == "auto" {
            // A scheduled poll after tracking came on: the stream's last
            // read is tracked.
            let m = wait_for(&h, |m| tracking(m) == Some(1.0)).await;
            assert_eq!(tracking(&m), Some(1.0), "{}", m.text);
            let before = sent(&m, "xinfo_stream");
            let m = wait_for(&h, |m| sent(m, "xinfo_stream") > before).await;
            assert!(
                sent(&m, "xinfo_stream") > before,
                "no poll since tracking came on"
            );
        }
        let m = wait_for(&h, |m| {
            m.get("redis_streams_stream_length", &ts("q")) == Some(60.0)
        })
        .await;
        assert_eq!(
            m.get("redis_streams_stream_length", &ts("q")),
            Some(60.0),
            "{}",
            m.text
        );
        // Entries 1..50 go: 10 read, 40 unread.
        cmd(&mut c, &["XTRIM", "q", "MAXLEN", "10"]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let past = read_group(&mut c, "q", "g", "c", 100);
        assert_eq!(past.first(), Some(&ids[50]), "read past the trim");
        let trimmed = [
            ("target", "t"),
            ("stream", "q"),
            ("group", "g"),
            ("cause", "trimmed"),
        ];
        let lost = |m: &Metrics| m.get("redis_streams_group_lost_entries_total", &trimmed);
        let possibly =
            |m: &Metrics| m.get("redis_streams_group_possibly_lost_entries_total", &trimmed);
        // Up to the next scheduled poll, which proves it on 7.0 anyway, or
        // says it is possible on Redis 8 and Valkey.
        let mut m = h.metrics();
        for _ in 0..240 {
            if lost(&m) == Some(40.0) || possibly(&m) >= Some(40.0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            m = h.metrics();
        }
        println!(
            "TRACKING | {kind:?} | client_tracking = {mode}: trim of 40 unread entries read past 0.3 s later: lost {:?}, possibly lost {:?}",
            lost(&m),
            possibly(&m)
        );
        if kind != Server::Redis62 {
            assert!(
                lost(&m) == Some(40.0) || possibly(&m) >= Some(40.0),
                "client_tracking = {mode}: neither proven nor possible:\n{}",
                m.text
            );
        }
        exported.push(lost(&m));
        stop.cancel();
        running.await.unwrap();
    }
    match kind {
        Server::Redis62 => assert_eq!(exported[0], None, "6.2 proves no loss"),
        _ => assert_eq!(exported[0], Some(40.0), "{kind:?} with tracking"),
    }
}

per_server!(a_trim_read_past_at_once_is_counted_without_notifications);

/// The minimal ACL of docs/configuration.md.
fn minimal_acl(kind: Server) -> String {
    let keys = if kind.has_acl_key_permissions() {
        "%R~*"
    } else {
        "~*"
    };
    format!(
        "on >exporter-pw resetchannels {keys} -@all +ping +info +time +scan +type +xinfo|stream +xinfo|groups \
         +xinfo|consumers +xpending +xrange +xrevrange +client|setname +client|id +client|tracking \
         +cluster|shards +cluster|slots +asking +multi +exec +subscribe +unsubscribe \
         &__keyevent@0__:x* &__keyevent@0__:del &__redis__:invalidate"
    )
}

/// An ACL user without `CLIENT TRACKING`, or without the invalidation
/// channel: tracking is off for the node (`client_tracking_active` 0), the
/// keyspace events are subscribed all the same, the quiet stream is read in
/// full at every poll as without tracking, and nothing counts as a
/// collection error.
async fn refused_tracking_falls_back_to_polling(kind: Server) {
    let notify = ["--notify-keyspace-events", "Etg"];
    for (without, rule) in [
        (
            "+client|tracking",
            minimal_acl(kind).replace(" +client|tracking", ""),
        ),
        (
            "&__redis__:invalidate",
            minimal_acl(kind).replace(" &__redis__:invalidate", ""),
        ),
    ] {
        let server = RedisServer::start_with(kind, &notify);
        let mut args: Vec<&str> = vec!["ACL", "SETUSER", "exporter"];
        args.extend(rule.split(' '));
        server.cmd(&args);
        let mut c = server.conn();
        quiet_stream(&mut c);
        let url = format!("redis://exporter:exporter-pw@127.0.0.1:{}", server.port);
        let h = Harness::new(config_for_url(&url, EVERY_SECOND));
        let stop = CancellationToken::new();
        let running = tokio::spawn(h.poller.clone().run(stop.clone()));
        let events = |m: &Metrics| target(m, "redis_streams_exporter_keyspace_events_active");
        let m = wait_for(&h, |m| {
            events(m) == Some(1.0) && m.get("redis_streams_group_lag", &tsg("q", "g")) == Some(0.0)
        })
        .await;
        assert_eq!(
            events(&m),
            Some(1.0),
            "events without {without}:\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let m0 = h.metrics();
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let m1 = h.metrics();
        assert_eq!(tracking(&m1), Some(0.0), "without {without}:\n{}", m1.text);
        let full = between(&m0, &m1, &["xinfo_stream"]);
        let checks = between(&m0, &m1, &["xrevrange"]);
        println!(
            "TRACKING | {kind:?} | without {without}: {full} full reads, {checks} last-entry checks in 3 s"
        );
        // Polled as before: read in full at every poll (keyspace events
        // vouch only once the server is seen to publish stream events).
        assert!(
            full >= 2.0,
            "without {without}: {full} reads, {checks} checks"
        );
        for (series, v) in m1.family("redis_streams_exporter_errors_total") {
            assert_eq!(v, 0.0, "{series} without {without}:\n{}", m1.text);
        }
        m1.assert_every_probe_succeeded();
        stop.cancel();
        running.await.unwrap();
    }
}

per_server!(refused_tracking_falls_back_to_polling);

/// What tracking vouched for is read again when the vouching may have
/// lapsed: the subscriber killed (its invalidations are lost: RESP2 says
/// nothing of a redirect that is gone), the poll connection killed (the
/// keys it read are no longer tracked), and a flush. In each case a write
/// made at once, whose invalidation never arrives, is seen within a few
/// polls instead of at the safety check minutes later.
async fn lost_vouching_reads_everything_again(kind: Server) {
    if kind == Server::Redis62 {
        // Every stream is read in full at every poll: nothing to lose.
        return;
    }
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    quiet_stream(&mut c);
    let h = Harness::new(config_for(&server, EVERY_SECOND));
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let qg = tsg("q", "g");
    let length = |m: &Metrics| m.get("redis_streams_stream_length", &ts("q"));
    tracked(&h, |m| m.get("redis_streams_group_lag", &qg) == Some(0.0)).await;
    let mut expected = 3.0;
    let reads = ["xinfo_stream", "xinfo_groups", "xrevrange"];
    for lapse in ["subscriber", "poll connection", "flush"] {
        // Quiet, and standing without a read.
        let m = wait_for(&h, |m| {
            tracking(m) == Some(1.0)
                && length(m) == Some(expected)
                && m.get("redis_streams_group_lag", &qg) == Some(0.0)
                && m.get("redis_streams_group_pending", &qg) == Some(0.0)
        })
        .await;
        assert_eq!(
            length(&m),
            Some(expected),
            "before the {lapse}:\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let m0 = h.metrics();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let standing = between(&m0, &h.metrics(), &reads);
        assert_eq!(standing, 0.0, "not standing before the {lapse}");
        match lapse {
            "subscriber" => {
                cmd(&mut c, &["CLIENT", "KILL", "TYPE", "pubsub"]);
            }
            "poll connection" => {
                let list = match cmd(&mut c, &["CLIENT", "LIST"]) {
                    redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
                    redis::Value::VerbatimString { text, .. } => text,
                    other => panic!("CLIENT LIST: {other:?}"),
                };
                let ids: Vec<&str> = list
                    .lines()
                    .filter(|l| l.contains(" name=redis-streams-exporter "))
                    .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
                    .collect();
                assert_eq!(ids.len(), 1, "one poll connection:\n{list}");
                cmd(&mut c, &["CLIENT", "KILL", "ID", ids[0]]);
            }
            _ => {
                // The same stream again, one entry shorter: only the flush's
                // null invalidation says it changed (a flush empties the
                // tracking table, so the writes after it announce nothing).
                cmd(&mut c, &["FLUSHALL"]);
                quiet_stream(&mut c);
                expected = 3.0;
            }
        }
        xadd_n(&mut c, "q", 1);
        expected += 1.0;
        let m = wait_for(&h, |m| length(m) == Some(expected)).await;
        println!(
            "TRACKING | {kind:?} | {lapse} lost: length {:?}, expected {expected}",
            length(&m)
        );
        assert_eq!(length(&m), Some(expected), "after the {lapse}:\n{}", m.text);
        // Quiet again for the next round.
        for id in read_group(&mut c, "q", "g", "c", 10) {
            cmd(&mut c, &["XACK", "q", "g", &id]);
        }
    }
    stop.cancel();
    running.await.unwrap();
}

per_server!(lost_vouching_reads_everything_again);

/// In a cluster, each primary's poll connection tracks towards that
/// primary's subscriber: active only when all three do; a quiet stream on
/// each primary stands without a read, and an `XADD` to each is read at
/// the next poll.
#[tokio::test]
async fn a_cluster_tracks_on_every_primary() {
    let cluster = cluster::RedisCluster::start(Server::Redis70, 3);
    let mut names: Vec<String> = Vec::new();
    let mut owners = std::collections::BTreeSet::new();
    for i in 0..1000 {
        let name = format!("q:{i}");
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
        xadd_n(&mut c, name, 2);
        cmd(&mut c, &["XGROUP", "CREATE", name, "g", "$"]);
    }
    let text = format!("{}{EVERY_SECOND}", cluster.target_toml("t"));
    let config =
        redis_streams_exporter::config::from_str("cluster.toml", &text, &Default::default())
            .unwrap();
    let h = Harness::new(config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let length = |m: &Metrics, name: &str| {
        m.get(
            "redis_streams_stream_length",
            &[("target", "t"), ("stream", name)],
        )
    };
    let m = tracked(&h, |m| names.iter().all(|n| length(m, n) == Some(2.0))).await;
    assert_eq!(tracking(&m), Some(1.0), "{}", m.text);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let m0 = h.metrics();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let reads = between(&m0, &h.metrics(), &["xinfo_stream", "xinfo_groups"]);
    println!("TRACKING | cluster of 3 | quiet: {reads} reads in 2 s");
    assert_eq!(reads, 0.0, "three quiet streams read {reads} times");
    for name in &names {
        xadd_n(&mut cluster.conn_for(name), name, 1);
    }
    let m = wait_for(&h, |m| names.iter().all(|n| length(m, n) == Some(3.0))).await;
    for name in &names {
        assert_eq!(length(&m, name), Some(3.0), "{name}:\n{}", m.text);
    }
    stop.cancel();
    running.await.unwrap();
}
