//! The rendered exposition, kept current in the background: when the
//! snapshots change it is rendered and gzip-compressed once, and `/metrics`
//! serves the latest result from memory without waiting, however many
//! scrapes arrive and however large the output is. Only the compressed form
//! is kept (about 1/20 of the text at 10 000 streams).
//!
//! The same render also feeds an OpenMetrics copy (the text converted line
//! by line as it is written, see [`crate::metrics::openmetrics`]), kept
//! compressed beside it, for scrapers that ask for OpenMetrics (Prometheus
//! does by default): a scrape of either format serves bytes already made.
//!
//! Each [`Section`] of the text is compressed on its own and kept with what
//! it was written from; a render rewrites only the sections whose snapshot
//! maps changed (a probe run replaces one map) and joins the pieces into one
//! gzip member. Compressing 54 MB was most of the exporter's CPU at 10,000
//! streams.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::openmetrics::{EOF, to_openmetrics};
use crate::metrics::{BuildInfo, Renderer, Section, SectionCounts, SectionInputs};
use crate::snapshot::{ExporterState, SnapshotStore, TargetSnapshot};

/// Changes arriving within this time of each other are rendered together.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// After a render taking `d`, the next waits `RENDER_SPACING × d`: a storm of
/// changes can keep at most 1/(1 + RENDER_SPACING) of a core rendering, while
/// small expositions (a millisecond to render) follow changes at once. At
/// 10,000 streams a render that rewrites every section took about 0.25 s,
/// so probes finishing within about 5 s of each other share one render (a
/// value waits at most that long to be served, well inside the 15 s stream
/// poll).
const RENDER_SPACING: u32 = 20;

/// The longest wait between two renders, whatever a render takes: at
/// 100,000 streams a render took over a second, and 20 times that held
/// each stream poll's values back for up to half a minute (the written
/// streams were served 51 s old against a 15 s poll). The cap is what
/// 10,000 streams wait (0.25 s × 20), so smaller expositions keep their
/// pace; past it a storm of changes may keep a larger share of a core
/// rendering, which an exposition that size costs anyway.
const RENDER_SPACING_CAP: Duration = Duration::from_secs(5);

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

    /// Total length in bytes (only the tests measure a whole body).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.iter().map(bytes::Bytes::len).sum()
    }

    /// True when there is nothing.
    #[cfg(test)]
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

/// Why a target is not ready: the failure of the probe it waits for, or
/// that the probe has not run yet.
pub fn not_ready_reason(t: &TargetSnapshot) -> String {
    use crate::vocab::ProbeKind;
    for kind in [ProbeKind::Discovery, ProbeKind::Stream] {
        match t.probes.get(&kind) {
            Some(p) if p.last_success.is_some() => {}
            Some(p) => {
                return match &p.last_error {
                    Some(e) => format!("{} failed: {e}", kind.label()),
                    None => format!("{} has not succeeded yet", kind.label()),
                };
            }
            None => return format!("{} has not run yet", kind.label()),
        }
    }
    "ready".to_string()
}

/// Why a target is down: the failure of its first failing probe, in
/// collection order.
pub fn down_reason(t: &TargetSnapshot) -> String {
    t.probes
        .iter()
        .filter(|(_, p)| !p.success)
        .find_map(|(kind, p)| {
            p.last_error
                .as_ref()
                .map(|e| format!("{} failed: {e}", kind.label()))
        })
        .unwrap_or_else(|| "no connection yet".to_string())
}

/// Why a target that is down or not ready is so, from its probes; `None`
/// when it is up and ready.
pub fn target_problem(t: &TargetSnapshot) -> Option<String> {
    if !t.up {
        return Some(format!("down: {}", down_reason(t)));
    }
    (!t.ready).then(|| format!("not ready: {}", not_ready_reason(t)))
}

/// What `/readyz` says of a target: that its first collection is still
/// running, or else its problem ([`target_problem`]); `None` when it is up
/// and ready.
pub fn readiness_note(t: &TargetSnapshot) -> Option<String> {
    if !t.first_collection_done() {
        return Some(format!(
            "first collection in progress: {}",
            not_ready_reason(t)
        ));
    }
    target_problem(t)
}

/// One rendered exposition.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The text, gzip-compressed, in chunks (it is written in pieces of
    /// fixed size so it never needs a doubled buffer, and served as is).
    pub gzip: Chunks,
    /// The same in OpenMetrics, gzip-compressed, ending with `# EOF`.
    pub openmetrics_gzip: Chunks,
    /// The targets in it whose first collection has an outcome (data, or
    /// `target_up 0` with why): `/readyz` answers from what `/metrics`
    /// serves, not from what is still being rendered.
    pub collected: BTreeSet<Arc<str>>,
    /// The targets in it that are collecting for the first time, down or
    /// not ready, each with its [`readiness_note`].
    pub notes: Vec<(Arc<str>, String)>,
}

