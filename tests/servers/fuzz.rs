//! Property-based fuzzing (proptest) of everything that parses
//! outside input: the Redis reply decoders, the config loader, the glob
//! matcher, the exposition writer and the lag arithmetic. Each property runs
//! a few thousand generated cases in CI.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use redis::Value;
use redis_streams_exporter::backend::reply::{self, GroupInfo, StreamInfo};
use redis_streams_exporter::config::{self, StreamSettings};
use redis_streams_exporter::glob::Glob;
use redis_streams_exporter::lag::{self, UndeliveredSample};
use redis_streams_exporter::metrics::{BuildInfo, render};
use redis_streams_exporter::snapshot::{
    ExporterState, GroupState, Groups, StreamState, TargetSnapshot,
};
use redis_streams_exporter::vocab::StreamId;

const FIELDS: &[&str] = &[
    "length",
    "groups",
    "last-generated-id",
    "first-entry",
    "last-entry",
    "entries-added",
    "max-deleted-entry-id",
    "recorded-first-entry-id",
    "name",
    "consumers",
    "pending",
    "last-delivered-id",
    "entries-read",
    "lag",
    "idle",
    "inactive",
    "radix-tree-keys",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Nil),
        any::<i64>().prop_map(Value::Int),
        (-2i64..100).prop_map(Value::Int),
        prop::collection::vec(any::<u8>(), 0..12).prop_map(Value::BulkString),
        prop::sample::select(FIELDS).prop_map(|f| Value::BulkString(f.as_bytes().to_vec())),
        (any::<u64>(), any::<u64>())
            .prop_map(|(a, b)| Value::BulkString(format!("{a}-{b}").into_bytes())),
        (0u64..5, 0u64..5).prop_map(|(a, b)| Value::BulkString(format!("{a}-{b}").into_bytes())),
        "[0-9]{1,4}".prop_map(|s| Value::BulkString(s.into_bytes())),
        Just(Value::Okay),
        "[ -~]{0,10}".prop_map(Value::SimpleString),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 96, 10, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
            prop::collection::vec((inner.clone(), inner), 0..8).prop_map(Value::Map),
        ]
    })
}

/// A field list with known names and arbitrary values, which reaches the
/// decoders' inner branches far more often than fully random trees.
fn field_list() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(FIELDS), value()), 0..14).prop_map(|pairs| {
        Value::Array(
            pairs
                .into_iter()
                .flat_map(|(k, v)| [Value::BulkString(k.as_bytes().to_vec()), v])
                .collect(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn decoders_never_panic(v in prop_oneof![value(), field_list(), prop::collection::vec(field_list(), 0..4).prop_map(Value::Array)]) {
        let _ = reply::stream_info(&v);
        let _ = reply::groups(&v);
        let _ = reply::consumers(&v);
        let _ = reply::pending_summary(&v);
        let _ = reply::pending_entries(&v);
        let _ = reply::range_ids(&v);
        let _ = reply::time_ms(&v);
        let _ = reply::scan_page(&v);
        let _ = reply::info_fields(&v);
    }

    #[test]
    fn decoded_groups_keep_nil_as_unknown(lag in prop::option::of(0u64..1000), read in prop::option::of(0u64..1000)) {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let opt = |o: Option<u64>| o.map_or(Value::Nil, |n| Value::Int(n as i64));
        let v = Value::Array(vec![Value::Array(vec![
            b("name"), b("g"), b("consumers"), Value::Int(1), b("pending"), Value::Int(0),
            b("last-delivered-id"), b("1-0"), b("entries-read"), opt(read), b("lag"), opt(lag),
        ])]);
        let g = reply::groups(&v).unwrap();
        prop_assert_eq!(g[0].lag, lag);
        prop_assert_eq!(g[0].entries_read, read);
    }

    #[test]
    fn config_loader_never_panics(text in ".{0,300}") {
        let _ = config::from_str("fuzz.toml", &text, &Default::default());
    }

    #[test]
    fn config_loader_on_near_valid_toml(
        section in prop::sample::select(&["schedule", "limits", "metrics", "status", "web", "log", "stream_defaults"][..]),
        key in prop::sample::select(&["stream", "discovery", "commands_per_second", "pending_page", "window",
            "listen_address", "format", "max_delay", "pending_idle_buckets", "command_timeout", "bogus"][..]),
        value in prop_oneof![
            "-?[0-9]{1,12}".prop_map(|s| s),
            "\"[0-9a-z :.]{0,8}\"".prop_map(|s| s),
            Just("[]".to_string()), Just("[\"1s\", \"0s\"]".to_string()), Just("true".to_string()),
        ],
    ) {
        let text = format!("[{section}]\n{key} = {value}\n");
        match config::from_str("fuzz.toml", &text, &Default::default()) {
            Ok(c) => prop_assert!(!c.targets.is_empty()),
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("fuzz.toml: "), "{}", msg);
            }
        }
    }

    #[test]
    fn glob_matches_like_a_reference(pattern in "[ab*?]{0,6}", key in "[ab]{0,8}") {
        prop_assert_eq!(Glob::new(pattern.clone()).matches(key.as_bytes()), reference_match(pattern.as_bytes(), key.as_bytes()));
    }

    #[test]
    fn lag_is_bounded_by_the_stream(
        len in 0u64..500, first in 1u64..1000, span in 0u64..1000, ld_off in 0u64..2200,
        reported in prop::option::of(0u64..2000), read in prop::option::of(0u64..2000), sample_n in 0usize..120,
        prev_gone in prop::option::of(0u64..50), prev_unmoved in any::<bool>(),
    ) {
        let last = first + span;
        let stream = StreamInfo {
            length: len,
            groups: 1,
            last_generated_id: StreamId::new(last, 0),
            first_entry_id: (len > 0).then(|| StreamId::new(first, 0)),
            last_entry_id: (len > 0).then(|| StreamId::new(last, 0)),
            entries_added: Some(len + 10),
            max_deleted_entry_id: Some(StreamId::ZERO),
            ..StreamInfo::default()
        };
        let ld = StreamId::new(ld_off, 0);
        let group = GroupInfo { name: b"g".to_vec(), consumers: 1, pending: 0, last_delivered_id: ld, entries_read: read, lag: reported };
        let previous = prev_gone.map(|g| lag::Trail {
            last_delivered: if prev_unmoved { ld } else { StreamId::new(ld_off / 2, 0) },
            entries_read: if prev_unmoved { read } else { read.map(|r| r / 2) },
            unread_gone: Some(g),
            first_undelivered: Some(StreamId::new(ld_off + 1, 0)),
        });
        for arithmetic in [lag::Arithmetic::Current, lag::Arithmetic::Miscounting] {
            let reading = lag::Reading { stream: &stream, group: &group, arithmetic, previous: previous.as_ref(), advanced_over: None };
            let sample = reading.sample_request(100).map(|count| UndeliveredSample::head(
                (0..sample_n.min(count as usize)).map(|i| StreamId::new((ld_off + 1 + i as u64).min(last), 0)).collect(),
                count,
            ));
            let f = reading.compute(sample.as_ref(), &lag::Evidence::default());
            if let Some(l) = f.lag {
                prop_assert!(l <= len.max(100), "lag {} above length {}", l, len);
            }
            if ld >= StreamId::new(last, 0) || len == 0 {
                prop_assert_eq!(f.lag, Some(0));
            }
            if let (Some(first), true) = (f.first_undelivered, f.lag.is_some_and(|l| l > 0)) {
                prop_assert!(first > ld || first == stream.first_entry_id.unwrap_or_default(), "first undelivered {:?} at or before {:?}", first, ld);
            }
            if let Some(gone) = f.unread_gone {
                prop_assert!(gone <= len + 10, "gone {} above entries-added", gone);
            }
        }
    }

    #[test]
    fn exposition_stays_valid_for_any_names(names in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 1..6)) {
        let text = render_names(&names);
        for line in text.lines() {
            prop_assert!(line.starts_with("# HELP ") || line.starts_with("# TYPE ") || valid_sample_line(line), "bad line: {:?}", line);
        }
    }
}

