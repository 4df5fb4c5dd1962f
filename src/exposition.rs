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
/// small expositions (a millisecond to render) follow changes at once. At
/// 10,000 streams a render takes about 0.25 s, so probes finishing within
/// about 5 s of each other share one render (a value waits at most that long
/// to be served, well inside the 15 s stream poll).
const RENDER_SPACING: u32 = 20;

/// Size of the pieces the compressed exposition is kept in.
const CHUNK: usize = 256 * 1024;

/// Bytes kept as a list of pieces.
#[derive(Clone, Debug, Default)]
pub struct Chunks(Arc<[bytes::Bytes]>);

impl Chunks {
    /// The pieces, in order.
    pub fn pieces(&self) -> impl Iterator<Item = bytes::Bytes> + Send + use<> {
        let all = self.0.clone();
        (0..all.len()).map(move |i| all[i].clone())
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.0.iter().map(bytes::Bytes::len).sum()
    }

    /// True when there is nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the pieces as one byte stream.
    pub fn reader(&self) -> impl std::io::Read + Send + use<> {
        ChunksReader {
            chunks: self.0.clone(),
            index: 0,
            offset: 0,
        }
    }
}

struct ChunksReader {
    chunks: Arc<[bytes::Bytes]>,
    index: usize,
    offset: usize,
}

impl std::io::Read for ChunksReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(chunk) = self.chunks.get(self.index) {
            let rest = &chunk[self.offset..];
            if rest.is_empty() {
                self.index += 1;
                self.offset = 0;
                continue;
            }
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.offset += n;
            return Ok(n);
        }
        Ok(0)
    }
}

/// A writer into [`Chunks`] of [`CHUNK`] bytes each.
#[derive(Debug, Default)]
struct ChunkWriter {
    done: Vec<bytes::Bytes>,
    current: Vec<u8>,
}

impl ChunkWriter {
    fn finish(mut self) -> Chunks {
        if !self.current.is_empty() {
            self.current.shrink_to_fit();
            self.done.push(self.current.into());
        }
        Chunks(self.done.into())
    }
}

impl std::io::Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.current.capacity() == 0 {
            self.current.reserve_exact(CHUNK);
        }
        let n = buf.len().min(CHUNK - self.current.len());
        self.current.extend_from_slice(&buf[..n]);
        if self.current.len() == CHUNK {
            self.done.push(std::mem::take(&mut self.current).into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One rendered exposition.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The snapshot generation it shows.
    pub generation: u64,
    /// The text, gzip-compressed, in chunks (it is written in pieces of
    /// fixed size so it never needs a doubled buffer, and served as is).
    pub gzip: Chunks,
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
                    ChunkWriter::default(),
                    flate2::Compression::fast(),
                );
                let (gz, duplicates) = render(&targets, &exporter, BuildInfo::CURRENT, gz)?;
                Ok::<_, std::io::Error>((gz.finish()?.finish(), duplicates))
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
                        gzip,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn chunks_round_trip_across_boundaries() {
        let data: Vec<u8> = (0..(CHUNK * 2 + 1234)).map(|i| (i % 251) as u8).collect();
        let mut w = ChunkWriter::default();
        for piece in data.chunks(7_001) {
            w.write_all(piece).unwrap();
        }
        let chunks = w.finish();
        assert_eq!(chunks.len(), data.len());
        assert_eq!(chunks.pieces().count(), 3);
        let mut back = Vec::new();
        chunks.reader().read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
        assert!(ChunkWriter::default().finish().is_empty());
    }
}
