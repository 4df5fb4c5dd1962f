//! Loading a configuration: [`load`] reads a file, [`from_str`] its text in
//! two stages (the ripgrep/postgres_exporter pattern): serde reads the TOML
//! into the raw structs, which reject unknown keys (each is left out and
//! the file read again, so all are found), and the validator checks every
//! value. How that fails is a [`ConfigError`]: the file, and every problem
//! with its key path (a syntax error with its line, a misspelt key with the
//! nearest valid one), unknown keys and bad values together.

use std::fmt;
use std::path::Path;

use serde_path_to_error::Segment;
use toml::de::{DeTable, DeValue};

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
    /// Every problem: those of the file as written (unknown keys, values
    /// of the wrong type) in file order, then the values the validator
    /// refuses, section by section.
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
/// Every problem found, with its key path: the keys the file may not have
/// and the values of the wrong type first, then every value the validator
/// refuses, all in one error.
pub fn from_str(file: &str, text: &str, overrides: &CliOverrides) -> Result<Config, ConfigError> {
    let fail = |problems| ConfigError {
        file: file.to_string(),
        problems,
    };
    let (raw, mut problems) = parse(text).map_err(fail)?;
    match validate(raw, overrides) {
        Ok(config) if problems.is_empty() => Ok(config),
        Ok(_) => Err(fail(problems)),
        Err(refused) => {
            // A key left out for its type reads as unset: what the
            // validator says of an unset key is no news.
            let left_out: Vec<String> = problems.iter().map(|p| p.key.clone()).collect();
            problems.extend(refused.into_iter().filter(|p| !left_out.contains(&p.key)));
            Err(fail(problems))
        }
    }
}

/// The most problems the raw structs report before reading stops (each
/// costs a read of the file's tree).
const MAX_PARSE_PROBLEMS: usize = 100;

/// The TOML text into the raw structs, with an error a reader can act on:
/// the key path, the line, and the nearest valid name for a typo. A key the
/// structs do not know, or a value of the wrong type, is a problem, and the
/// key is then left out and the tree read again, so that every such
/// problem is found in one pass and the validator still sees the rest of
/// the file.
///
/// # Errors
/// A syntax error (the tree cannot be read), or a problem at a place of the
/// tree that cannot be left out, with those found before it.
fn parse(text: &str) -> Result<(RawConfig, Vec<Problem>), Vec<Problem>> {
    let mut root = DeTable::parse(text).map_err(|e| {
        vec![Problem {
            key: String::new(),
            message: describe_toml_error(text, &e),
        }]
    })?;
    // Each with where it is in the file: serde reads keys in their order,
    // not the file's.
    let mut found: Vec<(usize, Problem)> = Vec::new();
    let in_file_order = |mut found: Vec<(usize, Problem)>| {
        found.sort_by_key(|(at, _)| *at);
        found.into_iter().map(|(_, p)| p).collect::<Vec<Problem>>()
    };
    loop {
        let de = toml::Deserializer::from(root.clone());
        let e = match serde_path_to_error::deserialize::<_, RawConfig>(de) {
            Ok(raw) => return Ok((raw, in_file_order(found))),
            Err(e) => e,
        };
        let key = e.path().to_string();
        let at = e.inner().span().map_or(usize::MAX, |span| span.start);
        found.push((
            at,
            Problem {
                key: if key == "." { String::new() } else { key },
                message: describe_toml_error(text, e.inner()),
            },
        ));
        let segments: Vec<&Segment> = e.path().iter().collect();
        if found.len() >= MAX_PARSE_PROBLEMS || !leave_out(root.get_mut(), &segments) {
            return Err(in_file_order(found));
        }
    }
}

/// Removes the key at `path` from `table` (for an item of an array, the
/// whole array: removing one item would renumber the others); false when
/// there is no such key.
fn leave_out(table: &mut DeTable<'_>, path: &[&Segment]) -> bool {
    let Some((Segment::Map { key }, rest)) = path.split_first() else {
        return false;
    };
    let key = key.as_str();
    if matches!(rest, [] | [Segment::Seq { .. }]) {
        return table.remove(key).is_some();
    }
    let inner = match (table.get_mut(key).map(|v| v.get_mut()), rest) {
        (Some(DeValue::Table(t)), rest) => Some((t, rest)),
        (Some(DeValue::Array(items)), [Segment::Seq { index }, rest @ ..]) => {
            match items.get_mut(*index).map(|v| v.get_mut()) {
                Some(DeValue::Table(t)) => Some((t, rest)),
                _ => None,
            }
        }
        _ => None,
    };
    inner.is_some_and(|(t, rest)| leave_out(t, rest))
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
