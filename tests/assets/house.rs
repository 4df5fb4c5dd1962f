//! The rules of docs/design.md that a machine can check, checked on the source: imports only
//! go down the floors of its table, every module has a floor, and a module file with rooms
//! (`x.rs` beside `x/`) holds its doc, its rooms, re-exports and dispatch, nothing else.
//! Function length and the module-file convention are clippy's (`too_many_lines`,
//! `mod_module_files`, set in Cargo.toml and clippy.toml); unit tests are each module's child
//! `tests` module (inline, or `x/tests.rs`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The floors of docs/design.md's layer table: each top-level module (`probe` for `src/probe/`,
/// `loss` for `src/loss.rs`) and its floor.
fn floors() -> BTreeMap<String, u32> {
    let design = fs::read_to_string(root().join("docs/design.md")).unwrap();
    let table = design
        .split("## Layers")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/design.md has a Layers section");
    let mut floors = BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(floor) = cells[1].parse::<u32>() else {
            continue;
        };
        for module in cells[2].split(',') {
            let path = module.trim().trim_matches('`');
            let name = path
                .strip_prefix("src/")
                .unwrap_or_else(|| panic!("floor {floor}: {path} is not under src/"))
                .trim_end_matches('/')
                .trim_end_matches(".rs");
            floors.insert(name.to_string(), floor);
        }
    }
    floors
}

/// The top-level module a source file belongs to (`src/probe/stream.rs` -> `probe`).
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(root().join("src")).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// A file's code outside its unit tests: the text before a top-level `#[cfg(test)]`
/// (tests may reach wherever they need to).
fn production_code(text: &str) -> &str {
    text.find("\n#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// `code` without its comments: a doc link names a module without importing it.
fn without_comments(code: &str) -> String {
    code.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's production code names through `crate::`.
fn crate_imports(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    // `use crate::{a, b::c}` names several.
    let mut rest = code;
    while let Some(at) = rest.find("crate::{") {
        rest = &rest[at + "crate::{".len()..];
        let mut depth = 1;
        let mut item = String::new();
        let mut at_start = true;
        for c in rest.chars() {
            if depth == 1 && at_start && (c.is_ascii_alphanumeric() || c == '_') {
                item.push(c);
                continue;
            }
            if !item.is_empty() {
                out.push(std::mem::take(&mut item));
                at_start = false;
            }
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 1 => at_start = true,
                _ => {}
            }
            if depth == 0 {
                break;
            }
        }
        if !item.is_empty() {
            out.push(item);
        }
    }
    out
}

/// The library's own sources: the simulator binary stands apart and `main.rs`, `lib.rs` only
/// declare and call.
fn library_sources() -> Vec<PathBuf> {
    sources(&root().join("src"))
        .into_iter()
        .filter(|f| {
            let rel = f.strip_prefix(root().join("src")).unwrap();
            !rel.starts_with("bin") && rel != Path::new("main.rs") && rel != Path::new("lib.rs")
        })
        .filter(|f| !f.to_string_lossy().ends_with("tests.rs"))
        .collect()
}

#[test]
fn imports_only_go_down_the_floors_of_the_design() {
    let floors = floors();
    let mut problems = Vec::new();
    for file in library_sources() {
        let module = module_of(&file);
        let Some(&floor) = floors.get(&module) else {
            problems.push(format!("src/{module}: no floor in docs/design.md's table"));
            continue;
        };
        let text = fs::read_to_string(&file).unwrap();
        for import in crate_imports(&without_comments(production_code(&text))) {
            if import == module {
                continue;
            }
            match floors.get(&import) {
                Some(&to) if to < floor => {}
                Some(&to) => problems.push(format!(
                    "{} (floor {floor}) imports {import} (floor {to})",
                    file.strip_prefix(root()).unwrap().display()
                )),
                None => {} // a module without a floor is reported above
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "docs/design.md's floors broken:\n{}",
        problems.join("\n")
    );
}

/// A line of a module file that declares rather than does: doc, comment, attribute, `mod`,
/// `use`, or blank.
fn declares(line: &str) -> bool {
    let l = line.trim_start();
    l.is_empty()
        || l.starts_with("//")
        || l.starts_with("#[")
        || l.starts_with("#![")
        || ["mod ", "pub mod ", "pub(crate) mod ", "pub(super) mod "]
            .iter()
            .any(|p| l.starts_with(p))
        || ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .any(|p| l.starts_with(p))
}

/// Lines of code a module file may hold besides its declarations: a dispatch.
const DISPATCH_LINES: usize = 40;

#[test]
fn module_files_hold_their_doc_rooms_and_dispatch() {
    let mut problems = Vec::new();
    for file in library_sources() {
        // A folder that holds only the module's unit tests (`x/tests.rs`) is not rooms.
        let folder = file.with_extension("");
        let rooms = folder.is_dir()
            && fs::read_dir(&folder)
                .unwrap()
                .any(|e| e.unwrap().file_name() != "tests.rs");
        let is_module_file = file.file_name().is_some_and(|n| n == "mod.rs") || rooms;
        if !is_module_file {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        let code = production_code(&text);
        if !code.starts_with("//!") {
            problems.push(format!("{}: no //! header", file.display()));
        }
        // A multi-line `use` or `mod` list continues a declaration.
        let mut in_list = false;
        let mut doing = 0;
        for line in code.lines() {
            if in_list {
                in_list = !line.trim_end().ends_with(';');
                continue;
            }
            if declares(line) {
                let l = line.trim();
                in_list = !l.starts_with("//")
                    && !l.starts_with('#')
                    && !l.is_empty()
                    && !l.ends_with(';');
                continue;
            }
            doing += 1;
        }
        if doing > DISPATCH_LINES {
            problems.push(format!(
                "{}: {doing} lines besides its doc, rooms and re-exports (at most {DISPATCH_LINES}, a dispatch)",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/design.md: module files hold their doc, rooms and dispatch:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_import_reader_reads_lists_and_paths() {
    let code =
        "use crate::{lag::{self, X}, snapshot, vocab::Id};\nfn f() { crate::trend::slope(); }";
    let mut got = crate_imports(code);
    got.sort();
    assert_eq!(got, ["lag", "snapshot", "trend", "vocab"]);
    assert_eq!(production_code("a\n#[cfg(test)]\nmod tests;"), "a");
    assert!(declares("pub use x::{a, b};") && declares("//! doc") && !declares("fn run() {"));
}
