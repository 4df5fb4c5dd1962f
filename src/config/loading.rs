//! Loading a configuration: [`load`] reads a file, [`from_str`] its text in
//! two stages (the ripgrep/postgres_exporter pattern): serde reads the TOML
//! into the raw structs, which reject unknown keys, and the validator checks
//! every value. How that fails is a [`ConfigError`]: the file, and every
//! problem with its key path (a syntax error with its line, a misspelt key
//! with the nearest valid one).

use std::fmt;
use std::path::Path;

use super::problems::Problem;
use super::raw::RawConfig;
use super::suggest;
use super::validate::{CliOverrides, validate};
use super::whole::Config;

/// Why a configuration could not be loaded: every problem found, with the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file, or `<flags>` when there was none.
    pub file: String,
    /// Every problem, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if p.key.is_empty() {
                write!(f, "{}: {}", self.file, p.message)?;
            } else {
                write!(f, "{}: {}: {}", self.file, p.key, p.message)?;
            }
        }
        Ok(())
    }
}

/// Loads and validates the file at `path` (or only the defaults and the flags
/// when `path` is `None`).
///
/// # Errors
/// A [`ConfigError`] listing every problem: unreadable file, TOML syntax,
/// unknown keys, bad values, missing secrets.
pub fn load(path: Option<&Path>, overrides: &CliOverrides) -> Result<Config, ConfigError> {
    let (file, text) = match path {
        Some(p) => {
            let file = p.display().to_string();
            match std::fs::read_to_string(p) {
                Ok(text) => (file, text),
                Err(e) => {
                    return Err(ConfigError {
                        file,
                        problems: vec![Problem {
                            key: String::new(),
                            message: format!("cannot read the file: {e}"),
                        }],
                    });
                }
            }
        }
        None => ("<flags>".to_string(), String::new()),
    };
    let mut config = from_str(&file, &text, overrides)?;
    config.source = path.map(Path::to_path_buf);
    Ok(config)
}

/// Parses and validates configuration text. `file` names the source in
/// messages.
///
/// # Errors
/// Every problem found, with its key path.
pub fn from_str(file: &str, text: &str, overrides: &CliOverrides) -> Result<Config, ConfigError> {
    let fail = |problems| ConfigError {
        file: file.to_string(),
        problems,
    };
    let raw = parse(text).map_err(|problem| fail(vec![problem]))?;
    validate(raw, overrides).map_err(fail)
}

/// The TOML text into the raw structs, with an error a reader can act on:
/// the key path, the line, and the nearest valid name for a typo.
fn parse(text: &str) -> Result<RawConfig, Problem> {
    let de = toml::Deserializer::parse(text).map_err(|e| Problem {
        key: String::new(),
        message: describe_toml_error(text, &e),
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        Problem {
            key: if key == "." { String::new() } else { key },
            message: describe_toml_error(text, e.inner()),
        }
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
