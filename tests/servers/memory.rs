//! The exporter's memory does not follow what the server holds or sends:
//! its peak resident memory (`VmHWM` of the binary run as a process, as
//! `cargo test` builds it) after several polls of each case stays within
//! 16 MiB of its peak watching one small stream. The cases: one stream of
//! 20 MiB entries; ten streams of 200 entries of three 60 KiB fields each,
//! whose groups a trim overtook and which then read on (the loss count's
//! and the lag samples' `XRANGE`s read those entries); a hostile server
//! sending 100 MiB strings, their lengths written plainly and after zeros;
//! a key name of 10 MiB with keyspace notifications on.
//!
//! Each case prints one `MEMORY` line (the table of docs/cost.md).

use crate::common;

use std::time::Duration;

use common::exporter::Exporter;
use common::fake::{self, Answer, Fake, Request};
use common::*;

/// How far above the idle peak a case may go.
const ALLOWED_KIB: u64 = 16 * 1024;

/// Stream polls every half second, discovery every second.
const FAST: &str = "[schedule]\nstream = \"500ms\"\ndiscovery = \"1s\"\n";

/// The exporter process's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .expect("VmHWM in /proc/<pid>/status")
}

/// A running exporter watching `url`.
struct Watch {
    exporter: Exporter,
    _dir: tempfile::TempDir,
    client: reqwest::Client,
}

impl Watch {
    fn start(url: &str, extra: &str) -> Watch {
        Watch::start_with(url, "", extra)
    }

    /// With `target` in the target's table and `extra` in `[schedule]`.
    /// Client tracking is off: every stream is read at every stream poll,
    /// so what is measured is what reading the replies costs, again and
    /// again, not one read of each quiet stream.
    fn start_with(url: &str, target: &str, extra: &str) -> Watch {
        let dir = tempfile::tempdir().unwrap();
        let exporter = Exporter::with_config(
            dir.path(),
            &format!(
                "[[targets]]\nname = \"t\"\nurl = \"{url}\"\nclient_tracking = \"off\"\n{target}{FAST}{extra}"
            ),
        )
        .start();
        Watch {
            exporter,
            _dir: dir,
            client: reqwest::Client::new(),
        }
    }

    async fn metrics(&self) -> Option<Metrics> {
        let url = format!("http://127.0.0.1:{}/metrics", self.exporter.port);
        let r = self.client.get(&url).send().await.ok()?;
        Some(Metrics::parse(&r.text().await.ok()?))
    }

