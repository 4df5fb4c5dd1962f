//! A fault-injecting TCP proxy on loopback, between the exporter and a
//! `redis-server`: it forwards bytes both ways and, switched at run time,
//! delays them, swallows them, holds them, or resets connections.
//!
//! It runs on its own thread and tokio runtime, so the faults it injects
//! never depend on the runtime under test and its tasks are not counted in
//! that runtime's metrics. It counts the connections it holds open on both
//! sides, so tests can tell whether the exporter leaks sockets.
//!
//! Dropping the [`Proxy`] stops it and closes every connection.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with connections and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways.
    Pass,
    /// Forward both ways, but hold every chunk read (in either direction)
    /// this long before writing it on.
    Delay(Duration),
    /// Accept and read, never forward or answer. A connection that lost
    /// bytes this way stays a black hole until it is closed (its byte stream
    /// is broken), even after the mode changes back.
    Blackhole,
    /// Stop accepting (new connections wait in the kernel's backlog, their
    /// handshake done, so connecting succeeds) and stop reading existing
    /// ones. When the mode changes, what was held flows on, as after a
    /// healed partition.
    Hold,
    /// Reset every open connection (RST, `SO_LINGER` 0) and every new one
    /// as soon as it is accepted.
    Reset,
}

/// Counters, shared with the proxy's tasks.
#[derive(Debug, Default)]
struct Counters {
    /// Exporter-side connections the proxy holds open.
    clients_open: AtomicUsize,
    /// Redis-side connections the proxy holds open.
    upstreams_open: AtomicUsize,
    /// Highest `upstreams_open` since the last [`Proxy::reset_peaks`].
    upstreams_peak: AtomicUsize,
    /// Highest `clients_open` since the last [`Proxy::reset_peaks`].
    clients_peak: AtomicUsize,
    accepted: AtomicU64,
    resets: AtomicU64,
    upstream_connect_failures: AtomicU64,
    /// Bytes forwarded from the exporter to Redis.
    bytes_up: AtomicU64,
    /// Bytes swallowed by the black hole (either direction).
    bytes_swallowed: AtomicU64,
}

/// Increments a gauge (and its peak) for as long as it lives.
struct Open<'a> {
    gauge: &'a AtomicUsize,
}

impl<'a> Open<'a> {
    fn new(gauge: &'a AtomicUsize, peak: &'a AtomicUsize) -> Open<'a> {
        let now = gauge.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        Open { gauge }
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.gauge.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    /// The loopback port it listens on.
    pub port: u16,
    /// The Redis port it forwards to.
    pub upstream_port: u16,
    mode: watch::Sender<Mode>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy on `127.0.0.1:0` that forwards to `127.0.0.1:upstream_port`,
    /// in [`Mode::Pass`].
    pub fn start(upstream_port: u16) -> Proxy {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, upstream_port));
        let (mode_tx, mode_rx) = watch::channel(Mode::Pass);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let counters = Arc::new(Counters::default());
        let thread = {
            let counters = counters.clone();
            std::thread::Builder::new()
                .name(format!("proxy-{port}"))
                .spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(async move {
                        let listener = TcpListener::from_std(listener).unwrap();
                        tokio::select! {
                            _ = accept_loop(listener, upstream, mode_rx, counters) => {}
                            _ = stop_rx => {}
                        }
                    });
                    // Dropping the runtime drops every connection task and
                    // so closes every socket.
                    drop(rt);
                })
                .unwrap()
        };
        Proxy {
            port,
            upstream_port,
            mode: mode_tx,
            stop: Some(stop_tx),
            counters,
            thread: Some(thread),
        }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Switches the mode; existing connections follow at once.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    /// Exporter-side connections held open now.
    pub fn clients_open(&self) -> usize {
        self.counters.clients_open.load(Ordering::SeqCst)
    }

    /// Redis-side connections held open now.
    pub fn upstreams_open(&self) -> usize {
        self.counters.upstreams_open.load(Ordering::SeqCst)
    }

    /// Highest number of Redis-side connections open at once since the last
    /// [`Self::reset_peaks`].
    pub fn upstreams_peak(&self) -> usize {
        self.counters.upstreams_peak.load(Ordering::SeqCst)
    }

    /// Highest number of exporter-side connections open at once since the
    /// last [`Self::reset_peaks`].
    pub fn clients_peak(&self) -> usize {
        self.counters.clients_peak.load(Ordering::SeqCst)
    }

    /// Restarts the peaks from the current values.
    pub fn reset_peaks(&self) {
        let c = &self.counters;
        c.upstreams_peak
            .store(c.upstreams_open.load(Ordering::SeqCst), Ordering::SeqCst);
        c.clients_peak
            .store(c.clients_open.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    /// Connections reset so far.
    pub fn resets(&self) -> u64 {
        self.counters.resets.load(Ordering::SeqCst)
    }

    /// Connections to Redis that could not be opened.
    pub fn upstream_connect_failures(&self) -> u64 {
        self.counters
            .upstream_connect_failures
            .load(Ordering::SeqCst)
    }

    /// Bytes forwarded from the exporter to Redis so far.
    pub fn bytes_up(&self) -> u64 {
        self.counters.bytes_up.load(Ordering::SeqCst)
    }

    /// Bytes swallowed by the black hole so far.
    pub fn bytes_swallowed(&self) -> u64 {
        self.counters.bytes_swallowed.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    counters: Arc<Counters>,
) {
    loop {
        if *mode.borrow_and_update() == Mode::Hold {
            // Leave new connections in the backlog.
            if mode.changed().await.is_err() {
                return;
            }
            continue;
        }
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                counters.accepted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(connection(client, upstream, mode.clone(), counters.clone()));
            }
            changed = mode.changed() => if changed.is_err() { return },
        }
    }
}

