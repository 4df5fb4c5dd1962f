//! OpenMetrics 1.0 from the text exposition, and the `name[]` filter over
//! either: both are line rewriters in front of a writer, so the daemon
//! converts and filters what it already rendered without holding it whole.
//!
//! The conversion touches only metadata: series have the same names and
//! labels in both formats by construction of the catalog (see
//! [`MetricType`](super::catalog::MetricType)), so a sample line is copied
//! as is. Family names lose their type's suffix (`_total`, `_info`,
//! `_bucket`), types become OpenMetrics types, seconds and bytes families
//! get `# UNIT`, HELP texts escape `"`, and comments that are not metadata
//! are dropped (OpenMetrics has none). [`EOF`] ends the exposition.

use std::collections::HashSet;
use std::io::{self, Write};

use super::catalog::{METRICS, find};

/// The last line of an OpenMetrics exposition.
pub const EOF: &[u8] = b"# EOF\n";

/// The content type of the text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The content type of OpenMetrics 1.0.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether an `Accept` header prefers OpenMetrics to the text format: an
/// `application/openmetrics-text` range (version 1.0.0, 0.0.1 or none) with
/// a weight above 0 and at least that of any `text/plain` range. Anything
/// else, no header included, gets the text format.
pub fn prefers_openmetrics<'h>(accept: impl IntoIterator<Item = &'h str>) -> bool {
    let mut openmetrics = 0.0_f64;
    let mut text = 0.0_f64;
    for range in accept.into_iter().flat_map(|h| h.split(',')) {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut q = 1.0;
        let mut version_ok = true;
        for param in parts {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "q" => q = value.trim().parse::<f64>().unwrap_or(0.0).clamp(0.0, 1.0),
                "version" => {
                    version_ok = matches!(value.trim().trim_matches('"'), "1.0.0" | "0.0.1");
                }
                _ => {}
            }
        }
        match media.as_str() {
            "application/openmetrics-text" if version_ok => openmetrics = openmetrics.max(q),
            "text/plain" => text = text.max(q),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

/// A writer that hands whole lines to `rewrite`, which writes what it makes
/// of each into the output buffer; a line cut between two writes waits for
/// its end.
pub struct Lines<W: Write, R: FnMut(&[u8], &mut Vec<u8>)> {
    inner: W,
    rewrite: R,
    partial: Vec<u8>,
    out: Vec<u8>,
}

impl<W: Write, R: FnMut(&[u8], &mut Vec<u8>)> std::fmt::Debug for Lines<W, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("partial", &self.partial.len())
            .field("out", &self.out.len())
            .finish_non_exhaustive()
    }
}

impl<W: Write, R: FnMut(&[u8], &mut Vec<u8>)> Lines<W, R> {
    fn new(inner: W, rewrite: R) -> Self {
        Lines {
            inner,
            rewrite,
            partial: Vec::new(),
            out: Vec::with_capacity(64 * 1024),
        }
    }

    /// Rewrites a last line without its newline, if any, and returns the
    /// writer.
    ///
    /// # Errors
    /// The writer's.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            (self.rewrite)(&line, &mut self.out);
        }
        self.inner.write_all(&self.out)?;
        Ok(self.inner)
    }
}

impl<W: Write, R: FnMut(&[u8], &mut Vec<u8>)> Write for Lines<W, R> {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let taken = data.len();
        while let Some(end) = data.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                (self.rewrite)(&data[..=end], &mut self.out);
            } else {
                self.partial.extend_from_slice(&data[..=end]);
                let line = std::mem::take(&mut self.partial);
                (self.rewrite)(&line, &mut self.out);
            }
            data = &data[end + 1..];
        }
        self.partial.extend_from_slice(data);
        if self.out.len() >= 64 * 1024 {
            self.inner.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.write_all(&self.out)?;
        self.out.clear();
        self.inner.flush()
    }
}