    fn stream_polls(m: &Metrics) -> f64 {
        m.get(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "xinfo_groups")],
        )
        .unwrap_or(0.0)
    }

    /// Waits (up to 60 s) until `done` holds, then for `polls` more stream
    /// polls of `streams` streams (one `XINFO GROUPS` each); the last
    /// exposition.
    async fn until(&self, polls: f64, streams: f64, done: impl Fn(&Metrics) -> bool) -> Metrics {
        let mut from: Option<f64> = None;
        let mut last = None;
        for _ in 0..1200 {
            if let Some(m) = self.metrics().await {
                if from.is_none() && done(&m) {
                    from = Some(Self::stream_polls(&m));
                }
                let enough = from.is_some_and(|f| Self::stream_polls(&m) >= f + polls * streams);
                last = Some(m);
                if enough {
                    return last.unwrap();
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "not reached in 60 s; log:\n{}\nlast exposition:\n{}",
            self.exporter.log(),
            last.map(|m| m.text).unwrap_or_default()
        );
    }

    fn peak_kib(&self) -> u64 {
        peak_rss_kib(self.exporter.child.id())
    }
}

fn report(case: &str, peak: u64, idle: u64) {
    println!(
        "MEMORY | {case} | peak {peak} KiB | idle {idle} KiB | {:+} KiB",
        peak as i64 - idle as i64
    );
    assert!(
        peak <= idle + ALLOWED_KIB,
        "{case}: peak {peak} KiB, idle {idle} KiB"
    );
}

fn cmd(c: &mut redis::Connection, args: &[&[u8]]) -> redis::Value {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap()
}

/// Adds `n` entries of `fields` fields of `bytes` bytes each to `key`.
fn add_big(c: &mut redis::Connection, key: &str, n: usize, fields: usize, bytes: usize) {
    let value = vec![b'v'; bytes];
    for chunk in 0..n.div_ceil(10) {
        let mut pipe = redis::pipe();
        for _ in 0..(n - chunk * 10).min(10) {
            let xadd = pipe.cmd("XADD").arg(key).arg("*");
            for f in 0..fields {
                xadd.arg(format!("f{f}")).arg(&value[..]);
            }
        }
        let _: Vec<String> = pipe.query(c).unwrap();
    }
}

fn lag_known(m: &Metrics, stream: &str) -> bool {
    m.get("redis_streams_group_lag_seconds", &tsg(stream, "g"))
        .is_some()
}

/// One small stream with a group behind: what every case is compared with.
async fn idle(server: &RedisServer) -> u64 {
    let mut c = server.conn();
    cmd(&mut c, &[b"FLUSHALL"]);
    xadd_n(&mut c, "small", 3);
    cmd(&mut c, &[b"XGROUP", b"CREATE", b"small", b"g", b"0"]);
    let w = Watch::start(&server.url(), "");
    w.until(6.0, 1.0, |m| lag_known(m, "small")).await;
    w.peak_kib()
}

#[tokio::test]
async fn memory_does_not_follow_entries_names_or_hostile_replies() {
    let server = RedisServer::start_with(Server::Redis70, &["--notify-keyspace-events", "KEA"]);
    let idle = idle(&server).await;
    println!("MEMORY | idle: one stream of 3 small entries | peak {idle} KiB");
    let mut c = server.conn();

    // One stream of three 20 MiB entries, all undelivered: XINFO STREAM
    // returns two of them at every poll, the lag sample's XRANGE all three.
    cmd(&mut c, &[b"FLUSHALL"]);
    add_big(&mut c, "big", 3, 1, 20 << 20);
    cmd(&mut c, &[b"XGROUP", b"CREATE", b"big", b"g", b"0"]);
    let w = Watch::start(&server.url(), "");
    let m = w.until(6.0, 1.0, |m| lag_known(m, "big")).await;
    assert_eq!(
        m.get("redis_streams_group_lag", &tsg("big", "g")),
        Some(3.0)
    );
    report("one stream of 20 MiB entries", w.peak_kib(), idle);
    drop(w);

    many_wide_entries_overtaken(&server, idle).await;
    many_consumers(&server, idle).await;
    many_streams_few_watched(&server, idle).await;
    long_key_with_events(&server, idle).await;
    hostile(idle).await;
}

/// Ten streams of 200 entries of three 60 KiB fields; each group read 20,
/// then a trim took the first 50 (30 unread) and the group read 100 more:
/// the loss is counted over the range it moved across, its lag sampled
/// from the 50 left.
async fn many_wide_entries_overtaken(server: &RedisServer, idle: u64) {
    let mut c = server.conn();
    cmd(&mut c, &[b"FLUSHALL"]);
    let streams: Vec<String> = (0..10).map(|i| format!("wide{i}")).collect();
    for s in &streams {
        add_big(&mut c, s, 200, 3, 60 << 10);
        cmd(
            &mut c,
            &[
                b"XGROUP",
                b"CREATE",
                s.as_bytes(),
                b"g",
                b"0",
                b"ENTRIESREAD",
                b"0",
            ],
        );
        read_group(&mut c, s, "g", "c", 20);
    }
    let w = Watch::start(&server.url(), "");
    w.until(2.0, 10.0, |m| streams.iter().all(|s| lag_known(m, s)))
        .await;
    for s in &streams {
        cmd(&mut c, &[b"XTRIM", s.as_bytes(), b"MAXLEN", b"150"]);
    }
    w.until(2.0, 10.0, |_| true).await;
    for s in &streams {
        assert_eq!(read_group(&mut c, s, "g", "c", 100).len(), 100);
    }
    let lost = |m: &Metrics, s: &str| {
        m.get(
            "redis_streams_group_lost_entries_total",
            &[
                ("target", "t"),
                ("stream", s),
                ("group", "g"),
                ("cause", "trimmed"),
            ],
        )
    };
    let m = w
        .until(6.0, 10.0, |m| {
            streams.iter().all(|s| lost(m, s) == Some(30.0))
        })
        .await;
    assert!(
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "xrange")]
        ) >= 10.0
    );
    report(
        "10 streams x 200 entries of 3 x 60 KiB fields, overtaken by a trim, read on",
        w.peak_kib(),
        idle,
    );
}

