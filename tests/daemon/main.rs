//! The daemon and its commands as an operator runs them: configuration checks, `check`, logs,
//! reload, signals, the state file across restarts, build metadata, bad input, and the demo.
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

mod bad_input;
mod build_info;
mod check_command;
mod config_checks;
mod config_files;
mod demo;
mod logs;
mod reload;
mod signals;
mod state_file;
