//! The wrapper against replies of every shape, fed in pieces of every size:
//! what it hands on, what it never keeps, and what it refuses.

use super::replies::{BULK_BOUND, DEPTH_BOUND, LINE_BOUND, Replies};
use super::sent::Sent;
use super::*;
use crate::vocab::ROWS_KEPT;

/// `args` as the redis crate writes them.
fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

fn bulk(s: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", s.len()).into_bytes();
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
    out
}

/// An entry `[id, [field, value, ...]]` whose every value is `value`.
fn entry(id: &str, fields: usize, value: &[u8]) -> Vec<u8> {
    let mut out = b"*2\r\n".to_vec();
    out.extend(bulk(id.as_bytes()));
    out.extend_from_slice(format!("*{}\r\n", fields * 2).as_bytes());
    for f in 0..fields {
        out.extend(bulk(format!("f{f}").as_bytes()));
        out.extend(bulk(value));
    }
    out
}

/// What the filter hands on of `reply` (fed in pieces of `step` bytes)
/// after `commands` were written.
fn filtered(commands: &[&[&str]], reply: &[u8], step: usize) -> Result<Vec<u8>, String> {
    let mut sent = Sent::default();
    let mut replies = Replies::default();
    for c in commands {
        sent.feed(&command(c), &mut replies.plans);
    }
    let mut out = Vec::new();
    for piece in reply.chunks(step) {
        replies.filter(piece, &mut out)?;
    }
    Ok(out)
}

fn plain(reply: &[u8], step: usize) -> Result<Vec<u8>, String> {
    filtered(&[], reply, step)
}

#[test]
fn short_replies_pass_unchanged_in_any_pieces() {
    let reply = b"*3\r\n$5\r\nhello\r\n:42\r\n*2\r\n$-1\r\n+OK\r\n=8\r\ntxt:abcd\r\n-ERR no\r\n%1\r\n$1\r\nk\r\n_\r\n*-1\r\n$0\r\n\r\n";
    for step in [1, 2, 3, 7, reply.len()] {
        assert_eq!(plain(reply, step).unwrap(), reply.to_vec(), "step {step}");
    }
}

#[test]
fn a_long_bulk_string_becomes_a_null_without_being_kept() {
    let body = vec![b'x'; BULK_BOUND + 1];
    let mut reply = b"*2\r\n$3\r\nabc\r\n".to_vec();
    reply.extend(bulk(&body));
    reply.extend_from_slice(b":7\r\n");
    for step in [1, 5, 4096, reply.len()] {
        assert_eq!(
            plain(&reply, step).unwrap(),
            b"*2\r\n$3\r\nabc\r\n$-1\r\n:7\r\n".to_vec(),
            "step {step}"
        );
    }
    // At the bound exactly, it is kept.
    let at_bound = bulk(&body[..BULK_BOUND]);
    assert_eq!(plain(&at_bound, 1000).unwrap(), at_bound);
}

#[test]
fn lengths_are_read_whatever_zeros_lead_them() {
    // 20 MiB announced with leading zeros: still too long to keep.
    let mut reply = format!("${}20971520\r\n", "0".repeat(5000)).into_bytes();
    let mut body = vec![b'y'; 20 << 20];
    body.extend_from_slice(b"\r\n");
    reply.extend_from_slice(&body);
    reply.extend_from_slice(b"+OK\r\n");
    assert_eq!(
        plain(&reply, 64 * 1024).unwrap(),
        b"$-1\r\n+OK\r\n".to_vec()
    );
    // A short one is handed on in its plain form.
    assert_eq!(
        plain(b"*0002\r\n$0003\r\nabc\r\n:1\r\n", 2).unwrap(),
        b"*2\r\n$3\r\nabc\r\n:1\r\n".to_vec()
    );
}

#[test]
fn lines_without_their_end_are_refused_past_the_bound() {
    for ty in [b'+', b'-', b':', b'$', b'*'] {
        let mut reply = vec![ty];
        reply.extend(std::iter::repeat_n(b'0', LINE_BOUND));
        let err = plain(&reply, 4096).unwrap_err();
        assert!(err.contains("longer than 256 KiB"), "{}: {err}", ty as char);
    }
    // Within the bound, a line passes.
    let mut line = b"-ERR ".to_vec();
    line.extend(std::iter::repeat_n(b'e', LINE_BOUND - 10));
    line.extend_from_slice(b"\r\n");
    assert_eq!(plain(&line, 4096).unwrap(), line);
}

