//! The rules of docs/design.md that a machine can check, checked on the source: imports only
//! go down the floors of its table and every module has a floor; inside a folder imports go
//! down too (a room never names what its module file defines or re-exports); a type's
//! inherent methods live in at most two files, no two types share a name, and few leaf files
//! are a few lines long. Function length and the module-file convention are clippy's
//! (`too_many_lines`, `mod_module_files`, set in Cargo.toml and clippy.toml).

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

/// The library's own sources: the simulator binary stands apart, `main.rs`, `lib.rs` only
/// declare and call, and unit tests (a module declared under `#[cfg(test)]`, and what lies
/// below it) may reach wherever they need to.
fn library_sources() -> Vec<PathBuf> {
    sources(&root().join("src"))
        .into_iter()
        .filter(|f| {
            let rel = f.strip_prefix(root().join("src")).unwrap();
            !rel.starts_with("bin") && rel != Path::new("main.rs") && rel != Path::new("lib.rs")
        })
        .filter(|f| !is_test_module(f))
        .collect()
}

/// Whether `file`, or a module above it, is declared under `#[cfg(test)]` by its parent.
fn is_test_module(file: &Path) -> bool {
    let src = root().join("src");
    let mut path = file.with_extension("");
    while let Some(parent) = path.parent().map(Path::to_path_buf) {
        if parent == src || !parent.starts_with(&src) {
            return false;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let declaring = parent.with_extension("rs");
        let text = fs::read_to_string(&declaring).unwrap_or_default();
        // `#[cfg(test)]` on the `mod` line or up to two attribute lines above it.
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let declared = lines.iter().enumerate().any(|(i, l)| {
            let decl = [format!("mod {name};"), format!("pub(crate) mod {name};")];
            decl.iter().any(|d| d == l) && lines[i.saturating_sub(2)..i].contains(&"#[cfg(test)]")
        });
        if declared {
            return true;
        }
        path = parent;
    }
    false
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

/// The module path of a library file (`src/probe/stream/run.rs` -> `probe::stream::run`;
/// `src/probe.rs` -> `probe`).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root().join("src")).unwrap();
    rel.with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// Whether `module` (a module path) has a room named `name`: a file `name.rs` or a folder
/// `name/` beside its module file.
fn has_room(module: &[String], name: &str) -> bool {
    let mut dir = root().join("src");
    for part in module {
        dir.push(part);
    }
    dir.join(format!("{name}.rs")).is_file() || dir.join(name).is_dir()
}

/// The paths a file's code names from the crate's root: `crate::a::b`, and `super::x` made
/// absolute from the file's own module path. Each is cut at its first item that is not a
/// module the walk can tell (the rest does not matter to where it points).
fn paths_named(file: &Path, code: &str) -> Vec<Vec<String>> {
    let own = module_path(file);
    let mut out = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", own[..own.len() - 1].to_vec()),
    ] {
        let mut from = 0;
        while let Some(found) = code[from..].find(prefix) {
            let at = from + found;
            from = at + prefix.len();
            let rest = &code[from..];
            // `super::super::` and `crate::` inside a longer word do not start a path here.
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            let mut tail = rest;
            while tail.starts_with("super::") {
                path.pop();
                tail = &tail["super::".len()..];
            }
            // The path's segments: each an identifier followed straight by `::`, the last
            // one followed by anything else.
            let mut segments: Vec<String> = Vec::new();
            for raw in tail.split("::") {
                let ident: String = raw
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '*' | '{'))
                    .collect();
                if ident.is_empty() {
                    break;
                }
                let whole = ident.len() == raw.len();
                segments.push(ident);
                if !whole {
                    break;
                }
            }
            for seg in segments {
                let stop = seg.starts_with('{') || seg == "*" || seg == "self";
                path.push(seg.trim_start_matches('{').to_string());
                if stop || !has_room(&path[..path.len() - 1], path.last().unwrap()) {
                    break;
                }
            }
            out.push(path);
        }
    }
    out
}

