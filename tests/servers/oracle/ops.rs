//! The oracle's operations: how a seed turns into a list of steps, and how
//! each step is applied to the real server and to the model at once.
//!
//! Operations hold no IDs of their own where the IDs depend on what came
//! before: they say which entries to pick (a seed, a share of the stream)
//! and the pick happens when the operation is applied. A shrunk replay that
//! drops operations therefore still applies valid commands.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use super::model::{Cause, Id, Model, StreamModel};
use super::rng::Rng;
use crate::common::{RedisServer, Server};

pub const STREAMS: [&str; 2] = ["o0", "o1"];
pub const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
pub const CONSUMERS: [&str; 3] = ["c0", "c1", "c2"];

/// What a trim or a delete does to the PEL references (Redis 8.2+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefMode {
    Plain,
    KeepRef,
    DelRef,
    Acked,
}

impl RefMode {
    fn arg(self) -> Option<&'static str> {
        match self {
            RefMode::Plain => None,
            RefMode::KeepRef => Some("KEEPREF"),
            RefMode::DelRef => Some("DELREF"),
            RefMode::Acked => Some("ACKED"),
        }
    }
}

/// Where XGROUP CREATE/SETID puts a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Zero,
    End,
    /// A present entry, picked by this seed.
    Pick(u64),
    /// Beyond the last generated ID.
    Future,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGSTOP shorter than the exporter's command timeout, during a poll.
    StopShort,
    /// SIGSTOP longer than the command timeout, during a poll.
    StopLong,
    /// DEBUG RELOAD: the same process and run_id, data through an RDB.
    Reload,
    /// SAVE, kill, start again on the same port from the RDB: a new run_id.
    Restart,
    /// Kill, and a new empty server on the same port.
    Fresh,
    /// The exporter stops (writing its state file, as at shutdown) and
    /// starts again from that file before the next poll.
    Exporter,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `n` entries (one XADD, or a pipelined burst); explicit IDs `ms-seq`
    /// all in one millisecond, or auto IDs; optionally capped by MAXLEN.
    Add {
        s: usize,
        n: u64,
        explicit: bool,
        cap: Option<(u64, bool)>,
    },
    Read {
        s: usize,
        g: usize,
        c: usize,
        count: u64,
        noack: bool,
    },
    Ack {
        s: usize,
        g: usize,
        n: u64,
        pick: u64,
    },
    Claim {
        s: usize,
        g: usize,
        c: usize,
        n: u64,
    },
    AutoClaim {
        s: usize,
        g: usize,
        c: usize,
        n: u64,
    },
    Del {
        s: usize,
        n: u64,
        pick: u64,
    },
    TrimMaxLen {
        s: usize,
        keep_pct: u64,
        approx: bool,
        mode: RefMode,
    },
    TrimMinId {
        s: usize,
        cut_pct: u64,
        approx: bool,
        mode: RefMode,
    },
    DelEx {
        s: usize,
        n: u64,
        pick: u64,
        mode: RefMode,
    },
    AckDel {
        s: usize,
        g: usize,
        n: u64,
        pick: u64,
        mode: RefMode,
    },
    SetId {
        s: usize,
        g: usize,
        to: Target,
        entries_read: bool,
    },
    Create {
        s: usize,
        g: usize,
        at: Target,
        entries_read: bool,
    },
    Destroy {
        s: usize,
        g: usize,
    },
    DelConsumer {
        s: usize,
        g: usize,
        c: usize,
    },
    DelStream {
        s: usize,
    },
    /// A retention job: `XTRIM MINID` to the slowest group's position,
    /// which removes only what every group has read.
    Retain {
        s: usize,
        mode: RefMode,
    },
    /// A worker: reads up to `n` for consumer `c`, then acknowledges and
    /// deletes what it read (`XACK` + `XDEL`, or `XACKDEL` on 8.2+).
    Worker {
        s: usize,
        g: usize,
        c: usize,
        n: u64,
        ackdel: bool,
    },
    /// A producer at the edge: `n` entries, each with `MAXLEN` the stream's
    /// length before them, so each add trims the oldest entry.
    AddAtEdge {
        s: usize,
        n: u64,
    },
    /// `XSETID key <last ID> ENTRIESADDED <entries-added + n>`.
    BumpAdded {
        s: usize,
        n: u64,
    },
    Fault(Fault),
}

