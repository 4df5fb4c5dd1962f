//! What a hostile or broken server cannot make the exporter do, against the
//! scriptable fake server of `common::fake`: keep a 100 MiB string however
//! its length is written (in a reply or a keyspace event), wait for the
//! timeout on a line that never ends,
//! take a reply for the answer to another command once one was added or
//! did not decode, or say "connect" for a command that timed out on an open
//! connection.

use crate::common;

use common::fake::{self, Answer, Fake, Request};
use common::*;
use redis_streams_exporter::probe::ProbeKind;

const T: [(&str, &str); 1] = [("target", "t")];

fn skipped(m: &Metrics, kind: &str) -> f64 {
    m.value(
        "redis_streams_exporter_items_skipped_total",
        &[("target", "t"), ("kind", kind)],
    )
}

fn errors(m: &Metrics, kind: &str) -> f64 {
    m.value(
        "redis_streams_exporter_errors_total",
        &[("target", "t"), ("kind", kind)],
    )
}

fn success(m: &Metrics, probe: &str) -> f64 {
    m.value(
        "redis_streams_exporter_probe_success",
        &[("target", "t"), ("probe", probe)],
    )
}

/// The stream probe's last error, as the landing page and the logs say it.
fn stream_error(h: &Harness) -> String {
    h.store.targets()[0].probes[&ProbeKind::Stream]
        .last_error
        .as_deref()
        .unwrap_or("")
        .to_string()
}

/// 100 MiB, the length of the strings below.
const HUGE: usize = 100 << 20;

/// A 100 MiB string written with `zeros` zeros before its length.
fn huge_string(head: &[u8], zeros: usize, tail: &[u8]) -> Answer {
    let mut h = head.to_vec();
    h.extend_from_slice(format!("${}{HUGE}\r\n", "0".repeat(zeros)).as_bytes());
    let mut t = b"\r\n".to_vec();
    t.extend_from_slice(tail);
    Answer::Huge {
        head: h,
        fill: HUGE,
        tail: t,
    }
}

/// Strings of 100 MiB where the exporter keeps strings (a key `SCAN` finds,
/// a group's name), their lengths written plainly or after 5,000 zeros: each
/// is left out and counted, and the rest of its reply stays (the stream is
/// watched, its group exported).
#[tokio::test]
async fn strings_of_100_mib_are_left_out_however_their_length_is_written() {
    for zeros in [0, 5_000] {
        let fake = Fake::start(move |r: &Request| {
            if r.is("SCAN", None) {
                let head = [b"*2\r\n".to_vec(), fake::bulk(b"0"), b"*2\r\n".to_vec()].concat();
                huge_string(&head, zeros, &fake::bulk(fake::STREAM.as_bytes()))
            } else if r.is("XINFO", Some("GROUPS")) {
                let mut head = b"*2\r\n*12\r\n".to_vec();
                head.extend(fake::bulk(b"name"));
                let mut tail = Vec::new();
                for (k, v) in [
                    ("consumers", fake::int(0)),
                    ("pending", fake::int(0)),
                    ("last-delivered-id", fake::bulk(b"0-0")),
                    ("entries-read", fake::int(0)),
                    ("lag", fake::int(1)),
                ] {
                    tail.extend(fake::bulk(k.as_bytes()));
                    tail.extend(v);
                }
                tail.extend(fake::group(fake::GROUP.as_bytes()));
                huge_string(&head, zeros, &tail)
            } else {
                Answer::Default
            }
        });
        let h = Harness::new(config_for_url(&fake.url(), ""));
        h.collect().await;
        let m = h.metrics();
        let g = tsg(fake::STREAM, fake::GROUP);
        assert_eq!(
            m.get("redis_streams_exporter_streams", &T),
            Some(1.0),
            "zeros {zeros}"
        );
        assert_eq!(m.get("redis_streams_group_lag", &g), Some(0.0), "{zeros}");
        assert!(skipped(&m, "key") >= 1.0, "zeros {zeros}");
        assert!(skipped(&m, "group") >= 1.0, "zeros {zeros}");
        assert_eq!(success(&m, "stream"), 1.0, "{}", stream_error(&h));
        assert_eq!(success(&m, "discovery"), 1.0, "zeros {zeros}");
        assert_eq!(errors(&m, "protocol"), 0.0, "zeros {zeros}");
    }
}

