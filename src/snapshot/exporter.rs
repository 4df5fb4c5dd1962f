//! The exporter's own state that is not about a target: reloads, `/probe`
//! counters, the process figures and the label limit in force.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Exporter-wide state that is not about a target.
#[derive(Debug)]
pub struct ExporterState {
    /// Reloads attempted.
    pub reloads: AtomicU64,
    /// Reloads rejected.
    pub reload_failures: AtomicU64,
    /// Last reload succeeded (or none attempted).
    pub last_reload_ok: AtomicBool,
    /// The process's own figures, read when the exposition is rendered
    /// (`None` in the live state, and where /proc cannot be read).
    pub process: Option<crate::process::ProcessStats>,
    /// `metrics.max_label_value_bytes` of the configuration in force.
    pub label_limit: AtomicUsize,
    /// What `/probe` is doing.
    pub multi_target: MultiTargetCounters,
}

/// `/probe` at a glance, for `/metrics`.
#[derive(Debug, Default)]
pub struct MultiTargetCounters {
    /// Targets polled for `/probe` now.
    pub targets: AtomicU64,
    /// `[probe] max_targets`.
    pub max_targets: AtomicU64,
    /// Targets dropped after their time to live.
    pub expired: AtomicU64,
    /// Requests by result (`ok` or the refusal's label).
    pub requests: std::sync::Mutex<BTreeMap<&'static str, u64>>,
}

impl MultiTargetCounters {
    /// Counts one request.
    pub fn request(&self, result: &'static str) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(result)
            .or_insert(0) += 1;
    }

    fn copy(&self) -> MultiTargetCounters {
        MultiTargetCounters {
            targets: AtomicU64::new(self.targets.load(Ordering::Relaxed)),
            max_targets: AtomicU64::new(self.max_targets.load(Ordering::Relaxed)),
            expired: AtomicU64::new(self.expired.load(Ordering::Relaxed)),
            requests: std::sync::Mutex::new(
                self.requests
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ),
        }
    }
}

impl ExporterState {
    /// A copy of the counters at this moment.
    pub fn copy(&self) -> ExporterState {
        ExporterState {
            reloads: AtomicU64::new(self.reloads.load(Ordering::Relaxed)),
            reload_failures: AtomicU64::new(self.reload_failures.load(Ordering::Relaxed)),
            last_reload_ok: AtomicBool::new(self.last_reload_ok.load(Ordering::Relaxed)),
            process: self.process,
            label_limit: AtomicUsize::new(self.label_limit.load(Ordering::Relaxed)),
            multi_target: self.multi_target.copy(),
        }
    }
}

impl Default for ExporterState {
    fn default() -> Self {
        ExporterState {
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            last_reload_ok: AtomicBool::new(true),
            process: None,
            label_limit: AtomicUsize::new(crate::config::DEFAULT_MAX_LABEL_VALUE_BYTES),
            multi_target: MultiTargetCounters::default(),
        }
    }
}
