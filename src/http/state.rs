//! What the handlers share: the snapshots, the configuration in force, the
//! exposition kept current, the `/probe` registry and where reloads go.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::exposition::Exposition;
use crate::multitarget::MultiTargets;
use crate::snapshot::SnapshotStore;

/// A reload request: the reply says whether the new file was accepted, and
/// if not why, in words fit for an HTTP client (no file paths).
pub type ReloadRequest = oneshot::Sender<Result<(), String>>;

/// What the handlers share.
#[derive(Debug)]
pub struct HttpState {
    /// Snapshots to render.
    pub store: Arc<SnapshotStore>,
    /// The configuration in force (reloads replace it).
    pub config: Arc<RwLock<Arc<Config>>>,
    /// Where reload requests go.
    pub reload: mpsc::Sender<ReloadRequest>,
    /// The targets `/probe` polls.
    pub multi_targets: Arc<MultiTargets>,
    pub(super) exposition: Arc<Exposition>,
    /// `/readyz` said ready once: it stays so (see `health::readyz`).
    pub(super) ready: AtomicBool,
}

impl HttpState {
    /// Shared state for the router, serving what `exposition` renders.
    /// `/probe` gets a registry of its own, whose tasks nobody stops (see
    /// [`Self::with_multi_targets`] to share the daemon's).
    pub fn new(
        store: Arc<SnapshotStore>,
        config: Arc<RwLock<Arc<Config>>>,
        reload: mpsc::Sender<ReloadRequest>,
        exposition: Arc<Exposition>,
    ) -> Arc<Self> {
        let multi_targets = MultiTargets::start(
            config.clone(),
            store.clone(),
            tokio_util::sync::CancellationToken::new(),
            tokio_util::task::TaskTracker::new(),
        );
        Self::with_multi_targets(store, config, reload, multi_targets, exposition)
    }

    /// Shared state with the daemon's `/probe` registry and renderer (both
    /// started, and stopped, by [`crate::app::run`]).
    pub fn with_multi_targets(
        store: Arc<SnapshotStore>,
        config: Arc<RwLock<Arc<Config>>>,
        reload: mpsc::Sender<ReloadRequest>,
        multi_targets: Arc<MultiTargets>,
        exposition: Arc<Exposition>,
    ) -> Arc<Self> {
        Arc::new(HttpState {
            exposition,
            store,
            config,
            reload,
            multi_targets,
            ready: AtomicBool::new(false),
        })
    }

    /// How many times the exposition was rendered (once per snapshot
    /// generation that was scraped, however many scrapes).
    pub fn renders(&self) -> u64 {
        self.exposition.renders()
    }

    pub(super) fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