impl Op {
    /// The stream the operation writes to or reads from; none for a fault.
    pub fn stream(&self) -> Option<usize> {
        match self {
            Op::Add { s, .. }
            | Op::Read { s, .. }
            | Op::Ack { s, .. }
            | Op::Claim { s, .. }
            | Op::AutoClaim { s, .. }
            | Op::Del { s, .. }
            | Op::TrimMaxLen { s, .. }
            | Op::TrimMinId { s, .. }
            | Op::DelEx { s, .. }
            | Op::AckDel { s, .. }
            | Op::SetId { s, .. }
            | Op::Create { s, .. }
            | Op::Destroy { s, .. }
            | Op::DelConsumer { s, .. }
            | Op::DelStream { s }
            | Op::Retain { s, .. }
            | Op::Worker { s, .. }
            | Op::AddAtEdge { s, .. }
            | Op::BumpAdded { s, .. } => Some(*s),
            Op::Fault(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Op(Op),
    Poll,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Poll => write!(f, "POLL"),
            Step::Op(op) => write!(f, "{op:?}"),
        }
    }
}

/// The steps of one seed: streams and groups set up, then `polls` batches
/// of random operations each followed by a poll.
pub fn generate(seed: u64, kind: Server, polls: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut steps = Vec::new();
    for s in 0..STREAMS.len() {
        steps.push(Step::Op(Op::Add {
            s,
            n: rng.range(1, 50),
            explicit: false,
            cap: None,
        }));
        for g in 0..GROUPS.len() {
            if g == 0 || rng.chance(60) {
                steps.push(Step::Op(Op::Create {
                    s,
                    g,
                    at: [Target::Zero, Target::End, Target::Pick(rng.next_u64())]
                        [rng.below(3) as usize],
                    entries_read: rng.chance(70),
                }));
            }
        }
    }
    steps.push(Step::Poll);
    for _ in 0..polls {
        for i in 0..rng.range(1, 6) {
            let op = random_op(&mut rng, kind);
            match op {
                // XSETID … ENTRIESADDED: now and then alone in its interval
                // (a new baseline), mostly among ordinary writes to its
                // stream (adds, deletions, trims, a read) in the same
                // interval, where it must never count as lost.
                Op::BumpAdded { s, .. } => {
                    if i == 0 && rng.chance(25) {
                        steps.push(Step::Op(op));
                        break;
                    }
                    steps.extend(
                        beside_setid(&mut rng, kind, s, op)
                            .into_iter()
                            .map(Step::Op),
                    );
                }
                // A stop acts at the next poll, and a new empty server ends
                // what went before: both end the interval. A reload and a
                // restart on the same data fall among the operations, so
                // losses on either side of them share one interval.
                Op::Fault(Fault::StopShort | Fault::StopLong | Fault::Fresh) => {
                    steps.push(Step::Op(op));
                    break;
                }
                _ => steps.push(Step::Op(op)),
            }
        }
        steps.push(Step::Poll);
    }
    steps
}

/// `bump` (an `XSETID … ENTRIESADDED` on stream `s`) among ordinary writes
/// to the same stream, in a random order: an add, a removal (a trim, a
/// deletion, a worker's cleanup, a producer at the edge, a capped add),
/// and sometimes a read.
fn beside_setid(rng: &mut Rng, kind: Server, s: usize, bump: Op) -> Vec<Op> {
    let caps = kind.capabilities();
    let g = rng.below(GROUPS.len() as u64) as usize;
    let c = rng.below(CONSUMERS.len() as u64) as usize;
    let removal = match rng.below(6) {
        0 => Op::TrimMaxLen {
            s,
            keep_pct: rng.range(10, 90),
            approx: false,
            mode: RefMode::Plain,
        },
        1 => Op::TrimMinId {
            s,
            cut_pct: rng.range(5, 90),
            approx: false,
            mode: RefMode::Plain,
        },
        2 => Op::Del {
            s,
            n: rng.range(1, 8),
            pick: rng.next_u64(),
        },
        3 => Op::Worker {
            s,
            g,
            c,
            n: rng.range(1, 30),
            ackdel: caps.xackdel && rng.chance(50),
        },
        4 => Op::AddAtEdge {
            s,
            n: rng.range(1, 40),
        },
        _ => Op::Add {
            s,
            n: rng.range(1, 20),
            explicit: false,
            cap: Some((rng.range(20, 95), false)),
        },
    };
    let mut ops = vec![
        Op::Add {
            s,
            n: rng.range(1, 20),
            explicit: false,
            cap: None,
        },
        removal,
    ];
    if rng.chance(50) {
        ops.push(Op::Read {
            s,
            g: rng.below(GROUPS.len() as u64) as usize,
            c,
            count: rng.range(1, 30),
            noack: false,
        });
    }
    let at = rng.below(ops.len() as u64 + 1) as usize;
    ops.insert(at, bump);
    ops
}

/// The steps of a live workload: as [`generate`], with only what producers,
/// consumers and cleanup jobs do (no repositioning, no faults, no
/// `XSETID`), for the oracle's concurrent mode.
pub fn generate_live(seed: u64, kind: Server, polls: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut steps = Vec::new();
    for s in 0..STREAMS.len() {
        steps.push(Step::Op(Op::Add {
            s,
            n: rng.range(1, 50),
            explicit: false,
            cap: None,
        }));
        for g in 0..GROUPS.len() {
            steps.push(Step::Op(Op::Create {
                s,
                g,
                at: [Target::Zero, Target::End][rng.below(2) as usize],
                entries_read: rng.chance(70),
            }));
        }
    }
    steps.push(Step::Poll);
    for _ in 0..polls {
        let mut n = rng.range(1, 8);
        while n > 0 {
            let op = random_op(&mut rng, kind);
            let live = !matches!(
                op,
                Op::Fault(_)
                    | Op::SetId { .. }
                    | Op::Create { .. }
                    | Op::Destroy { .. }
                    | Op::DelConsumer { .. }
                    | Op::DelStream { .. }
                    | Op::BumpAdded { .. }
            );
            if live {
                steps.push(Step::Op(op));
                n -= 1;
            }
        }
        steps.push(Step::Poll);
    }
    steps
}

/// How a removal treats the PEL references to what it removes: plain where
/// the command has no such option on this server.
fn mode(rng: &mut Rng, has_refs: bool) -> RefMode {
    if !has_refs {
        return RefMode::Plain;
    }
    [
        RefMode::Plain,
        RefMode::KeepRef,
        RefMode::DelRef,
        RefMode::Acked,
    ][rng.below(4) as usize]
}

fn random_op(rng: &mut Rng, kind: Server) -> Op {
    let s = rng.below(STREAMS.len() as u64) as usize;
    let g = rng.below(GROUPS.len() as u64) as usize;
    let c = rng.below(CONSUMERS.len() as u64) as usize;
    // XDELEX and XACKDEL wherever the server has them.
    let caps = kind.capabilities();
    let xdelex = if caps.xdelex { 6 } else { 0 };
    let xackdel = if caps.xackdel { 6 } else { 0 };
    let counters = if kind.has_lag() { 2 } else { 0 };
    //            add rd ack clm acl del mxl mid dex adl set cre des dlc del ret wrk edg xid flt
    let weights = [
        24, 22, 9, 3, 3, 7, 6, 4, xdelex, xackdel, 3, 3, 1, 2, 1, 5, 6, 4, counters, 5,
    ];
    match rng.weighted(&weights) {
        0 => {
            let burst = rng.chance(25);
            Op::Add {
                s,
                n: if burst {
                    rng.range(100, 400)
                } else {
                    rng.range(1, 20)
                },
                explicit: burst || rng.chance(20),
                cap: rng.chance(10).then(|| (rng.range(20, 95), rng.chance(50))),
            }
        }
        1 => Op::Read {
            s,
            g,
            c,
            count: if rng.chance(20) {
                rng.range(100, 500)
            } else {
                rng.range(1, 30)
            },
            noack: rng.chance(20),
        },
        2 => Op::Ack {
            s,
            g,
            n: rng.range(1, 40),
            pick: rng.next_u64(),
        },
        3 => Op::Claim {
            s,
            g,
            c,
            n: rng.range(1, 10),
        },
        4 => Op::AutoClaim {
            s,
            g,
            c,
            n: rng.range(1, 10),
        },
        5 => Op::Del {
            s,
            n: rng.range(1, 8),
            pick: rng.next_u64(),
        },
        6 => Op::TrimMaxLen {
            s,
            keep_pct: if rng.chance(10) { 0 } else { rng.range(10, 90) },
            approx: rng.chance(40),
            mode: mode(rng, caps.trim_refs),
        },
        7 => Op::TrimMinId {
            s,
            cut_pct: rng.range(5, 100),
            approx: rng.chance(40),
            mode: mode(rng, caps.trim_refs),
        },
        8 => Op::DelEx {
            s,
            n: rng.range(1, 8),
            pick: rng.next_u64(),
            mode: mode(rng, true),
        },
        9 => Op::AckDel {
            s,
            g,
            n: rng.range(1, 8),
            pick: rng.next_u64(),
            mode: mode(rng, true),
        },
        10 => Op::SetId {
            s,
            g,
            to: [
                Target::Zero,
                Target::End,
                Target::Pick(rng.next_u64()),
                Target::Pick(rng.next_u64()),
                Target::Future,
            ][rng.below(5) as usize],
            entries_read: rng.chance(60),
        },
        11 => Op::Create {
            s,
            g,
            at: [Target::Zero, Target::End, Target::Pick(rng.next_u64())][rng.below(3) as usize],
            entries_read: rng.chance(60),
        },
        12 => Op::Destroy { s, g },
        13 => Op::DelConsumer { s, g, c },
        14 => Op::DelStream { s },
        15 => Op::Retain {
            s,
            mode: mode(rng, caps.trim_refs),
        },
        16 => Op::Worker {
            s,
            g,
            c,
            n: rng.range(1, 30),
            ackdel: caps.xackdel && rng.chance(50),
        },
        17 => Op::AddAtEdge {
            s,
            n: rng.range(1, 40),
        },
        18 => Op::BumpAdded {
            s,
            n: rng.range(1, 1000),
        },
        // Restarts on the same data (the server's and the exporter's) a
        // little more often than the rest: losses across them are checked
        // in full.
        _ => Op::Fault(
            [
                Fault::StopShort,
                Fault::StopLong,
                Fault::Reload,
                Fault::Restart,
                Fault::Fresh,
                Fault::Exporter,
            ][rng.weighted(&[2, 2, 3, 3, 2, 3])],
        ),
    }
}

/// What happened between two polls that the checker must know of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The group's position was set from outside (create or SETID).
    Positioned { s: usize, g: usize },
    /// Entries left the stream.
    Removed { s: usize, n: u64 },
    /// The stream's entries-added was raised by `n` from outside
    /// (`XSETID … ENTRIESADDED`): `n` entries counted that never existed.
    StreamSet { s: usize, n: u64 },
    /// Another server with other data behind the port (killed, a new
    /// empty one started): a new run_id and a new baseline.
    NewServer,
    /// The same data in a new process (`SAVE`, killed, started again from
    /// its RDB): a new run_id, and the figures continue the last poll's.
    Restarted,
    /// `DEBUG RELOAD`: the same process and data, through an RDB.
    Reloaded,
    /// The exporter restarted from its state file.
    ExporterRestarted,
}