/// Inside a folder, imports go down: a room names its siblings by their room path, never an
/// item that a module file above it defines or re-exports (that import runs back up through
/// its parent). Returns the offending paths of one file.
fn imports_back_up(file: &Path, code: &str) -> Vec<String> {
    let own = module_path(file);
    let mut problems = Vec::new();
    for path in paths_named(file, code) {
        // The deepest module of the path that is an ancestor of this file (not the file).
        let shared = path.iter().zip(&own).take_while(|(a, b)| a == b).count();
        if shared == 0 || shared >= own.len() || shared >= path.len() {
            continue;
        }
        let next = &path[shared];
        if next == "*" || next == "self" || !has_room(&path[..shared], next) {
            problems.push(format!(
                "{} names {} of its ancestor {}",
                file.strip_prefix(root()).unwrap().display(),
                path[shared..].join("::"),
                path[..shared].join("::")
            ));
        }
    }
    problems
}

#[test]
fn imports_inside_a_folder_go_down() {
    let mut problems = Vec::new();
    for file in library_sources() {
        let text = fs::read_to_string(&file).unwrap();
        problems.extend(imports_back_up(
            &file,
            &without_comments(production_code(&text)),
        ));
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "docs/design.md: inside a folder imports go down ({}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Lines of code of a file: neither blank nor a comment.
fn lines_of_code(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// At most this many leaf files of at most [`SMALL`] lines of code in the crate.
const SMALL_FILES: usize = 15;
const SMALL: usize = 40;

#[test]
fn one_type_one_place() {
    let mut problems = Vec::new();
    // Inherent methods of a type in at most two files.
    let mut impls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut types: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut small = Vec::new();
    for file in sources(&root().join("src")) {
        let text = fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        let code = without_comments(production_code(&text));
        for line in code.lines() {
            let l = line.trim_start();
            if let Some(rest) = l.strip_prefix("impl") {
                let rest = rest
                    .trim_start_matches(|c: char| c != ' ' && c != '<')
                    .trim_start();
                let rest = if let Some(generics) = rest.strip_prefix('<') {
                    generics.split_once('>').map_or("", |(_, r)| r).trim_start()
                } else {
                    rest
                };
                if !rest.contains(" for ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        let files = impls.entry(name).or_default();
                        if !files.contains(&rel) {
                            files.push(rel.clone());
                        }
                    }
                }
            }
            for kind in ["struct ", "enum "] {
                let Some(at) = l.find(kind) else { continue };
                let vis = &l[..at];
                if !vis.starts_with("pub") || !vis.trim_end().ends_with(['b', ')']) {
                    continue;
                }
                let name: String = l[at + kind.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && !rel.starts_with("src/bin") {
                    types.entry(name).or_default().push(rel.clone());
                }
            }
        }
        let leaf = !file.with_extension("").is_dir();
        if leaf
            && lines_of_code(&text) <= SMALL
            && !rel.ends_with("lib.rs")
            && !rel.ends_with("main.rs")
        {
            small.push(rel);
        }
    }
    for (name, files) in &impls {
        if files.len() > 2 {
            problems.push(format!("impl {name} in {} files: {files:?}", files.len()));
        }
    }
    for (name, files) in &types {
        if files.len() > 1 {
            problems.push(format!("two types named {name}: {files:?}"));
        }
    }
    if small.len() > SMALL_FILES {
        problems.push(format!(
            "{} leaf files of at most {SMALL} lines of code (at most {SMALL_FILES}): {small:?}",
            small.len()
        ));
    }
    assert!(
        problems.is_empty(),
        "docs/design.md: one type, one place:\n{}",
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
    assert_eq!(lines_of_code("// a\n\nfn f() {}\n  //! b\n}"), 2);
}

/// The folder rule reads `super::` and `crate::` paths and tells a room from an item.
#[test]
fn the_folder_rule_tells_rooms_from_items() {
    let run = root().join("src/probe/stream/run.rs");
    let code = "use super::batch::Batch;\nuse super::Poll;\nuse crate::probe::context::X;\n\
                use crate::probe::ProbeError;\nuse crate::snapshot::Name;\nuse super::super::state::S;";
    let found = imports_back_up(&run, code);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .any(|f| f.contains("Poll of its ancestor probe::stream")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.contains("ProbeError of its ancestor probe")),
        "{found:?}"
    );
}