/// One group of 100,000 consumers, three of them holding entries and the
/// rest never active: `XINFO CONSUMERS` lists them all at every consumers
/// run.
async fn many_consumers(server: &RedisServer, idle: u64) {
    const CONSUMERS: usize = 100_000;
    let mut c = server.conn();
    cmd(&mut c, &[b"FLUSHALL"]);
    xadd_n(&mut c, "crowd", 20);
    cmd(&mut c, &[b"XGROUP", b"CREATE", b"crowd", b"g", b"0"]);
    for r in 0..3 {
        read_group(&mut c, "crowd", "g", &format!("reader{r}"), 2);
    }
    for chunk in (0..CONSUMERS).collect::<Vec<_>>().chunks(10_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("XGROUP")
                .arg("CREATECONSUMER")
                .arg("crowd")
                .arg("g")
                .arg(format!("consumer-{i:06}"));
        }
        let _: redis::Value = pipe.query(&mut c).unwrap();
    }
    let w = Watch::start(
        &server.url(),
        "consumers = \"1s\"\npending_summary = \"1s\"\n",
    );
    let consumers_reads = |m: &Metrics| {
        m.get(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "xinfo_consumers")],
        )
        .unwrap_or(0.0)
    };
    let m = w.until(6.0, 1.0, |m| consumers_reads(m) >= 3.0).await;
    assert_eq!(
        m.get("redis_streams_group_pending", &tsg("crowd", "g")),
        Some(6.0),
        "{}",
        m.text
    );
    report("one group of 100,000 consumers", w.peak_kib(), idle);
}

/// 300,000 streams, `max_streams = 1000`: discovery's `SCAN` walks them all
/// at every run, and keeps only the names it will watch.
async fn many_streams_few_watched(server: &RedisServer, idle: u64) {
    const STREAMS: usize = 300_000;
    let mut c = server.conn();
    cmd(&mut c, &[b"FLUSHALL"]);
    for chunk in (0..STREAMS).collect::<Vec<_>>().chunks(10_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("XADD")
                .arg(format!("many:{i:06}"))
                .arg("*")
                .arg("n")
                .arg(1);
        }
        let _: redis::Value = pipe.query(&mut c).unwrap();
    }
    let w = Watch::start_with(
        &server.url(),
        "max_streams = 1000\npatterns = [\"many:*\"]\n",
        "",
    );
    let dropped = |m: &Metrics| m.get("redis_streams_exporter_streams_dropped", &[("target", "t")]);
    let m = w
        .until(2.0, 1000.0, |m| dropped(m) == Some((STREAMS - 1000) as f64))
        .await;
    assert_eq!(
        m.get("redis_streams_exporter_streams", &[("target", "t")]),
        Some(1000.0)
    );
    report("300,000 streams, max_streams = 1000", w.peak_kib(), idle);
}

