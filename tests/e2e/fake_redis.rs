//! A Redis-compatible server that is reachable and answers PING, INFO, TIME and SCAN like
//! Redis, but replies to `XINFO STREAM` without the `length` field: what a proxy or a fork
//! with an incompatible reply shape looks like to the exporter. The target stays up while its
//! stream probe fails on every run, which is what `RedisStreamsProbeFailing` is about.
//!
//! It understands RESP2 arrays of bulk strings (all the exporter sends) and nothing more.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The running server.
pub struct FakeRedis {
    pub port: u16,
    /// Commands received, for diagnostics.
    pub commands: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeRedis {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The one stream it pretends to hold.
pub const STREAM: &str = "proxy:orders";

pub async fn start() -> FakeRedis {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let commands = Arc::new(AtomicU64::new(0));
    let counter = commands.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let counter = counter.clone();
            tokio::spawn(async move {
                let _ = serve(socket, counter).await;
            });
        }
    });
    FakeRedis {
        port,
        commands,
        task,
    }
}

async fn serve(mut socket: TcpStream, counter: Arc<AtomicU64>) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        while let Some((args, used)) = parse(&buf) {
            buf.drain(..used);
            counter.fetch_add(1, Ordering::Relaxed);
            out.extend(reply(&args));
        }
        if !out.is_empty() {
            socket.write_all(&out).await?;
        }
    }
}

/// One RESP array of bulk strings from the front of `buf`, and the bytes it used.
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

fn bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for i in items {
        out.extend_from_slice(i);
    }
    out
}

fn reply(args: &[String]) -> Vec<u8> {
    let name = args
        .first()
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    match (name.as_str(), sub.as_str()) {
        ("PING", _) => b"+PONG\r\n".to_vec(),
        ("CLIENT", _) | ("SELECT", _) | ("AUTH", _) => b"+OK\r\n".to_vec(),
        ("INFO", _) => bulk(
            "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\
             # Memory\r\nused_memory:1048576\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
        ),
        ("TIME", _) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            array(&[
                bulk(&now.as_secs().to_string()),
                bulk(&now.subsec_micros().to_string()),
            ])
        }
        ("SCAN", _) => array(&[bulk("0"), array(&[bulk(STREAM)])]),
        ("TYPE", _) => b"+stream\r\n".to_vec(),
        // The incompatible reply: no `length` field.
        ("XINFO", "STREAM") => array(&[
            bulk("groups"),
            b":0\r\n".to_vec(),
            bulk("last-generated-id"),
            bulk("1700000000000-0"),
        ]),
        ("XINFO", _) => b"*0\r\n".to_vec(),
        _ => format!("-ERR unknown command '{name}'\r\n").into_bytes(),
    }
}
