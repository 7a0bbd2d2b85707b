//! A small block-style YAML emitter for [`serde_json::Value`] trees.
//!
//! The context sections are typed serde structs; they are turned into a `Value` with
//! `serde_json::to_value` and written here. Reasons for not using `serde_yaml_ng`'s
//! serializer directly:
//! - libyaml falls back to double-quoted `"...\n\t..."` strings for file contents
//!   that contain tabs or trailing spaces; here every multi-line string that YAML
//!   allows in a literal block is written as one (`|`, `|-`, `|+`, with an
//!   indentation indicator when the first line starts with a space), so code stays
//!   readable;
//! - sequences are indented under their key, as in seed 000 Appendix A.
//!
//! Scalars are written plain when that is unambiguous and double-quoted otherwise.
//! The output parses back (with `serde_yaml_ng`) to the same value, except that
//! `\r\n` line ends inside a multi-line string are shown as `\n`.

use serde_json::{Map, Value};

/// Writes `key: value` as a top-level YAML mapping entry (one context section).
/// The result always ends with a newline.
pub(crate) fn section(key: &str, value: &Value) -> String {
    let mut out = String::with_capacity(256);
    entry(&mut out, key, value, 0, true);
    out
}

/// Indents by `n` spaces (a slice copy: once per line of every block, so char-by-char
/// pushes showed in a step's profile).
fn pad(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Writes `key:` and its value. `with_pad` is false when the key follows `- `.
fn entry(out: &mut String, key: &str, value: &Value, indent: usize, with_pad: bool) {
    if with_pad {
        pad(out, indent);
    }
    scalar(out, key);
    out.push(':');
    node_after_indicator(out, value, indent);
}

/// Writes a value that follows `key:` or `-` on the same line, nested at `indent + 2`.
fn node_after_indicator(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            mapping(out, m, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            sequence(out, a, indent + 2);
        }
        Value::Object(_) => out.push_str(" {}\n"),
        Value::Array(_) => out.push_str(" []\n"),
        Value::String(s) => {
            out.push(' ');
            string(out, s, indent + 2);
        }
        other => {
            out.push(' ');
            simple(out, other);
            out.push('\n');
        }
    }
}

fn mapping(out: &mut String, m: &Map<String, Value>, indent: usize) {
    for (k, v) in m {
        entry(out, k, v, indent, true);
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        pad(out, indent);
        out.push('-');
        match item {
            Value::Object(m) if !m.is_empty() => {
                out.push(' ');
                let mut first = true;
                for (k, v) in m {
                    entry(out, k, v, indent + 2, !first);
                    first = false;
                }
            }
            other => node_after_indicator(out, other, indent),
        }
    }
}

/// Null, booleans and numbers.
fn simple(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => scalar(out, s),
        Value::Array(_) | Value::Object(_) => unreachable!("collections are written as blocks"),
    }
}

/// A string value: a literal block when multi-line, else a flow scalar; ends the line.
/// `content_indent` is where block lines start.
fn string(out: &mut String, s: &str, content_indent: usize) {
    if s.contains('\n') {
        let normalized;
        let s = if s.contains("\r\n") {
            normalized = s.replace("\r\n", "\n");
            normalized.as_str()
        } else {
            s
        };
        if block_allowed(s) {
            literal_block(out, s, content_indent);
            return;
        }
    }
    scalar(out, s);
    out.push('\n');
}

/// Whether `s` can be written as a literal block scalar.
fn block_allowed(s: &str) -> bool {
    if s.is_ascii() {
        // The common case (code, logs), decided on bytes: printable ASCII is 0x20..0x7f,
        // and then the only white space left is space, tab and line feed.
        let b = s.as_bytes();
        return b
            .iter()
            .all(|&c| c == b'\n' || c == b'\t' || (0x20..0x7f).contains(&c))
            && b.iter().any(|&c| !matches!(c, b' ' | b'\n' | b'\t'));
    }
    s.chars().any(|c| !c.is_whitespace())
        && s.chars().all(|c| c == '\n' || c == '\t' || printable(c))
}

/// Characters YAML allows anywhere without escaping (and that no YAML 1.1 reader
/// takes for a line break).
fn printable(c: char) -> bool {
    !c.is_control() && !matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}')
}

