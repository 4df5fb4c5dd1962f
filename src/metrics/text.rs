//! The Prometheus text exposition format (0.0.4), written by hand: label
//! values are escaped byte-exactly (names from Redis need not be UTF-8),
//! families are written only when they have samples, and a duplicate series
//! (possible only when two non-UTF-8 names escape alike) is dropped instead of
//! making the whole exposition invalid.

use std::collections::HashSet;
use std::io::Write;

use super::catalog::MetricDef;

/// Writes `value` as a label value: UTF-8 kept, `\`, `"` and newline
/// escaped, and bytes that are not UTF-8 written as the text `\xNN`.
pub fn escape_label(out: &mut Vec<u8>, value: &[u8]) {
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
            let _ = write!(out, "\\\\x{b:02x}");
        }
    }
}

/// True when some name will be written with `\xNN` escapes.
pub fn needs_escape(name: &[u8]) -> bool {
    std::str::from_utf8(name).is_err()
}

/// Writes a sample value.
pub fn write_value(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// One metric family being written.
pub struct Family<'o> {
    out: &'o mut Vec<u8>,
    def: &'static MetricDef,
    started: bool,
    seen: Option<HashSet<Vec<u8>>>,
    /// Series dropped as duplicates.
    pub duplicates: u64,
}

impl<'o> Family<'o> {
    /// Starts `def`. With `dedupe`, every series' labels are remembered so a
    /// duplicate can be dropped.
    pub fn new(out: &'o mut Vec<u8>, def: &'static MetricDef, dedupe: bool) -> Self {
        Family {
            out,
            def,
            started: false,
            seen: dedupe.then(HashSet::new),
            duplicates: 0,
        }
    }

    /// Writes one sample; `values` match the definition's labels in order.
    pub fn sample(&mut self, values: &[&[u8]], value: f64) {
        debug_assert_eq!(values.len(), self.def.labels.len(), "{}", self.def.name);
        let mut labels = Vec::with_capacity(64);
        if !values.is_empty() {
            labels.push(b'{');
            for (i, (name, v)) in self.def.labels.iter().zip(values).enumerate() {
                if i > 0 {
                    labels.push(b',');
                }
                labels.extend_from_slice(name.as_bytes());
                labels.extend_from_slice(b"=\"");
                escape_label(&mut labels, v);
                labels.push(b'"');
            }
            labels.push(b'}');
        }
        if let Some(seen) = &mut self.seen {
            if !seen.insert(labels.clone()) {
                self.duplicates += 1;
                return;
            }
        }
        if !self.started {
            self.started = true;
            self.out.extend_from_slice(b"# HELP ");
            self.out.extend_from_slice(self.def.name.as_bytes());
            self.out.push(b' ');
            for b in self.def.help.bytes() {
                match b {
                    b'\\' => self.out.extend_from_slice(b"\\\\"),
                    b'\n' => self.out.extend_from_slice(b"\\n"),
                    other => self.out.push(other),
                }
            }
            self.out.extend_from_slice(b"\n# TYPE ");
            self.out.extend_from_slice(self.def.name.as_bytes());
            self.out.push(b' ');
            self.out
                .extend_from_slice(self.def.kind.as_str().as_bytes());
            self.out.push(b'\n');
        }
        self.out.extend_from_slice(self.def.name.as_bytes());
        self.out.extend_from_slice(&labels);
        self.out.push(b' ');
        write_value(self.out, value);
        self.out.push(b'\n');
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
        for v in [3.0, 0.25, 1.5e15, f64::INFINITY] {
            write_value(&mut out, v);
            out.push(b' ');
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "3 0.25 1500000000000000 +Inf "
        );
    }

    #[test]
    fn family_header_once_and_duplicates_dropped() {
        let mut out = Vec::new();
        let mut f = Family::new(&mut out, &STREAM_LENGTH, true);
        f.sample(&[b"t", b"s"], 1.0);
        f.sample(&[b"t", b"s"], 2.0);
        f.sample(&[b"t", b"u"], 3.0);
        assert_eq!(f.duplicates, 1);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("# TYPE").count(), 1);
        assert!(text.contains("redis_streams_stream_length{target=\"t\",stream=\"u\"} 3\n"));
    }
}