/// The server, a connection to it and the model, kept in step.
pub struct Driver {
    pub kind: Server,
    pub server: RedisServer,
    pub port: u16,
    data: tempfile::TempDir,
    conn: redis::Connection,
    pub model: Model,
    /// Every command sent, for the replay printed on failure.
    pub transcript: Vec<String>,
    pub events: Vec<Event>,
    /// A SIGSTOP to send when the next poll starts, and for how long.
    pub stop_during_poll: Option<Duration>,
    /// Restart the exporter from its state file before the next poll.
    pub restart_exporter: bool,
    /// Operations applied, by name.
    pub applied: BTreeMap<&'static str, u64>,
}

/// The exporter's command timeout in the oracle's config.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);

fn server_args(kind: Server, dir: &std::path::Path) -> Vec<String> {
    let mut args = vec!["--dir".to_string(), dir.display().to_string()];
    if kind != Server::Redis62 {
        args.extend(["--enable-debug-command".to_string(), "yes".to_string()]);
    }
    args
}

fn start(kind: Server, port: u16, dir: &std::path::Path) -> RedisServer {
    let args = server_args(kind, dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    RedisServer::start_fixed(kind, port, &args)
}

fn id_of(v: &redis::Value) -> Option<Id> {
    match v {
        redis::Value::BulkString(b) => Some(Id::parse(&String::from_utf8_lossy(b))),
        redis::Value::SimpleString(s) => Some(Id::parse(s)),
        _ => None,
    }
}

fn int_of(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(i) => Some(*i),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).parse().ok(),
        _ => None,
    }
}