fn literal_block(out: &mut String, s: &str, indent: usize) {
    out.push('|');
    // An explicit indentation indicator when the content's own indentation would be
    // taken for the block's: the first line with text starts with a space, or a
    // blank-looking line before it holds spaces.
    let needs_indicator = s
        .split('\n')
        .take_while(|l| l.trim_start_matches(' ').is_empty() || l.starts_with(' '))
        .any(|l| l.starts_with(' '));
    if needs_indicator {
        out.push('2');
    }
    let body = if let Some(stripped) = s.strip_suffix('\n') {
        if stripped.ends_with('\n') {
            out.push('+');
        }
        stripped
    } else {
        out.push('-');
        s
    };
    out.push('\n');
    for line in body.split('\n') {
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// Writes a one-line scalar: plain when unambiguous, else double-quoted.
pub(crate) fn scalar(out: &mut String, s: &str) {
    if plain_allowed(s) {
        out.push_str(s);
    } else {
        double_quoted(out, s);
    }
}

fn plain_allowed(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if first.is_whitespace() || s.ends_with(char::is_whitespace) {
        return false;
    }
    if "?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if first == '-' && !s[1..].starts_with(|c: char| c.is_alphabetic()) {
        return false;
    }
    if s.starts_with("<<") || s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    let printable_text = if s.is_ascii() {
        s.bytes().all(|b| (0x20..0x7f).contains(&b))
    } else {
        s.chars().all(printable)
    };
    printable_text && !resolves_to_non_string(s)
}

/// Whether a plain `s` could be read as null, a boolean or a number by some YAML reader.
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n", ".inf", "-.inf", "+.inf",
        ".nan",
    ];
    if WORDS.iter().any(|w| w.eq_ignore_ascii_case(s)) {
        return true;
    }
    let first = s.as_bytes()[0];
    // Rust's float syntax starts with a digit, a sign, a point, or `inf`/`nan` in any
    // case; other strings need no parse attempt.
    if (first.is_ascii_digit() || b"+-.iInN".contains(&first)) && s.parse::<f64>().is_ok() {
        return true;
    }
    let numberish = (first.is_ascii_digit() || b"+-.".contains(&first))
        && s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() || b"+-._:xXoObB".contains(&b));
    numberish
}

fn double_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if !printable(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: &Value) -> String {
        let text = section("k", v);
        let back: Value = serde_yaml_ng::from_str(&text)
            .unwrap_or_else(|e| panic!("does not parse: {e}\n{text}"));
        assert_eq!(back, json!({ "k": v }), "round trip of\n{text}");
        text
    }

    #[test]
    fn tricky_scalars_round_trip() {
        for s in [
            "",
            "plain words",
            "yes",
            "No",
            "null",
            "~",
            "1.0",
            "12",
            "-3",
            "0x1F",
            "1_000",
            "1e5",
            ".inf",
            "- a",
            "-flag",
            "--verbose",
            "a: b",
            "a #b",
            "#x",
            "x:",
            "'q'",
            "\"q\"",
            "tab\there",
            "trailing ",
            " leading",
            "é ü",
            "5 of 20",
            "120-185",
            "[a]",
            "{a}",
            "*alias",
            "&a",
            "!tag",
            "%x",
            "@x",
            "`x`",
            "<<",
            "del\u{7f}",
            "bel\u{7}",
            "c1\u{85}x",
            "ls\u{2028}x",
            "bom\u{feff}",
            "a\\b",
            "inf",
            "NaN",
            "Infinity",
            "-inf",
            "+1",
            "-.5",
            "n",
            "ON",
        ] {
            round_trip(&json!(s));
            round_trip(&json!([s]));
            round_trip(&json!({ s: s }));
        }
    }

    proptest::proptest! {
        /// Any string, one-line or not, ASCII or not, with control characters and
        /// YAML's indicators, reads back as itself: in a mapping, in a sequence and as
        /// a key (CRLF aside, which is shown as LF by design).
        #[test]
        fn any_string_round_trips(
            s in "([ -~]|[\t\n\r\u{0b}\u{0c}\u{00}-\u{1f}\u{7f}\u{85}\u{a0}\u{2028}\u{feff}é世]|: | #|- |0x1|1e3|true|~){0,24}"
        ) {
            // As the emitter shows CRLF: until none is left (`\r\r\n` twice).
            let mut s = s;
            while s.contains("\r\n") {
                s = s.replace("\r\n", "\n");
            }
            round_trip(&json!(s));
            round_trip(&json!([s.clone()]));
            round_trip(&json!({ "a": { "b": [s.clone(), { "c": s.clone() }] } }));
            if !s.contains('\n') {
                round_trip(&json!({ s.clone(): 1 }));
            }
        }
    }

    #[test]
    fn multi_line_strings_are_literal_blocks() {
        for s in [
            "a\nb\n",
            "a\nb",
            "a\n\n\n",
            "  lead\nx\n",
            "\n\nfirst\n",
            "  \n x\n",
            "fn f() {\n\tlet x = 1;   \n}\n",
            "line\n   \nafter",
            "x\n  indented\n",
            "- item\n- item\n",
            "key: value\n# comment\n",
        ] {
            for v in [
                json!(s),
                json!([s]),
                json!({ "a": s }),
                json!([{ "a": s, "b": 1 }]),
            ] {
                let text = round_trip(&v);
                assert!(text.contains('|'), "not a block:\n{text}");
            }
        }
        // Strings YAML cannot hold in a block fall back to quotes.
        for s in ["bell\u{7}\nx", "\n", " \n "] {
            let text = round_trip(&json!(s));
            assert!(!text.contains('|'), "{text}");
        }
    }

    #[test]
    fn crlf_is_shown_as_lf() {
        let text = section("k", &json!("a\r\nb\r\n"));
        assert_eq!(text, "k: |\n  a\n  b\n");
    }

    #[test]
    fn nested_layout() {
        let v = json!({
            "id": "t-1",
            "list": ["a", "b"],
            "maps": [{ "x": 1, "z": [true, null] }, {}],
            "empty": [],
            "nested": [["a"]],
        });
        let text = round_trip(&v);
        insta::assert_snapshot!(text, @r"
        k:
          id: t-1
          list:
            - a
            - b
          maps:
            - x: 1
              z:
                - true
                - null
            - {}
          empty: []
          nested:
            -
              - a
        ");
    }
}
