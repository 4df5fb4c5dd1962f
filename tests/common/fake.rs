//! The tests' one RESP fake: a scriptable Redis impostor on loopback, for
//! what no real server does. It answers like a healthy Redis 7.0 holding one
//! stream ([`STREAM`], one group [`GROUP`] with nothing to do), except where
//! the test's script says otherwise (a reply with a 100 MiB string, a line
//! that never ends, a reply added or left out, silence, the incompatible
//! proxy of the end-to-end chain).
//!
//! It reads RESP arrays of bulk strings (all the exporter sends) and nothing
//! more. Like the proxy it runs on a thread and runtime of its own, so what
//! it does never depends on the runtime under test; dropping the [`Fake`]
//! stops it and closes every connection.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// The stream it holds.
pub const STREAM: &str = "s";
/// The group of [`STREAM`].
pub const GROUP: &str = "g";
/// The ID of the stream's one entry, and the group's position.
pub const ENTRY_ID: &str = "1700000000000-0";

/// What the fake answers to one command.
pub enum Answer {
    /// What a healthy server holding [`STREAM`] would answer.
    Default,
    /// These bytes.
    Bytes(Vec<u8>),
    /// `head`, then `fill` bytes `x` written a piece at a time (never held
    /// whole), then `tail`.
    Huge {
        head: Vec<u8>,
        fill: usize,
        tail: Vec<u8>,
    },
    /// Nothing, ever; the connection stays open.
    Silence,
}

/// One command as the fake read it.
pub struct Request<'a> {
    /// Its words, the name upper-cased.
    pub args: &'a [String],
    /// Which connection it came on: 1 for the first accepted.
    pub connection: u64,
}

impl Request<'_> {
    /// Whether the command is `name` (and its subcommand `sub`, if given).
    pub fn is(&self, name: &str, sub: Option<&str>) -> bool {
        self.args.first().is_some_and(|a| a == name)
            && sub.is_none_or(|s| self.args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(s)))
    }
}

type Script = dyn Fn(&Request) -> Answer + Send + Sync;

