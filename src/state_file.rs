//! What the exporter learned survives its own restart: the state file
//! (`status.state_file`, `--state.file`). It keeps, per configured target
//! and group, the learned read cadence and hold times, the status window,
//! what the status rules know of the group's reads and of the stream's
//! head, and the loss ledger (counts, the last loss of each cause, the last
//! poll it compares with and the server it was kept against). So a batch
//! group without `read_every` is judged by its rhythm from the first poll
//! after a restart, and a loss while the exporter was down is proven
//! against the last poll before it, under the ledger's own rules (another
//! server, other data: a new baseline).
//!
//! [`StateFile`] reads the file once at start ([`StateFile::open`]: a
//! missing, unreadable, corrupt, stale, foreign file is ignored with one
//! log line, never a failure), hands each target's part to its poller
//! before its first poll ([`StateFile::restore`]), and writes the pollers'
//! state every [`SAVE_EVERY`] ([`StateFile::keep_saving`]) and once more at
//! shutdown, after the pollers stopped ([`StateFile::save_at_shutdown`]).
//! Targets that `/probe` adds are not kept.
//!
//! The rooms: `document` (the format, what is kept of a group, and what a
//! file read at start is worth) and `disk` (reading, and writing
//! atomically).

mod disk;
mod document;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::Target;
use crate::probe::TargetState;

pub use disk::StateFileError;

use document::{Ignored, RestoredTarget, SavedTarget, StateDocument};

/// How often the state is written while the exporter runs (and once more
/// at shutdown): a crash or a kill loses at most this much of what was
/// learned.
pub const SAVE_EVERY: Duration = Duration::from_secs(60);

/// One target whose state is written: its configuration and its poller's
/// state.
pub type TrackedTarget = (Arc<Target>, Arc<Mutex<TargetState>>);

/// The state file of a running daemon.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    /// What the file held at start for the configured targets, until each
    /// target's first poller takes its part.
    loaded: Mutex<BTreeMap<String, RestoredTarget>>,
    /// The targets whose state is written, as the last reload left them.
    tracked: Mutex<Vec<TrackedTarget>>,
    /// Held through a write (one at a time); whether the last one failed,
    /// so a failure is logged when it starts, not every minute.
    writing: Mutex<bool>,
}

