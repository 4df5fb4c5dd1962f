//! Logging setup: `tracing` to stderr, as text or JSON lines.
//!
//! JSON lines carry each key once: `timestamp`, `level`, `target` (the Rust
//! module, as tracing names it), `message`, then the event's fields in the
//! order written. Log processors (jq, Loki, Vector, Elasticsearch) keep only
//! one of two equal keys, so the Redis target is the field `redis_target`,
//! never `target`; a field that would still collide with a key already
//! written is renamed `field_<name>` rather than repeated.
//!
//! Text lines are coloured only when stderr is a terminal and `NO_COLOR` is
//! unset or empty (<https://no-color.org>): a file or the journal never gets
//! escape codes.

use std::fmt;
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The log levels a `--log.level` directive may name.
pub const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Checks a filter such as `info` or `redis_streams_exporter=debug,warn`
/// strictly: every directive is a level, or `target=level`. tracing itself
/// reads a bare unknown word (`wran`) as a module name to trace, which turns
/// every other log line off without a word; here it is an error.
///
/// # Errors
/// What is wrong with the first bad directive, for the operator.
pub fn check_filter(filter: &str) -> Result<(), String> {
    if filter.trim().is_empty() {
        return Err(format!("is empty; use a level ({})", LEVELS.join(", ")));
    }
    for directive in filter.split(',').map(str::trim) {
        if directive.is_empty() {
            continue;
        }
        let level = match directive.rsplit_once('=') {
            Some((_, level)) => level,
            None => directive,
        };
        if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level.trim())) {
            return Err(match directive.contains('=') {
                true => format!(
                    "{directive:?}: {level:?} is not a log level ({})",
                    LEVELS.join(", ")
                ),
                false => format!(
                    "{directive:?} is not a log level ({}) nor a target=level directive",
                    LEVELS.join(", ")
                ),
            });
        }
    }
    EnvFilter::try_new(filter)
        .map(|_| ())
        .map_err(|e| format!("not a valid filter: {e}"))
}

/// True when text logs may be coloured: stderr is a terminal and `NO_COLOR`
/// is unset or empty.
pub fn colour_allowed() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber. `level` is a filter directive; `RUST_LOG`,
/// when set, wins. Calling it twice is harmless (the second call does
/// nothing), which keeps tests simple.
pub fn init(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.with_ansi(colour_allowed()).try_init(),
        LogFormat::Json => builder.event_format(JsonLines).try_init(),
    };
}

/// One JSON object per event, each key once (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let mut line = Line::default();
        line.push("timestamp", serde_json::Value::String(timestamp));
        line.push("level", meta.level().as_str().into());
        line.push("target", meta.target().into());
        // The message first among the fields, whatever order it was given in.
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let Some(message) = fields.message.take() {
            line.push("message", message.into());
        }
        for (name, value) in fields.values {
            line.push(name, value);
        }
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<serde_json::Value> =
                scope.from_root().map(|s| s.name().into()).collect();
            if !spans.is_empty() {
                line.push("spans", serde_json::Value::Array(spans));
            }
        }
        writeln!(writer, "{}", line.finish())
    }
}

/// A JSON object being written, with the keys used so far.
#[derive(Default)]
struct Line {
    out: String,
    keys: Vec<String>,
}

impl Line {
    fn push(&mut self, key: &str, value: serde_json::Value) {
        let mut key = key.to_string();
        while self.keys.contains(&key) {
            key = format!("field_{key}");
        }
        self.out.push(if self.keys.is_empty() { '{' } else { ',' });
        // Strings and values serialise infallibly.
        self.out
            .push_str(&serde_json::to_string(&key).unwrap_or_default());
        self.out.push(':');
        self.out
            .push_str(&serde_json::to_string(&value).unwrap_or_default());
        self.keys.push(key);
    }

    fn finish(mut self) -> String {
        if self.keys.is_empty() {
            self.out.push('{');
        }
        self.out.push('}');
        self.out
    }
}

/// An event's fields as JSON values, in the order recorded.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    values: Vec<(&'static str, serde_json::Value)>,
}

impl Fields {
    fn add(&mut self, field: &Field, value: serde_json::Value) {
        if field.name() == "message" && self.message.is_none() {
            if let serde_json::Value::String(s) = value {
                self.message = Some(s);
                return;
            }
        }
        self.values.push((field.name(), value));
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.add(field, format!("{value:?}").into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.add(field, value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.add(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.add(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.add(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.add(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.add(field, value.to_string().into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn filters_are_levels_or_target_equals_level() {
        for good in [
            "info",
            "WARN",
            "off",
            "redis_streams_exporter=debug",
            "warn,redis_streams_exporter::poller=trace",
        ] {
            assert_eq!(check_filter(good), Ok(()), "{good}");
        }
        let err = check_filter("wran").unwrap_err();
        assert!(err.contains("\"wran\" is not a log level"), "{err}");
        let err = check_filter("redis_streams_exporter=verbose").unwrap_err();
        assert!(err.contains("\"verbose\" is not a log level"), "{err}");
        assert!(check_filter("info,wran").is_err());
        assert!(check_filter("  ").is_err());
    }

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Keys of a JSON object in order, duplicates included (serde_json's
    /// own maps would keep only the last of two equal keys).
    fn keys(line: &str) -> Vec<String> {
        struct Keys(Vec<String>);
        impl<'de> serde::Deserialize<'de> for Keys {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = Keys;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("an object")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<Keys, A::Error> {
                        let mut keys = Vec::new();
                        while let Some((k, _)) =
                            map.next_entry::<String, serde::de::IgnoredAny>()?
                        {
                            keys.push(k);
                        }
                        Ok(Keys(keys))
                    }
                }
                d.deserialize_map(V)
            }
        }
        serde_json::from_str::<Keys>(line).unwrap().0
    }

    #[test]
    fn json_lines_write_each_key_once() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .event_format(JsonLines)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(redis_target = "main", error = %"refused", "target down");
            // Fields that collide with the fixed keys, and with each other.
            tracing::info!(target = "x", level = 3, timestamp = true, "odd");
            tracing::info!(message2 = 1.5, "x\ny\"");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        for line in &lines {
            let keys = keys(line);
            let mut unique = keys.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), keys.len(), "{line}");
            assert_eq!(&keys[..4], ["timestamp", "level", "target", "message"]);
        }
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["redis_target"], "main");
        assert_eq!(first["level"], "WARN");
        assert_eq!(first["message"], "target down");
        assert_eq!(first["error"], "refused");
        assert_eq!(first["target"], module_path!());
        let second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(second["field_target"], "x");
        assert_eq!(second["field_level"], 3);
        assert_eq!(second["field_timestamp"], true);
        let third: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(third["message"], "x\ny\"");
        assert_eq!(third["message2"], 1.5);
    }
}
