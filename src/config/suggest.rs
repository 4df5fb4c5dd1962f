//! Unknown keys and values: the nearest valid one, instead of the list of
//! every valid one, so that a typo's fix is on the first line of the error.

/// Rewrites serde's "unknown field `x`, expected one of `a`, `b`, …" (and the
/// same for an enum's variants) into "unknown key `x`: did you mean `a`?"
/// when one valid name is close, else into a short first line with the
/// valid names on a line of their own. Any other message is returned as is.
pub(super) fn unknown_name(message: &str) -> String {
    let (what, rest) = if let Some(rest) = message.strip_prefix("unknown field `") {
        ("key", rest)
    } else if let Some(rest) = message.strip_prefix("unknown variant `") {
        ("value", rest)
    } else {
        return message.to_string();
    };
    let Some((given, expected)) = rest.split_once("`, ") else {
        return message.to_string();
    };
    let valid: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| !name.is_empty())
        .collect();
    match nearest(given, &valid) {
        Some(near) => format!("unknown {what} `{given}`: did you mean `{near}`?"),
        None if valid.is_empty() => format!("unknown {what} `{given}`: none is allowed here"),
        None => format!(
            "unknown {what} `{given}`\n  valid {what}s here: {}",
            valid.join(", ")
        ),
    }
}

/// The valid name closest to `given` in edits (a swap of two neighbours is
/// one edit), when it is close enough to be the one meant: at most a third
/// of the longer name's letters wrong, or one name a prefix of the other.
fn nearest<'a>(given: &str, valid: &[&'a str]) -> Option<&'a str> {
    let given_lower = given.to_ascii_lowercase();
    valid
        .iter()
        .map(|name| (edits(&given_lower, &name.to_ascii_lowercase()), *name))
        .filter(|&(distance, name)| {
            let longer = given.chars().count().max(name.chars().count());
            distance * 3 <= longer
                || (given.len() >= 3
                    && (name.starts_with(&given_lower) || given_lower.starts_with(name)))
        })
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, name)| name)
}

/// Optimal string alignment distance: insertions, deletions, substitutions
/// and swaps of adjacent characters.
fn edits(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET_KEYS: &str = "unknown field `patern`, expected one of `name`, `url`, `patterns`, \
                               `exclude_streams`, `max_streams`, `scan_count`";

    #[test]
    fn a_typo_gets_the_nearest_key() {
        assert_eq!(
            unknown_name(TARGET_KEYS),
            "unknown key `patern`: did you mean `patterns`?"
        );
    }

    #[test]
    fn swapped_letters_and_case_are_near() {
        let m = "unknown field `sacn_count`, expected one of `scan_count`, `max_streams`";
        assert_eq!(
            unknown_name(m),
            "unknown key `sacn_count`: did you mean `scan_count`?"
        );
        let m = "unknown field `URL`, expected one of `name`, `url`";
        assert_eq!(unknown_name(m), "unknown key `URL`: did you mean `url`?");
    }

    #[test]
    fn a_prefix_is_near() {
        let m = "unknown field `commands`, expected one of `commands_per_second`, `priority`";
        assert_eq!(
            unknown_name(m),
            "unknown key `commands`: did you mean `commands_per_second`?"
        );
    }

    #[test]
    fn nothing_near_lists_the_keys_on_a_line_of_their_own() {
        let m = "unknown field `colour`, expected one of `name`, `url`";
        let out = unknown_name(m);
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("unknown key `colour`"));
        assert_eq!(lines.next(), Some("  valid keys here: name, url"));
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn a_single_expected_name_and_variants() {
        let m = "unknown field `strem`, expected `stream`";
        assert_eq!(
            unknown_name(m),
            "unknown key `strem`: did you mean `stream`?"
        );
        let m = "unknown variant `clustr`, expected one of `standalone`, `cluster`, `sentinel`";
        assert_eq!(
            unknown_name(m),
            "unknown value `clustr`: did you mean `cluster`?"
        );
        let m = "unknown field `x`, there are no fields";
        assert_eq!(unknown_name(m), "unknown key `x`: none is allowed here");
    }

    #[test]
    fn other_messages_pass_through() {
        assert_eq!(unknown_name("invalid type: string"), "invalid type: string");
    }

    #[test]
    fn edit_distance() {
        assert_eq!(edits("patern", "patterns"), 2);
        assert_eq!(edits("sacn", "scan"), 1);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("same", "same"), 0);
    }
}
