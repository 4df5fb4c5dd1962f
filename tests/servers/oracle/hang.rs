//! Scratch: delta debugging of a hang (not committed).
use super::ops::{Op, RefMode, Step, Target};
#[allow(unused_imports)]
use super::ops::Op as _Op;
use crate::common::Server;

#[tokio::test]
async fn hang_replay() {
    let steps = vec![
Step::Op(Op::Add { s: 0, n: 23, explicit: false, cap: None }),
Step::Op(Op::Create { s: 0, g: 0, at: Target::End, entries_read: true }),
Step::Op(Op::Create { s: 0, g: 1, at: Target::Pick(6915105739825135632), entries_read: true }),
Step::Op(Op::Create { s: 0, g: 2, at: Target::Zero, entries_read: true }),
Step::Op(Op::Add { s: 1, n: 6, explicit: false, cap: None }),
Step::Op(Op::Create { s: 1, g: 0, at: Target::Zero, entries_read: true }),
Step::Op(Op::Create { s: 1, g: 2, at: Target::Pick(16327159615215798760), entries_read: true }),
Step::Poll,
Step::Op(Op::AckDel { s: 1, g: 1, n: 1, pick: 4259074016762302413, mode: RefMode::KeepRef }),
Step::Op(Op::Add { s: 1, n: 8, explicit: true, cap: None }),
Step::Poll,
Step::Op(Op::Read { s: 1, g: 2, c: 2, count: 27, noack: false }),
Step::Op(Op::Ack { s: 0, g: 0, n: 31, pick: 4033236803054591509 }),
Step::Op(Op::Del { s: 0, n: 2, pick: 6612991147085540163 }),
Step::Op(Op::Add { s: 0, n: 352, explicit: true, cap: None }),
Step::Op(Op::Ack { s: 1, g: 0, n: 14, pick: 17050764184072665361 }),
Step::Poll,
Step::Op(Op::Del { s: 1, n: 7, pick: 9284204556570367760 }),
Step::Op(Op::Read { s: 1, g: 0, c: 1, count: 30, noack: false }),
Step::Op(Op::Ack { s: 0, g: 0, n: 12, pick: 14741052016455743256 }),
Step::Op(Op::Read { s: 1, g: 0, c: 1, count: 13, noack: false }),
Step::Poll,
Step::Op(Op::SetId { s: 1, g: 1, to: Target::Future, entries_read: true }),
Step::Op(Op::Worker { s: 1, g: 0, c: 2, n: 21, ackdel: true }),
Step::Poll,
Step::Op(Op::Add { s: 1, n: 3, explicit: false, cap: None }),
Step::Op(Op::TrimMinId { s: 1, cut_pct: 26, approx: true, mode: RefMode::Plain }),
Step::Poll,
Step::Op(Op::TrimMaxLen { s: 1, keep_pct: 68, approx: true, mode: RefMode::DelRef }),
Step::Op(Op::Ack { s: 0, g: 2, n: 22, pick: 18341347498433292421 }),
Step::Op(Op::SetId { s: 1, g: 1, to: Target::Future, entries_read: true }),
Step::Poll,
Step::Op(Op::TrimMinId { s: 0, cut_pct: 24, approx: true, mode: RefMode::KeepRef }),
Step::Poll,
Step::Op(Op::Add { s: 1, n: 276, explicit: true, cap: None }),
Step::Op(Op::Read { s: 0, g: 0, c: 1, count: 9, noack: false }),
Step::Op(Op::Del { s: 1, n: 7, pick: 12652584255683654927 }),
Step::Op(Op::Add { s: 1, n: 14, explicit: false, cap: None }),
Step::Op(Op::Read { s: 0, g: 1, c: 0, count: 13, noack: false }),
Step::Op(Op::Read { s: 0, g: 0, c: 0, count: 12, noack: true }),
Step::Poll,
Step::Op(Op::Add { s: 0, n: 12, explicit: false, cap: None }),
Step::Op(Op::Read { s: 1, g: 1, c: 2, count: 17, noack: false }),
Step::Op(Op::Add { s: 0, n: 249, explicit: true, cap: None }),
Step::Op(Op::Read { s: 1, g: 2, c: 0, count: 16, noack: false }),
Step::Op(Op::DelEx { s: 1, n: 5, pick: 18087999077803973430, mode: RefMode::KeepRef }),
Step::Poll,
    ];
    let drop: Vec<usize> = std::env::var("RSE_HANG_DROP")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let steps: Vec<Step> = steps
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, s)| s)
        .collect();
    let kind = Server::Redis8;
    let mut d = super::ops::Driver::new(kind);
    let h = crate::common::Harness::new(super::exporter_config(d.port));
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Op(op) => d.apply(op),
            Step::Poll => {
                let _w = super::Watchdog::arm(|| super::hang_report(kind, &steps, i + 1, &d.transcript));
                d.transcript.push("-- poll".into());
                super::poll(&h, &mut d).await;
            }
        }
    }
    println!("DONE");
}

