//! Text from outside the host (plugins, tools, commands, the model) made safe to show.
//!
//! A plugin's name, log line, guard reason or fact, and a tool's output, reach a
//! terminal, a log file and the model's context. Terminal escapes (ANSI/OSC: clear the
//! screen, retitle the window, hide text), NUL, bidi overrides (text that reads other
//! than it is) and forged lines (`\nerror: ...`) must not. [`text`] keeps line breaks
//! and tabs (multi-line output); [`line`](fn@line) makes one line of it (names, reasons, log
//! lines), showing a break as `⏎`.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;

/// Escape sequences (ECMA-48): CSI (`ESC [` ... final byte, or the 8-bit `U+009B`), OSC
/// (`ESC ]` ... `BEL` or `ESC \`), the string commands DCS/SOS/PM/APC (`ESC P|X|^|_` ...
/// `ESC \`), and the two-character escapes.
fn escapes() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"(?:\x1b\[|\x{9b})[0-?]*[ -/]*[@-~]?",
            r"|(?:\x1b\]|\x{9d})[^\x07\x1b\x{9c}]*(?:\x07|\x1b\\|\x{9c})?",
            r"|\x1b[PX^_][^\x1b\x{9c}]*(?:\x1b\\|\x{9c})?",
            r"|\x1b[ -/]*[0-~]?",
        ))
        .expect("the escape pattern is valid")
    })
}

/// Whether `c` is removed: control characters (C0 but tab and line feed, DEL, C1),
/// bidirectional formatting (embeddings, overrides, isolates, marks), and the line and
/// paragraph separators some terminals break on.
fn unwanted(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
                | '\u{2028}' | '\u{2029}'
        )
}

/// `s` without escape sequences and unwanted characters; line feeds and tabs are kept
/// (`\r\n` becomes `\n`). Borrows when nothing had to go (the common case).
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unwanted) {
        return Cow::Borrowed(s);
    }
    let s = s.replace("\r\n", "\n");
    let stripped = escapes().replace_all(&s, "");
    Cow::Owned(stripped.chars().filter(|&c| !unwanted(c)).collect())
}

/// [`text`] on one line: each line break shows as `⏎` and tabs as a space, so a text
/// cannot forge a line of its own in a terminal or a log.
pub fn line(s: &str) -> String {
    let t = text(s);
    let t = t.trim_end_matches('\n');
    t.replace('\n', " ⏎ ").replace('\t', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_are_removed() {
        let hostile = "\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}ok\u{0} \u{202e}abc\u{2066} \u{9b}2Jx \u{1b}Pdcs\u{1b}\\y\u{7f}";
        assert_eq!(text(hostile), "red ok abc x y");
    }

    #[test]
    fn clean_text_is_borrowed_and_newlines_survive() {
        assert!(matches!(text("a\n\tb"), Cow::Borrowed("a\n\tb")));
        assert_eq!(text("a\r\nb\rc"), "a\nbc");
    }

    #[test]
    fn one_line_cannot_forge_another() {
        assert_eq!(line("ok\nerror: forged\n"), "ok ⏎ error: forged");
        assert_eq!(line("a\tb"), "a b");
    }

    #[test]
    fn unterminated_sequences_are_cut_too() {
        assert_eq!(text("x\u{1b}]0;never ends"), "x");
        assert_eq!(text("x\u{1b}["), "x");
    }
}