/// A simple string that never ends (300 KiB and counting, the connection
/// left open) is a protocol error at once, not a wait for the command
/// timeout (20 s here, so a wait would show as a timeout); the connection
/// is dropped and the next poll reads from a new one. The server answers,
/// so the target stays up.
#[tokio::test]
async fn a_line_without_its_end_is_a_protocol_error_not_a_timeout() {
    let fake = Fake::start(|r: &Request| {
        if r.connection == 1 && r.is("XINFO", Some("STREAM")) {
            let mut endless = b"+".to_vec();
            endless.extend(std::iter::repeat_n(b'a', 300 << 10));
            Answer::Bytes(endless)
        } else {
            Answer::Default
        }
    });
    let h = Harness::new(config_for_url(
        &fake.url(),
        "[limits]\ncommand_timeout = \"20s\"\n",
    ));
    h.collect().await;
    let m = h.metrics();
    assert_eq!(success(&m, "stream"), 0.0);
    let error = stream_error(&h);
    assert!(
        error.contains("reply to XINFO STREAM: a line longer than 256 KiB"),
        "{error}"
    );
    assert_eq!(errors(&m, "protocol"), 1.0);
    assert_eq!(errors(&m, "timeout"), 0.0);
    assert_eq!(m.get("redis_streams_exporter_target_up", &T), Some(1.0));
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    assert_eq!(success(&m, "stream"), 1.0, "{}", stream_error(&h));
    assert_eq!(fake.connections(), 2);
}

/// A server that adds a reply (here before its answer to `XINFO STREAM`)
/// would leave every later reply answering the command before it: the
/// misfit is caught in the round trip it happens in, the connection
/// dropped, and the next poll, on a new connection, reads true figures.
#[tokio::test]
async fn after_a_reply_added_the_connection_is_dropped_not_off_by_one() {
    let fake = Fake::start(|r: &Request| {
        if r.connection == 1 && r.is("XINFO", Some("STREAM")) {
            let mut added = fake::int(7);
            added.extend(fake::default_answer(r.args));
            Answer::Bytes(added)
        } else {
            Answer::Default
        }
    });
    let h = Harness::new(config_for_url(&fake.url(), ""));
    h.collect().await;
    let m = h.metrics();
    assert_eq!(success(&m, "stream"), 0.0);
    let error = stream_error(&h);
    assert!(
        error.contains(
            "a reply to xinfo_stream that cannot answer it (integer) (connection dropped)"
        ),
        "{error}"
    );
    assert_eq!(errors(&m, "protocol"), 1.0);
    for _ in 0..3 {
        h.probe(ProbeKind::Stream).await;
        let m = h.metrics();
        assert_eq!(success(&m, "stream"), 1.0, "{}", stream_error(&h));
        assert_eq!(
            m.get("redis_streams_stream_length", &ts(fake::STREAM)),
            Some(1.0)
        );
    }
    assert_eq!(errors(&h.metrics(), "protocol"), 1.0);
    assert_eq!(fake.connections(), 2);
}

/// A reply that does not decode (an `XINFO STREAM` without its length):
/// the replies on that connection can no longer be trusted to answer the
/// commands they are taken for, so the next command opens a new one.
#[tokio::test]
async fn after_a_reply_that_did_not_decode_the_next_command_reconnects() {
    let fake = Fake::start(|r: &Request| {
        if r.connection == 1 && r.is("XINFO", Some("STREAM")) {
            Answer::Bytes(fake::fields(&[("groups", fake::int(1))]))
        } else {
            Answer::Default
        }
    });
    let h = Harness::new(config_for_url(&fake.url(), ""));
    h.collect().await;
    let m = h.metrics();
    assert_eq!(success(&m, "stream"), 0.0);
    assert!(
        stream_error(&h).contains("no length field"),
        "{}",
        stream_error(&h)
    );
    let connections = fake.connections();
    h.probe(ProbeKind::Stream).await;
    assert_eq!(success(&h.metrics(), "stream"), 1.0);
    assert_eq!(fake.connections(), connections + 1);
    // A good poll keeps its connection.
    h.probe(ProbeKind::Stream).await;
    assert_eq!(fake.connections(), connections + 1);
}

