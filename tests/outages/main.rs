//! Faults between the exporter and Redis (a TCP proxy of our own, stopped and restarted
//! servers), dead and hung targets beside healthy ones, and what survives an outage. These
//! tests measure timing, so nothing CPU-heavy shares their binary.
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

mod blips;
mod faults;
mod many_targets;
mod outage;
