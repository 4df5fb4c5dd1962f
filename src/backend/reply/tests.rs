//! The decoders against replies of every shape the servers send.

use super::*;
use crate::backend::command::{RangeEnd, RangeStart};

fn b(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}
fn arr(v: Vec<Value>) -> Value {
    Value::Array(v)
}
fn entry(id: &str) -> Value {
    arr(vec![b(id), arr(vec![b("f"), b("v")])])
}

#[test]
fn stream_info_7_0_with_all_fields() {
    let v = arr(vec![
        b("length"),
        Value::Int(3),
        b("radix-tree-keys"),
        Value::Int(1),
        b("radix-tree-nodes"),
        Value::Int(2),
        b("last-generated-id"),
        b("1700000000003-0"),
        b("max-deleted-entry-id"),
        b("1700000000001-0"),
        b("entries-added"),
        Value::Int(4),
        b("recorded-first-entry-id"),
        b("1700000000000-0"),
        b("groups"),
        Value::Int(2),
        b("first-entry"),
        entry("1700000000000-0"),
        b("last-entry"),
        entry("1700000000003-0"),
        b("some-future-field"),
        Value::Int(9),
    ]);
    let info = stream_info(&v).unwrap();
    assert_eq!(info.length, 3);
    assert_eq!(info.groups, 2);
    assert_eq!(info.entries_added, Some(4));
    assert_eq!(
        info.max_deleted_entry_id,
        Some(StreamId::new(1700000000001, 0))
    );
    assert_eq!(info.first_entry_id, Some(StreamId::new(1700000000000, 0)));
    assert_eq!(info.last_entry_id, Some(StreamId::new(1700000000003, 0)));
}

#[test]
fn stream_info_6_2_lacks_fields_and_empty_stream_has_nil_entries() {
    let v = arr(vec![
        b("length"),
        Value::Int(0),
        b("radix-tree-keys"),
        Value::Int(0),
        b("radix-tree-nodes"),
        Value::Int(1),
        b("last-generated-id"),
        b("5-0"),
        b("groups"),
        Value::Int(0),
        b("first-entry"),
        Value::Nil,
        b("last-entry"),
        Value::Nil,
    ]);
    let info = stream_info(&v).unwrap();
    assert_eq!(info.entries_added, None);
    assert_eq!(info.max_deleted_entry_id, None);
    assert_eq!(info.first_entry_id, None);
    assert_eq!(info.last_generated_id, StreamId::new(5, 0));
}

#[test]
fn stream_info_resp3_map() {
    let v = Value::Map(vec![
        (b("length"), Value::Int(1)),
        (b("last-generated-id"), b("1-1")),
        (b("groups"), Value::Int(0)),
    ]);
    assert_eq!(
        stream_info(&v).unwrap().last_generated_id,
        StreamId::new(1, 1)
    );
}

#[test]
fn stream_info_without_length_is_an_error() {
    let v = arr(vec![b("last-generated-id"), b("1-1")]);
    assert!(
        stream_info(&v)
            .unwrap_err()
            .to_string()
            .contains("no length")
    );
}

#[test]
fn groups_nil_lag_stays_unknown() {
    let v = arr(vec![
        arr(vec![
            b("name"),
            b("g1"),
            b("consumers"),
            Value::Int(2),
            b("pending"),
            Value::Int(5),
            b("last-delivered-id"),
            b("10-0"),
            b("entries-read"),
            Value::Nil,
            b("lag"),
            Value::Nil,
        ]),
        arr(vec![
            b("name"),
            b("g2"),
            b("consumers"),
            Value::Int(0),
            b("pending"),
            Value::Int(0),
            b("last-delivered-id"),
            b("0-0"),
            b("entries-read"),
            Value::Int(7),
            b("lag"),
            Value::Int(0),
        ]),
        // Redis 6.2: no entries-read, no lag.
        arr(vec![
            b("name"),
            b("old"),
            b("consumers"),
            Value::Int(1),
            b("pending"),
            Value::Int(1),
            b("last-delivered-id"),
            b("3-0"),
        ]),
    ]);
    let g = groups(&v).unwrap();
    assert_eq!((g[0].lag, g[0].entries_read), (None, None));
    assert_eq!((g[1].lag, g[1].entries_read), (Some(0), Some(7)));
    assert_eq!((g[2].lag, g[2].entries_read), (None, None));
    assert_eq!(g[0].pending, 5);
}

#[test]
fn groups_negative_lag_is_unknown_not_wrapped() {
    let v = arr(vec![arr(vec![
        b("name"),
        b("g"),
        b("consumers"),
        Value::Int(0),
        b("pending"),
        Value::Int(0),
        b("last-delivered-id"),
        b("1-0"),
        b("lag"),
        Value::Int(-3),
    ])]);
    assert_eq!(groups(&v).unwrap()[0].lag, None);
}

