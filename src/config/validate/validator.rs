//! The validator: the problems it collects, and its walk of the whole file,
//! section by section in the file's order; each section is checked in the
//! room of its subject.

use super::CliOverrides;
use crate::config::raw::RawConfig;
use crate::config::*;

pub(super) struct Validator {
    pub(super) problems: Vec<Problem>,
}

impl Validator {
    pub(super) fn problem(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    /// The whole file, section by section in the file's order, so that
    /// problems are listed in the order a reader meets their keys.
    pub(super) fn config(&mut self, raw: RawConfig, cli: &CliOverrides) -> Config {
        let web = self.web(raw.web, cli);
        let log = self.log(raw.log, cli);
        // A /probe-only exporter (allowed_targets set, no [[targets]]) polls
        // nothing of its own; --redis.url still adds its target.
        let probe_only = !raw.probe.allowed_targets.is_empty() && cli.redis_url.is_none();
        let targets = self.targets(raw.targets, probe_only, cli);
        let schedule = self.schedule(raw.schedule);
        let limits = self.limits(raw.limits);
        let metrics = self.metrics(raw.metrics);
        let (status_window, data_loss_hold) = self.status(raw.status);
        let streams = self.stream_rules(raw.stream_defaults, raw.streams);
        let multi_target = self.multi_target(raw.probe);
        let auth_modules = self.auth_modules(raw.auth_modules);
        Config {
            source: None,
            web,
            log,
            targets,
            schedule,
            limits,
            metrics,
            status_window,
            data_loss_hold,
            streams,
            multi_target,
            auth_modules,
        }
    }
}