/// The latest rendered exposition and the task that keeps it current.
#[derive(Debug)]
pub struct Exposition {
    latest: watch::Sender<Option<Rendered>>,
    renders: AtomicU64,
}

impl Exposition {
    /// Starts rendering `store` in the background, in a task of `tasks`
    /// that ends when `stop` is cancelled (the daemon's shutdown).
    pub fn start(
        store: Arc<SnapshotStore>,
        tasks: &TaskTracker,
        stop: CancellationToken,
    ) -> Arc<Exposition> {
        let exposition = Arc::new(Exposition {
            latest: watch::Sender::new(None),
            renders: AtomicU64::new(0),
        });
        let this = exposition.clone();
        tasks.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = this.keep_current(&store) => {}
            }
        });
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

    /// Renders every change of `store`; never returns (its caller stops it).
    async fn keep_current(&self, store: &SnapshotStore) {
        let mut shown: Option<u64> = None;
        let mut cache = SectionCache::default();
        loop {
            let generation = store.generation();
            if shown != Some(generation) {
                let started = tokio::time::Instant::now();
                // Exporter state first, targets second: a reload updates its
                // counters after it applied the new targets, so what is shown of
                // a reload is never newer than the targets shown with it.
                let mut exporter = store.exporter.copy();
                exporter.process = crate::process::read();
                let targets = store.targets();
                let collected = targets
                    .iter()
                    .filter(|t| t.first_collection_done())
                    .map(|t| t.name.clone())
                    .collect();
                let notes = targets
                    .iter()
                    .filter_map(|t| readiness_note(t).map(|note| (t.name.clone(), note)))
                    .collect();
                let mut sections = std::mem::take(&mut cache);
                let rendered = tokio::task::spawn_blocking(move || {
                    let out = render_gzip(&targets, &exporter, &mut sections);
                    (out, sections)
                })
                .await
                .map(|(out, sections)| {
                    cache = sections;
                    out
                });
                match rendered {
                    Ok(Ok((gzip, openmetrics_gzip, duplicates))) => {
                        if duplicates > 0 {
                            tracing::debug!(duplicates, "series dropped: names that escape alike");
                        }
                        self.renders.fetch_add(1, Ordering::Relaxed);
                        self.latest.send_replace(Some(Rendered {
                            gzip,
                            openmetrics_gzip,
                            collected,
                            notes,
                        }));
                    }
                    Ok(Err(e)) => tracing::error!(error = %e, "rendering metrics failed"),
                    Err(e) => tracing::error!(error = %e, "rendering metrics panicked"),
                }
                shown = Some(generation);
                tokio::time::sleep((started.elapsed() * RENDER_SPACING).min(RENDER_SPACING_CAP))
                    .await;
                continue;
            }
            store.changed().await;
            tokio::time::sleep(DEBOUNCE).await;
        }
    }
}

/// The compressed sections of the last render, in [`Section::ALL`] order.
type SectionCache = [Option<CompressedSection>; Section::ALL.len()];

/// One section, compressed on its own in both formats, and what it was
/// written from.
#[derive(Debug)]
struct CompressedSection {
    /// `None`: written afresh every time.
    inputs: Option<SectionInputs>,
    text: Deflated,
    openmetrics: Deflated,
    counts: SectionCounts,
}

/// Raw deflate of some bytes, and their CRC and length.
#[derive(Debug)]
struct Deflated {
    deflate: Chunks,
    crc: flate2::Crc,
}

/// One gzip member from deflated pieces, in order.
fn gzip_member<'d>(pieces: impl Iterator<Item = &'d Deflated>) -> Chunks {
    let mut out = vec![bytes::Bytes::from_static(&GZIP_HEADER)];
    let mut crc = flate2::Crc::new();
    for piece in pieces {
        out.extend(piece.deflate.pieces());
        crc.combine(&piece.crc);
    }
    let mut end = Vec::with_capacity(10);
    end.extend_from_slice(&DEFLATE_END);
    end.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE is the length modulo 2^32, which is what `amount` keeps.
    end.extend_from_slice(&crc.amount().to_le_bytes());
    out.push(end.into());
    Chunks(out.into())
}

/// Writes one section's text to `text` and its OpenMetrics conversion to
/// `openmetrics`.
struct BothFormats<T: std::io::Write, O: std::io::Write> {
    text: T,
    openmetrics: O,
}