fn text_of(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// A flat field/value reply as a map.
pub fn fields(v: &redis::Value) -> BTreeMap<String, redis::Value> {
    let mut out = BTreeMap::new();
    match v {
        redis::Value::Array(items) => {
            for pair in items.chunks(2) {
                if let [k, v] = pair {
                    if let Some(k) = text_of(k) {
                        out.insert(k, v.clone());
                    }
                }
            }
        }
        redis::Value::Map(items) => {
            for (k, v) in items {
                if let Some(k) = text_of(k) {
                    out.insert(k, v.clone());
                }
            }
        }
        _ => {}
    }
    out
}

/// What the server says of a group, read by the oracle itself.
#[derive(Clone, Debug)]
pub struct RawGroup {
    pub ld: Id,
    pub pending: u64,
    pub consumers: u64,
    pub entries_read: Option<u64>,
    pub lag: Option<u64>,
}

impl Driver {
    pub fn new(kind: Server) -> Driver {
        let data = tempfile::tempdir().unwrap();
        let port = crate::common::free_port();
        let server = start(kind, port, data.path());
        let conn = server.conn();
        Driver {
            kind,
            server,
            port,
            data,
            conn,
            model: Model::default(),
            transcript: Vec::new(),
            events: Vec::new(),
            stop_during_poll: None,
            restart_exporter: false,
            applied: BTreeMap::new(),
        }
    }

    pub fn pid(&mut self) -> u32 {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.conn)
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    pub fn run_id(&mut self) -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.conn)
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Sends one command; logs it and its error, if any.
    fn send(&mut self, args: &[String]) -> Option<redis::Value> {
        let mut cmd = redis::cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
        let line = args.join(" ");
        match cmd.query::<redis::Value>(&mut self.conn) {
            Ok(v) => {
                self.transcript.push(line);
                Some(v)
            }
            Err(e) => {
                self.transcript.push(format!("{line}   -> error: {e}"));
                None
            }
        }
    }

    /// The IDs present in the stream, from the server.
    pub fn server_ids(&mut self, key: &str) -> BTreeSet<Id> {
        let v: redis::Value = redis::cmd("XRANGE")
            .arg(key)
            .arg("-")
            .arg("+")
            .query(&mut self.conn)
            .unwrap();
        let mut out = BTreeSet::new();
        if let redis::Value::Array(entries) = v {
            for e in entries {
                if let redis::Value::Array(parts) = e {
                    out.insert(id_of(&parts[0]).unwrap());
                }
            }
        }
        out
    }

    pub fn exists(&mut self, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query::<i64>(&mut self.conn)
            .unwrap()
            == 1
    }

    /// XINFO STREAM: length, last-generated-id, entries-added (7.0+).
    pub fn raw_stream(&mut self, key: &str) -> (u64, Id, Option<u64>) {
        let v: redis::Value = redis::cmd("XINFO")
            .arg("STREAM")
            .arg(key)
            .query(&mut self.conn)
            .unwrap();
        let f = fields(&v);
        (
            int_of(&f["length"]).unwrap() as u64,
            id_of(&f["last-generated-id"]).unwrap(),
            f.get("entries-added").and_then(int_of).map(|n| n as u64),
        )
    }

    pub fn raw_groups(&mut self, key: &str) -> BTreeMap<String, RawGroup> {
        let v: redis::Value = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(key)
            .query(&mut self.conn)
            .unwrap();
        let mut out = BTreeMap::new();
        if let redis::Value::Array(groups) = v {
            for g in &groups {
                let f = fields(g);
                out.insert(
                    text_of(&f["name"]).unwrap(),
                    RawGroup {
                        ld: id_of(&f["last-delivered-id"]).unwrap(),
                        pending: int_of(&f["pending"]).unwrap() as u64,
                        consumers: int_of(&f["consumers"]).unwrap() as u64,
                        entries_read: f.get("entries-read").and_then(int_of).map(|n| n as u64),
                        lag: f.get("lag").and_then(int_of).map(|n| n as u64),
                    },
                );
            }
        }
        out
    }

    /// The group's PEL rows from the server: id -> (consumer, deliveries).
    fn server_pel(&mut self, key: &str, group: &str) -> BTreeMap<Id, (String, u64)> {
        let v: redis::Value = redis::cmd("XPENDING")
            .arg(key)
            .arg(group)
            .arg("-")
            .arg("+")
            .arg(1_000_000)
            .query(&mut self.conn)
            .unwrap();
        let mut out = BTreeMap::new();
        if let redis::Value::Array(rows) = v {
            for r in rows {
                if let redis::Value::Array(p) = r {
                    out.insert(
                        id_of(&p[0]).unwrap(),
                        (text_of(&p[1]).unwrap(), int_of(&p[3]).unwrap() as u64),
                    );
                }
            }
        }
        out
    }

    fn server_consumers(&mut self, key: &str, group: &str) -> BTreeSet<String> {
        let v: redis::Value = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(key)
            .arg(group)
            .query(&mut self.conn)
            .unwrap();
        let mut out = BTreeSet::new();
        if let redis::Value::Array(cs) = v {
            for c in &cs {
                out.insert(text_of(&fields(c)["name"]).unwrap());
            }
        }
        out
    }

    /// Takes the PELs and consumer lists of a stream's groups from the
    /// server, after a command whose effect on them differs by version
    /// (XCLAIM, XAUTOCLAIM, DELREF, ACKED) or is not in its reply.
    fn sync_groups(&mut self, s: usize) {
        let key = STREAMS[s];
        let Some(names) = self
            .model
            .streams
            .get(key)
            .map(|st| st.groups.keys().cloned().collect::<Vec<_>>())
        else {
            return;
        };
        for name in names {
            let pel = self.server_pel(key, &name);
            let consumers = self.server_consumers(key, &name);
            let g = self
                .model
                .streams
                .get_mut(key)
                .unwrap()
                .groups
                .get_mut(&name)
                .unwrap();
            g.pel = pel;
            g.consumers = consumers;
        }
    }

    /// Entries the last command removed, read back from the server (the
    /// exact effect of `~`, ACKED and the 8.6 commands is the server's).
    fn sync_removals(&mut self, s: usize, cause: Cause) {
        let key = STREAMS[s];
        if !self.model.streams.contains_key(key) {
            return;
        }
        let now = self.server_ids(key);
        let st = self.model.streams.get_mut(key).unwrap();
        let gone: Vec<Id> = st.present.difference(&now).copied().collect();
        let (first, deleted) = (st.present.first().copied(), st.max_deleted());
        let seen = cause == Cause::Trimmed
            || gone.iter().max().copied() > deleted
            || first.is_some_and(|f| gone.contains(&f));
        if !seen {
            st.unseen.extend(gone.iter().copied());
        }
        for id in &gone {
            st.remove(*id, cause);
        }
        assert!(
            now.is_subset(&st.present),
            "model: the server has entries the model never added in {key}"
        );
        if !gone.is_empty() {
            self.events.push(Event::Removed {
                s,
                n: gone.len() as u64,
            });
        }
    }

    fn stream(&self, s: usize) -> Option<&StreamModel> {
        self.model.streams.get(STREAMS[s])
    }

    /// Picks up to `n` distinct present IDs with `pick`, half of them from
    /// above the lowest group position (entries some group has not read).
    fn pick_ids(&self, s: usize, n: u64, pick: u64) -> Vec<Id> {
        let Some(st) = self.stream(s) else {
            return Vec::new();
        };
        let all: Vec<Id> = st.present.iter().copied().collect();
        if all.is_empty() {
            return Vec::new();
        }
        let low = st.groups.values().map(|g| g.ld).min().unwrap_or(Id::ZERO);
        let unread: Vec<Id> = st.present.range(low..).copied().collect();
        let mut rng = Rng::new(pick);
        let mut out = BTreeSet::new();
        for i in 0..n {
            let from = if i % 2 == 0 && !unread.is_empty() {
                &unread
            } else {
                &all
            };
            out.insert(from[rng.below(from.len() as u64) as usize]);
        }
        out.into_iter().collect()
    }

    fn target_id(&self, s: usize, t: Target) -> (String, Id) {
        let st = self.stream(s);
        let last = st.map_or(Id::ZERO, |st| st.last_gen);
        match t {
            Target::Zero => ("0".to_string(), Id::ZERO),
            Target::End => ("$".to_string(), last),
            Target::Future => {
                let id = Id(last.0 + 100_000, 0);
                (id.to_string(), id)
            }
            Target::Pick(p) => {
                let ids: Vec<Id> = st.map_or(Vec::new(), |st| st.present.iter().copied().collect());
                if ids.is_empty() {
                    return ("0".to_string(), Id::ZERO);
                }
                let id = ids[Rng::new(p).below(ids.len() as u64) as usize];
                (id.to_string(), id)
            }
        }
    }

    /// Applies one operation to the server and the model.
    pub fn apply(&mut self, op: &Op) {
        let name = match op {
            Op::Add { .. } => "XADD",
            Op::Read { .. } => "XREADGROUP",
            Op::Ack { .. } => "XACK",
            Op::Claim { .. } => "XCLAIM",
            Op::AutoClaim { .. } => "XAUTOCLAIM",
            Op::Del { .. } => "XDEL",
            Op::TrimMaxLen { .. } => "XTRIM MAXLEN",
            Op::TrimMinId { .. } => "XTRIM MINID",
            Op::DelEx { .. } => "XDELEX",
            Op::AckDel { .. } => "XACKDEL",
            Op::SetId { .. } => "XGROUP SETID",
            Op::Create { .. } => "XGROUP CREATE",
            Op::Destroy { .. } => "XGROUP DESTROY",
            Op::DelConsumer { .. } => "XGROUP DELCONSUMER",
            Op::DelStream { .. } => "DEL",
            Op::Retain { .. } => "XTRIM MINID slowest group",
            Op::Worker { .. } => "worker read+delete",
            Op::AddAtEdge { .. } => "XADD MAXLEN at the edge",
            Op::BumpAdded { .. } => "XSETID ENTRIESADDED",
            Op::Fault(Fault::StopShort) => "SIGSTOP short",
            Op::Fault(Fault::StopLong) => "SIGSTOP long",
            Op::Fault(Fault::Reload) => "DEBUG RELOAD",
            Op::Fault(Fault::Restart) => "restart from RDB",
            Op::Fault(Fault::Fresh) => "new empty server",
            Op::Fault(Fault::Exporter) => "exporter restarted with its state file",
        };
        *self.applied.entry(name).or_default() += 1;
        let s_of = |s: &usize| STREAMS[*s].to_string();
        match op {
            Op::Add {
                s,
                n,
                explicit,
                cap,
            } => self.add(*s, *n, *explicit, *cap),
            Op::Read {
                s,
                g,
                c,
                count,
                noack,
            } => self.read(*s, *g, *c, *count, *noack),
            Op::Ack { s, g, n, pick } => {
                let Some(gm) = self.stream(*s).and_then(|st| st.groups.get(GROUPS[*g])) else {
                    return;
                };
                let pel: Vec<Id> = gm.pel.keys().copied().collect();
                if pel.is_empty() {
                    return;
                }
                let mut rng = Rng::new(*pick);
                let ids: BTreeSet<Id> = (0..*n)
                    .map(|_| pel[rng.below(pel.len() as u64) as usize])
                    .collect();
                let mut args = vec!["XACK".to_string(), s_of(s), GROUPS[*g].to_string()];
                args.extend(ids.iter().map(Id::to_string));
                if let Some(v) = self.send(&args) {
                    let gm = self
                        .model
                        .streams
                        .get_mut(STREAMS[*s])
                        .unwrap()
                        .groups
                        .get_mut(GROUPS[*g])
                        .unwrap();
                    for id in &ids {
                        gm.pel.remove(id);
                    }
                    assert_eq!(int_of(&v), Some(ids.len() as i64), "model: XACK count");
                }
            }
            Op::Claim { s, g, c, n } => {
                let Some(gm) = self.stream(*s).and_then(|st| st.groups.get(GROUPS[*g])) else {
                    return;
                };
                let ids: Vec<String> = gm.pel.keys().take(*n as usize).map(Id::to_string).collect();
                if ids.is_empty() {
                    return;
                }
                let mut args = vec![
                    "XCLAIM".to_string(),
                    s_of(s),
                    GROUPS[*g].to_string(),
                    CONSUMERS[*c].to_string(),
                    "0".to_string(),
                ];
                args.extend(ids);
                if self.send(&args).is_some() {
                    self.sync_groups(*s);
                }
            }
            Op::AutoClaim { s, g, c, n } => {
                let args = [
                    "XAUTOCLAIM",
                    STREAMS[*s],
                    GROUPS[*g],
                    CONSUMERS[*c],
                    "0",
                    "0-0",
                    "COUNT",
                    &n.to_string(),
                ]
                .map(String::from);
                if self.send(&args).is_some() {
                    self.sync_groups(*s);
                }
            }
            Op::Del { s, n, pick } => {
                let ids = self.pick_ids(*s, *n, *pick);
                if ids.is_empty() {
                    return;
                }
                let mut args = vec!["XDEL".to_string(), s_of(s)];
                args.extend(ids.iter().map(Id::to_string));
                if self.send(&args).is_some() {
                    self.sync_removals(*s, Cause::Deleted);
                }
            }
            Op::TrimMaxLen {
                s,
                keep_pct,
                approx,
                mode,
            } => {
                let Some(st) = self.stream(*s) else {
                    return;
                };
                let keep = st.present.len() as u64 * keep_pct / 100;
                let mut args = vec!["XTRIM".to_string(), s_of(s), "MAXLEN".to_string()];
                if *approx {
                    args.push("~".to_string());
                }
                args.push(keep.to_string());
                args.extend(mode.arg().map(String::from));
                self.trim(*s, &args, *mode);
            }
            Op::TrimMinId {
                s,
                cut_pct,
                approx,
                mode,
            } => {
                let Some(st) = self.stream(*s) else {
                    return;
                };
                let ids: Vec<Id> = st.present.iter().copied().collect();
                let min = if *cut_pct >= 100 || ids.is_empty() {
                    Id(st.last_gen.0, st.last_gen.1 + 1)
                } else {
                    ids[(ids.len() as u64 * cut_pct / 100) as usize]
                };
                let mut args = vec!["XTRIM".to_string(), s_of(s), "MINID".to_string()];
                if *approx {
                    args.push("~".to_string());
                }
                args.push(min.to_string());
                args.extend(mode.arg().map(String::from));
                self.trim(*s, &args, *mode);
            }
            Op::DelEx { s, n, pick, mode } => {
                let ids = self.pick_ids(*s, *n, *pick);
                if ids.is_empty() {
                    return;
                }
                let mut args = vec!["XDELEX".to_string(), s_of(s)];
                args.extend(mode.arg().map(String::from));
                args.extend(["IDS".to_string(), ids.len().to_string()]);
                args.extend(ids.iter().map(Id::to_string));
                if self.send(&args).is_some() {
                    self.sync_removals(*s, Cause::Deleted);
                    self.sync_groups(*s);
                }
            }
            Op::AckDel {
                s,
                g,
                n,
                pick,
                mode,
            } => {
                let Some(gm) = self.stream(*s).and_then(|st| st.groups.get(GROUPS[*g])) else {
                    return;
                };
                // Mostly entries the group holds; some it has not read.
                let pel: Vec<Id> = gm.pel.keys().copied().collect();
                let mut ids: BTreeSet<Id> =
                    self.pick_ids(*s, 1 + n / 3, *pick).into_iter().collect();
                let mut rng = Rng::new(pick.wrapping_add(1));
                for _ in 0..*n {
                    if !pel.is_empty() {
                        ids.insert(pel[rng.below(pel.len() as u64) as usize]);
                    }
                }
                if ids.is_empty() {
                    return;
                }
                let mut args = vec!["XACKDEL".to_string(), s_of(s), GROUPS[*g].to_string()];
                args.extend(mode.arg().map(String::from));
                args.extend(["IDS".to_string(), ids.len().to_string()]);
                args.extend(ids.iter().map(Id::to_string));
                if self.send(&args).is_some() {
                    self.sync_removals(*s, Cause::Deleted);
                    self.sync_groups(*s);
                }
            }
            Op::Retain { s, mode } => {
                let Some(st) = self.stream(*s) else {
                    return;
                };
                let Some(slowest) = st.groups.values().map(|g| g.ld).min() else {
                    return;
                };
                let mut args = vec![
                    "XTRIM".to_string(),
                    s_of(s),
                    "MINID".to_string(),
                    slowest.to_string(),
                ];
                args.extend(mode.arg().map(String::from));
                self.trim(*s, &args, *mode);
            }
            Op::Worker { s, g, c, n, ackdel } => {
                self.read(*s, *g, *c, *n, false);
                let Some(gm) = self.stream(*s).and_then(|st| st.groups.get(GROUPS[*g])) else {
                    return;
                };
                let held: Vec<String> = gm
                    .pel
                    .iter()
                    .filter(|(_, (owner, _))| owner == CONSUMERS[*c])
                    .map(|(id, _)| id.to_string())
                    .take(*n as usize)
                    .collect();
                if held.is_empty() {
                    return;
                }
                let count = held.len().to_string();
                let sent = if *ackdel {
                    let mut args = vec![
                        "XACKDEL".to_string(),
                        s_of(s),
                        GROUPS[*g].to_string(),
                        "IDS".to_string(),
                        count,
                    ];
                    args.extend(held.iter().cloned());
                    self.send(&args).is_some()
                } else {
                    let mut ack = vec!["XACK".to_string(), s_of(s), GROUPS[*g].to_string()];
                    ack.extend(held.iter().cloned());
                    let mut del = vec!["XDEL".to_string(), s_of(s)];
                    del.extend(held.iter().cloned());
                    self.send(&ack).is_some() && self.send(&del).is_some()
                };
                if sent {
                    self.sync_removals(*s, Cause::Deleted);
                    self.sync_groups(*s);
                }
            }
            Op::AddAtEdge { s, n } => {
                self.add(*s, *n, false, Some((0, false)));
            }
            Op::BumpAdded { s, n } => {
                let Some(st) = self.stream(*s) else {
                    return;
                };
                if !self.kind.has_lag() || st.last_gen == Id::ZERO {
                    return;
                }
                let args = [
                    "XSETID".to_string(),
                    s_of(s),
                    st.last_gen.to_string(),
                    "ENTRIESADDED".to_string(),
                    (st.added + n).to_string(),
                ];
                if self.send(&args).is_some() {
                    self.model.streams.get_mut(STREAMS[*s]).unwrap().added += n;
                    self.events.push(Event::StreamSet { s: *s, n: *n });
                }
            }
            Op::SetId {
                s,
                g,
                to,
                entries_read,
            } => {
                if self
                    .stream(*s)
                    .is_none_or(|st| !st.groups.contains_key(GROUPS[*g]))
                {
                    return;
                }
                let (arg, id) = self.target_id(*s, *to);
                let mut args = vec![
                    "XGROUP".to_string(),
                    "SETID".to_string(),
                    s_of(s),
                    GROUPS[*g].to_string(),
                    arg,
                ];
                let st = self.stream(*s).unwrap();
                if *entries_read && self.kind.has_lag() {
                    let read = if id > st.last_gen {
                        st.added
                    } else {
                        st.read_up_to(id)
                    };
                    args.extend(["ENTRIESREAD".to_string(), read.to_string()]);
                }
                if self.send(&args).is_some() {
                    let epoch = self.model.new_epoch();
                    self.model
                        .streams
                        .get_mut(STREAMS[*s])
                        .unwrap()
                        .set_group(GROUPS[*g], id, epoch);
                    self.events.push(Event::Positioned { s: *s, g: *g });
                }
            }
            Op::Create {
                s,
                g,
                at,
                entries_read,
            } => {
                if self
                    .stream(*s)
                    .is_some_and(|st| st.groups.contains_key(GROUPS[*g]))
                {
                    return;
                }
                let (arg, id) = self.target_id(*s, *at);
                let mut args = vec![
                    "XGROUP".to_string(),
                    "CREATE".to_string(),
                    s_of(s),
                    GROUPS[*g].to_string(),
                    arg,
                    "MKSTREAM".to_string(),
                ];
                let read = self.stream(*s).map_or(0, |st| st.read_up_to(id));
                if *entries_read && self.kind.has_lag() {
                    args.extend(["ENTRIESREAD".to_string(), read.to_string()]);
                }
                if self.send(&args).is_some() {
                    let epoch = self.model.new_epoch();
                    let st = self
                        .model
                        .streams
                        .entry(STREAMS[*s].to_string())
                        .or_default();
                    st.set_group(GROUPS[*g], id, epoch);
                    self.events.push(Event::Positioned { s: *s, g: *g });
                }
            }
            Op::Destroy { s, g } => {
                if self
                    .stream(*s)
                    .is_none_or(|st| !st.groups.contains_key(GROUPS[*g]))
                {
                    return;
                }
                let args = ["XGROUP", "DESTROY", STREAMS[*s], GROUPS[*g]].map(String::from);
                if self.send(&args).is_some() {
                    self.model
                        .streams
                        .get_mut(STREAMS[*s])
                        .unwrap()
                        .groups
                        .remove(GROUPS[*g]);
                }
            }
            Op::DelConsumer { s, g, c } => {
                let Some(gm) = self.stream(*s).and_then(|st| st.groups.get(GROUPS[*g])) else {
                    return;
                };
                if !gm.consumers.contains(CONSUMERS[*c]) {
                    return;
                }
                let args = [
                    "XGROUP",
                    "DELCONSUMER",
                    STREAMS[*s],
                    GROUPS[*g],
                    CONSUMERS[*c],
                ]
                .map(String::from);
                if let Some(v) = self.send(&args) {
                    let gm = self
                        .model
                        .streams
                        .get_mut(STREAMS[*s])
                        .unwrap()
                        .groups
                        .get_mut(GROUPS[*g])
                        .unwrap();
                    let held = gm.pending_of(CONSUMERS[*c]);
                    gm.pel.retain(|_, (owner, _)| owner != CONSUMERS[*c]);
                    gm.consumers.remove(CONSUMERS[*c]);
                    assert_eq!(int_of(&v), Some(held as i64), "model: DELCONSUMER count");
                }
            }
            Op::DelStream { s } => {
                if self.stream(*s).is_none() {
                    return;
                }
                if self.send(&["DEL".to_string(), s_of(s)]).is_some() {
                    self.model.streams.remove(STREAMS[*s]);
                }
            }
            Op::Fault(f) => self.fault(*f),
        }
    }

    fn add(&mut self, s: usize, n: u64, explicit: bool, cap: Option<(u64, bool)>) {
        let key = STREAMS[s];
        let len = self.stream(s).map_or(0, |st| st.present.len() as u64);
        let last = self.stream(s).map_or(Id::ZERO, |st| st.last_gen);
        let cap_args: Vec<String> = match cap {
            None => Vec::new(),
            Some((pct, approx)) => {
                // 0: the length before the adds (a producer at the edge).
                let keep = if pct == 0 {
                    len.max(1)
                } else {
                    ((len + n) * pct / 100).max(1)
                };
                let mut a = vec!["MAXLEN".to_string()];
                if approx {
                    a.push("~".to_string());
                }
                a.push(keep.to_string());
                a
            }
        };
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let ms = (last.0 + 1).max(now_ms);
        let mut pipe = redis::pipe();
        let mut lines = Vec::new();
        for i in 0..n {
            let id = if explicit {
                Id(ms, i).to_string()
            } else {
                "*".to_string()
            };
            let mut args = vec!["XADD".to_string(), key.to_string()];
            args.extend(cap_args.iter().cloned());
            args.extend([id, "n".to_string(), i.to_string()]);
            let cmd = pipe.cmd(&args[0]);
            for a in &args[1..] {
                cmd.arg(a);
            }
            lines.push(args.join(" "));
        }
        let replies: Result<Vec<redis::Value>, _> = pipe.query(&mut self.conn);
        match replies {
            Ok(replies) => {
                if n <= 3 {
                    self.transcript.extend(lines);
                } else {
                    self.transcript.push(format!(
                        "{} ... ({} XADDs pipelined, last {})",
                        lines[0],
                        n,
                        lines[lines.len() - 1]
                    ));
                }
                let st = self.model.streams.entry(key.to_string()).or_default();
                for r in &replies {
                    st.add(id_of(r).unwrap());
                }
                if cap.is_some() {
                    self.sync_removals(s, Cause::Trimmed);
                }
            }
            Err(e) => {
                // An explicit ID that a shrunk replay made too small, say:
                // nothing was added past the error; read back what was.
                self.transcript
                    .push(format!("{} ... ({n} XADDs)   -> error: {e}", lines[0]));
                let now = self.server_ids(key);
                let st = self.model.streams.entry(key.to_string()).or_default();
                let new: Vec<Id> = now
                    .iter()
                    .filter(|id| !st.ever.contains(id))
                    .copied()
                    .collect();
                for id in new {
                    st.add(id);
                }
            }
        }
    }

    fn read(&mut self, s: usize, g: usize, c: usize, count: u64, noack: bool) {
        if self
            .stream(s)
            .is_none_or(|st| !st.groups.contains_key(GROUPS[g]))
        {
            return;
        }
        let mut args = vec![
            "XREADGROUP".to_string(),
            "GROUP".to_string(),
            GROUPS[g].to_string(),
            CONSUMERS[c].to_string(),
            "COUNT".to_string(),
            count.to_string(),
        ];
        if noack {
            args.push("NOACK".to_string());
        }
        args.extend([
            "STREAMS".to_string(),
            STREAMS[s].to_string(),
            ">".to_string(),
        ]);
        let Some(v) = self.send(&args) else {
            return;
        };
        let mut ids = Vec::new();
        if let redis::Value::Array(streams) = v {
            for st in streams {
                if let redis::Value::Array(parts) = st {
                    if let Some(redis::Value::Array(entries)) = parts.get(1) {
                        for e in entries {
                            if let redis::Value::Array(kv) = e {
                                ids.push(id_of(&kv[0]).unwrap());
                            }
                        }
                    }
                }
            }
        }
        let gm = self
            .model
            .streams
            .get_mut(STREAMS[s])
            .unwrap()
            .groups
            .get_mut(GROUPS[g])
            .unwrap();
        for id in &ids {
            assert!(*id > gm.ld, "model: delivered {id} at or below {}", gm.ld);
            gm.ld = *id;
            if !noack {
                gm.pel.insert(*id, (CONSUMERS[c].to_string(), 1));
            }
        }
        // Whether a read that found nothing creates the consumer differs by
        // version: take the list from the server.
        let consumers = self.server_consumers(STREAMS[s], GROUPS[g]);
        self.model
            .streams
            .get_mut(STREAMS[s])
            .unwrap()
            .groups
            .get_mut(GROUPS[g])
            .unwrap()
            .consumers = consumers;
    }

    fn trim(&mut self, s: usize, args: &[String], mode: RefMode) {
        if self.send(args).is_some() {
            self.sync_removals(s, Cause::Trimmed);
            if mode != RefMode::Plain {
                self.sync_groups(s);
            }
        }
    }

    fn reconnect(&mut self) {
        self.conn = self.server.conn();
    }

    fn fault(&mut self, f: Fault) {
        match f {
            Fault::StopShort => {
                self.transcript
                    .push("(SIGSTOP for 60 ms during the next poll)".into());
                self.stop_during_poll = Some(COMMAND_TIMEOUT / 5);
            }
            Fault::StopLong => {
                self.transcript
                    .push("(SIGSTOP for 1.5 s during the next poll)".into());
                self.stop_during_poll = Some(COMMAND_TIMEOUT * 5);
            }
            Fault::Reload => {
                if self
                    .send(&["DEBUG".to_string(), "RELOAD".to_string()])
                    .is_some()
                {
                    self.events.push(Event::Reloaded);
                }
            }
            Fault::Restart => {
                self.send(&["SAVE".to_string()]);
                self.transcript
                    .push("(kill; start again on the same port and data)".into());
                self.server.kill();
                self.server = start(self.kind, self.port, self.data.path());
                self.reconnect();
                self.events.push(Event::Restarted);
            }
            Fault::Exporter => {
                self.transcript.push(
                    "(the exporter stops, writing its state file, and starts again from it)".into(),
                );
                self.restart_exporter = true;
                self.events.push(Event::ExporterRestarted);
            }
            Fault::Fresh => {
                self.transcript
                    .push("(kill; a new empty server on the same port)".into());
                self.server.kill();
                self.data = tempfile::tempdir().unwrap();
                self.server = start(self.kind, self.port, self.data.path());
                self.reconnect();
                self.model.streams.clear();
                self.events.push(Event::NewServer);
            }
        }
    }
}