/// A timeout says what timed out: connecting (and what the connection
/// waited for), or the commands of a round trip on an open connection.
#[tokio::test]
async fn timeouts_say_whether_connecting_or_a_command_timed_out() {
    const FAST: &str = "[limits]\ncommand_timeout = \"300ms\"\n";
    let silent_setname = Fake::start(|r: &Request| {
        if r.is("CLIENT", Some("SETNAME")) {
            Answer::Silence
        } else {
            Answer::Default
        }
    });
    let h = Harness::new(config_for_url(&silent_setname.url(), FAST));
    h.probe(ProbeKind::Stream).await;
    let error = stream_error(&h);
    assert!(
        error.contains("could not connect within 300ms (no answer to CLIENT SETNAME)"),
        "{error}"
    );
    assert_eq!(errors(&h.metrics(), "timeout"), 1.0);

    let silent_xinfo = Fake::start(|r: &Request| {
        if r.is("XINFO", Some("STREAM")) {
            Answer::Silence
        } else {
            Answer::Default
        }
    });
    let h = Harness::new(config_for_url(&silent_xinfo.url(), FAST));
    h.probe(ProbeKind::Discovery).await;
    h.probe(ProbeKind::Stream).await;
    let error = stream_error(&h);
    assert!(
        error.contains(
            "did not answer time, xinfo_stream, xinfo_groups within 300ms on an open connection"
        ),
        "{error}"
    );
    assert!(!error.contains("connect within"), "{error}");
}

/// Keyspace events read through the same bounds: a message whose key is
/// 100 MiB long (its length after 5,000 zeros) is left out and counted, and
/// the message after it is read on the same subscription.
#[tokio::test]
async fn a_keyspace_event_with_a_100_mib_key_is_left_out_and_the_next_read() {
    let fake = Fake::start(|r: &Request| {
        if !r.is("SUBSCRIBE", None) {
            return Answer::Default;
        }
        let mut head = Vec::new();
        for (i, c) in r.args[1..].iter().enumerate() {
            head.extend(fake::array(&[
                fake::bulk(b"subscribe"),
                fake::bulk(c.as_bytes()),
                fake::int(i as i64 + 1),
            ]));
        }
        let message = |key: &[u8]| {
            let mut m = b"*3\r\n".to_vec();
            m.extend(fake::bulk(b"message"));
            m.extend(fake::bulk(b"__keyevent@0__:xdel"));
            m.extend(fake::bulk(key));
            m
        };
        let whole = message(b"");
        // The first message, up to its key's length.
        head.extend_from_slice(&whole[..whole.len() - b"$0\r\n\r\n".len()]);
        let tail = message(fake::STREAM.as_bytes());
        huge_string(&head, 5_000, &tail)
    });
    let h = Harness::new(config_for_url(&fake.url(), ""));
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let read = eventually(std::time::Duration::from_secs(20), || {
        let m = h.metrics();
        m.get("redis_streams_exporter_keyspace_events_total", &T) == Some(1.0)
    })
    .await;
    let m = h.metrics();
    stop.cancel();
    running.await.unwrap();
    assert!(read, "{}", m.text);
    assert_eq!(skipped(&m, "event"), 1.0);
    assert_eq!(
        m.get("redis_streams_exporter_keyspace_events_active", &T),
        Some(1.0)
    );
    assert_eq!(errors(&m, "protocol"), 0.0);
}
