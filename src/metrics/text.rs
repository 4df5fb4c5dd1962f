//! The Prometheus text exposition format (0.0.4), written by hand and
//! streamed: lines go through a small buffer into any `Write` (the gzip
//! encoder, in the daemon), so the whole text is never held in memory.
//! Families are written only when they have samples.
//!
//! Names from Redis become label values one to one (names need not be UTF-8,
//! label values must be): a `\` of the name is written `\\`, a byte that is
//! not UTF-8 or an ASCII control character other than the newline (NUL, tab,
//! escape, DEL) `\xNN`, so a binary key and an ASCII key spelled with the
//! escape never merge, and no raw control byte reaches the text. A name longer than the configured limit
//! (`metrics.max_label_value_bytes`) is shortened and marked with `\…` and a
//! hash of the whole name; only such names could (through a hash collision)
//! share a series, and then the duplicate is dropped instead of making the
//! whole exposition invalid.

use std::collections::HashSet;
use std::io::{self, Write};

use super::catalog::MetricDef;

/// Writes a name from Redis as a label value (see the module doc): UTF-8
/// kept, and a one-to-one mapping for the rest (a `\` in the name becomes
/// `\\`, a byte that is not UTF-8 or an ASCII control character other than
/// the newline `\xNN`), so that no two names, valid
/// UTF-8 or not, share a label value. A name longer than `limit` bytes keeps
/// its first bytes and ends with `\…` and 16 hex digits of a hash of the
/// whole name (a marker no name can spell, since its backslashes are
/// doubled). Then the exposition's own escaping of `\`, `"` and newline.
/// Returns true when the name was shortened.
pub fn escape_label(out: &mut Vec<u8>, value: &[u8], limit: usize) -> bool {
    let plain = value.len() <= limit
        && value.is_ascii()
        && !value
            .iter()
            .any(|&b| matches!(b, b'\\' | b'"' | b'\n') || is_control(b));
    if plain {
        out.extend_from_slice(value);
        return false;
    }
    let shortened = value.len() > limit;
    let kept = if shortened {
        // Not in the middle of a character (the incomplete end of an
        // otherwise valid prefix is left out).
        let cut = match std::str::from_utf8(&value[..limit]) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => limit,
        };
        &value[..cut]
    } else {
        value
    };
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for chunk in kept.utf8_chunks() {
        for b in chunk.valid().bytes() {
            match b {
                // A backslash of the name, doubled, then doubled again by
                // the exposition format.
                b'\\' => out.extend_from_slice(b"\\\\\\\\"),
                b'"' => out.extend_from_slice(b"\\\""),
                b'\n' => out.extend_from_slice(b"\\n"),
                // A control character (NUL, tab, escape, DEL, …) as `\xNN`,
                // like a byte that is not UTF-8: no name can spell that
                // (its backslash would be doubled), so the mapping stays
                // one to one.
                control if is_control(control) => {
                    out.extend_from_slice(b"\\\\x");
                    out.push(HEX[usize::from(control >> 4)]);
                    out.push(HEX[usize::from(control & 0xf)]);
                }
                other => out.push(other),
            }
        }
        for b in chunk.invalid() {
            // `\xNN`, its backslash escaped for the exposition.
            out.extend_from_slice(b"\\\\x");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        }
    }
    if shortened {
        out.extend_from_slice("\\\\…".as_bytes());
        let hash = fnv1a(value);
        for shift in (0..16).rev() {
            out.push(HEX[((hash >> (shift * 4)) & 0xf) as usize]);
        }
    }
    shortened
}

/// An ASCII control character other than the newline (which the
/// exposition format escapes as `\n`): written `\xNN` in label values, so
/// that no raw NUL, tab, escape or DEL reaches a reader of the text.
fn is_control(b: u8) -> bool {
    b.is_ascii_control() && b != b'\n'
}

/// FNV-1a, 64 bits: enough to tell shortened names apart.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// True when some name could share a written label value with another:
/// only shortened names can (through a hash collision).
pub fn needs_escape(name: &[u8], limit: usize) -> bool {
    name.len() > limit
}

/// Writes a sample value: integers exactly, other values in the shortest
/// form that reads back as the same `f64`.
pub fn write_value(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        out.extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
    } else {
        out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
    }
}

/// Bytes beyond which the line buffer is handed to the writer.
const FLUSH_AT: usize = 64 * 1024;

/// A line buffer in front of a writer that remembers the first error.
#[derive(Debug)]
pub struct Sink<W: Write> {
    buf: Vec<u8>,
    inner: W,
    error: Option<io::Error>,
}

impl<W: Write> Sink<W> {
    /// A sink writing to `inner`.
    pub fn new(inner: W) -> Self {
        Sink {
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            inner,
            error: None,
        }
    }

    fn line_done(&mut self) {
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.inner.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Flushes and returns the writer.
    ///
    /// # Errors
    /// The first error the writer returned.
    pub fn finish(mut self) -> io::Result<W> {
        self.flush();
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.inner),
        }
    }
}