impl<T: std::io::Write, O: std::io::Write> std::io::Write for BothFormats<T, O> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.text.write_all(data)?;
        self.openmetrics.write_all(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.text.flush()?;
        self.openmetrics.flush()
    }
}

/// A gzip header: no name, no time, unknown OS.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// An empty final deflate block (fixed Huffman codes, BFINAL set).
const DEFLATE_END: [u8; 2] = [0x03, 0x00];

/// Renders `targets` into one gzip member of each format, compressing again
/// only the sections whose inputs differ from the cached ones; returns the
/// text, the OpenMetrics and the number of series dropped as duplicates.
fn render_gzip(
    targets: &[Arc<TargetSnapshot>],
    exporter: &ExporterState,
    cache: &mut SectionCache,
) -> std::io::Result<(Chunks, Chunks, u64)> {
    let renderer = Renderer::new(targets, exporter, BuildInfo::CURRENT);
    let mut duplicates = 0;
    for (slot, section) in cache.iter_mut().zip(Section::ALL) {
        let inputs = renderer.inputs(section);
        let reused = slot
            .take()
            .filter(|c| c.inputs.is_some() && c.inputs == inputs);
        let compressed = match reused {
            Some(c) => c,
            None => {
                let both = BothFormats {
                    text: SectionDeflater::new(),
                    openmetrics: to_openmetrics(SectionDeflater::new()),
                };
                let (both, counts) = renderer.section(section, both)?;
                CompressedSection {
                    inputs,
                    text: both.text.finish()?,
                    openmetrics: both.openmetrics.finish()?.finish()?,
                    counts,
                }
            }
        };
        let compressed = slot.insert(compressed);
        duplicates += compressed.counts.duplicates;
        renderer.note(&compressed.counts);
    }
    let sections = || cache.iter().flatten();
    let text = gzip_member(sections().map(|c| &c.text));
    let mut eof = SectionDeflater::new();
    std::io::Write::write_all(&mut eof, EOF)?;
    let eof = eof.finish()?;
    let openmetrics = gzip_member(
        sections()
            .map(|c| &c.openmetrics)
            .chain(std::iter::once(&eof)),
    );
    Ok((text, openmetrics, duplicates))
}

/// Raw deflate of one section ended by a sync flush: byte-aligned and not
/// final, and with no reference to bytes before it, so sections compressed
/// apart join into one valid deflate stream.
struct SectionDeflater {
    compress: flate2::Compress,
    crc: flate2::Crc,
    out: ChunkWriter,
    buf: Vec<u8>,
}

impl SectionDeflater {
    fn new() -> Self {
        SectionDeflater {
            compress: flate2::Compress::new(flate2::Compression::fast(), false),
            crc: flate2::Crc::new(),
            out: ChunkWriter::default(),
            buf: Vec::with_capacity(64 * 1024),
        }
    }

    /// Runs the compressor over `input` with `flush` until it has taken all
    /// of the input and has no more output to give.
    fn run(&mut self, mut input: &[u8], flush: flate2::FlushCompress) -> std::io::Result<()> {
        loop {
            self.buf.clear();
            let before = self.compress.total_in();
            self.compress
                .compress_vec(input, &mut self.buf, flush)
                .map_err(std::io::Error::other)?;
            let taken = (self.compress.total_in() - before) as usize;
            if taken == 0 && self.buf.is_empty() && !input.is_empty() {
                return Err(std::io::Error::other("deflate made no progress"));
            }
            input = &input[taken..];
            std::io::Write::write_all(&mut self.out, &self.buf)?;
            // Output space left over means the compressor had no more to say.
            if input.is_empty() && self.buf.len() < self.buf.capacity() {
                return Ok(());
            }
        }
    }

    fn finish(mut self) -> std::io::Result<Deflated> {
        self.run(&[], flate2::FlushCompress::Sync)?;
        Ok(Deflated {
            deflate: self.out.finish(),
            crc: self.crc,
        })
    }
}

impl std::io::Write for SectionDeflater {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.crc.update(data);
        self.run(data, flate2::FlushCompress::None)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::{Read, Write};

    use crate::config::StreamSettings;
    use crate::metrics::render;
    use crate::snapshot::{Groups, OldestPending, StreamState};
    use crate::vocab::{StreamId, StreamInfo};

    fn streams(lengths: &[(&str, u64)]) -> Arc<BTreeMap<crate::snapshot::Name, Arc<StreamState>>> {
        let state = |length| StreamState {
            info: StreamInfo {
                length,
                ..StreamInfo::default()
            },
            time_based_ids: true,
            settings: Arc::new(StreamSettings::default()),
            dead_letter: None,
            groups: Groups::new(Vec::new()),
            ..StreamState::default()
        };
        Arc::new(
            lengths
                .iter()
                .map(|(name, length)| (Arc::from(name.as_bytes()), Arc::new(state(*length))))
                .collect(),
        )
    }