/// Scratch: one seed's steps less the indices in RSE_HANG_DROP, checked.
#[tokio::test]
async fn replay_seed() {
    let Ok(seed) = std::env::var("RSE_REPLAY_SEED") else {
        return;
    };
    let kind = match std::env::var("RSE_REPLAY_SERVER").unwrap().as_str() {
        "redis70" => Server::Redis70,
        "valkey9" => Server::Valkey9,
        "redis8" => Server::Redis8,
        _ => Server::Redis62,
    };
    let polls = std::env::var("RSE_ORACLE_POLLS").map_or(40, |p| p.parse().unwrap());
    let steps = super::ops::generate(seed.parse().unwrap(), kind, polls);
    let drop: Vec<usize> = std::env::var("RSE_HANG_DROP")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    if std::env::var("RSE_REPLAY_LIST").is_ok() {
        for (i, s) in steps.iter().enumerate() {
            println!("STEP {i} {s}");
        }
        return;
    }
    let steps: Vec<Step> = steps
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, s)| s)
        .collect();
    let r = super::run(kind, &steps).await;
    match r.failure {
        Some(f) => println!("RESULT {} poll {} | {}", f.check, f.poll, f.detail),
        None => println!("RESULT ok"),
    }
    println!("TRANSCRIPT\n{}", r.transcript.join("\n"));
}

/// Scratch: XSETID … ENTRIESADDED beside one kind of write each.
#[tokio::test]
async fn setid_shapes() {
    if std::env::var("RSE_SHAPES").is_err() {
        return;
    }
    use super::ops::Op::*;
    let setup = |extra: Vec<Op>| {
        let mut v = vec![
            Step::Op(Add { s: 0, n: 20, explicit: false, cap: None }),
            Step::Op(Create { s: 0, g: 0, at: Target::Zero, entries_read: true }),
            Step::Op(Create { s: 0, g: 1, at: Target::Zero, entries_read: true }),
            Step::Op(Read { s: 0, g: 0, c: 0, count: 5, noack: false }),
            Step::Poll,
        ];
        v.extend(extra.into_iter().map(Step::Op));
        v.push(Step::Poll);
        v
    };
    let only = std::env::var("RSE_SHAPES").unwrap();
    let head = vec![
        Step::Op(Add { s: 0, n: 100, explicit: false, cap: None }),
        Step::Op(Create { s: 0, g: 0, at: Target::Zero, entries_read: true }),
        Step::Op(Create { s: 0, g: 1, at: Target::Zero, entries_read: true }),
        Step::Poll,
        Step::Op(TrimMaxLen { s: 0, keep_pct: 85, approx: false, mode: RefMode::Plain }),
        Step::Op(Worker { s: 0, g: 0, c: 0, n: 30, ackdel: false }),
        Step::Poll,
    ];
    let shapes: Vec<(&str, Vec<Step>)> = vec![
        ("trim, then another group's worker deletes the head", head),
        ("adds only", setup(vec![Add { s: 0, n: 5, explicit: false, cap: None }, BumpAdded { s: 0, n: 1000 }])),
        ("trim", setup(vec![Add { s: 0, n: 5, explicit: false, cap: None }, TrimMaxLen { s: 0, keep_pct: 40, approx: false, mode: RefMode::Plain }, BumpAdded { s: 0, n: 1000 }])),
        ("xdel", setup(vec![Add { s: 0, n: 5, explicit: false, cap: None }, Del { s: 0, n: 3, pick: 7 }, BumpAdded { s: 0, n: 1000 }])),
        ("worker head xdel", setup(vec![Add { s: 0, n: 5, explicit: false, cap: None }, Worker { s: 0, g: 1, c: 1, n: 8, ackdel: false }, BumpAdded { s: 0, n: 1000 }])),
        ("edge producer", setup(vec![AddAtEdge { s: 0, n: 5 }, BumpAdded { s: 0, n: 1000 }])),
    ];
    for kind in [Server::Redis70, Server::Valkey9, Server::Redis8] {
        for (name, steps) in &shapes {
            if only != "all" && !name.contains(only.as_str()) {
                continue;
            }
            let r = super::run(kind, steps).await;
            println!(
                "SHAPE {kind:?} | {name} | {}",
                r.failure.as_ref().map_or("ok".to_string(), |f| format!("{} poll {}: {}", f.check, f.poll, f.detail))
            );
            println!("    {}", r.transcript.join("\n    "));
        }
    }
}