/// What one write wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveReport {
    /// Targets written.
    pub targets: usize,
    /// Groups written, over every target.
    pub groups: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl StateFile {
    /// The state file at `path`, read for `targets` at `now`; what it
    /// holds, or why it is ignored, is logged in one line.
    pub fn open(path: PathBuf, targets: &[Arc<Target>], now: SystemTime) -> StateFile {
        let loaded = Self::load(&path, targets, now);
        StateFile {
            path,
            loaded: Mutex::new(loaded),
            tracked: Mutex::default(),
            writing: Mutex::new(false),
        }
    }

    /// Reads the file and logs what it gave or why it was ignored.
    fn load(
        path: &Path,
        targets: &[Arc<Target>],
        now: SystemTime,
    ) -> BTreeMap<String, RestoredTarget> {
        let shown = path.display();
        let judged = match disk::read(path) {
            Ok(Some(bytes)) => document::judge(&bytes, targets, millis_since_epoch(now)),
            Ok(None) => Err(Ignored::Missing),
            Err(e) => Err(Ignored::Unreadable(e.to_string())),
        };
        match judged {
            Ok(restorable) => {
                let ago = millis_since_epoch(now).saturating_sub(restorable.saved_at_ms);
                let groups: usize = restorable
                    .targets
                    .values()
                    .map(RestoredTarget::groups)
                    .sum();
                tracing::info!(
                    path = %shown,
                    saved_ago = %humantime::format_duration(Duration::from_secs(ago / 1000)),
                    targets = restorable.targets.len(),
                    groups,
                    left_out = ?restorable.left_out,
                    "state file read: learned cadences, hold times, status windows and loss ledgers carry on"
                );
                restorable.targets
            }
            Err(Ignored::Missing) => {
                tracing::info!(path = %shown, "no state file yet; it is written every minute and at shutdown");
                BTreeMap::new()
            }
            Err(why @ (Ignored::Unreadable(_) | Ignored::Corrupt(_))) => {
                tracing::warn!(path = %shown, "state file ignored, starting afresh: {why}");
                BTreeMap::new()
            }
            Err(why) => {
                tracing::info!(path = %shown, "state file ignored, starting afresh: {why}");
                BTreeMap::new()
            }
        }
    }

    /// Gives `target`'s part of the file, if it has one, to its poller's
    /// `state` before its first poll; once only (a poller started later,
    /// by a reload, starts from what its predecessor kept, not from the
    /// file).
    pub fn restore(&self, target: &Target, state: &Mutex<TargetState>) {
        let Some(restored) = lock(&self.loaded).remove(&target.name) else {
            return;
        };
        lock(state).restore(restored.memories, restored.ledgers);
    }

    /// Drops what no poller took (after the first pollers started).
    pub fn forget_unclaimed(&self) {
        lock(&self.loaded).clear();
    }

    /// The targets whose state is written from now on.
    pub fn track(&self, targets: Vec<TrackedTarget>) {
        *lock(&self.tracked) = targets;
    }

    /// Writes the state of every tracked target, saved at `now`
    /// (blocking: file I/O), as the daemon does, without logging.
    ///
    /// # Errors
    /// When the file cannot be written; the last complete one stays.
    #[cfg(test)]
    pub fn save(&self, now: SystemTime) -> Result<SaveReport, StateFileError> {
        let _one_at_a_time = lock(&self.writing);
        self.write(now)
    }

    /// Writes the state of every tracked target, saved at `now`; the
    /// caller holds `writing`.
    fn write(&self, now: SystemTime) -> Result<SaveReport, StateFileError> {
        let tracked = lock(&self.tracked).clone();
        let targets: Vec<SavedTarget> = tracked
            .iter()
            .map(|(target, state)| SavedTarget::of(target, &lock(state)))
            .collect();
        let document = StateDocument::new(millis_since_epoch(now), targets);
        let report = SaveReport {
            targets: document.targets.len(),
            groups: document.groups(),
        };
        disk::write_atomically(&self.path, |out| {
            serde_json::to_writer(&mut *out, &document)?;
            std::io::Write::write_all(out, b"\n")
        })?;
        Ok(report)
    }

    /// Writes the state now and logs the outcome: a failure when it
    /// starts (and at `shutdown`, always), a success at `shutdown` or
    /// after failures.
    fn save_and_log(&self, now: SystemTime, shutdown: bool) {
        let mut failing = lock(&self.writing);
        let was_failing = *failing;
        let path = self.path.display();
        match self.write(now) {
            Ok(report) => {
                *failing = false;
                if shutdown || was_failing {
                    tracing::info!(%path, targets = report.targets, groups = report.groups, "state file written");
                } else {
                    tracing::debug!(%path, targets = report.targets, groups = report.groups, "state file written");
                }
            }
            Err(e) => {
                *failing = true;
                if shutdown || !was_failing {
                    tracing::warn!(error = %e, "state file not written: what the exporter learned since the last write will not survive a restart");
                } else {
                    tracing::debug!(error = %e, "state file still not written");
                }
            }
        }
    }

    /// Writes the state every `every` until `shutdown` (the first write one
    /// `every` after the start).
    pub async fn keep_saving(self: Arc<Self>, every: Duration, shutdown: CancellationToken) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            let this = self.clone();
            let write =
                tokio::task::spawn_blocking(move || this.save_and_log(SystemTime::now(), false));
            tokio::select! {
                _ = write => {}
                // The write goes on; the one at shutdown waits for it.
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// Writes the state once the pollers have stopped, within `grace`.
    pub async fn save_at_shutdown(self: Arc<Self>, grace: Duration) {
        let path = self.path.clone();
        let write = tokio::task::spawn_blocking(move || self.save_and_log(SystemTime::now(), true));
        if tokio::time::timeout(grace, write).await.is_err() {
            tracing::warn!(path = %path.display(), ?grace, "state file not written within the shutdown grace");
        }
    }
}