    fn plain(targets: &[Arc<TargetSnapshot>]) -> String {
        let (out, _) = render(
            targets,
            &ExporterState::default(),
            BuildInfo::CURRENT,
            Vec::new(),
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The text converted to OpenMetrics in one go, with its end.
    fn openmetrics_of(text: &str) -> String {
        let mut w = to_openmetrics(Vec::new());
        w.write_all(text.as_bytes()).unwrap();
        let mut out = w.finish().unwrap();
        out.extend_from_slice(EOF);
        String::from_utf8(out).unwrap()
    }

    /// Decodes exactly one gzip member, checking its CRC and length.
    fn gunzip(gzip: &Chunks) -> String {
        let mut text = String::new();
        flate2::read::GzDecoder::new(gzip.reader())
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    /// Sections are compressed apart, joined into one gzip member equal to
    /// the plain render, and recompressed only when their map changed.
    #[test]
    fn sections_join_into_one_member_and_unchanged_ones_are_reused() {
        let exporter = ExporterState::default();
        let mut cache = SectionCache::default();
        let mut t = TargetSnapshot {
            name: "t".into(),
            up: true,
            ready: true,
            streams: streams(&[("a", 3), ("b\"q", 5)]),
            ..TargetSnapshot::default()
        };
        let targets = [Arc::new(t.clone())];
        let (first, first_om, _) = render_gzip(&targets, &exporter, &mut cache).unwrap();
        let text = gunzip(&first);
        assert_eq!(text, plain(&targets));
        assert_eq!(gunzip(&first_om), openmetrics_of(&text));
        assert!(text.contains("redis_streams_stream_length{target=\"t\",stream=\"a\"} 3\n"));
        let streams_piece = |c: &Chunks| c.pieces().nth(1).unwrap().as_ptr();

        // Another probe's map changes: the streams section is reused as is.
        let oldest = OldestPending {
            id: StreamId::new(1_000, 0),
            read_at_ms: 43_000,
        };
        t.oldest_pending = Arc::new(BTreeMap::from([(
            (Arc::from(&b"a"[..]), Arc::from(&b"g"[..])),
            oldest,
        )]));
        let targets = [Arc::new(t.clone())];
        let (second, _, _) = render_gzip(&targets, &exporter, &mut cache).unwrap();
        assert_eq!(streams_piece(&second), streams_piece(&first));
        let text = gunzip(&second);
        assert_eq!(text, plain(&targets));
        assert!(
            text.contains("oldest_pending_age_seconds{target=\"t\",stream=\"a\",group=\"g\"} 42\n")
        );

        // The stream poll replaces the streams map: rewritten.
        t.streams = streams(&[("a", 4)]);
        let targets = [Arc::new(t.clone())];
        let (third, third_om, _) = render_gzip(&targets, &exporter, &mut cache).unwrap();
        assert_ne!(streams_piece(&third), streams_piece(&second));
        assert_eq!(gunzip(&third), plain(&targets));
        assert_eq!(gunzip(&third_om), openmetrics_of(&plain(&targets)));

        // The target goes down with the same maps: its data is withdrawn.
        t.up = false;
        let targets = [Arc::new(t.clone())];
        let (fourth, _, _) = render_gzip(&targets, &exporter, &mut cache).unwrap();
        let text = gunzip(&fourth);
        assert_eq!(text, plain(&targets));
        assert!(!text.contains("redis_streams_stream_length"));
    }

    /// A section larger than the compressor's buffers and the chunk size
    /// still round-trips.
    #[test]
    fn large_sections_round_trip() {
        let names: Vec<(String, u64)> = (0..20_000).map(|i| (format!("stream:{i}"), i)).collect();
        let lengths: Vec<(&str, u64)> = names.iter().map(|(n, l)| (n.as_str(), *l)).collect();
        let targets = [Arc::new(TargetSnapshot {
            name: "t".into(),
            up: true,
            streams: streams(&lengths),
            ..TargetSnapshot::default()
        })];
        let mut cache = SectionCache::default();
        let (gzip, openmetrics, _) =
            render_gzip(&targets, &ExporterState::default(), &mut cache).unwrap();
        let text = plain(&targets);
        assert!(text.len() > 16 * 64 * 1024, "{} bytes", text.len());
        assert_eq!(gunzip(&gzip), text);
        assert_eq!(gunzip(&openmetrics), openmetrics_of(&text));
    }

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