/// RST instead of FIN: `SO_LINGER` 0, then close.
fn reset(client: TcpStream, counters: &Counters) {
    counters.resets.fetch_add(1, Ordering::SeqCst);
    let _ = client.set_zero_linger();
    drop(client);
}

enum Step {
    Go,
    Reset,
    Close,
}

/// Waits `delay` unless the mode turns to a reset or a black hole first.
async fn delayed(delay: Duration, mode: &mut watch::Receiver<Mode>, poisoned: &mut bool) -> Step {
    let sleep = tokio::time::sleep(delay);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            _ = &mut sleep => return Step::Go,
            changed = mode.changed() => {
                if changed.is_err() {
                    return Step::Close;
                }
                match *mode.borrow_and_update() {
                    Mode::Reset => return Step::Reset,
                    Mode::Blackhole => {
                        *poisoned = true;
                        return Step::Go;
                    }
                    _ => {}
                }
            }
        }
    }
}

async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    counters: Arc<Counters>,
) {
    let _client_open = Open::new(&counters.clients_open, &counters.clients_peak);
    let mut poisoned = false;
    match *mode.borrow_and_update() {
        Mode::Reset => return reset(client, &counters),
        Mode::Blackhole => poisoned = true,
        _ => {}
    }
    let mut client = client;
    // A swallowed connection never reaches Redis.
    let mut upstream = if poisoned {
        None
    } else {
        match TcpStream::connect(upstream).await {
            Ok(u) => Some(u),
            Err(_) => {
                counters
                    .upstream_connect_failures
                    .fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
    };
    let _upstream_open = upstream
        .as_ref()
        .map(|_| Open::new(&counters.upstreams_open, &counters.upstreams_peak));
    let mut cbuf = vec![0u8; 16 * 1024];
    let mut ubuf = vec![0u8; 16 * 1024];
    let outcome = 'conn: loop {
        let now = *mode.borrow_and_update();
        match now {
            Mode::Reset => break 'conn Step::Reset,
            Mode::Blackhole => poisoned = true,
            Mode::Hold => {
                if mode.changed().await.is_err() {
                    break 'conn Step::Close;
                }
                continue;
            }
            Mode::Pass | Mode::Delay(_) => {}
        }
        let (mut cr, mut cw) = client.split();
        // Without an upstream (a swallowed connection) only the client is read.
        let (read, from_client) = match upstream.as_mut() {
            Some(u) => {
                let (mut ur, _) = u.split();
                tokio::select! {
                    r = cr.read(&mut cbuf) => (r, true),
                    r = ur.read(&mut ubuf) => (r, false),
                    changed = mode.changed() => {
                        if changed.is_err() { break 'conn Step::Close; }
                        continue;
                    }
                }
            }
            None => tokio::select! {
                r = cr.read(&mut cbuf) => (r, true),
                changed = mode.changed() => {
                    if changed.is_err() { break 'conn Step::Close; }
                    continue;
                }
            },
        };
        let n = match read {
            Ok(0) | Err(_) => break 'conn Step::Close,
            Ok(n) => n,
        };
        if let Mode::Delay(d) = now {
            match delayed(d, &mut mode, &mut poisoned).await {
                Step::Go => {}
                other => break 'conn other,
            }
        }
        if poisoned {
            counters
                .bytes_swallowed
                .fetch_add(n as u64, Ordering::SeqCst);
            continue;
        }
        let written = if from_client {
            counters.bytes_up.fetch_add(n as u64, Ordering::SeqCst);
            match upstream.as_mut() {
                Some(u) => u.write_all(&cbuf[..n]).await,
                None => Ok(()),
            }
        } else {
            cw.write_all(&ubuf[..n]).await
        };
        if written.is_err() {
            break 'conn Step::Close;
        }
    };
    if let Step::Reset = outcome {
        if let Some(u) = upstream.take() {
            let _ = u.set_zero_linger();
        }
        reset(client, &counters);
    }
}