/// The running fake, stopped on drop.
pub struct Fake {
    pub port: u16,
    connections: Arc<AtomicU64>,
    commands: Arc<Mutex<Vec<String>>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Fake {
    /// Starts a fake that answers as `script` says (see [`Answer`]).
    pub fn start(script: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Fake {
        let script: Arc<Script> = Arc::new(script);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicU64::new(0));
        let commands = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = oneshot::channel::<()>();
        let (conns, cmds) = (connections.clone(), commands.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let Ok((socket, _)) = listener.accept().await else {
                            continue;
                        };
                        let n = conns.fetch_add(1, Ordering::SeqCst) + 1;
                        let (script, cmds) = (script.clone(), cmds.clone());
                        tokio::spawn(async move {
                            let _ = serve(socket, n, &*script, &cmds).await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime drops every connection's task.
        });
        Fake {
            port,
            connections,
            commands,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The URL the exporter is pointed at.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// The names of the commands received so far (`XINFO STREAM` with its
    /// subcommand), in order.
    pub fn commands(&self) -> Vec<String> {
        self.commands.lock().unwrap().clone()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    mut socket: TcpStream,
    connection: u64,
    script: &Script,
    commands: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some((mut args, used)) = parse(&buf) {
            buf.drain(..used);
            if let Some(name) = args.first_mut() {
                *name = name.to_ascii_uppercase();
            }
            let label = match args.get(1) {
                Some(sub) if args[0] == "XINFO" || args[0] == "CLIENT" => {
                    format!("{} {}", args[0], sub.to_ascii_uppercase())
                }
                _ => args.first().cloned().unwrap_or_default(),
            };
            commands.lock().unwrap().push(label);
            let request = Request {
                args: &args,
                connection,
            };
            match script(&request) {
                Answer::Default => socket.write_all(&default_answer(&args)).await?,
                Answer::Bytes(b) => socket.write_all(&b).await?,
                Answer::Huge { head, fill, tail } => {
                    socket.write_all(&head).await?;
                    let piece = vec![b'x'; 256 * 1024];
                    let mut left = fill;
                    while left > 0 {
                        let n = left.min(piece.len());
                        socket.write_all(&piece[..n]).await?;
                        left -= n;
                    }
                    socket.write_all(&tail).await?;
                }
                Answer::Silence => std::future::pending::<()>().await,
            }
        }
    }
}

/// One RESP array of bulk strings from the front of `buf`, and the bytes it
/// used.
fn parse(buf: &[u8]) -> Option<(Vec<String>, usize)> {
    let line = |from: usize| -> Option<(&[u8], usize)> {
        let end = buf[from..].windows(2).position(|w| w == b"\r\n")? + from;
        Some((&buf[from..end], end + 2))
    };
    let (head, mut at) = line(0)?;
    let n: usize = std::str::from_utf8(head.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, next) = line(at)?;
        let len: usize = std::str::from_utf8(len.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        if buf.len() < next + len + 2 {
            return None;
        }
        args.push(String::from_utf8_lossy(&buf[next..next + len]).into_owned());
        at = next + len + 2;
    }
    Some((args, at))
}

/// A bulk string.
pub fn bulk(s: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", s.len()).into_bytes();
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
    out
}

/// An integer.
pub fn int(i: i64) -> Vec<u8> {
    format!(":{i}\r\n").into_bytes()
}

/// An array of encoded items.
pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for i in items {
        out.extend_from_slice(i);
    }
    out
}

/// A RESP2 field list: names and encoded values.
pub fn fields(pairs: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let items: Vec<Vec<u8>> = pairs
        .iter()
        .flat_map(|(k, v)| [bulk(k.as_bytes()), v.clone()])
        .collect();
    array(&items)
}

/// The stream's one entry.
pub fn entry() -> Vec<u8> {
    array(&[bulk(ENTRY_ID.as_bytes()), array(&[bulk(b"f"), bulk(b"v")])])
}

/// `XINFO GROUPS` of [`STREAM`]: the group [`GROUP`] at the end, nothing
/// pending.
pub fn group(name: &[u8]) -> Vec<u8> {
    let mut out = b"*12\r\n".to_vec();
    out.extend(bulk(b"name"));
    out.extend(bulk(name));
    for (k, v) in [
        ("consumers", int(0)),
        ("pending", int(0)),
        ("last-delivered-id", bulk(ENTRY_ID.as_bytes())),
        ("entries-read", int(1)),
        ("lag", int(0)),
    ] {
        out.extend(bulk(k.as_bytes()));
        out.extend(v);
    }
    out
}

/// What a healthy Redis 7.0 holding [`STREAM`] answers.
pub fn default_answer(args: &[String]) -> Vec<u8> {
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    match (args.first().map(String::as_str).unwrap_or(""), sub.as_str()) {
        ("PING", _) => b"+PONG\r\n".to_vec(),
        ("CLIENT" | "SELECT" | "AUTH", _) => b"+OK\r\n".to_vec(),
        ("INFO", _) => bulk(
            b"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\
             # Memory\r\nused_memory:1048576\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
        ),
        ("TIME", _) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            array(&[
                bulk(now.as_secs().to_string().as_bytes()),
                bulk(now.subsec_micros().to_string().as_bytes()),
            ])
        }
        ("SCAN", _) => array(&[bulk(b"0"), array(&[bulk(STREAM.as_bytes())])]),
        ("TYPE", _) => b"+stream\r\n".to_vec(),
        ("XINFO", "STREAM") => fields(&[
            ("length", int(1)),
            ("radix-tree-keys", int(1)),
            ("radix-tree-nodes", int(2)),
            ("last-generated-id", bulk(ENTRY_ID.as_bytes())),
            ("max-deleted-entry-id", bulk(b"0-0")),
            ("entries-added", int(1)),
            ("recorded-first-entry-id", bulk(ENTRY_ID.as_bytes())),
            ("groups", int(1)),
            ("first-entry", entry()),
            ("last-entry", entry()),
        ]),
        ("XINFO", "GROUPS") => array(&[group(GROUP.as_bytes())]),
        ("XINFO", _) => b"*0\r\n".to_vec(),
        ("XPENDING", _) if args.len() > 3 => b"*0\r\n".to_vec(),
        ("XPENDING", _) => b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n".to_vec(),
        ("XRANGE" | "XREVRANGE", _) => b"*0\r\n".to_vec(),
        (name, _) => format!("-ERR unknown command '{name}'\r\n").into_bytes(),
    }
}
