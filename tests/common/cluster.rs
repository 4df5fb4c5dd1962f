//! Topologies built from real servers on loopback for the cluster, sentinel
//! and many-target tests: a Redis Cluster joined with `redis-cli --cluster
//! create`, manual slot migration, a primary with a replica watched by a
//! sentinel, and a TCP blackhole.
//!
//! Every process is started here and killed on drop; nothing else is
//! touched. A missing binary fails the test.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{RedisServer, Server, free_port, which};

/// A loopback port at most 55535 whose cluster bus port (`port + 10000`,
/// the only choice before Redis 7.0) is free too.
fn cluster_port() -> u16 {
    for _ in 0..1000 {
        let p = free_port();
        if p <= 55535 && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair for a cluster node");
}

fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &redis::Value) -> i64 {
    match v {
        redis::Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// `field:value` lines of an INFO reply.
pub fn info_fields(server: &RedisServer, section: &str) -> BTreeMap<String, String> {
    text(&server.cmd(&["INFO", section]))
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// Calls per command from `INFO commandstats`, with subcommands folded into
/// their command (`xinfo|stream` counts as `xinfo`).
pub fn command_calls(server: &RedisServer) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, v) in info_fields(server, "commandstats") {
        let Some(name) = k.strip_prefix("cmdstat_") else {
            continue;
        };
        let name = name.split('|').next().unwrap().to_string();
        let calls: u64 = v
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .unwrap()
            .parse()
            .unwrap();
        *out.entry(name).or_insert(0) += calls;
    }
    out
}

/// One primary of a cluster.
pub struct ClusterNode {
    pub server: RedisServer,
    pub id: String,
}

impl ClusterNode {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.server.port)
    }
}

/// A Redis Cluster of primaries only, killed on drop.
pub struct RedisCluster {
    pub kind: Server,
    pub nodes: Vec<ClusterNode>,
}

impl RedisCluster {
    /// Starts `primaries` cluster-enabled servers and joins them with
    /// `redis-cli --cluster create`, then waits until every node serves
    /// every slot and agrees on the owners.
    pub fn start(kind: Server, primaries: usize) -> RedisCluster {
        let mut nodes = Vec::new();
        for _ in 0..primaries {
            let server = (0..10)
                .find_map(|_| {
                    RedisServer::try_start(
                        kind,
                        cluster_port(),
                        &[
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            "nodes.conf",
                            "--cluster-node-timeout",
                            "5000",
                        ],
                    )
                })
                .unwrap_or_else(|| panic!("{kind:?} cluster node did not start"));
            let id = text(&server.cmd(&["CLUSTER", "MYID"]));
            nodes.push(ClusterNode { server, id });
        }
        let cluster = RedisCluster { kind, nodes };
        let out = Command::new(which("redis-cli"))
            .arg("--cluster")
            .arg("create")
            .args(cluster.nodes.iter().map(ClusterNode::addr))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_agreed(Duration::from_secs(30));
        cluster
    }

    /// Waits until every node reports `cluster_state:ok` and the same slot
    /// owners.
    pub fn wait_agreed(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let ok = self
                .nodes
                .iter()
                .all(|n| text(&n.server.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok"));
            let views: Vec<Vec<(u16, u16, u16)>> = (0..self.nodes.len())
                .map(|i| self.slots_seen_by(i))
                .collect();
            let covered: u32 = views[0]
                .iter()
                .map(|(a, b, _)| u32::from(*b) - u32::from(*a) + 1)
                .sum();
            if ok && covered == 16384 && views.iter().all(|v| *v == views[0]) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "cluster did not settle: {views:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `(first, last, owner port)` from `CLUSTER SLOTS` of node `i`, sorted.
    pub fn slots_seen_by(&self, i: usize) -> Vec<(u16, u16, u16)> {
        let redis::Value::Array(rows) = self.nodes[i].server.cmd(&["CLUSTER", "SLOTS"]) else {
            panic!("CLUSTER SLOTS is not an array");
        };
        let mut out: Vec<(u16, u16, u16)> = rows
            .iter()
            .map(|row| {
                let redis::Value::Array(parts) = row else {
                    panic!("bad row {row:?}")
                };
                let redis::Value::Array(primary) = &parts[2] else {
                    panic!("bad primary {row:?}")
                };
                (
                    int(&parts[0]) as u16,
                    int(&parts[1]) as u16,
                    int(&primary[1]) as u16,
                )
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The slot of `key`, asked of the server.
    pub fn slot(&self, key: &str) -> u16 {
        int(&self.nodes[0].server.cmd(&["CLUSTER", "KEYSLOT", key])) as u16
    }

    /// Index of the node that serves `slot`, per node 0.
    pub fn owner_of_slot(&self, slot: u16) -> usize {
        let port = self
            .slots_seen_by(0)
            .into_iter()
            .find(|(a, b, _)| *a <= slot && slot <= *b)
            .map(|(_, _, p)| p)
            .unwrap_or_else(|| panic!("slot {slot} unassigned"));
        self.nodes
            .iter()
            .position(|n| n.server.port == port)
            .unwrap()
    }

    /// Index of the node that serves `key`.
    pub fn owner(&self, key: &str) -> usize {
        self.owner_of_slot(self.slot(key))
    }

    /// A plain connection to the node that serves `key`.
    pub fn conn_for(&self, key: &str) -> redis::Connection {
        self.nodes[self.owner(key)].server.conn()
    }

    /// Starts moving `slot` from node `from` to node `to`: IMPORTING on the
    /// target, MIGRATING on the source. Keys stay where they are.
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let slot = slot.to_string();
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        dst.server
            .cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src.id]);
        src.server
            .cmd(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst.id]);
    }

    /// Moves one key of a migrating slot with `MIGRATE`.
    pub fn migrate_key(&self, key: &str, from: usize, to: usize) {
        let port = self.nodes[to].server.port.to_string();
        let r = self.nodes[from].server.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "KEYS",
            key,
        ]);
        assert_eq!(r, redis::Value::Okay, "MIGRATE {key}");
    }