#[test]
fn consumers_inactive_minus_one_and_missing() {
    let v = arr(vec![
        arr(vec![
            b("name"),
            b("a"),
            b("pending"),
            Value::Int(2),
            b("idle"),
            Value::Int(1500),
            b("inactive"),
            Value::Int(-1),
        ]),
        arr(vec![
            b("name"),
            b("b"),
            b("pending"),
            Value::Int(0),
            b("idle"),
            Value::Int(10),
            b("inactive"),
            Value::Int(20),
        ]),
        arr(vec![
            b("name"),
            b("c"),
            b("pending"),
            Value::Int(1),
            b("idle"),
            Value::Int(99),
        ]),
    ]);
    let c = consumers(&v).unwrap();
    assert_eq!((c[0].inactive_ms, c[0].never_active), (None, true));
    assert_eq!((c[1].inactive_ms, c[1].never_active), (Some(20), false));
    assert_eq!(
        (c[2].inactive_ms, c[2].never_active, c[2].idle_ms),
        (None, false, 99)
    );
}

#[test]
fn pending_summary_counts_are_strings_and_empty_is_nil() {
    let v = arr(vec![
        Value::Int(3),
        b("1-0"),
        b("3-0"),
        arr(vec![
            arr(vec![b("alice"), b("2")]),
            arr(vec![b("bob"), b("1")]),
        ]),
    ]);
    let s = pending_summary(&v).unwrap();
    assert_eq!(s.count, 3);
    assert_eq!(s.min_id, Some(StreamId::new(1, 0)));
    assert_eq!(s.holders, 2);
    let empty = arr(vec![Value::Int(0), Value::Nil, Value::Nil, Value::Nil]);
    let e = pending_summary(&empty).unwrap();
    assert_eq!((e.count, e.min_id, e.holders), (0, None, 0));
    // As the connection hands it on: the names are nulls.
    let unnamed = arr(vec![
        Value::Int(1),
        b("1-0"),
        b("1-0"),
        arr(vec![arr(vec![Value::Nil, b("1")])]),
    ]);
    assert_eq!(pending_summary(&unnamed).unwrap().holders, 1);
}

