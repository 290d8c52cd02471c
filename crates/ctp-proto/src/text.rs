//! Text a peer sent (close and refusal reasons, names): made safe to print on a terminal.
//!
//! A reason goes to the user's terminal as it is, so a peer could otherwise send escape
//! sequences (clear the screen, set the window title, rewrite earlier lines) or bidi
//! overrides that make the text read differently from what it is. [`sanitize`] replaces
//! every such character with a visible escape and bounds the length.

/// Longest sanitised text, in bytes (before the `…` that marks a cut).
pub const MAX_PEER_TEXT: usize = 512;

/// Whether `c` must not reach a terminal as it is: C0 controls (ESC included), DEL, C1
/// controls (U+0080–U+009F) and the bidi embeddings, overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `s` with every unsafe character (see [`is_unsafe`]) replaced by a visible escape —
/// `\x1b` for C0, DEL and C1, `\u{202e}` for the bidi controls — and cut to at most `max`
/// bytes at a character boundary, with `…` appended when something was cut.
pub fn sanitize(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max));
    for c in s.chars() {
        let start = out.len();
        if !is_unsafe(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
        if out.len() > max {
            // Never cut an escape in two: drop the whole character that overflowed.
            out.truncate(start);
            out.push('…');
            break;
        }
    }
    out
}

/// Text received from a peer (any bytes): decoded as UTF-8 (invalid sequences become
/// U+FFFD), then [`sanitize`]d to [`MAX_PEER_TEXT`] bytes.
pub fn peer_text(bytes: &[u8]) -> String {
    sanitize(&String::from_utf8_lossy(bytes), MAX_PEER_TEXT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(sanitize("plain text: ok", 100), "plain text: ok");
        assert_eq!(sanitize("a\u{1b}[2Jb", 100), "a\\x1b[2Jb");
        assert_eq!(
            sanitize("\u{1b}]0;owned\u{7}", 100),
            "\\x1b]0;owned\\x07",
            "OSC title"
        );
        assert_eq!(sanitize("line\nnext\r\t", 100), "line\\x0anext\\x0d\\x09");
        assert_eq!(sanitize("del\u{7f}", 100), "del\\x7f");
        assert_eq!(sanitize("c1\u{9b}31m", 100), "c1\\x9b31m", "8-bit CSI");
        assert_eq!(sanitize("\u{80}\u{9f}", 100), "\\x80\\x9f");
        assert_eq!(sanitize("evil\u{202e}txt.exe", 100), "evil\\u{202e}txt.exe");
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{2066}', '\u{2069}',
        ] {
            assert!(is_unsafe(c), "{c:?}");
            assert!(!sanitize(&c.to_string(), 100).contains(c));
        }
        // Ordinary non-ASCII text passes untouched.
        assert_eq!(
            sanitize("Übertragung – 完了 ✓", 100),
            "Übertragung – 完了 ✓"
        );
        assert!(!is_unsafe('\u{a0}') && !is_unsafe('\u{2028}') && !is_unsafe('é'));
    }

    #[test]
    fn length_is_bounded_at_a_character_and_escape_boundary() {
        assert_eq!(sanitize("abcdef", 4), "abcd…");
        assert_eq!(sanitize("abcd", 4), "abcd");
        assert_eq!(
            sanitize("ab\u{1b}", 4),
            "ab…",
            "an escape is never cut in two"
        );
        assert_eq!(sanitize("aéé", 4), "aé…");
        let long = "\u{1b}".repeat(10_000);
        let s = peer_text(long.as_bytes());
        assert!(s.len() <= MAX_PEER_TEXT + '…'.len_utf8(), "{}", s.len());
        assert!(s.ends_with('…') && !s.contains('\u{1b}'));
    }

    #[test]
    fn invalid_utf8_from_a_peer_is_replaced_not_an_error() {
        assert_eq!(
            peer_text(b"bad \xff\xfe end\x1b"),
            "bad \u{fffd}\u{fffd} end\\x1b"
        );
    }
}