/// A stream whose key is 10 MiB long, given five groups with keyspace
/// notifications on: discovery's SCAN and every `xgroup-create` event carry
/// the name.
async fn long_key_with_events(server: &RedisServer, idle: u64) {
    let mut c = server.conn();
    cmd(&mut c, &[b"FLUSHALL"]);
    xadd_n(&mut c, "small", 3);
    cmd(&mut c, &[b"XGROUP", b"CREATE", b"small", b"g", b"0"]);
    let w = Watch::start(&server.url(), "");
    w.until(1.0, 1.0, |m| {
        m.get(
            "redis_streams_exporter_keyspace_events_active",
            &[("target", "t")],
        ) == Some(1.0)
    })
    .await;
    let key = "k".repeat(10 << 20);
    xadd_n(&mut c, &key, 1);
    for g in 0..5 {
        let group = format!("g{g}");
        cmd(
            &mut c,
            &[b"XGROUP", b"CREATE", key.as_bytes(), group.as_bytes(), b"0"],
        );
    }
    let skipped = |m: &Metrics, kind: &str| {
        // Absent until the target's first snapshot is published.
        m.get(
            "redis_streams_exporter_items_skipped_total",
            &[("target", "t"), ("kind", kind)],
        )
        .unwrap_or(0.0)
    };
    w.until(6.0, 1.0, |m| {
        skipped(m, "event") >= 5.0 && skipped(m, "key") >= 1.0
    })
    .await;
    report("a 10 MiB key name, notifications on", w.peak_kib(), idle);
}

/// A fake server whose every answer with a string the exporter keeps is a
/// 100 MiB one: a SCAN key (its length after 5,000 zeros), a group's name
/// (written plainly) and the fields of XINFO STREAM's first entry.
async fn hostile(idle: u64) {
    const HUGE: usize = 100 << 20;
    let huge = |head: Vec<u8>, zeros: usize, tail: Vec<u8>| {
        let mut h = head;
        h.extend_from_slice(format!("${}{HUGE}\r\n", "0".repeat(zeros)).as_bytes());
        let mut t = b"\r\n".to_vec();
        t.extend(tail);
        Answer::Huge {
            head: h,
            fill: HUGE,
            tail: t,
        }
    };
    let server = Fake::start(move |r: &Request| {
        if r.is("SCAN", None) {
            let head = [b"*2\r\n".to_vec(), fake::bulk(b"0"), b"*2\r\n".to_vec()].concat();
            huge(head, 5_000, fake::bulk(fake::STREAM.as_bytes()))
        } else if r.is("XINFO", Some("GROUPS")) {
            let mut head = b"*2\r\n".to_vec();
            head.extend(fake::group(fake::GROUP.as_bytes()));
            head.extend_from_slice(b"*2\r\n");
            head.extend(fake::bulk(b"name"));
            huge(head, 0, Vec::new())
        } else if r.is("XINFO", Some("STREAM")) {
            let mut head = b"*8\r\n".to_vec();
            for (k, v) in [
                ("length", fake::int(1)),
                ("last-generated-id", fake::bulk(fake::ENTRY_ID.as_bytes())),
                ("groups", fake::int(2)),
            ] {
                head.extend(fake::bulk(k.as_bytes()));
                head.extend(v);
            }
            head.extend(fake::bulk(b"first-entry"));
            head.extend_from_slice(b"*2\r\n");
            head.extend(fake::bulk(fake::ENTRY_ID.as_bytes()));
            head.extend_from_slice(b"*2\r\n");
            head.extend(fake::bulk(b"f"));
            huge(head, 0, Vec::new())
        } else {
            Answer::Default
        }
    });
    let w = Watch::start(&server.url(), "");
    let skipped = |m: &Metrics, kind: &str| {
        // Absent until the target's first snapshot is published.
        m.get(
            "redis_streams_exporter_items_skipped_total",
            &[("target", "t"), ("kind", kind)],
        )
        .unwrap_or(0.0)
    };
    let m = w
        .until(6.0, 1.0, |m| {
            skipped(m, "key") >= 1.0 && skipped(m, "group") >= 1.0
        })
        .await;
    assert_eq!(
        m.get(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", "stream")]
        ),
        Some(1.0),
        "{}",
        w.exporter.log()
    );
    report(
        "hostile server: 100 MiB strings (a key, a group name, entry fields), lengths plain and zero-led",
        w.peak_kib(),
        idle,
    );
}
