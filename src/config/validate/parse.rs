//! The TOML text into the raw structs, with errors a reader can act on: the
//! key path, the line, and the nearest valid name for a typo.

use super::suggest;
use crate::config::raw::RawConfig;
use crate::config::*;

pub(super) fn parse(file: &str, text: &str) -> Result<RawConfig, ConfigError> {
    let fail = |key: String, message: String| ConfigError {
        file: file.to_string(),
        problems: vec![Problem { key, message }],
    };
    let de = toml::Deserializer::parse(text)
        .map_err(|e| fail(String::new(), describe_toml_error(text, &e)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let key = if key == "." { String::new() } else { key };
        fail(key, describe_toml_error(text, e.inner()))
    })
}

/// The toml error's message with the line it points at on its first line,
/// an unknown key or value with the nearest valid one.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = suggest::unknown_name(e.message().trim());
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            match message.split_once('\n') {
                Some((first, rest)) => format!("{first} (line {line})\n{rest}"),
                None => format!("{message} (line {line})"),
            }
        }
        None => message,
    }
}
