//! End to end, on loopback with real servers: the whole monitoring chain (simulator, Redis,
//! exporters, Prometheus with the shipped rules, Alertmanager with the example's routes) and the
//! multi-target `/probe` pattern behind a real Prometheus.
//!
//! One test binary of the suite (docs/development.md).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::mod_module_files
)] // Test code: a panic is a failed test.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod alerts;
mod dashboards;
mod expect;
mod multi_target;
mod procs;
mod scaling;
mod trim_story;
mod webhook;

/// The chain and the multi-target pair each run a Prometheus and several exporters against
/// scaled `for:` durations; one at a time, so neither's timing depends on the other's load.
static ONE_STACK_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
