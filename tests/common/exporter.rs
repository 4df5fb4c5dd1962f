//! The one fixture that runs the exporter binary as a process: a configuration file or a Redis
//! URL, a free loopback port, the log in a file, optionally a descriptor limit (`prlimit`);
//! started when it listens, killed on drop. (The whole daemon in-process is `daemon.rs`.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{free_port, which};

const EXE: &str = env!("CARGO_BIN_EXE_redis-streams-exporter");

/// The exporter binary, killed on drop.
pub struct Exporter {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

/// How an [`Exporter`] is started; [`ExporterBuilder::start`] starts it.
pub struct ExporterBuilder {
    dir: PathBuf,
    args: Vec<String>,
    env: Vec<(String, Option<String>)>,
    nofile: Option<u64>,
}

impl ExporterBuilder {
    /// One more command-line argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More command-line arguments.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// An environment variable of the process.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), Some(value.to_string())));
        self
    }

    /// An environment variable the process must not inherit.
    pub fn env_remove(mut self, key: &str) -> Self {
        self.env.push((key.to_string(), None));
        self
    }

    /// Runs the exporter under `prlimit --nofile=N:N`.
    pub fn nofile(mut self, limit: u64) -> Self {
        self.nofile = Some(limit);
        self
    }

    /// Starts the exporter on a free loopback port and waits until it listens; fails the test
    /// with the log when it exits or does not listen within 20 s.
    pub fn start(self) -> Exporter {
        let port = free_port();
        let log = self.dir.join(format!("exporter-{port}.log"));
        let mut cmd = match self.nofile {
            Some(n) => {
                let mut c = Command::new(which("prlimit"));
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(EXE);
                c
            }
            None => Command::new(EXE),
        };
        cmd.args(&self.args)
            .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (key, value) in &self.env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "exporter exited ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "exporter did not listen: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Exporter { child, port, log }
    }
}

impl Exporter {
    /// An exporter reading the configuration `config` (TOML), written into `dir`, which also
    /// holds its log.
    pub fn with_config(dir: &Path, config: &str) -> ExporterBuilder {
        // Several exporters may share `dir`: each gets a file of its own.
        static WRITTEN: AtomicUsize = AtomicUsize::new(0);
        let n = WRITTEN.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("exporter-{n}.toml"));
        std::fs::write(&path, config).unwrap();
        Exporter::with_config_file(dir, &path)
    }

    /// An exporter reading the configuration file `path` (a test that rewrites it and reloads);
    /// its log in `dir`.
    pub fn with_config_file(dir: &Path, path: &Path) -> ExporterBuilder {
        ExporterBuilder {
            dir: dir.to_path_buf(),
            args: vec!["--config".to_string(), path.display().to_string()],
            env: Vec::new(),
            nofile: None,
        }
    }

    /// An exporter started with `--redis.url` only (no configuration file); its log in `dir`.
    pub fn with_url(dir: &Path, url: &str) -> ExporterBuilder {
        ExporterBuilder {
            dir: dir.to_path_buf(),
            args: vec!["--redis.url".to_string(), url.to_string()],
            env: Vec::new(),
            nofile: None,
        }
    }

    /// The HTTP edge tests' exporter: `config`, optionally under a descriptor limit, with the
    /// server module's debug lines in the log and `extra` arguments.
    pub fn start(dir: &Path, config: &str, nofile: Option<u64>, extra: &[&str]) -> Exporter {
        let mut builder = Exporter::with_config(dir, config).args(&[
            "--log.level",
            "info,redis_streams_exporter::http::server=debug",
        ]);
        if let Some(n) = nofile {
            builder = builder.nofile(n);
        }
        builder.args(extra).start()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The log, without terminal colour codes.
    pub fn log(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// Open descriptors of the process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    /// The soft descriptor limit the process runs with.
    pub fn nofile(&self) -> u64 {
        nofile_of(&format!("/proc/{}/limits", self.child.id()))
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequences end with a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn nofile_of(limits: &str) -> u64 {
    let text = std::fs::read_to_string(limits).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line["Max open files".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Makes sure this test process may open `wanted` descriptors, raising its
/// soft limit up to the hard one with `prlimit` when needed.
pub fn ensure_own_nofile(wanted: u64) {
    if nofile_of("/proc/self/limits") >= wanted {
        return;
    }
    let out = Command::new(which("prlimit"))
        .args([
            "--pid",
            &std::process::id().to_string(),
            &format!("--nofile={wanted}:"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success() && nofile_of("/proc/self/limits") >= wanted,
        "this test needs {wanted} descriptors (raise `ulimit -n`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
