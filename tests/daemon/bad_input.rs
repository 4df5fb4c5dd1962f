//! A corpus of bad input (odd and huge names, custom and future IDs, non-streams, keys deleted mid-cycle). The output
//! stays valid exposition (`promtool check metrics`), nothing crashes, the
//! good streams are still reported, and every problem is counted in
//! `redis_streams_exporter_errors_total{kind}`.

use crate::common;

use common::*;
use redis_streams_exporter::config;
use redis_streams_exporter::probe::ProbeKind;

fn xadd_bytes(c: &mut redis::Connection, key: &[u8], id: &str) -> String {
    redis::cmd("XADD")
        .arg(key)
        .arg(id)
        .arg("f")
        .arg("v")
        .query(c)
        .unwrap()
}

fn errors(m: &Metrics, kind: &str) -> f64 {
    m.value(
        "redis_streams_exporter_errors_total",
        &[("target", "t"), ("kind", kind)],
    )
}

async fn corpus(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    // Names with quotes, backslashes, newlines, non-UTF-8 bytes, 10 KB.
    let long = format!("long:{}", "x".repeat(10 * 1024));
    let weird: Vec<Vec<u8>> = vec![
        b"q:we\"ird".to_vec(),
        b"q:back\\slash".to_vec(),
        b"q:line\nbreak".to_vec(),
        b"q:\xff\xfe-bytes".to_vec(),
        b"q:\xfe\xff-bytes".to_vec(),
        long.clone().into_bytes(),
    ];
    for key in &weird {
        xadd_bytes(&mut c, key, "*");
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(key.as_slice())
            .arg(b"g\"\n\xff".as_slice())
            .arg("0")
            .query(&mut c)
            .unwrap();
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(b"g\"\n\xff".as_slice())
            .arg(b"c\\\xfe".as_slice())
            .arg("STREAMS")
            .arg(key.as_slice())
            .arg(">")
            .query(&mut c)
            .unwrap();
    }
    // Custom IDs and far-future IDs.
    xadd_bytes(&mut c, b"ids:small", "1-1");
    xadd_bytes(&mut c, b"ids:small", "2-5");
    xadd_bytes(&mut c, b"ids:future", "99999999999999-0");
    // A consumer that never read (inactive -1 on 7.2+).
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("idle:s")
        .arg("g")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XGROUP")
        .arg("CREATECONSUMER")
        .arg("idle:s")
        .arg("g")
        .arg("never")
        .query(&mut c)
        .unwrap();
    // Keys that match the pattern but are not streams, and one configured
    // by exact name.
    let _: () = redis::cmd("SET")
        .arg("q:string")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("q:hash")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap_or(());
    // Streams and groups that will be deleted mid-cycle.
    xadd_n(&mut c, "q:doomed", 3);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("q:doomed-group")
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();

    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\nstreams = [\"q:string\", \"missing:stream\"]\npatterns = [\"*\"]\n",
        server.url()
    );
    let h = Harness::new(config::from_str("bad.toml", &text, &Default::default()).unwrap());
    h.probe(ProbeKind::Discovery).await;
    // Deleted between discovery and the stream poll.
    let _: i64 = redis::cmd("DEL").arg("q:doomed").query(&mut c).unwrap();
    h.probe(ProbeKind::Stream).await;
    // Group deleted between the stream poll and the group probes.
    let _: i64 = redis::cmd("XGROUP")
        .arg("DESTROY")
        .arg("q:doomed-group")
        .arg("g")
        .query(&mut c)
        .unwrap();
    h.probe(ProbeKind::PendingSummary).await;
    h.probe(ProbeKind::Consumers).await;
    h.probe(ProbeKind::PendingScan).await;
    h.probe(ProbeKind::Info).await;
    let m = h.metrics();
    promtool_check(&m.text);

    // Every probe ran to completion.
    m.assert_every_probe_succeeded();
    // Each problem counted by kind.
    assert_eq!(
        errors(&m, "wrongtype"),
        2.0,
        "q:string configured by name: XINFO STREAM and GROUPS"
    );
    // missing:stream, q:doomed and the destroyed group vanished: events,
    // not errors (keys come and go).
    assert_eq!(errors(&m, "nosuchkey"), 0.0);
    assert_eq!(errors(&m, "nogroup"), 0.0);
    assert_eq!(errors(&m, "protocol"), 0.0);
    // Non-streams never appear.
    assert!(!m.text.contains("stream=\"q:string\""));
    assert!(!m.text.contains("stream=\"q:hash\""));
    assert!(!m.text.contains("stream=\"q:doomed\""));
    // Odd names appear escaped, each once.
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("q:we\\\"ird")),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("q:back\\\\\\\\slash")),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("q:line\\nbreak")),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("q:\\\\xff\\\\xfe-bytes")),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("q:\\\\xfe\\\\xff-bytes")),
        1.0
    );
    // The 10 KB name is shortened to metrics.max_label_value_bytes (1024)
    // and marked with `\\…` and a hash of the whole name, and counted.
    let shortened: Vec<&str> = m
        .family("redis_streams_stream_length")
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| k.contains("stream=\"long:"))
        .collect();
    assert_eq!(shortened.len(), 1, "{shortened:?}");
    let label = shortened[0].split("stream=\"").nth(1).unwrap();
    assert!(
        label.starts_with(&long[..1024]),
        "the first 1024 bytes kept"
    );
    assert!(
        label[1024..].starts_with("\\\\…"),
        "then the marker: {}",
        &label[1024..]
    );
    assert!(label.len() < 1100, "not 10 KB: {}", label.len());
    assert!(m.value("redis_streams_exporter_label_values_shortened", &[]) > 0.0);
    let g = [
        ("target", "t"),
        ("stream", "q:we\\\"ird"),
        ("group", "g\\\"\\n\\\\xff"),
    ];
    assert_eq!(m.value("redis_streams_group_pending", &g), 1.0);
    let consumer = [
        ("target", "t"),
        ("stream", "q:we\\\"ird"),
        ("group", "g\\\"\\n\\\\xff"),
        ("consumer", "c\\\\\\\\\\\\xfe"),
    ];
    assert_eq!(m.value("redis_streams_consumer_pending", &consumer), 1.0);
    // Custom and future IDs: no ages, and said so.
    for s in ["ids:small", "ids:future"] {
        assert_eq!(
            m.value("redis_streams_stream_time_based_ids", &ts(s)),
            0.0,
            "{s}"
        );
        assert_eq!(
            m.get("redis_streams_stream_last_entry_timestamp_seconds", &ts(s)),
            None,
            "{s}"
        );
    }
    // inactive -1: no inactive series, idle still there, nothing orphaned.
    let never = [
        ("target", "t"),
        ("stream", "idle:s"),
        ("group", "g"),
        ("consumer", "never"),
    ];
    assert_eq!(
        m.get("redis_streams_consumer_inactive_seconds", &never),
        None
    );
    assert!(
        m.get("redis_streams_consumer_idle_seconds", &never)
            .is_some()
    );
    assert_eq!(
        m.value("redis_streams_group_pending_orphaned", &tsg("idle:s", "g")),
        0.0
    );
}

