//! What ships beside the binary, tested as code: alert rules, dashboards, the mixin, the
//! Kubernetes manifests and chart, and the README.
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

mod alerts_agree;
mod front_door;
mod house;
mod kubernetes;
mod lean_shape;
mod mixin;
mod monitoring_assets;
