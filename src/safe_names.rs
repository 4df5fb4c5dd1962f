//! Names from Redis made safe for people to read: in logs, the `check`
//! table, the landing page and `/readyz`. Anyone who can create a key
//! chooses its bytes, so a name must never start a new log line, move the
//! cursor of an operator's terminal or pad every row of a table.
//!
//! [`printable`] escapes: `\` as `\\`, control characters (C0, DEL, C1,
//! which include newline and ESC) as `\n`, `\r`, `\t` or `\u{..}`, and
//! bytes that are not UTF-8 as `\x..`. Distinct names stay distinct (the
//! escaping is reversible). [`shorten`] cuts a long name and says how much
//! it left out.

use std::borrow::Cow;
use std::fmt::Write;

/// `name` with every byte that could be read as something other than text
/// escaped (see the module doc).
pub fn printable(name: impl AsRef<[u8]>) -> Cow<'static, str> {
    let bytes = name.as_ref();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// `text` cut to about `max` characters, with a marker saying how many
/// were left out; unchanged when it is short enough.
pub fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    let count = text.chars().count();
    if count <= max {
        return Cow::Borrowed(text);
    }
    let kept: String = text.chars().take(max).collect();
    Cow::Owned(format!("{kept}…(+{} chars)", count - max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_bad_bytes_are_escaped() {
        assert_eq!(printable("orders"), "orders");
        assert_eq!(
            printable("inj\n2026-01-01 ERROR fake"),
            "inj\\n2026-01-01 ERROR fake"
        );
        assert_eq!(printable("\x1b]0;pwned\x07"), "\\u{1b}]0;pwned\\u{7}");
        assert_eq!(printable(b"s\xff\xfe"), "s\\xff\\xfe");
        assert_eq!(printable("caf\u{e9}"), "caf\u{e9}");
        assert_eq!(printable("\u{85}"), "\\u{85}");
    }

    #[test]
    fn escaping_is_unambiguous() {
        // A binary key and an ASCII key spelled with the escape must differ.
        assert_ne!(printable(b"s\xff"), printable("s\\xff"));
        assert_eq!(printable("s\\xff"), "s\\\\xff");
    }

    #[test]
    fn long_names_are_cut_with_a_marker() {
        let long = "x".repeat(10_000);
        let cut = shorten(&long, 64);
        assert!(cut.starts_with(&"x".repeat(64)));
        assert!(cut.ends_with("…(+9936 chars)"));
        assert_eq!(shorten("short", 64), "short");
    }
}