#[test]
fn what_is_not_resp_is_refused_and_stays_refused() {
    for (reply, why) in [
        (&b"?what\r\n"[..], "byte 0x3f"),
        (b"$12a\r\n", "not a number"),
        (b"$-\r\n", "not a number"),
        (b"%-1\r\n", "negative length"),
        (b"$99999999999999999999\r\n", "beyond 2^63"),
        (b"$3\r\nabcde\r\n", "do not end where its length says"),
    ] {
        let err = plain(reply, 1).unwrap_err();
        assert!(err.contains(why), "{reply:?}: {err}");
    }
    let mut replies = Replies::default();
    let mut out = Vec::new();
    assert!(replies.filter(b"?", &mut out).is_err());
    assert!(replies.filter(b"+OK\r\n", &mut out).is_err());
}

#[test]
fn nesting_is_bounded() {
    let deep = "*1\r\n".repeat(DEPTH_BOUND) + ":1\r\n";
    assert_eq!(plain(deep.as_bytes(), 3).unwrap(), deep.as_bytes());
    let deeper = "*1\r\n".repeat(DEPTH_BOUND + 1) + ":1\r\n";
    let err = plain(deeper.as_bytes(), 3).unwrap_err();
    assert!(err.contains("nested deeper than 8"), "{err}");
}

#[test]
fn range_entries_become_their_ids_and_their_bodies_are_never_kept() {
    let big = vec![b'z'; 3 * BULK_BOUND];
    let small = b"v".to_vec();
    let mut reply = b"*3\r\n".to_vec();
    reply.extend(entry("1-0", 1, &big));
    reply.extend(entry("2-0", 4, &small));
    reply.extend(entry("3-5", 0, &small));
    let xrange: &[&str] = &["XRANGE", "s", "-", "+", "COUNT", "10"];
    for step in [1, 3, 100, reply.len()] {
        let out = filtered(&[xrange], &reply, step).unwrap();
        assert_eq!(
            out,
            b"*3\r\n$3\r\n1-0\r\n$3\r\n2-0\r\n$3\r\n3-5\r\n".to_vec(),
            "step {step}"
        );
    }
    // XREVRANGE alike; an error in place of the array passes as it is.
    let rev: &[&str] = &["XREVRANGE", "s", "+", "-", "COUNT", "1"];
    let mut two = b"*1\r\n".to_vec();
    two.extend(entry("9-0", 2, &small));
    two.extend_from_slice(b"-WRONGTYPE no\r\n");
    assert_eq!(
        filtered(&[rev, rev], &two, 2).unwrap(),
        b"*1\r\n$3\r\n9-0\r\n-WRONGTYPE no\r\n".to_vec()
    );
}

#[test]
fn more_entries_or_rows_than_count_asked_are_refused() {
    let mut reply = b"*2\r\n".to_vec();
    reply.extend(entry("1-0", 1, b"v"));
    reply.extend(entry("2-0", 1, b"v"));
    let one: &[&str] = &["XRANGE", "s", "-", "+", "COUNT", "1"];
    let err = filtered(&[one], &reply, 7).unwrap_err();
    assert_eq!(
        err,
        "reply to XRANGE: 2 elements where COUNT asked for at most 1"
    );
    let rows = b"*2\r\n*4\r\n$3\r\n1-0\r\n$1\r\nc\r\n:5\r\n:1\r\n*4\r\n$3\r\n2-0\r\n$1\r\nc\r\n:5\r\n:1\r\n";
    let page: &[&str] = &["XPENDING", "s", "g", "-", "+", "1"];
    assert!(filtered(&[page], rows, 5).is_err());
    let page: &[&str] = &["XPENDING", "s", "g", "-", "+", "2"];
    assert!(filtered(&[page], rows, 5).is_ok());
}

