//! The sections that are only values: `[log]`, `[schedule]`, `[limits]`,
//! `[metrics]` and `[status]`, each checked key by key against its defaults.

use std::time::Duration;

use super::CliOverrides;
use super::validator::Validator;
use crate::config::raw::{RawLimits, RawLog, RawMetrics, RawSchedule, RawStatus};
use crate::config::*;

impl Validator {
    /// `[log]`, the flags first: its format and its level filter, which
    /// must parse now rather than when logging starts.
    pub(super) fn log(&mut self, raw: RawLog, cli: &CliOverrides) -> Log {
        let log = Log {
            format: match cli.log_format.clone().or(raw.format).as_deref() {
                None | Some("text") => LogFormat::Text,
                Some("json") => LogFormat::Json,
                Some(other) => {
                    self.problem(
                        "log.format",
                        format!("must be \"text\" or \"json\", not {other:?}"),
                    );
                    LogFormat::Text
                }
            },
            level: cli
                .log_level
                .clone()
                .or(raw.level)
                .unwrap_or_else(|| "info".into()),
        };
        if let Err(e) = crate::telemetry::check_filter(&log.level) {
            self.problem("log.level", e);
        }
        log
    }

    /// `[schedule]`: every probe's interval, each positive.
    pub(super) fn schedule(&mut self, s: RawSchedule) -> Schedule {
        let defaults = Schedule::default();
        Schedule {
            discovery: self.interval("schedule.discovery", s.discovery, defaults.discovery),
            info: self.interval("schedule.info", s.info, defaults.info),
            stream: self.interval("schedule.stream", s.stream, defaults.stream),
            pending_summary: self.interval(
                "schedule.pending_summary",
                s.pending_summary,
                defaults.pending_summary,
            ),
            consumers: self.interval("schedule.consumers", s.consumers, defaults.consumers),
            pending_scan: self.interval(
                "schedule.pending_scan",
                s.pending_scan,
                defaults.pending_scan,
            ),
        }
    }

    /// `[limits]`: the command budget, page sizes and the probes' shares
    /// of the budget, each within the range the client can honour.
    pub(super) fn limits(&mut self, l: RawLimits) -> Limits {
        let d = Limits::default();
        Limits {
            commands_per_second: self.positive(
                "limits.commands_per_second",
                l.commands_per_second,
                d.commands_per_second.into(),
                1_000_000,
            ) as u32,
            pending_entries_per_second: self.positive(
                "limits.pending_entries_per_second",
                l.pending_entries_per_second,
                d.pending_entries_per_second.into(),
                100_000_000,
            ) as u32,
            pending_page: self.positive(
                "limits.pending_page",
                l.pending_page,
                d.pending_page.into(),
                100_000,
            ) as u32,
            command_timeout: self.interval(
                "limits.command_timeout",
                l.command_timeout,
                d.command_timeout,
            ),
            pipeline_size: self.positive(
                "limits.pipeline_size",
                l.pipeline_size,
                d.pipeline_size as u64,
                100_000,
            ) as usize,
            lag_exact_count: self.positive(
                "limits.lag_exact_count",
                l.lag_exact_count,
                d.lag_exact_count.into(),
                100_000,
            ) as u32,
            ghost_checks_per_scan: self.ranged(
                "limits.ghost_checks_per_scan",
                l.ghost_checks_per_scan,
                d.ghost_checks_per_scan.into(),
                0,
                10_000_000,
            ) as u32,
            priority: self.priority(l.priority, &d.priority),
            min_share: self.min_share(l.min_share, &d.min_share),
            page_target: self.interval("limits.page_target", l.page_target, d.page_target),
            min_page: self.positive("limits.min_page", l.min_page, d.min_page.into(), 100_000)
                as u32,
        }
    }

    /// `[metrics]`: caps on series and label sizes, and the histograms'
    /// buckets.
    pub(super) fn metrics(&mut self, m: RawMetrics) -> MetricsSettings {
        let dm = MetricsSettings::default();
        MetricsSettings {
            max_consumers_per_group: self.ranged(
                "metrics.max_consumers_per_group",
                m.max_consumers_per_group,
                dm.max_consumers_per_group as u64,
                0,
                100_000,
            ) as usize,
            max_groups_per_stream: self.ranged(
                "metrics.max_groups_per_stream",
                m.max_groups_per_stream,
                dm.max_groups_per_stream as u64,
                1,
                crate::vocab::ROWS_KEPT,
            ) as usize,
            max_label_value_bytes: self.ranged(
                "metrics.max_label_value_bytes",
                m.max_label_value_bytes,
                dm.max_label_value_bytes as u64,
                64,
                1 << 20,
            ) as usize,
            pending_idle_buckets: match m.pending_idle_buckets {
                None => dm.pending_idle_buckets,
                Some(list) => self.duration_buckets("metrics.pending_idle_buckets", &list),
            },
            delivery_count_buckets: match m.delivery_count_buckets {
                None => dm.delivery_count_buckets,
                Some(list) => self.count_buckets("metrics.delivery_count_buckets", &list),
            },
        }
    }

    /// `[status]`: the window of polls a status rests on (at least two, to
    /// see a change) and how long `data_loss` holds after a loss.
    pub(super) fn status(&mut self, raw: RawStatus) -> (usize, Duration) {
        let status_window = self.positive(
            "status.window",
            raw.window,
            DEFAULT_STATUS_WINDOW as u64,
            1000,
        ) as usize;
        if status_window < 2 {
            self.problem("status.window", "must be at least 2 polls");
        }
        let data_loss_hold = self.interval(
            "status.data_loss_hold",
            raw.data_loss_hold,
            DEFAULT_DATA_LOSS_HOLD,
        );
        (status_window, data_loss_hold)
    }
}
