//! Redis-style glob patterns, matched exactly as `SCAN ... MATCH` matches them.
//!
//! Discovery sends a pattern to Redis and then filters the reply with the same
//! pattern locally (Redis may return keys the ACL lets us see but that the user
//! did not ask for, and exact names bypass SCAN). Stream settings (`[[streams]]
//! match`) use the same matcher, so one syntax covers the whole config:
//! `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` and `\` escapes, over raw bytes.

use std::fmt;

/// A compiled glob pattern. Matching works on bytes because Redis keys need
/// not be UTF-8.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Vec<u8>,
}

impl Glob {
    /// Wraps a pattern. Every byte string is a valid Redis pattern (an
    /// unterminated `[` matches literally, as in Redis), so this cannot fail.
    pub fn new(pattern: impl Into<Vec<u8>>) -> Self {
        Glob {
            pattern: pattern.into(),
        }
    }

    /// The pattern as given.
    pub fn as_bytes(&self) -> &[u8] {
        &self.pattern
    }

    /// True when `key` matches the whole pattern.
    pub fn matches(&self, key: &[u8]) -> bool {
        match_bytes(&self.pattern, key)
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", String::from_utf8_lossy(&self.pattern))
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.pattern))
    }
}

/// A port of Redis's `stringmatchlen` (util.c), iterative over `*` with
/// backtracking to the last star, so the cost stays O(pattern × key).
fn match_bytes(pattern: &[u8], key: &[u8]) -> bool {
    let (mut p, mut k) = (0usize, 0usize);
    // Position after the last `*` in the pattern and the key position it was
    // tried at; on a mismatch we retry the star one byte further.
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    // Collapse runs of stars.
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, k));
                    continue;
                }
                b'?' => {
                    p += 1;
                    k += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = match_class(pattern, p, key[k]) {
                        if matched {
                            p = next;
                            k += 1;
                            continue;
                        }
                    } else if key[k] == b'[' {
                        // Unterminated class: Redis compares the rest literally;
                        // treat `[` as a literal byte.
                        p += 1;
                        k += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == key[k] {
                        p += 2;
                        k += 1;
                        continue;
                    }
                }
                c => {
                    if c == key[k] {
                        p += 1;
                        k += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, sk)) => {
                p = sp;
                k = sk + 1;
                star = Some((sp, sk + 1));
            }
            None => return false,
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Matches one byte against the class starting at `pattern[start] == b'['`.
/// Returns whether it matched and the index after the closing `]`, or `None`
/// when the class is not terminated.
fn match_class(pattern: &[u8], start: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = i < pattern.len() && pattern[i] == b'^';
    if negate {
        i += 1;
    }
    let mut matched = false;
    loop {
        if i >= pattern.len() {
            return None;
        }
        match pattern[i] {
            b']' => break,
            b'\\' if i + 1 < pattern.len() => {
                if pattern[i + 1] == c {
                    matched = true;
                }
                i += 2;
            }
            lo if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' => {
                let hi = pattern[i + 2];
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                if (lo..=hi).contains(&c) {
                    matched = true;
                }
                i += 3;
            }
            other => {
                if other == c {
                    matched = true;
                }
                i += 1;
            }
        }
    }
    Some((matched != negate, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, k: &str) -> bool {
        Glob::new(p).matches(k.as_bytes())
    }

    #[test]
    fn stars_and_questions() {
        assert!(m("*", ""));
        assert!(m("orders:*", "orders:events"));
        assert!(!m("orders:*", "order:events"));
        assert!(m("*:events", "orders:events"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("**x", "abx"));
    }

    #[test]
    fn classes() {
        assert!(m("h[ae]llo", "hello"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(!m("h[a-b]llo", "hcllo"));
    }

    #[test]
    fn escapes_and_literals() {
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("[", "["));
    }

    #[test]
    fn non_utf8_keys() {
        assert!(Glob::new("s:*").matches(b"s:\xff\xfe"));
        assert!(Glob::new(b"s:\xff".to_vec()).matches(b"s:\xff"));
    }
}