#[test]
fn pending_entries_keep_whether_they_have_an_owner_not_its_name() {
    let name = vec![b'c'; 40_000];
    let mut rows = b"*2\r\n*4\r\n".to_vec();
    rows.extend(bulk(b"1-0"));
    rows.extend(bulk(&name));
    rows.extend_from_slice(b":5\r\n:1\r\n*4\r\n");
    rows.extend(bulk(b"2-0"));
    rows.extend(bulk(b""));
    rows.extend_from_slice(b":0\r\n:2\r\n");
    let page: &[&str] = &["XPENDING", "s", "g", "-", "+", "500"];
    assert_eq!(
        filtered(&[page], &rows, 1000).unwrap(),
        b"*2\r\n*4\r\n$3\r\n1-0\r\n$-1\r\n:5\r\n:1\r\n*4\r\n$3\r\n2-0\r\n$0\r\n\r\n:0\r\n:2\r\n"
            .to_vec()
    );
    let mut summary = b"*4\r\n:3\r\n$3\r\n1-0\r\n$3\r\n2-0\r\n*2\r\n*2\r\n".to_vec();
    summary.extend(bulk(&name));
    summary.extend(bulk(b"2"));
    summary.extend_from_slice(b"*2\r\n");
    summary.extend(bulk(b"bob"));
    summary.extend(bulk(b"1"));
    let sum: &[&str] = &["XPENDING", "s", "g"];
    assert_eq!(
        filtered(&[sum], &summary, 7).unwrap(),
        b"*4\r\n:3\r\n$3\r\n1-0\r\n$3\r\n2-0\r\n*2\r\n*2\r\n$-1\r\n$1\r\n2\r\n*2\r\n$-1\r\n$1\r\n1\r\n"
            .to_vec()
    );
    // An empty PEL's summary.
    let empty = b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n";
    assert_eq!(filtered(&[sum], empty, 3).unwrap(), empty.to_vec());
}

/// The look at a group's oldest entries (at most 10 rows) names their
/// holders, up to 1024 bytes each, so a poison or orphaned entry's holder
/// can be named; a longer name is a null, and so is every name of a longer
/// page.
#[test]
fn a_short_page_names_its_holders() {
    let long = vec![b'c'; 1025];
    let mut rows = b"*3\r\n*4\r\n".to_vec();
    rows.extend(bulk(b"1-0"));
    rows.extend(bulk(b"worker-7f3a"));
    rows.extend_from_slice(b":5\r\n:1\r\n*4\r\n");
    rows.extend(bulk(b"2-0"));
    rows.extend(bulk(&long));
    rows.extend_from_slice(b":5\r\n:1\r\n*4\r\n");
    rows.extend(bulk(b"3-0"));
    rows.extend(bulk(b""));
    rows.extend_from_slice(b":0\r\n:2\r\n");
    let head: &[&str] = &["XPENDING", "s", "g", "-", "+", "10"];
    for step in [1, 7, rows.len()] {
        assert_eq!(
            filtered(&[head], &rows, step).unwrap(),
            b"*3\r\n*4\r\n$3\r\n1-0\r\n$11\r\nworker-7f3a\r\n:5\r\n:1\r\n*4\r\n$3\r\n2-0\r\n$-1\r\n:5\r\n:1\r\n*4\r\n$3\r\n3-0\r\n$0\r\n\r\n:0\r\n:2\r\n"
                .to_vec(),
            "step {step}"
        );
    }
    let page: &[&str] = &["XPENDING", "s", "g", "-", "+", "11"];
    let text = filtered(&[page], &rows, 9).unwrap();
    assert!(!text.windows(6).any(|w| w == b"worker"), "{text:?}");
}

#[test]
fn stream_info_hands_on_the_ids_of_its_first_and_last_entries() {
    let body = vec![b'q'; 3 * BULK_BOUND];
    let mut reply = b"*8\r\n".to_vec();
    reply.extend(bulk(b"length"));
    reply.extend_from_slice(b":2\r\n");
    reply.extend(bulk(b"first-entry"));
    reply.extend(entry("1-0", 3, &body));
    reply.extend(bulk(b"last-entry"));
    reply.extend(entry("2-0", 1, b"small"));
    reply.extend(bulk(b"groups"));
    reply.extend_from_slice(b"*1\r\n:5\r\n");
    let info: &[&str] = &["XINFO", "STREAM", "s"];
    let groups: &[&str] = &["XINFO", "GROUPS", "s"];
    // XINFO GROUPS answers first: read plain, its arrays kept whole.
    let mut both = b"*1\r\n*2\r\n$4\r\nname\r\n$1\r\ng\r\n".to_vec();
    both.extend(&reply);
    let want = b"*1\r\n*2\r\n$4\r\nname\r\n$1\r\ng\r\n*8\r\n$6\r\nlength\r\n:2\r\n$11\r\nfirst-entry\r\n$3\r\n1-0\r\n$10\r\nlast-entry\r\n$3\r\n2-0\r\n$6\r\ngroups\r\n*1\r\n:5\r\n";
    for step in [1, 9, 1 << 16] {
        assert_eq!(
            filtered(&[groups, info], &both, step).unwrap(),
            want.to_vec(),
            "step {step}"
        );
    }
    // An empty stream's nil entries, and a RESP3 map.
    let empty = b"%2\r\n$11\r\nfirst-entry\r\n_\r\n$10\r\nlast-entry\r\n*-1\r\n";
    assert_eq!(filtered(&[info], empty, 4).unwrap(), empty.to_vec());
}

