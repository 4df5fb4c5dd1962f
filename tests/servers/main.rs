//! Tests against real servers with the exporter's probes in-process: the figures against the
//! truth, in motion and between polls, the differential oracle, cost, cardinality, keyspace
//! events, clusters and Sentinel.
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

mod between_polls;
mod cardinality;
mod client_tracking;
mod cluster;
mod core_values;
mod cost;
mod fuzz;
mod hostile;
mod keyspace_events;
mod long_names;
mod memory;
mod motion;
mod oracle;
mod read_only;
mod sentinel;
mod server_capabilities;
mod truth;
