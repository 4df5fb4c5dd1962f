//! The Prometheus text exposition format (0.0.4), written by hand and
//! streamed: lines go through a small buffer into any `Write` (the gzip
//! encoder, in the daemon), so the whole text is never held in memory. Label
//! values are escaped byte-exactly (names from Redis need not be UTF-8);
//! families are written only when they have samples; a duplicate series
//! (possible only when two non-UTF-8 names escape alike) is dropped instead of
//! making the whole exposition invalid.

use std::collections::HashSet;
use std::io::{self, Write};

use super::catalog::MetricDef;

/// Writes `value` as a label value: UTF-8 kept, `\`, `"` and newline
/// escaped, and bytes that are not UTF-8 written as the text `\xNN`.
pub fn escape_label(out: &mut Vec<u8>, value: &[u8]) {
    if value.is_ascii() && !value.iter().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.extend_from_slice(value);
        return;
    }
    for chunk in value.utf8_chunks() {
        for b in chunk.valid().bytes() {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'"' => out.extend_from_slice(b"\\\""),
                b'\n' => out.extend_from_slice(b"\\n"),
                other => out.push(other),
            }
        }
        for b in chunk.invalid() {
            // The backslash itself is escaped, so the sample reads `\xff`.
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\\\x");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        }
    }
}

/// True when some name will be written with `\xNN` escapes.
pub fn needs_escape(name: &[u8]) -> bool {
    std::str::from_utf8(name).is_err()
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
    /// Series dropped as duplicates.
    pub duplicates: u64,
}

impl<'s, W: Write> Family<'s, W> {
    /// Starts `def`. With `dedupe`, every series' labels are remembered so a
    /// duplicate can be dropped.
    pub fn new(sink: &'s mut Sink<W>, def: &'static MetricDef, dedupe: bool) -> Self {
        Family {
            sink,
            def,
            started: false,
            seen: dedupe.then(HashSet::new),
            duplicates: 0,
        }
    }

    /// Writes one sample with `labels`, which must follow the definition's
    /// label order. Label values are escaped straight into the line buffer:
    /// nothing is allocated per sample (except the duplicate check, which
    /// only runs when some name does not escape uniquely).
    pub fn sample(&mut self, labels: &[(&str, &[u8])], value: f64) {
        let def = self.def;
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
        if !labels.is_empty() {
            buf.push(b'{');
            for (i, (name, v)) in labels.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(name.as_bytes());
                buf.extend_from_slice(b"=\"");
                escape_label(buf, v);
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::catalog::STREAM_LENGTH;

    #[test]
    fn escapes_quotes_newlines_and_bytes() {
        let mut out = Vec::new();
        escape_label(&mut out, b"a\"b\\c\nd\xffe");
        assert_eq!(out, b"a\\\"b\\\\c\\nd\\\\xffe");
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
    fn family_header_once_and_duplicates_dropped() {
        let mut sink = Sink::new(Vec::new());
        let mut f = Family::new(&mut sink, &STREAM_LENGTH, true);
        f.sample(&[("target", b"t"), ("stream", b"s")], 1.0);
        f.sample(&[("target", b"t"), ("stream", b"s")], 2.0);
        f.sample(&[("target", b"t"), ("stream", b"u")], 3.0);
        assert_eq!(f.duplicates, 1);
        let text = String::from_utf8(sink.finish().unwrap()).unwrap();
        assert_eq!(text.matches("# TYPE").count(), 1);
        assert!(text.contains("redis_streams_stream_length{target=\"t\",stream=\"u\"} 3\n"));
    }
}