#[test]
fn a_payload_that_looks_like_resp_is_not_parsed() {
    let payload = b"$99999999\r\n*1\r\n";
    let mut reply = bulk(payload);
    reply.extend_from_slice(b"+OK\r\n");
    assert_eq!(plain(&reply, 3).unwrap(), reply);
}

/// Through tokio's reader and writer: commands written, replies filtered;
/// a violation fails the read and is told.
#[tokio::test]
async fn reads_and_writes_through_the_wrapper() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (client, mut server) = tokio::io::duplex(1 << 20);
    let mut wrapped = BoundedReplies::new(client);
    let violation = wrapped.violation();
    wrapped
        .write_all(&command(&["XRANGE", "s", "-", "+", "COUNT", "5"]))
        .await
        .unwrap();
    let mut written = vec![0; 64];
    let n = server.read(&mut written).await.unwrap();
    assert!(written[..n].starts_with(b"*6\r\n$6\r\nXRANGE"));
    let mut reply = b"*1\r\n".to_vec();
    reply.extend(entry("7-0", 2, &vec![b'b'; 5 * BULK_BOUND]));
    reply.extend_from_slice(b"+PONG\r\n?");
    server.write_all(&reply).await.unwrap();
    drop(server);
    let mut out = Vec::new();
    let err = wrapped.read_to_end(&mut out).await.unwrap_err();
    // What the last read held with the violation is not handed on: the
    // connection is done for.
    assert_eq!(out, b"*1\r\n$3\r\n7-0\r\n".to_vec());
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        violation.get(),
        Some("reply: byte 0x3f where an element should start")
    );
}

/// Inside `MULTI` … `EXEC` the queued commands are answered `QUEUED`, and
/// `EXEC`'s array holds their replies: each is read by its own command's
/// plan, so an `XINFO STREAM` in a transaction hands on its entries' IDs
/// alone too.
#[test]
fn a_transaction_reads_each_queued_reply_by_its_command() {
    let body = vec![b'x'; 1000];
    let mut info = b"*4\r\n".to_vec();
    info.extend(bulk(b"first-entry"));
    info.extend(entry("1-0", 3, &body));
    info.extend(bulk(b"last-entry"));
    info.extend(entry("2-0", 2, &body));
    let groups = b"*1\r\n*2\r\n$4\r\nname\r\n$1\r\ng\r\n".to_vec();
    let mut reply = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n".to_vec();
    reply.extend(&info);
    reply.extend(&groups);
    reply.extend_from_slice(b"+PONG\r\n");
    let mut want = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n*4\r\n$11\r\nfirst-entry\r\n$3\r\n1-0\r\n$10\r\nlast-entry\r\n$3\r\n2-0\r\n".to_vec();
    want.extend(&groups);
    want.extend_from_slice(b"+PONG\r\n");
    let commands: &[&[&str]] = &[
        &["MULTI"],
        &["XINFO", "STREAM", "s"],
        &["XINFO", "GROUPS", "s"],
        &["EXEC"],
        &["PING"],
    ];
    for step in [1, 5, 1 << 16] {
        assert_eq!(
            filtered(commands, &reply, step).unwrap(),
            want,
            "step {step}"
        );
    }
    // A MULTI the server refused: the commands ran as they came, EXEC errs.
    let mut refused = b"-NOPERM no\r\n".to_vec();
    refused.extend(&info);
    refused.extend(&groups);
    refused.extend_from_slice(b"-ERR EXEC without MULTI\r\n");
    let out = filtered(commands, &refused, 7).unwrap();
    assert!(out.ends_with(b"-ERR EXEC without MULTI\r\n"));
}