    /// Assigns `slot` to node `to` on the target, then the source, then the
    /// others, and waits until every node agrees.
    pub fn finish_migration(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let id = self.nodes[to].id.clone();
        let mut order = vec![to, from];
        order.extend((0..self.nodes.len()).filter(|i| *i != to && *i != from));
        for i in order {
            self.nodes[i]
                .server
                .cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &id]);
        }
        self.wait_agreed(Duration::from_secs(10));
        assert_eq!(self.owner_of_slot(slot), to);
    }

    /// The exporter's target table for this cluster: the URL names node 0,
    /// the others are seeds.
    pub fn target_toml(&self, name: &str) -> String {
        let seeds: Vec<String> = self.nodes[1..]
            .iter()
            .map(|n| format!("\"{}\"", n.addr()))
            .collect();
        format!(
            "[[targets]]\nname = \"{name}\"\nurl = \"redis://{}\"\nmode = \"cluster\"\ncluster_nodes = [{}]\npatterns = [\"*\"]\n",
            self.nodes[0].addr(),
            seeds.join(", ")
        )
    }
}

/// A primary, one replica and one sentinel monitoring them as `mymaster`
/// (quorum 1, down after 1 s, failover timeout 3 s). Killed on drop.
pub struct SentinelSetup {
    pub primary: RedisServer,
    pub replica: RedisServer,
    pub sentinel: RedisServer,
}

pub const MASTER_NAME: &str = "mymaster";

impl SentinelSetup {
    pub fn start() -> SentinelSetup {
        let primary = RedisServer::start(Server::Redis70);
        let replica = RedisServer::start_with(
            Server::Redis70,
            &["--replicaof", "127.0.0.1", &primary.port.to_string()],
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while info_fields(&replica, "replication")
            .get("master_link_status")
            .map(String::as_str)
            != Some("up")
        {
            assert!(Instant::now() < deadline, "replica never synced");
            std::thread::sleep(Duration::from_millis(50));
        }
        let sentinel = start_sentinel(primary.port);
        let setup = SentinelSetup {
            primary,
            replica,
            sentinel,
        };
        // The sentinel learns of the replica from the primary's INFO; a
        // failover needs it known and healthy.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let replicas = setup.sentinel.cmd(&["SENTINEL", "REPLICAS", MASTER_NAME]);
            let healthy = match &replicas {
                redis::Value::Array(list) => list.iter().any(|r| {
                    let redis::Value::Array(kv) = r else {
                        return false;
                    };
                    kv.chunks(2).any(|p| {
                        text(&p[0]) == "flags"
                            && text(&p[1]) == "slave"
                            && kv.chunks(2).any(|q| {
                                text(&q[0]) == "port"
                                    && text(&q[1]) == setup.replica.port.to_string()
                            })
                    })
                }),
                _ => false,
            };
            if healthy {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sentinel never saw the replica: {replicas:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        setup
    }

    /// The primary's port according to the sentinel.
    pub fn master_port(&self) -> u16 {
        match self
            .sentinel
            .cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
        {
            redis::Value::Array(parts) => text(&parts[1]).parse().unwrap(),
            other => panic!("no master: {other:?}"),
        }
    }

    /// Waits until the primary and the replica have the same replication
    /// offset (everything written reached the replica).
    pub fn wait_replicated(&self) {
        let r = self.primary.cmd(&["WAIT", "1", "5000"]);
        assert_eq!(r, redis::Value::Int(1), "replica did not acknowledge");
    }
}

fn start_sentinel(primary_port: u16) -> RedisServer {
    let binary = Server::Redis70.binary();
    for _ in 0..5 {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 1\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 3000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let child = Command::new(&binary)
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} --sentinel: {e}", binary.display()));
        let mut server = RedisServer {
            kind: Server::Redis70,
            port,
            child,
            dir,
        };
        if server.wait_ready(Duration::from_secs(10), None) {
            return server;
        }
        server.kill();
    }
    panic!("sentinel did not start");
}

/// A TCP port that accepts connections (the kernel completes the
/// handshake) but never reads or answers: a hung server.
pub struct Blackhole {
    listener: TcpListener,
}

impl Blackhole {
    pub fn start() -> Blackhole {
        Blackhole {
            listener: TcpListener::bind("127.0.0.1:0").unwrap(),
        }
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }
}
