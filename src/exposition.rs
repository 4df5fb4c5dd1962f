//! The rendered exposition, kept current in the background: when the
//! snapshots change it is rendered and gzip-compressed once, and `/metrics`
//! serves the latest result from memory without waiting, however many
//! scrapes arrive and however large the output is. Only the compressed form
//! is kept (about 1/20 of the text at 10 000 streams).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::metrics::{BuildInfo, render};
use crate::snapshot::SnapshotStore;

/// Changes arriving within this time of each other are rendered together.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// After a render taking `d`, the next waits `RENDER_SPACING × d`: a storm of
/// changes can keep at most 1/(1 + RENDER_SPACING) of a core rendering, while
/// small expositions (a millisecond to render) follow changes at once.
const RENDER_SPACING: u32 = 10;

/// One rendered exposition.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The snapshot generation it shows.
    pub generation: u64,
    /// The text, gzip-compressed.
    pub gzip: bytes::Bytes,
    /// Targets in it that finished a first collection: `/readyz` answers
    /// from what `/metrics` serves, not from what is still being rendered.
    pub ready_targets: usize,
}

/// The latest rendered exposition and the task that keeps it current.
#[derive(Debug)]
pub struct Exposition {
    latest: watch::Sender<Option<Rendered>>,
    renders: AtomicU64,
}

impl Exposition {
    /// Starts rendering `store` in the background. The task ends soon after
    /// the returned `Exposition` is dropped.
    pub fn start(store: Arc<SnapshotStore>) -> Arc<Exposition> {
        let exposition = Arc::new(Exposition {
            latest: watch::Sender::new(None),
            renders: AtomicU64::new(0),
        });
        tokio::spawn(keep_current(store, Arc::downgrade(&exposition)));
        exposition
    }

    /// The latest exposition; before the first render completes, waits for it.
    pub async fn latest(&self) -> Rendered {
        let mut rx = self.latest.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`; it cannot be gone while we are.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The latest exposition, if one was rendered yet.
    pub fn current(&self) -> Option<Rendered> {
        self.latest.borrow().clone()
    }

    /// How many renders ran (once per change, not per scrape).
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }
}

async fn keep_current(store: Arc<SnapshotStore>, exposition: Weak<Exposition>) {
    let mut shown: Option<u64> = None;
    loop {
        let generation = store.generation();
        if shown != Some(generation) {
            let started = tokio::time::Instant::now();
            // Exporter state first, targets second: a reload updates its
            // counters after it applied the new targets, so what is shown of
            // a reload is never newer than the targets shown with it.
            let exporter = store.exporter.copy();
            let targets = store.targets();
            let ready_targets = targets.iter().filter(|t| t.ready).count();
            let rendered = tokio::task::spawn_blocking(move || {
                let gz = flate2::write::GzEncoder::new(
                    Vec::with_capacity(256 * 1024),
                    flate2::Compression::fast(),
                );
                let (gz, duplicates) = render(&targets, &exporter, BuildInfo::CURRENT, gz)?;
                let mut gzip = gz.finish()?;
                // It is kept until the next render: hold no spare capacity.
                gzip.shrink_to_fit();
                Ok::<_, std::io::Error>((gzip, duplicates))
            })
            .await;
            let Some(this) = exposition.upgrade() else {
                return;
            };
            match rendered {
                Ok(Ok((gzip, duplicates))) => {
                    if duplicates > 0 {
                        tracing::debug!(duplicates, "series dropped: names that escape alike");
                    }
                    this.renders.fetch_add(1, Ordering::Relaxed);
                    this.latest.send_replace(Some(Rendered {
                        generation,
                        gzip: gzip.into(),
                        ready_targets,
                    }));
                }
                Ok(Err(e)) => tracing::error!(error = %e, "rendering metrics failed"),
                Err(e) => tracing::error!(error = %e, "rendering metrics panicked"),
            }
            drop(this);
            shown = Some(generation);
            tokio::time::sleep(started.elapsed() * RENDER_SPACING).await;
            continue;
        }
        tokio::select! {
            _ = store.changed() => tokio::time::sleep(DEBOUNCE).await,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if exposition.strong_count() == 0 {
                    return;
                }
            }
        }
    }
}