per_server!(corpus);

/// A user whose ACL key pattern hides some streams: SCAN still lists them
/// (SCAN is not key-filtered), XINFO is refused with NOPERM, which is counted;
/// the permitted streams are reported.
#[tokio::test]
async fn noperm_on_some_keys() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "allowed:a", 2);
    xadd_n(&mut c, "secret:b", 3);
    server.cmd(&[
        "ACL",
        "SETUSER",
        "limited",
        "on",
        ">pw",
        "resetchannels",
        "%R~allowed:*",
        "-@all",
        "+ping",
        "+info",
        "+time",
        "+scan",
        "+xinfo|stream",
        "+xinfo|groups",
        "+xinfo|consumers",
        "+xpending",
        "+xrange",
        "+client|setname",
    ]);
    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"redis://limited:pw@127.0.0.1:{}\"\n",
        server.port
    );
    let h = Harness::new(config::from_str("np.toml", &text, &Default::default()).unwrap());
    h.collect().await;
    let m = h.metrics();
    promtool_check(&m.text);
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("allowed:a")),
        2.0
    );
    assert_eq!(m.get("redis_streams_stream_length", &ts("secret:b")), None);
    assert_eq!(
        errors(&m, "noperm"),
        2.0,
        "XINFO STREAM and GROUPS on secret:b"
    );
    assert_eq!(
        m.value("redis_streams_exporter_target_up", &[("target", "t")]),
        1.0
    );
}