/// `# HELP name …`, `# TYPE name …` or `# UNIT name …`: the name.
fn metadata_name(line: &[u8]) -> Option<&[u8]> {
    let rest = [&b"# HELP "[..], b"# TYPE ", b"# UNIT "]
        .iter()
        .find_map(|p| line.strip_prefix(*p))?;
    let end = rest
        .iter()
        .position(|&b| b == b' ' || b == b'\n')
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Converts the text exposition written into it to OpenMetrics (without
/// the final [`EOF`], which the caller adds once after the last piece).
pub fn to_openmetrics<W: Write>(inner: W) -> Lines<W, impl FnMut(&[u8], &mut Vec<u8>)> {
    Lines::new(inner, move |line: &[u8], out: &mut Vec<u8>| {
        if let Some(rest) = line.strip_prefix(b"# HELP ") {
            let (name, help) = split_name(rest);
            let family = std::str::from_utf8(name).ok().and_then(find);
            out.extend_from_slice(b"# HELP ");
            out.extend_from_slice(family.map_or(name, |d| d.openmetrics_name().as_bytes()));
            out.push(b' ');
            for &b in help {
                if b == b'"' {
                    out.push(b'\\');
                }
                out.push(b);
            }
        } else if let Some(rest) = line.strip_prefix(b"# TYPE ") {
            let (name, _) = split_name(rest);
            let Some(def) = std::str::from_utf8(name).ok().and_then(find) else {
                // Not a family of the catalog: not one the exporter writes.
                out.extend_from_slice(line);
                return;
            };
            let name = def.openmetrics_name();
            out.extend_from_slice(format!("# TYPE {name} {}\n", def.kind.openmetrics()).as_bytes());
            if let Some(unit) = def.unit() {
                out.extend_from_slice(format!("# UNIT {name} {unit}\n").as_bytes());
            }
        } else if line.starts_with(b"#") {
            // OpenMetrics has no free comments.
        } else {
            out.extend_from_slice(line);
        }
    })
}

/// `name rest`: the name and the rest (after one space).
fn split_name(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.iter().position(|&b| b == b' ') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest.strip_suffix(b"\n").unwrap_or(rest), b"\n"),
    }
}

/// The families `name[]` asks for, by the names their metadata lines may
/// carry (the catalog name, and the OpenMetrics family name); a name that is
/// no family of the catalog selects nothing.
pub fn selected_families<'n>(names: impl IntoIterator<Item = &'n str>) -> HashSet<&'static str> {
    let wanted: HashSet<&str> = names.into_iter().collect();
    METRICS
        .iter()
        .filter(|d| wanted.contains(d.name) || wanted.contains(d.openmetrics_name()))
        .flat_map(|d| [d.name, d.openmetrics_name()])
        .collect()
}