/// One metric family being written.
pub struct Family<'s, W: Write> {
    sink: &'s mut Sink<W>,
    def: &'static MetricDef,
    started: bool,
    seen: Option<HashSet<Vec<u8>>>,
    limit: usize,
    /// Series dropped as duplicates.
    pub duplicates: u64,
    /// Label values shortened to the limit.
    pub shortened: u64,
    /// Series written per `target` label value, in the order targets came
    /// (samples come target by target, so the last entry is nearly always
    /// the one to count).
    pub series: Vec<(Vec<u8>, u64)>,
}

impl<'s, W: Write> Family<'s, W> {
    /// Starts `def`. With `dedupe`, every series' labels are remembered so a
    /// duplicate can be dropped.
    /// Names longer than `limit` bytes are shortened (see [`escape_label`]).
    pub fn new(sink: &'s mut Sink<W>, def: &'static MetricDef, dedupe: bool, limit: usize) -> Self {
        Family {
            sink,
            def,
            started: false,
            seen: dedupe.then(HashSet::new),
            limit,
            duplicates: 0,
            shortened: 0,
            series: Vec::new(),
        }
    }

    /// Writes one sample with `labels`, which must follow the definition's
    /// label order. Label values are escaped straight into the line buffer:
    /// nothing is allocated per sample (except the duplicate check, which
    /// only runs when some name does not escape uniquely).
    pub fn sample(&mut self, labels: &[(&str, &[u8])], value: f64) {
        self.sample_with_literal(labels, None, value);
    }

    /// Writes one sample whose last label, after `labels`, is `literal`: a
    /// label name and a value written as it is, already escaped for the
    /// exposition. For values no name from Redis can be written as (see
    /// [`escape_label`]), such as the aggregate of the consumers over the
    /// cap.
    pub fn sample_with_literal(
        &mut self,
        labels: &[(&str, &[u8])],
        literal: Option<(&str, &str)>,
        value: f64,
    ) {
        let def = self.def;
        if cfg!(debug_assertions) {
            let mut all = labels.to_vec();
            all.extend(literal.map(|(name, v)| (name, v.as_bytes())));
            check_labels(def, &all);
        }
        let buf = &mut self.sink.buf;
        if !self.started {
            self.started = true;
            buf.extend_from_slice(b"# HELP ");
            buf.extend_from_slice(def.name.as_bytes());
            buf.push(b' ');
            for b in def.help.bytes() {
                match b {
                    b'\\' => buf.extend_from_slice(b"\\\\"),
                    b'\n' => buf.extend_from_slice(b"\\n"),
                    other => buf.push(other),
                }
            }
            buf.extend_from_slice(b"\n# TYPE ");
            buf.extend_from_slice(def.name.as_bytes());
            buf.push(b' ');
            buf.extend_from_slice(def.kind.as_str().as_bytes());
            buf.push(b'\n');
        }
        let line = buf.len();
        buf.extend_from_slice(def.name.as_bytes());
        if !labels.is_empty() || literal.is_some() {
            buf.push(b'{');
            for (i, (name, v)) in labels.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(name.as_bytes());
                buf.extend_from_slice(b"=\"");
                if escape_label(buf, v, self.limit) {
                    self.shortened += 1;
                }
                buf.push(b'"');
            }
            if let Some((name, v)) = literal {
                if !labels.is_empty() {
                    buf.push(b',');
                }
                buf.extend_from_slice(name.as_bytes());
                buf.extend_from_slice(b"=\"");
                buf.extend_from_slice(v.as_bytes());
                buf.push(b'"');
            }
            buf.push(b'}');
        }
        if let Some(seen) = &mut self.seen {
            if !seen.insert(buf[line..].to_vec()) {
                buf.truncate(line);
                self.duplicates += 1;
                return;
            }
        }
        buf.push(b' ');
        write_value(buf, value);
        buf.push(b'\n');
        self.sink.line_done();
        if let Some((_, target)) = labels.first().filter(|(name, _)| *name == "target") {
            match self.series.iter_mut().rev().find(|(t, _)| t == target) {
                Some((_, n)) => *n += 1,
                None => self.series.push((target.to_vec(), 1)),
            }
        }
    }
}