#[test]
fn pending_entries_and_ranges() {
    let v = arr(vec![
        arr(vec![b("5-1"), b("c1"), Value::Int(1200), Value::Int(25)]),
        // As the connection hands them on: a null for a holder, empty for
        // an entry released by XNACK.
        arr(vec![b("6-0"), Value::Nil, Value::Int(3), Value::Int(1)]),
        arr(vec![b("7-0"), b(""), Value::Int(0), Value::Int(2)]),
    ]);
    let p = pending_entries(&v).unwrap();
    assert_eq!(
        p[0],
        PendingEntry {
            id: StreamId::new(5, 1),
            released: false,
            holder: Some(b"c1".to_vec()),
            idle_ms: 1200,
            deliveries: 25
        }
    );
    assert_eq!(
        p.iter().map(|e| e.released).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(p[1].holder, None, "a name not kept");
    assert_eq!(p[2].holder, None, "released");
    let r = arr(vec![entry("1-0"), entry("2-0")]);
    assert_eq!(
        range_ids(&r).unwrap(),
        vec![StreamId::new(1, 0), StreamId::new(2, 0)]
    );
    // As the connection hands them on: the IDs alone.
    let ids = arr(vec![b("1-0"), b("3-7")]);
    assert_eq!(
        range_ids(&ids).unwrap(),
        vec![StreamId::new(1, 0), StreamId::new(3, 7)]
    );
    assert!(range_ids(&arr(vec![b("not-an-id")])).is_err());
}

#[test]
fn stream_info_entries_as_the_connection_hands_them_on() {
    let v = arr(vec![
        b("length"),
        Value::Int(2),
        b("last-generated-id"),
        b("9-0"),
        b("first-entry"),
        b("4-0"),
        b("last-entry"),
        b("9-0"),
    ]);
    let info = stream_info(&v).unwrap();
    assert_eq!(info.first_entry_id, Some(StreamId::new(4, 0)));
    assert_eq!(info.last_entry_id, Some(StreamId::new(9, 0)));
}

#[test]
fn time_scan_info() {
    assert_eq!(
        time_ms(&arr(vec![b("1700000000"), b("123456")])).unwrap(),
        1_700_000_000_123
    );
    // Found by the fuzz test: a garbled TIME overflowed the multiplication.
    let huge = (u64::MAX / 10).to_string();
    assert!(time_ms(&arr(vec![b(&huge), b("0")])).is_err());
    let page = scan_page(&arr(vec![
        b("17"),
        arr(vec![b("s1"), Value::BulkString(vec![0xff])]),
    ]))
    .unwrap();
    assert_eq!(page.cursor, 17);
    assert_eq!(page.keys[1], vec![0xff]);
    let info = info_fields(&b(
        "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n",
    ))
    .unwrap();
    assert_eq!(info[0], ("redis_version".into(), "7.0.15".into()));
}

fn group(name: Value) -> Value {
    arr(vec![
        b("name"),
        name,
        b("consumers"),
        Value::Int(0),
        b("pending"),
        Value::Int(0),
        b("last-delivered-id"),
        b("0-0"),
    ])
}

#[test]
fn items_whose_names_were_not_kept_are_left_out_and_counted() {
    let key = || b"s".to_vec();
    // A group whose name the connection dropped (a null): the others stay.
    let mut v = arr(vec![group(b("a")), group(Value::Nil), group(b("c"))]);
    assert_eq!(
        prune(&Command::XinfoGroups { key: key() }, &mut v),
        Some((SkipKind::Group, 1))
    );
    let names: Vec<Vec<u8>> = groups(&v).unwrap().into_iter().map(|g| g.name).collect();
    assert_eq!(names, [b"a".to_vec(), b"c".to_vec()]);
    let consumer = |name: Value| {
        arr(vec![
            b("name"),
            name,
            b("pending"),
            Value::Int(0),
            b("idle"),
            Value::Int(1),
        ])
    };
    let mut v = arr(vec![consumer(Value::Nil), consumer(b("x"))]);
    let cmd = Command::XinfoConsumers {
        key: key(),
        group: b"g".to_vec(),
    };
    assert_eq!(prune(&cmd, &mut v), Some((SkipKind::Consumer, 1)));
    assert_eq!(consumers(&v).unwrap().len(), 1);
    let scan = Command::Scan {
        cursor: 0,
        pattern: None,
        count: 10,
    };
    let mut v = arr(vec![b("0"), arr(vec![Value::Nil, b("k"), Value::Nil])]);
    assert_eq!(prune(&scan, &mut v), Some((SkipKind::Key, 2)));
    assert_eq!(scan_page(&v).unwrap().keys, [b"k".to_vec()]);
    // Nothing left out: nothing said; other replies are not touched.
    let mut v = arr(vec![group(b("a"))]);
    assert_eq!(prune(&Command::XinfoGroups { key: key() }, &mut v), None);
    let mut v = arr(vec![Value::Nil]);
    assert_eq!(prune(&Command::XinfoStream { key: key() }, &mut v), None);
    assert_eq!(v, arr(vec![Value::Nil]));
}

#[test]
fn a_reply_that_cannot_answer_its_command_is_told() {
    let key = || b"s".to_vec();
    let info = Command::XinfoStream { key: key() };
    let range = Command::Xrange {
        key: key(),
        start: RangeStart::Min,
        end: RangeEnd::Max,
        count: 5,
    };
    // What the servers answer fits.
    for (cmd, v) in [
        (&info, arr(vec![b("length"), Value::Int(0)])),
        (&range, arr(vec![b("1-0"), entry("2-0")])),
        (&range, arr(vec![])),
        (&Command::Ping, Value::SimpleString("PONG".into())),
        (&Command::Time, arr(vec![b("1"), b("2")])),
        (
            &info,
            redis::parse_redis_value(b"-ERR no such key\r\n").unwrap(),
        ),
    ] {
        assert_eq!(misfit(cmd, &v), None, "{cmd:?} {v:?}");
    }
    // Another command's reply does not.
    let groups = arr(vec![group(b("g"))]);
    assert_eq!(
        misfit(&info, &groups).as_deref(),
        Some("a reply to xinfo_stream that cannot answer it (array)")
    );
    assert!(misfit(&range, &Value::Int(3)).is_some());
    assert!(misfit(&Command::Time, &Value::SimpleString("PONG".into())).is_some());
    assert!(
        misfit(
            &Command::XpendingSummary {
                key: key(),
                group: b"g".to_vec()
            },
            &arr(vec![b("1-0")])
        )
        .is_some()
    );
}

#[test]
fn a_transaction_fits_its_commands() {
    let info = Command::XinfoStream { key: b"s".to_vec() };
    let groups = Command::XinfoGroups { key: b"s".to_vec() };
    let cmds = [Command::Multi, info.clone(), groups.clone(), Command::Exec];
    let queued = || Value::SimpleString("QUEUED".into());
    let exec = Value::Array(vec![Value::Array(vec![]), Value::Array(vec![])]);
    let fine = [Value::Okay, queued(), queued(), exec];
    assert_eq!(pipeline_misfit(&cmds, &fine), None);
    // EXEC with a reply too few, or a queued command answered at once.
    let short = [
        Value::Okay,
        queued(),
        queued(),
        Value::Array(vec![Value::Array(vec![])]),
    ];
    assert!(pipeline_misfit(&cmds, &short).is_some());
    let unqueued = [
        Value::Okay,
        Value::Array(vec![]),
        queued(),
        Value::Array(vec![]),
    ];
    assert!(pipeline_misfit(&cmds, &unqueued).is_some());
    // A refused MULTI: the commands ran as they came.
    let noperm = || redis::parse_redis_value(b"-NOPERM no\r\n").unwrap();
    let ran = [
        noperm(),
        Value::Array(vec![]),
        Value::Array(vec![]),
        noperm(),
    ];
    assert_eq!(pipeline_misfit(&cmds, &ran), None);
}

/// `XINFO STREAM s FULL COUNT 1` as Redis 8.8 writes it (RESP2; the field
/// order of its `t_stream.c`, with 8.8's `nacked-count` after `pel-count`
/// in each group, beside 8.6's idempotent-producer fields): two groups, one
/// with two entries released by `XNACK`. No 8.8 server can be built here
/// (Debian ships 8.0 and 8.6): this reply is what the decoder is held to.
pub(crate) const FULL_8_8: &[u8] = b"*30\r\n\
$6\r\nlength\r\n:3\r\n\
$15\r\nradix-tree-keys\r\n:1\r\n\
$16\r\nradix-tree-nodes\r\n:2\r\n\
$17\r\nlast-generated-id\r\n$15\r\n1796000000003-0\r\n\
$20\r\nmax-deleted-entry-id\r\n$3\r\n0-0\r\n\
$13\r\nentries-added\r\n:3\r\n\
$23\r\nrecorded-first-entry-id\r\n$15\r\n1796000000001-0\r\n\
$13\r\nidmp-duration\r\n:100\r\n\
$12\r\nidmp-maxsize\r\n:100\r\n\
$12\r\npids-tracked\r\n:0\r\n\
$12\r\niids-tracked\r\n:0\r\n\
$10\r\niids-added\r\n:0\r\n\
$15\r\niids-duplicates\r\n:0\r\n\
$7\r\nentries\r\n*1\r\n*2\r\n$15\r\n1796000000001-0\r\n*2\r\n$4\r\ntask\r\n$5\r\nhello\r\n\
$6\r\ngroups\r\n*2\r\n\
*16\r\n\
$4\r\nname\r\n$5\r\nother\r\n\
$17\r\nlast-delivered-id\r\n$15\r\n1796000000003-0\r\n\
$12\r\nentries-read\r\n:3\r\n\
$3\r\nlag\r\n:0\r\n\
$9\r\npel-count\r\n:0\r\n\
$12\r\nnacked-count\r\n:0\r\n\
$7\r\npending\r\n*0\r\n\
$9\r\nconsumers\r\n*0\r\n\
*16\r\n\
$4\r\nname\r\n$7\r\nworkers\r\n\
$17\r\nlast-delivered-id\r\n$15\r\n1796000000003-0\r\n\
$12\r\nentries-read\r\n:3\r\n\
$3\r\nlag\r\n:0\r\n\
$9\r\npel-count\r\n:3\r\n\
$12\r\nnacked-count\r\n:2\r\n\
$7\r\npending\r\n*1\r\n*4\r\n$15\r\n1796000000001-0\r\n$0\r\n\r\n:0\r\n:1\r\n\
$9\r\nconsumers\r\n*1\r\n*10\r\n\
$4\r\nname\r\n$2\r\nw1\r\n\
$9\r\nseen-time\r\n:1796000000500\r\n\
$11\r\nactive-time\r\n:1796000000400\r\n\
$9\r\npel-count\r\n:1\r\n\
$7\r\npending\r\n*1\r\n*3\r\n$15\r\n1796000000003-0\r\n:1796000000400\r\n:1\r\n";

/// The decoder reads each group's `nacked-count` from a Redis 8.8 reply,
/// and a reply without the field (Redis 8.6 and older, Valkey) says
/// nothing of it: unknown, not 0.
#[test]
fn nacked_counts_of_a_full_reply() {
    let v = redis::parse_redis_value(FULL_8_8).unwrap();
    let of = |name: &str, nacked| GroupNacks {
        name: name.as_bytes().to_vec(),
        nacked,
    };
    assert_eq!(
        nacked_counts(&v).unwrap(),
        [of("other", Some(0)), of("workers", Some(2))]
    );
    let without = std::str::from_utf8(FULL_8_8)
        .unwrap()
        .replace("*16\r\n", "*14\r\n")
        .replace("$12\r\nnacked-count\r\n:0\r\n", "")
        .replace("$12\r\nnacked-count\r\n:2\r\n", "");
    let v = redis::parse_redis_value(without.as_bytes()).unwrap();
    assert_eq!(
        nacked_counts(&v).unwrap(),
        [of("other", None), of("workers", None)]
    );
    assert!(nacked_counts(&redis::Value::Int(1)).is_err());
}