/// Keeps the families in `keep` (see [`selected_families`]) of the text or
/// OpenMetrics exposition written into it: their metadata and samples, and
/// comments that are not metadata (`# EOF` among them).
pub fn keep_families<W: Write>(
    inner: W,
    keep: HashSet<&'static str>,
) -> Lines<W, impl FnMut(&[u8], &mut Vec<u8>)> {
    let mut kept = false;
    Lines::new(inner, move |line: &[u8], out: &mut Vec<u8>| {
        if let Some(name) = metadata_name(line) {
            kept = std::str::from_utf8(name).is_ok_and(|n| keep.contains(n));
        } else if line.starts_with(b"#") {
            out.extend_from_slice(line);
            return;
        }
        if kept {
            out.extend_from_slice(line);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::catalog::MetricType;
    use crate::metrics::catalog::{
        EXPORTER_BUILD_INFO, GROUP_PENDING_BY_IDLE, GROUP_STATUS, STREAM_ENTRIES_ADDED,
    };

    fn convert(text: &str) -> String {
        let mut w = to_openmetrics(Vec::new());
        // Cut in awkward places: lines span writes.
        for piece in text.as_bytes().chunks(7) {
            w.write_all(piece).unwrap();
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    #[test]
    fn negotiation_follows_the_weights() {
        // Prometheus 2.42's Accept header.
        assert!(prefers_openmetrics([
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ]));
        assert!(prefers_openmetrics(["application/openmetrics-text"]));
        assert!(!prefers_openmetrics([]));
        assert!(!prefers_openmetrics(["*/*"]));
        assert!(!prefers_openmetrics(["text/plain"]));
        assert!(!prefers_openmetrics([
            "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"
        ]));
        assert!(!prefers_openmetrics([
            "application/openmetrics-text;version=2.0.0"
        ]));
        assert!(!prefers_openmetrics(["application/openmetrics-text;q=0"]));
    }

    #[test]
    fn names_lose_their_type_suffix_and_units_are_declared() {
        assert_eq!(
            STREAM_ENTRIES_ADDED.openmetrics_name(),
            "redis_streams_stream_entries_added"
        );
        assert_eq!(
            GROUP_PENDING_BY_IDLE.openmetrics_name(),
            "redis_streams_group_pending_by_idle"
        );
        assert_eq!(
            EXPORTER_BUILD_INFO.openmetrics_name(),
            "redis_streams_exporter_build"
        );
        assert_eq!(GROUP_STATUS.openmetrics_name(), GROUP_STATUS.name);
        let text = "# HELP redis_streams_stream_entries_added_total Entries \"ever\" added.\n\
                    # TYPE redis_streams_stream_entries_added_total counter\n\
                    redis_streams_stream_entries_added_total{target=\"t\",stream=\"s\"} 3\n\
                    # redis-streams-exporter: a comment\n\
                    # HELP redis_streams_group_lag_seconds Age.\n\
                    # TYPE redis_streams_group_lag_seconds gauge\n\
                    redis_streams_group_lag_seconds{target=\"t\",stream=\"s\",group=\"g\"} 1.5\n";
        assert_eq!(
            convert(text),
            "# HELP redis_streams_stream_entries_added Entries \\\"ever\\\" added.\n\
             # TYPE redis_streams_stream_entries_added counter\n\
             redis_streams_stream_entries_added_total{target=\"t\",stream=\"s\"} 3\n\
             # HELP redis_streams_group_lag_seconds Age.\n\
             # TYPE redis_streams_group_lag_seconds gauge\n\
             # UNIT redis_streams_group_lag_seconds seconds\n\
             redis_streams_group_lag_seconds{target=\"t\",stream=\"s\",group=\"g\"} 1.5\n"
        );
    }

    /// Every catalog entry fits OpenMetrics: counters end in `_total`, info
    /// families in `_info`, gauge histograms in `_bucket` with `le` last,
    /// and no two families claim a name.
    #[test]
    fn the_catalog_fits_openmetrics() {
        let mut claimed = HashSet::new();
        for def in METRICS {
            let suffixes: &[&str] = match def.kind {
                MetricType::Counter => {
                    assert!(def.name.ends_with("_total"), "{}", def.name);
                    &["_total", "_created"]
                }
                MetricType::Info => {
                    assert!(def.name.ends_with("_info"), "{}", def.name);
                    &["_info"]
                }
                MetricType::GaugeHistogram => {
                    assert!(def.name.ends_with("_bucket"), "{}", def.name);
                    assert_eq!(def.labels.last(), Some(&"le"), "{}", def.name);
                    &["_bucket", "_gcount", "_gsum"]
                }
                MetricType::Gauge | MetricType::Untyped => {
                    assert!(!def.labels.contains(&"le"), "{}", def.name);
                    &[]
                }
            };
            let family = def.openmetrics_name();
            for suffix in suffixes.iter().chain([&""]) {
                assert!(
                    claimed.insert(format!("{family}{suffix}")),
                    "{family}{suffix} clashes"
                );
            }
        }
    }

    #[test]
    fn the_filter_keeps_the_named_families_in_either_format() {
        let keep = selected_families(["redis_streams_group_pending_by_idle", "nope"]);
        assert!(keep.contains("redis_streams_group_pending_by_idle_bucket"));
        let text = "# HELP redis_streams_group_pending_by_idle PEL.\n\
                    # TYPE redis_streams_group_pending_by_idle gaugehistogram\n\
                    redis_streams_group_pending_by_idle_bucket{le=\"+Inf\"} 1\n\
                    # HELP redis_streams_group_lag Lag.\n\
                    # TYPE redis_streams_group_lag gauge\n\
                    redis_streams_group_lag 1\n\
                    # EOF\n";
        let mut w = keep_families(Vec::new(), keep);
        w.write_all(text.as_bytes()).unwrap();
        let kept = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(
            kept,
            "# HELP redis_streams_group_pending_by_idle PEL.\n\
             # TYPE redis_streams_group_pending_by_idle gaugehistogram\n\
             redis_streams_group_pending_by_idle_bucket{le=\"+Inf\"} 1\n\
             # EOF\n"
        );
        assert!(selected_families(["nope"]).is_empty());
    }
}
