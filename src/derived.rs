//! Files derived from a source in this repository (docs/metrics.md from the
//! catalog, the golden expositions from the renderer, the mixin's rule
//! copies from the alert rules): a test compares each with what its source
//! gives now and names the file and the command on drift, or rewrites it
//! when `RSE_REGEN=1`, as `scripts/regen.sh` runs every such test. Public
//! only so the integration tests share it with the unit tests.

use std::path::Path;

/// The variable that turns a comparison into a rewrite.
pub const REWRITE: &str = "RSE_REGEN";

/// Compares the file at `path` with `text`, derived from `source`; with
/// `RSE_REGEN=1`, writes `text` there instead. The error says where they
/// first differ and how to rewrite every derived file.
pub fn compare_or_rewrite(path: &Path, text: &str, source: &str) -> Result<(), String> {
    if std::env::var_os(REWRITE).is_some_and(|v| v == "1") {
        return std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()));
    }
    let want = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {e} (scripts/regen.sh writes it)", path.display()))?;
    if want == text {
        return Ok(());
    }
    let line = want
        .lines()
        .zip(text.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(want.lines().count().min(text.lines().count()));
    Err(format!(
        "{} differs from {source} at line {}: scripts/regen.sh rewrites it (and every derived \
         file)\n  file: {:?}\n  now:  {:?}",
        path.display(),
        line + 1,
        want.lines().nth(line),
        text.lines().nth(line)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_names_the_file_the_line_and_the_command() {
        let dir = std::env::temp_dir().join(format!("rse-derived-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("copy.txt");
        std::fs::write(&path, "a\nb\nc\n").unwrap();
        assert_eq!(compare_or_rewrite(&path, "a\nb\nc\n", "the source"), Ok(()));
        let err = compare_or_rewrite(&path, "a\nB\nc\n", "the source").unwrap_err();
        assert!(
            err.contains("copy.txt differs from the source at line 2"),
            "{err}"
        );
        assert!(err.contains("scripts/regen.sh"), "{err}");
        let err = compare_or_rewrite(&path, "a\nb\nc\nd\n", "the source").unwrap_err();
        assert!(err.contains("at line 4"), "{err}");
        let missing = compare_or_rewrite(&dir.join("none"), "x", "the source").unwrap_err();
        assert!(missing.contains("scripts/regen.sh writes it"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
