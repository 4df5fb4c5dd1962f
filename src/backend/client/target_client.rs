//! The client itself: what it holds for one target (limits, pages, topology,
//! counters, TLS) and how it is built; the rest of its methods live in the
//! room of their concern.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::topology::Topology;
use super::{ClientStats, NodeAddr};
use crate::backend::paging::Pages;
use crate::backend::ratelimit::RateLimiter;
use crate::backend::tls::TlsSetup;
use crate::config::{Limits, Target};
use crate::vocab::StatsSnapshot;

/// Why a client could not be built: its TLS settings are unusable.
#[derive(Debug, thiserror::Error)]
#[error("target {target}: {detail}")]
pub struct ClientSetupError {
    target: String,
    detail: String,
}

/// The connections to one target.
#[derive(Debug)]
pub struct TargetClient {
    pub(super) target: Arc<Target>,
    pub(super) timeout: Duration,
    pub(super) pipeline_size: usize,
    pub(super) commands: RateLimiter,
    pub(super) entries: RateLimiter,
    pub(super) stats: ClientStats,
    /// For `rediss://` targets.
    pub(super) tls: Option<TlsSetup>,
    pub(super) topology: Mutex<Topology>,
    /// Outcome of the last round trip: `None` before any, then whether it
    /// reached the server.
    pub(super) reachable: Mutex<Option<bool>>,
    /// `CLUSTER SHARDS` was refused (before 7.0): use `CLUSTER SLOTS`.
    pub(super) slots_only: AtomicBool,
    /// Page sizes that follow the server (see `paging`).
    pub(super) pages: Mutex<Pages>,
    /// `MULTI` was refused (`NOPERM`): reads that want one moment go
    /// without a transaction.
    pub(super) no_transactions: AtomicBool,
    /// Raised when a reply did not decode: connections opened before are
    /// not used again (see [`TargetClient::distrust_connections`]).
    pub(super) epoch: AtomicU64,
}

impl TargetClient {
    /// A client for `target`; it connects lazily, on the first command.
    ///
    /// # Errors
    /// When its TLS settings cannot be used (no CA configured and none in
    /// the system).
    pub fn new(target: Arc<Target>, limits: &Limits) -> Result<Self, ClientSetupError> {
        let tls = if target.endpoint.tls {
            if target.tls.insecure_skip_verify {
                tracing::warn!(redis_target = %target.name, "tls_insecure_skip_verify: the server's certificate is not verified; anyone on the path can read the exporter's password and answers");
            }
            Some(
                TlsSetup::new(&target.tls).map_err(|detail| ClientSetupError {
                    target: target.name.clone(),
                    detail,
                })?,
            )
        } else {
            None
        };
        let burst = limits
            .pipeline_size
            .min(limits.commands_per_second as usize)
            .max(1) as u32;
        let standalone: NodeAddr =
            format!("{}:{}", target.endpoint.host, target.endpoint.port).into();
        Ok(TargetClient {
            timeout: limits.command_timeout,
            pipeline_size: burst as usize,
            commands: RateLimiter::with_shares(
                limits.commands_per_second,
                burst,
                &limits.shares_by_rank(),
            ),
            entries: RateLimiter::new(limits.pending_entries_per_second, limits.pending_page),
            stats: ClientStats::default(),
            tls,
            topology: Mutex::new(Topology::for_mode(&target.mode, standalone)),
            reachable: Mutex::new(None),
            slots_only: AtomicBool::new(false),
            no_transactions: AtomicBool::new(false),
            pages: Mutex::new(Pages::new(limits, target.scan_count)),
            epoch: AtomicU64::new(0),
            target,
        })
    }

    /// The counters.
    pub(crate) fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// A copy of the counters.
    pub(crate) fn stats_snapshot(&self) -> StatsSnapshot {
        self.stats.snapshot(
            (self.commands.waited() + self.entries.waited()).as_secs_f64(),
            self.pages().sizes(),
        )
    }

    pub(super) fn pages(&self) -> std::sync::MutexGuard<'_, Pages> {
        self.pages.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `COUNT` of the next discovery `SCAN` page.
    pub(crate) fn scan_page(&self) -> u32 {
        self.pages().scan.current()
    }

    /// The `COUNT` of the next PEL scan `XPENDING` page.
    pub(crate) fn xpending_page(&self) -> u32 {
        self.pages().xpending.current()
    }

    /// Whether the last round trip reached the server (`None` before any).
    pub(crate) fn reachable(&self) -> Option<bool> {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_reachable(&self, ok: bool) {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner()) = Some(ok);
    }

    /// Commands sent so far by probes of `rank` (see `ratelimit::PRIORITY`).
    pub(crate) fn commands_spent(&self, rank: usize) -> u64 {
        self.commands.spent(rank)
    }

    /// Waits until the PEL scan may read `n` more entries.
    pub(crate) async fn acquire_pending_entries(&self, n: u32) {
        self.entries.acquire(n as usize).await;
    }
}
