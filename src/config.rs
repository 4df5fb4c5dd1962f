//! Configuration: the validated, read-only [`Config`] every other module
//! takes, and [`load`], the only way to build one from a file.
//!
//! Loading has two stages (the ripgrep/postgres_exporter pattern): serde reads
//! the TOML into [`raw`] structs that reject unknown keys, then [`validate`]
//! checks every value and resolves secrets, reporting each problem with the
//! file, the key path and what is wrong. Components accept only [`Config`], so
//! validation cannot be skipped. Defaults live in `defaults` as constants and
//! are mirrored, key by key, in `config/example.toml`.
//!
//! This file holds no code. The rooms: `whole` (the [`Config`] and its
//! logging section), `target` (one deployment to watch), `polling` (schedule
//! and limits), `output` (output shaping), `streams` (per-stream settings and
//! rules), `defaults`, `loading` (reading a file, and its errors), `raw` and
//! `validate` (the two stages), `web`, `tls` and `multitarget`.

mod defaults;
mod loading;
mod multitarget;
mod output;
mod polling;
mod raw;
mod streams;
mod target;
mod tls;
mod validate;
mod web;
mod whole;

pub use defaults::{
    DEFAULT_CONSUMER_INACTIVE_AFTER, DEFAULT_DATA_LOSS_HOLD, DEFAULT_MAX_GROUPS,
    DEFAULT_MAX_LABEL_VALUE_BYTES, DEFAULT_MAX_STREAMS, DEFAULT_REDIS_URL, DEFAULT_SCAN_COUNT,
    DEFAULT_STATUS_WINDOW,
};
pub use loading::{ConfigError, Problem, load};
pub use multitarget::{
    AuthModule, AuthModules, DEFAULT_FIRST_COLLECTION_WAIT, DEFAULT_MAX_PROBED_TARGETS,
    DEFAULT_TARGET_TTL, MAX_PROBE_URL_LEN, MultiTargetRefusal, MultiTargetSettings,
};
pub use output::MetricsSettings;
pub use polling::{Limits, Schedule, probe_names};
pub use streams::{ConsumerRename, Series, StreamRules, StreamSettings, Trimming};
pub use target::{Endpoint, KeyspaceEvents, Mode, NameFilter, Secret, Target};
pub use tls::{ClientIdentity, PemFile, RedisTls};
pub use validate::{CliOverrides, from_str};
pub use web::*;
pub use whole::{Config, Log, targets_by_name};

/// Log output format (the logger's own type: config only chooses it).
pub use crate::telemetry::LogFormat;
