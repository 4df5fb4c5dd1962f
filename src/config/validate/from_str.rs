//! Configuration text to a [`Config`]: parsed into the raw structs, then
//! validated, every problem collected with its key path.

use super::CliOverrides;
use super::parse::parse;
use super::validator::Validator;
use crate::config::*;

/// Parses and validates configuration text. `file` names the source in
/// messages.
///
/// # Errors
/// Every problem found, with its key path.
pub fn from_str(file: &str, text: &str, overrides: &CliOverrides) -> Result<Config, ConfigError> {
    let raw = parse(file, text)?;
    let mut v = Validator {
        problems: Vec::new(),
    };
    let config = v.config(raw, overrides);
    if v.problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError {
            file: file.to_string(),
            problems: v.problems,
        })
    }
}
