//! What a probe runs with ([`ProbeContext`]), how it fails
//! ([`ProbeError`]) and how it counts per-item problems ([`Problems`]).

use std::sync::{Arc, Mutex, MutexGuard};

use super::state::TargetState;
use crate::backend::{TargetClient, TargetError};
use crate::config::{Config, Target};
use crate::vocab::{ErrorKind, ProbeKind};

/// Everything a probe needs.
#[derive(Debug, Clone)]
pub struct ProbeContext {
    /// The whole configuration.
    pub config: Arc<Config>,
    /// This target's configuration.
    pub target: Arc<Target>,
    /// The connections.
    pub client: Arc<TargetClient>,
    /// The state.
    pub state: Arc<Mutex<TargetState>>,
    /// Held through a stream poll, scheduled or extra: one at a time.
    pub stream_polls: Arc<tokio::sync::Mutex<()>>,
}

impl ProbeContext {
    /// Locks the state. Probes hold it only between awaits.
    pub fn state(&self) -> MutexGuard<'_, TargetState> {
        // A panicking probe leaves at worst a partly updated state, which the
        // next run overwrites; keep serving rather than poisoning the target.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The data generation, to be compared with [`Self::ensure_current`].
    pub fn generation(&self) -> u64 {
        self.state().generation
    }

    /// Fails when the target's data was dropped since `generation` was read.
    ///
    /// # Errors
    /// [`ProbeError::Interrupted`].
    pub(crate) fn ensure_current(
        &self,
        state: &TargetState,
        generation: u64,
    ) -> Result<(), ProbeError> {
        if state.generation == generation {
            Ok(())
        } else {
            Err(ProbeError::Interrupted {
                target: self.target.name.clone(),
            })
        }
    }

    /// As [`Self::ensure_current`], for what a per-group probe read: also
    /// fails while the target's last picture is held after a fall. The
    /// poller does not start these probes then, but one that began just
    /// before the fall may still read a server that answers it (a killed
    /// connection, another server behind the address): its figures would
    /// join a picture of another moment and add series the target never
    /// served while up. The stream poll that reads the server again wakes
    /// them.
    ///
    /// # Errors
    /// [`ProbeError::Interrupted`].
    pub(crate) fn ensure_current_and_live(
        &self,
        state: &TargetState,
        generation: u64,
    ) -> Result<(), ProbeError> {
        self.ensure_current(state, generation)?;
        if state.snapshot.held {
            return Err(ProbeError::Interrupted {
                target: self.target.name.clone(),
            });
        }
        Ok(())
    }

    /// Counts a per-item error.
    pub(crate) fn count_error(&self, kind: ErrorKind) {
        self.client.stats().error(kind);
    }
}

/// Why a probe run failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// The target could not be reached.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The target went down during the run; what it read was discarded.
    #[error("target {target}: went down during the run; its results were discarded")]
    Interrupted {
        /// Target name.
        target: String,
    },
    /// The run had nothing to ask, and the target is unreachable.
    #[error("target {target}: unreachable")]
    Unreachable {
        /// Target name.
        target: String,
    },
    /// The server refused every command of the run.
    #[error("{probe}: the server refused all {count} commands, first: {first}")]
    Refused {
        /// Probe.
        probe: &'static str,
        /// How many.
        count: usize,
        /// The first refusal.
        first: String,
    },
    /// Replies could not be decoded.
    #[error("{probe}: {count} replies could not be decoded, first: {first}")]
    Decode {
        /// Probe.
        probe: &'static str,
        /// How many.
        count: usize,
        /// The first problem.
        first: String,
    },
}

impl ProbeError {
    /// True when the target itself is unreachable (so its data is dropped).
    /// A reply that broke the protocol is not: the server answers, what it
    /// says cannot be read, and the probe fails saying so.
    pub fn target_down(&self) -> bool {
        matches!(
            self,
            ProbeError::Target(
                TargetError::ConnectTimeout { .. }
                    | TargetError::CommandTimeout { .. }
                    | TargetError::Connection { .. }
                    | TargetError::ServerFull { .. }
                    | TargetError::Restarted { .. }
                    | TargetError::Topology { .. }
            )
        )
    }
}

/// What went wrong in one run, item by item, so the run can do everything
/// it can and then fail once: on any reply it could not decode, or when the
/// server refused every command it sent for a reason that is not about a
/// key (a missing ACL permission, say). A stream deleted mid-run or a key of
/// another type is a fact about that key, not a failure of the probe.
#[derive(Debug, Default)]
pub struct Problems {
    decode_count: usize,
    first_decode: Option<String>,
    answered: usize,
    refused: usize,
    first_refusal: Option<String>,
}

impl Problems {
    /// Records a reply that could not be decoded (counted as `protocol`).
    /// The target's connections are not used again: the replies on them
    /// may no longer answer the commands they are taken for.
    pub fn add(&mut self, ctx: &ProbeContext, problem: impl std::fmt::Display) {
        ctx.count_error(ErrorKind::Protocol);
        ctx.client.distrust_connections();
        self.decode_count += 1;
        if self.first_decode.is_none() {
            self.first_decode = Some(problem.to_string());
        }
    }

    /// The decoded value, or `None` with the failure recorded as by
    /// [`Problems::add`]: what every probe does with a reply it decodes.
    pub fn decoded<T, E: std::fmt::Display>(
        &mut self,
        ctx: &ProbeContext,
        decoded: Result<T, E>,
    ) -> Option<T> {
        decoded.map_err(|e| self.add(ctx, e)).ok()
    }

    /// Records a command the server answered.
    pub fn answered(&mut self) {
        self.answered += 1;
    }

    /// Records a command the server refused (already counted by the client).
    pub(crate) fn refused(&mut self, error: &crate::backend::CommandError) {
        if matches!(
            error.kind,
            ErrorKind::NoSuchKey | ErrorKind::WrongType | ErrorKind::NoGroup
        ) {
            return;
        }
        self.refused += 1;
        if self.first_refusal.is_none() {
            self.first_refusal = Some(error.to_string());
        }
    }

    /// `Err` when a reply could not be decoded or every command was refused.
    ///
    /// # Errors
    /// [`ProbeError::Decode`] or [`ProbeError::Refused`] with the first problem.
    pub(crate) fn finish(self, probe: ProbeKind) -> Result<(), ProbeError> {
        if let Some(first) = self.first_decode {
            return Err(ProbeError::Decode {
                probe: probe.label(),
                count: self.decode_count,
                first,
            });
        }
        match self.first_refusal {
            Some(first) if self.answered == 0 => Err(ProbeError::Refused {
                probe: probe.label(),
                count: self.refused,
                first,
            }),
            _ => Ok(()),
        }
    }
}