/// A straightforward recursive matcher for `*`, `?` and literals.
fn reference_match(p: &[u8], k: &[u8]) -> bool {
    match (p.first(), k.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            reference_match(&p[1..], k) || (!k.is_empty() && reference_match(p, &k[1..]))
        }
        (Some(b'?'), Some(_)) => reference_match(&p[1..], &k[1..]),
        (Some(a), Some(b)) if a == b => reference_match(&p[1..], &k[1..]),
        _ => false,
    }
}

fn render_names(names: &[Vec<u8>]) -> String {
    let mut streams = BTreeMap::new();
    for n in names {
        let group = GroupState {
            consumers: 1,
            pending: 2,
            last_delivered_id: StreamId::new(5, 0),
            entries_read: None,
            lag: Some(3),
            lag_estimated: true,
            trimmed_undelivered: Some(0),
            ..GroupState::default()
        };
        let stream = StreamState {
            info: StreamInfo {
                length: 1,
                ..StreamInfo::default()
            },
            time_based_ids: true,
            settings: Arc::new(StreamSettings::default()),
            dead_letter: None,
            groups: Groups::new(vec![(Arc::from(n.as_slice()), group)]),
            ..StreamState::default()
        };
        streams.insert(Arc::from(n.as_slice()), Arc::new(stream));
    }
    let target = TargetSnapshot {
        name: "t".into(),
        up: true,
        ready: true,
        streams: Arc::new(streams),
        ..TargetSnapshot::default()
    };
    let mut out = Vec::new();
    render(
        &[Arc::new(target)],
        &ExporterState::default(),
        BuildInfo::CURRENT,
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).expect("the exposition is always UTF-8")
}

/// `name{k="v",...} value` with only valid escapes inside label values.
fn valid_sample_line(line: &str) -> bool {
    let Some((series, value)) = line.rsplit_once(' ') else {
        return false;
    };
    if value.parse::<f64>().is_err() && !["+Inf", "-Inf", "NaN"].contains(&value) {
        return false;
    }
    let Some(open) = series.find('{') else {
        return series
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    };
    let mut chars = series[open + 1..].chars().peekable();
    loop {
        let mut name = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            name.push(c);
        }
        if name.is_empty() || chars.next() != Some('"') {
            return false;
        }
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('\\' | '"' | 'n') => {}
                    _ => return false,
                },
                Some('"') => break,
                Some('\n') | None => return false,
                Some(_) => {}
            }
        }
        match chars.next() {
            Some(',') => continue,
            Some('}') => return chars.next().is_none(),
            _ => return false,
        }
    }
}

/// One promtool run over an exposition full of hostile names.
#[test]
fn promtool_accepts_hostile_names() {
    let names: Vec<Vec<u8>> = vec![
        b"\"".to_vec(),
        b"\\".to_vec(),
        b"\n".to_vec(),
        b"\xff".to_vec(),
        b"\\xff".to_vec(),
        b"a\"b\\c\nd".to_vec(),
        b"\xc3\x28".to_vec(),
        "ünïcødé".as_bytes().to_vec(),
        vec![b'x'; 10_000],
    ];
    let text = render_names(&names);
    common::promtool_check(&text);
}