/// A user missing a whole command (here XPENDING) loses those figures: the
/// probes that need it fail, which is what the ProbeFailing alert watches,
/// while everything else keeps working.
#[tokio::test]
async fn a_missing_command_permission_fails_its_probes() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "s", 3);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("s")
        .arg("g")
        .arg("0")
        .query(&mut c)
        .unwrap();
    read_group(&mut c, "s", "g", "c", 2);
    server.cmd(&[
        "ACL",
        "SETUSER",
        "noxp",
        "on",
        ">pw",
        "resetchannels",
        "%R~*",
        "-@all",
        "+ping",
        "+info",
        "+time",
        "+scan",
        "+xinfo|stream",
        "+xinfo|groups",
        "+xinfo|consumers",
        "+xrange",
        "+client|setname",
    ]);
    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"redis://noxp:pw@127.0.0.1:{}\"\n",
        server.port
    );
    let h = Harness::new(config::from_str("np.toml", &text, &Default::default()).unwrap());
    h.collect().await;
    let m = h.metrics();
    let success = |probe: &str| {
        m.value(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", probe)],
        )
    };
    assert_eq!(success("pending_summary"), 0.0);
    assert_eq!(success("pending_scan"), 0.0);
    for probe in ["discovery", "info", "stream", "consumers"] {
        assert_eq!(success(probe), 1.0, "{probe}");
    }
    assert_eq!(
        errors(&m, "noperm"),
        2.0,
        "one XPENDING summary, one XPENDING page"
    );
    assert_eq!(m.value("redis_streams_group_pending", &tsg("s", "g")), 2.0);
    assert_eq!(
        m.get(
            "redis_streams_group_pending_max_idle_seconds",
            &tsg("s", "g")
        ),
        None
    );
}

/// Anyone who can create a key must not be able to forge the
/// operator's log lines. A stream named with a newline and a fake log line
/// (with non-time IDs, so the exporter logs its name at info) stays on one
/// line of the real binary's text log, its newline and escape codes escaped.
#[test]
fn key_names_cannot_forge_log_lines() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    let evil = b"inj\n2026-12-01T00:00:00.000000Z ERROR INJECTED LINE\x1b[2J";
    xadd_bytes(&mut c, evil, "5-1");
    let dir = tempfile::tempdir().unwrap();
    let exporter = common::exporter::Exporter::with_url(dir.path(), &server.url())
        .args(&["--log.level", "info"])
        .env_remove("RUST_LOG")
        .start();
    // The raw log file, as an operator's collector reads it.
    let log = exporter.log.clone();
    let raw_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !raw_log().contains("not wall-clock time") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(exporter);
    let text = raw_log();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let named = lines
        .iter()
        .find(|l| l.contains("not wall-clock time"))
        .unwrap_or_else(|| panic!("the stream's log line did not come: {lines:#?}"));
    assert!(
        named.contains("inj\\n2026-12-01T00:00:00.000000Z ERROR INJECTED LINE\\u{1b}[2J"),
        "the name is escaped on its own line: {named}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("2026-12-01T00:00:00.000000Z ERROR INJECTED")),
        "a forged line: {lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("\x1b[2J")),
        "a raw escape sequence"
    );
}
