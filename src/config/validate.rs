//! Turns [`RawConfig`] into [`Config`]: defaults, parsing of durations and
//! URLs, range checks and secret resolution, collecting every problem with
//! its key path instead of stopping at the first.
//!
//! The rooms: `from_str` (text to configuration), `parse` (the TOML and its
//! errors), `overrides` (the flags), `validator` (the problems and the walk
//! of the whole file, section by section), and by subject: `sections` (the
//! sections that are only values: `[log]`, `[schedule]`, `[limits]`,
//! `[metrics]`, `[status]`), `targets` (targets, their URLs and secrets,
//! stream rules), `web` (`[web]`, `[probe]` and auth modules), `values`
//! (durations, ranges, priorities, buckets) and `suggest` (the nearest
//! valid name).
//!
//! [`RawConfig`]: super::raw::RawConfig
//! [`Config`]: super::Config

mod from_str;
mod overrides;
mod parse;
mod sections;
mod suggest;
mod targets;
mod validator;
mod values;
mod web;

pub use from_str::from_str;
pub use overrides::CliOverrides;
pub(super) use targets::parse_url;

#[cfg(test)]
mod tests;