/// `rows` rows `[name, nK, pending, :n]` as `XINFO CONSUMERS` writes them.
fn consumer_rows(rows: u64) -> Vec<u8> {
    let mut out = format!("*{rows}\r\n").into_bytes();
    for i in 0..rows {
        out.extend_from_slice(b"*4\r\n");
        out.extend(bulk(b"name"));
        out.extend(bulk(format!("c{i}").as_bytes()));
        out.extend(bulk(b"pending"));
        out.extend_from_slice(format!(":{i}\r\n").as_bytes());
    }
    out
}

#[test]
fn lists_without_a_count_are_cut_at_the_rows_kept() {
    // Within the bound: unchanged.
    let short = consumer_rows(3);
    for step in [1, 7, short.len()] {
        let got = filtered(&[&["XINFO", "CONSUMERS", "s", "g"]], &short, step).unwrap();
        assert_eq!(got, short, "step {step}");
    }
    // Beyond it: the first ROWS_KEPT rows, the array's length said so, and
    // the next reply read as its own.
    let long = consumer_rows(ROWS_KEPT + 5);
    let mut reply = long.clone();
    reply.extend_from_slice(b":1\r\n");
    let kept = consumer_rows(ROWS_KEPT);
    for step in [3, 4096, reply.len()] {
        let got = filtered(&[&["XINFO", "GROUPS", "s"], &["XLEN", "s"]], &reply, step).unwrap();
        assert_eq!(&got[..kept.len()], &kept[..], "step {step}");
        assert_eq!(&got[kept.len()..], b":1\r\n", "step {step}");
    }
    // A plain command's list is not cut.
    let got = filtered(&[&["LRANGE", "l", "0", "-1"]], &long, 4096).unwrap();
    assert_eq!(got, long);
}

#[test]
fn the_summary_pendings_holders_are_cut_at_the_rows_kept() {
    let holders = |n: u64| {
        let mut out = format!("*{n}\r\n").into_bytes();
        for i in 0..n {
            out.extend_from_slice(b"*2\r\n");
            out.extend(bulk(format!("c{i}").as_bytes()));
            out.extend(bulk(b"1"));
        }
        out
    };
    let summary = |h: Vec<u8>| {
        let mut out = b"*4\r\n:7\r\n$3\r\n1-0\r\n$3\r\n9-0\r\n".to_vec();
        out.extend(h);
        out
    };
    let got = filtered(
        &[&["XPENDING", "s", "g"]],
        &summary(holders(ROWS_KEPT + 2)),
        4096,
    )
    .unwrap();
    // Names become nulls; the first ROWS_KEPT pairs are handed on.
    let mut want = b"*4\r\n:7\r\n$3\r\n1-0\r\n$3\r\n9-0\r\n".to_vec();
    want.extend_from_slice(format!("*{ROWS_KEPT}\r\n").as_bytes());
    for _ in 0..ROWS_KEPT {
        want.extend_from_slice(b"*2\r\n$-1\r\n$1\r\n1\r\n");
    }
    assert_eq!(got, want);
}

/// `XINFO STREAM … FULL` is read for its groups' own figures: the entries,
/// each group's PEL rows and its consumers are handed on as nulls, counted
/// past, and what is left decodes to the same `nacked-count`s.
#[test]
fn a_full_stream_reply_keeps_only_its_groups_figures() {
    use crate::backend::reply::{nacked_counts, tests::FULL_8_8};
    let full = ["XINFO", "STREAM", "s", "FULL", "COUNT", "1"];
    for step in [1, 3, 64, FULL_8_8.len()] {
        let out = filtered(&[&full], FULL_8_8, step).unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains("hello"), "the entry's body: {text}");
        assert!(!text.contains("w1"), "a consumer's name: {text}");
        assert!(text.contains("$7\r\nentries\r\n$-1\r\n"), "{text}");
        assert!(
            text.contains("$7\r\npending\r\n$-1\r\n$9\r\nconsumers\r\n$-1\r\n"),
            "{text}"
        );
        let v = redis::parse_redis_value(&out).unwrap();
        let read: Vec<(Vec<u8>, Option<u64>)> = nacked_counts(&v)
            .unwrap()
            .into_iter()
            .map(|g| (g.name, g.nacked))
            .collect();
        assert_eq!(
            read,
            [(b"other".to_vec(), Some(0)), (b"workers".to_vec(), Some(2))],
            "step {step}"
        );
    }
    // The summary form is still read as before.
    let summary = filtered(&[&["XINFO", "STREAM", "s"]], FULL_8_8, 7).unwrap();
    assert!(String::from_utf8_lossy(&summary).contains("w1"));
}