/// Panics when a sample's label names are not its family's, as the catalog
/// declares them (in order): such a sample is a bug in the renderer, caught
/// in debug builds and tests. Release builds do not check.
fn check_labels(def: &MetricDef, labels: &[(&str, &[u8])]) {
    if !labels
        .iter()
        .map(|(n, _)| *n)
        .eq(def.labels.iter().copied())
    {
        let names: Vec<&str> = labels.iter().map(|(n, _)| *n).collect();
        panic!(
            "{}: sample labels {names:?}, but the catalog declares {:?}",
            def.name, def.labels
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::catalog::STREAM_LENGTH;

    /// What Prometheus reads back from an escaped label value.
    fn unescape(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut it = text.iter();
        while let Some(&b) = it.next() {
            if b == b'\\' {
                match it.next() {
                    Some(b'n') => out.push(b'\n'),
                    Some(&c) => out.push(c),
                    None => {}
                }
            } else {
                out.push(b);
            }
        }
        out
    }

    fn label(name: &[u8], limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        escape_label(&mut out, name, limit);
        unescape(&out)
    }

    #[test]
    fn escapes_quotes_newlines_and_bytes() {
        let mut out = Vec::new();
        assert!(!escape_label(&mut out, b"a\"b\\c\nd\xffe", 1024));
        assert_eq!(out, b"a\\\"b\\\\\\\\c\\nd\\\\xffe");
        assert_eq!(label(b"a\"b\\c\nd\xffe", 1024), b"a\"b\\\\c\nd\\xffe");
    }

    /// NUL, tab, escape and DEL from a key name never reach the text raw:
    /// each is written `\xNN`, distinct from a name that spells it.
    #[test]
    fn control_characters_are_written_as_escapes() {
        let mut out = Vec::new();
        assert!(!escape_label(&mut out, b"a\0b\tc\x1bd\x7fe", 1024));
        assert_eq!(out, b"a\\\\x00b\\\\x09c\\\\x1bd\\\\x7fe");
        assert!(!out.iter().any(|&b| is_control(b)), "{out:?}");
        assert_eq!(label(b"q\tr", 1024), b"q\\x09r");
        assert_ne!(label(b"q\tr", 1024), label(b"q\\x09r", 1024));
        // Shortened names too.
        let long = [b'\t'; 100];
        let mut out = Vec::new();
        assert!(escape_label(&mut out, &long, 10));
        assert!(!out.iter().any(|&b| is_control(b)));
    }

    /// A binary key and an ASCII key spelled with the escape no longer
    /// share a label value (one key must not pass for another).
    #[test]
    fn escaping_is_one_to_one() {
        let names: [&[u8]; 5] = [
            b"s\xff",
            b"s\\xff",
            b"s\\\\xff",
            b"s\xff\xfe",
            b"s\\xff\\xfe",
        ];
        let labels: std::collections::HashSet<Vec<u8>> =
            names.iter().map(|n| label(n, 1024)).collect();
        assert_eq!(labels.len(), names.len());
        for l in &labels {
            assert!(std::str::from_utf8(l).is_ok(), "label values are UTF-8");
        }
    }

    #[test]
    fn long_names_are_shortened_distinctly() {
        let a = [b'a'; 10_000];
        let mut b = [b'a'; 10_000];
        b[9_999] = b'b';
        let (la, lb) = (label(&a, 64), label(&b, 64));
        assert_ne!(la, lb);
        assert!(la.len() < 100, "{}", la.len());
        assert!(la.starts_with(&[b'a'; 64]));
        assert!(String::from_utf8(la).unwrap().contains("\\…"));
        // Not in the middle of a character.
        let e = "é".repeat(40);
        let l = String::from_utf8(label(e.as_bytes(), 63)).unwrap();
        assert!(l.starts_with(&"é".repeat(31)), "{l}");
        let mut out = Vec::new();
        assert!(escape_label(&mut out, &a, 64));
    }

    #[test]
    fn values() {
        let mut out = Vec::new();
        for v in [3.0, 0.25, 1.5e15, f64::INFINITY, 1796006248.9357805] {
            write_value(&mut out, v);
            out.push(b' ');
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "3 0.25 1500000000000000.0 +Inf 1796006248.9357805 "
        );
    }

    #[test]
    #[should_panic(
        expected = "redis_streams_stream_length: sample labels [\"target\", \"group\"], but the catalog declares [\"target\", \"stream\"]"
    )]
    fn a_sample_with_other_labels_than_the_catalog_panics() {
        let mut sink = Sink::new(Vec::new());
        let mut f = Family::new(&mut sink, &STREAM_LENGTH, false, 1024);
        f.sample(&[("target", b"t"), ("group", b"g")], 1.0);
    }

    #[test]
    fn family_header_once_and_duplicates_dropped() {
        let mut sink = Sink::new(Vec::new());
        let mut f = Family::new(&mut sink, &STREAM_LENGTH, true, 1024);
        f.sample(&[("target", b"t"), ("stream", b"s")], 1.0);
        f.sample(&[("target", b"t"), ("stream", b"s")], 2.0);
        f.sample(&[("target", b"t"), ("stream", b"u")], 3.0);
        assert_eq!(f.duplicates, 1);
        let text = String::from_utf8(sink.finish().unwrap()).unwrap();
        assert_eq!(text.matches("# TYPE").count(), 1);
        assert!(text.contains("redis_streams_stream_length{target=\"t\",stream=\"u\"} 3\n"));
    }
}
