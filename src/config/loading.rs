//! Loading a file into a [`Config`] ([`load`]) and how that fails: a
//! [`ConfigError`] listing every [`Problem`] with its key path.

use std::fmt;
use std::path::Path;

use super::{CliOverrides, Config, from_str};

/// One problem found while loading a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, such as `targets[0].url`; empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

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
