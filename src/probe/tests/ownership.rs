//! Each part of the snapshot has one writer: the probe [`Part::owner`]
//! names. Checked on the probes' sources: a probe's file (outside its
//! tests) assigns or mutably borrows only the snapshot fields of the parts
//! it owns, and every owner does write its part (so the check bites).
//! Dropping what vanished goes through [`crate::probe::TargetState`]'s methods.

use crate::snapshot::Part;
use crate::vocab::ProbeKind;

/// The source of a probe, without its tests: its file and the rooms in its
/// folder, when it has one.
fn source(kind: ProbeKind) -> String {
    let base = format!("{}/src/probe/{}", env!("CARGO_MANIFEST_DIR"), kind.label());
    let mut files = vec![std::path::PathBuf::from(format!("{base}.rs"))];
    let mut folders = vec![std::path::PathBuf::from(&base)];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut out = String::new();
    for path in files {
        let p = path.display();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{p}: {e}"));
        out.push_str(match text.find("#[cfg(test)]") {
            Some(at) => &text[..at],
            None => &text,
        });
        out.push('\n');
    }
    out
}

/// Whether `text` writes the snapshot field `field`: assigns it, or borrows
/// it mutably (`Arc::make_mut(&mut state.snapshot.field)`, `retain_keys`).
fn writes(text: &str, field: &str) -> bool {
    let compact: String = text.split_whitespace().collect();
    let assign = format!(".snapshot.{field}=");
    let borrow = "&mut";
    let assigned = compact.match_indices(&assign).any(|(at, _)| {
        // `==` compares.
        !compact[at + assign.len()..].starts_with('=')
    });
    assigned
        || compact
            .match_indices(&format!(".snapshot.{field}"))
            .any(|(at, m)| {
                let before = &compact[..at];
                let after = &compact[at + m.len()..];
                // The field itself, not a longer name that starts like it.
                let whole = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
                let start = before.rfind(&borrow);
                whole
                    && start.is_some_and(|s| {
                        // `&mut state.snapshot.field`: only a path between.
                        before[s + borrow.len()..]
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    })
            })
}

#[test]
fn each_part_of_the_snapshot_has_one_writer() {
    for kind in ProbeKind::ALL {
        let text = source(kind);
        for part in Part::ALL {
            for field in part.fields() {
                let written = writes(&text, field);
                if part.owner() == kind {
                    assert!(
                        written,
                        "{} owns {part:?} but never writes `{field}`",
                        kind.label()
                    );
                } else {
                    assert!(
                        !written,
                        "{} writes `{field}` of {part:?}, which {} owns",
                        kind.label(),
                        part.owner().label()
                    );
                }
            }
        }
    }
}

#[test]
fn the_write_check_sees_writes() {
    assert!(writes("state.snapshot.scans = x;", "scans"));
    assert!(writes("Arc::make_mut(&mut state.snapshot.scans)", "scans"));
    assert!(writes(
        "retain_keys(&mut state\n .snapshot\n .streams, |n| true)",
        "streams"
    ));
    assert!(!writes("if *state.snapshot.scans == x {}", "scans"));
    assert!(!writes("state.snapshot.scans.get(&k)", "scans"));
    assert!(!writes(
        "Arc::make_mut(&mut state.snapshot.scans_x)",
        "scans"
    ));
    assert!(!writes("f(&mut x, state.snapshot.scans.len())", "scans"));
}
