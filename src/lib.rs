//! redis-streams-exporter: a Prometheus exporter for Redis Streams used as
//! message queues. It polls Redis on a rate-limited schedule, keeps an
//! immutable snapshot, and serves it over HTTP without ever waiting on Redis.
//!
//! # Layout
//! - [`vocab`]: the ground floor, plain data everyone shares (stream IDs,
//!   decoded replies, probe names, kinds of failure, the client's counters);
//!   it imports nothing of the project.
//! - [`config`]: the file and flags, parsed then validated into [`config::Config`].
//! - [`backend`]: the only module that talks to Redis: allowlisted commands,
//!   connections, rate limit and priorities, cluster routing, reply
//!   decoding.
//! - [`probe`]: what to ask on each schedule, one probe per file, producing
//!   plain data into the target's state.
//! - [`lag`], [`loss`], [`trend`], [`cadence`] and [`status`]: pure
//!   arithmetic on what the probes read (lag done right, the NULL-lag
//!   estimator, losses and rewinds between polls, time to loss and to drain,
//!   each group's learned read cadence, group status).
//! - [`schedule`]: when to run, pure and tested under paused time.
//! - [`poller`]: runs a target's probes and publishes its snapshots;
//!   [`multitarget`]: the pollers `/probe` starts, and their expiry.
//! - [`snapshot`]: the immutable picture `/metrics` renders.
//! - [`metrics`]: the only module that knows metric names (the catalog) and
//!   the text exposition; [`exposition`] keeps it rendered in the background.
//! - [`state_file`]: what the exporter learned, kept across its restarts.
//! - [`http`]: everything HTTP: the endpoints and the landing page, bounded
//!   connections (caps, timeouts, size limits, shutdown), and TLS, basic
//!   auth, rate limit and headers from an exporter-toolkit web config, kept
//!   current with its file. [`app`]: wiring, reload and shutdown.
//! - [`process`]: the process's own figures from /proc.
//! - [`check`]: the daemon's probes and status rules from a shell, once or
//!   over a watched window, and a report. [`glob`]: Redis-style patterns.
//!   [`safe_names`]: names from Redis made safe to print.

// Unit tests may run long: the 150-line rule is for production code.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod app;
pub mod backend;
pub(crate) mod cadence;
pub mod check;
pub mod cli;
pub mod config;
#[doc(hidden)]
pub mod derived;
pub(crate) mod events;
pub mod exposition;
pub mod glob;
pub mod http;
pub mod lag;
pub(crate) mod loss;
pub mod metrics;
pub(crate) mod multitarget;
pub mod poller;
pub mod probe;
pub(crate) mod process;
pub(crate) mod safe_names;
pub(crate) mod schedule;
pub mod snapshot;
pub(crate) mod state_file;
pub(crate) mod status;
pub mod telemetry;
pub(crate) mod tls_signatures;
pub(crate) mod trend;
pub mod vocab;
