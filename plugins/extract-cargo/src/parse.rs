//! The line shapes cargo's extractor reads on every output, parsed by hand.
//!
//! Each function matches exactly what the regex in its doc comment matches (the tests
//! below check that on tricky and generated lines), but runs as a few byte comparisons:
//! matching these with `regex` captures was most of an extraction, and in the WASM
//! component the capture engines (one-pass DFA, bounded backtracker) ran 2-3x slower than
//! natively, while these comparisons and `memchr`'s SIMD searches cost about the same in
//! both. The regexes' `\d` is ASCII here (cargo prints ASCII digits; a Unicode digit
//! never parsed as a number anyway).

use memchr::memmem;

/// The lines of `text`, as `str::lines` splits them (`\n` or `\r\n`, no empty last line),
/// found with `memchr` (SIMD in the component too; `str::lines` is not).
pub fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / 40 + 1);
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', text.as_bytes()) {
        let line = &text[start..nl];
        out.push(line.strip_suffix('\r').unwrap_or(line));
        start = nl + 1;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Whether `text` contains `needle` (`memchr`'s SIMD search, which the component gets
/// too; `str::contains` is vectorised only on x86_64).
pub fn has(text: &str, needle: &str) -> bool {
    memmem::find(text.as_bytes(), needle.as_bytes()).is_some()
}

/// What an output can hold, from one walk over its lines: each flag is true whenever the
/// shape it gates can be in the output (it may also be true when the shape is not), so a
/// rule skips its work on a false flag without changing its facts. Found by looking at
/// each line's first byte: three `memmem` searches over the whole output cost more,
/// most of all in the component (about 19 us each over 99 KB there).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Marks {
    /// A line whose first non-whitespace character is `{` (a libtest JSON event).
    pub json: bool,
    /// A line that is whitespace then `Summary [` (nextest's summary).
    pub summary: bool,
    /// A `---- name stdout ----` line followed by a line starting `Error: ` (a test
    /// returning `Err`).
    pub err_return: bool,
}

/// The [`Marks`] of `lines`.
pub fn marks(lines: &[&str]) -> Marks {
    let mut m = Marks::default();
    for (i, line) in lines.iter().enumerate() {
        let rest = match line.as_bytes().first() {
            Some(b'-') => {
                if line.ends_with(" stdout ----")
                    && line.starts_with("---- ")
                    && lines.get(i + 1).is_some_and(|n| n.starts_with("Error: "))
                {
                    m.err_return = true;
                }
                continue;
            }
            // Whitespace as `trim_start` sees it: ASCII, or a multi-byte character.
            Some(&b) if b.is_ascii_whitespace() || b == 0x0b || b >= 0x80 => line.trim_start(),
            Some(b'{' | b'S') => line,
            _ => continue,
        };
        match rest.as_bytes().first() {
            Some(b'{') => m.json = true,
            Some(b'S') if rest.starts_with("Summary [") => m.summary = true,
            _ => {}
        }
    }
    m
}

/// The longest prefix of `s` of ASCII digits (may be empty) and the rest.
fn digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at(n)
}

/// One or more ASCII digits at the start of `s`: the digits and the rest.
fn number(s: &str) -> Option<(&str, &str)> {
    let (d, rest) = digits(s);
    (!d.is_empty()).then_some((d, rest))
}

/// A run of non-whitespace, non-`:` characters at the start of `s` (`[^:\s]+`), followed
/// by `:`: the run and the rest after the `:`.
fn path_then_colon(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| c == ':' || c.is_whitespace())?;
    let (path, rest) = s.split_at(end);
    (!path.is_empty()).then_some(())?;
    Some((path, rest.strip_prefix(':')?))
}

/// `^test (\S+) \.\.\. (ok|FAILED|ignored)`: the test's name and its status.
pub fn test_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("test ")?;
    let end = rest.find(char::is_whitespace)?;
    let (name, rest) = rest.split_at(end);
    let rest = rest.strip_prefix(" ... ")?;
    let status = ["ok", "FAILED", "ignored"]
        .into_iter()
        .find(|s| rest.starts_with(s))?;
    (!name.is_empty()).then_some((name, status))
}

/// `^---- (\S+) stdout ----$`: the failing test's name.
pub fn stdout_header(line: &str) -> Option<&str> {
    let name = line.strip_prefix("---- ")?.strip_suffix(" stdout ----")?;
    (!name.is_empty() && !name.contains(char::is_whitespace)).then_some(name)
}

/// `^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored`: passed,
/// failed and ignored, as written.
pub fn result_line(line: &str) -> Option<[&str; 3]> {
    let rest = line.strip_prefix("test result: ")?;
    let rest = rest
        .strip_prefix("ok. ")
        .or_else(|| rest.strip_prefix("FAILED. "))?;
    let (passed, rest) = number(rest)?;
    let (failed, rest) = number(rest.strip_prefix(" passed; ")?)?;
    let (ignored, rest) = number(rest.strip_prefix(" failed; ")?)?;
    rest.starts_with(" ignored")
        .then_some([passed, failed, ignored])
}

/// `^(error|warning)(?:\[(E\d+)\])?: (.+)$`: level, error code, message.
#[inline(always)]
pub fn diag(line: &str) -> Option<(&str, Option<&str>, &str)> {
    // Most lines are ruled out here, in the caller's loop (this runs on every line of
    // every output): in the component, a call per line cost a tenth of the extraction
    // (the callee's prologue, its stack and epoch checks).
    let first = line.as_bytes().first().copied();
    if first != Some(b'e') && first != Some(b'w') {
        return None;
    }
    diag_header(line)
}

/// [`diag`] on a line that starts with `e` or `w`.
#[inline(never)]
fn diag_header(line: &str) -> Option<(&str, Option<&str>, &str)> {
    let (level, rest) = if let Some(r) = line.strip_prefix("error") {
        ("error", r)
    } else {
        ("warning", line.strip_prefix("warning")?)
    };
    let (code, rest) = match rest.strip_prefix("[E") {
        Some(r) => {
            let (d, r) = number(r)?;
            let r = r.strip_prefix(']')?;
            (Some(&rest[1..2 + d.len()]), r)
        }
        None => (None, rest),
    };
    let message = rest.strip_prefix(": ")?;
    (!message.is_empty()).then_some((level, code, message))
}

/// `^\s*--> ([^:\s]+):(\d+):\d+`: file and line of a diagnostic's primary span.
pub fn arrow(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix("--> ")?;
    let (file, rest) = path_then_colon(rest)?;
    let (line_no, rest) = number(rest)?;
    number(rest.strip_prefix(':')?)?;
    Some((file, line_no))
}

/// One panic in a test's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panic<'a> {
    /// The panicking thread (the test's name); `None` for the location-only shape.
    pub thread: Option<&'a str>,
    pub file: &'a str,
    pub line: &'a str,
    /// The first line of the message (whitespace before it skipped, untrimmed after).
    pub message: &'a str,
    /// Where the match starts and ends in the text.
    pub span: (usize, usize),
}

/// The location and message after `panicked at ` (at `at`, the index just after it):
/// `([^:\s]+):(\d+):\d+:\n\s*(.*)`.
fn location(text: &str, at: usize) -> Option<(&str, &str, &str, usize)> {
    let (file, rest) = path_then_colon(&text[at..])?;
    let (line, rest) = number(rest)?;
    let (_, rest) = number(rest.strip_prefix(':')?)?;
    let rest = rest.strip_prefix(":\n")?;
    let rest = rest.trim_start();
    let message = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let end = text.len() - rest.len() + message.len();
    Some((file, line, message, end))
}

/// The thread part before `panicked at ` (at `at`, its index): `thread '([^']+)'(?:
/// \(\d+\))? ` ending there. The name and where `thread` starts.
fn thread_before(text: &str, at: usize) -> Option<(&str, usize)> {
    let before = text[..at].strip_suffix(' ')?;
    // The thread id of newer Rust (`'name' (12345) panicked`), optional.
    let with_id = before.strip_suffix(')').and_then(|b| {
        let open = b.rfind('(')?;
        let id = &b[open + 1..];
        (!id.is_empty() && id.bytes().all(|c| c.is_ascii_digit())).then_some(())?;
        b[..open].strip_suffix(' ')
    });
    let quoted = with_id
        .filter(|b| b.ends_with('\''))
        .unwrap_or(before)
        .strip_suffix('\'')?;
    let open = quoted.rfind('\'')?;
    let name = &quoted[open + 1..];
    let start = quoted[..open].strip_suffix("thread ")?.len();
    (!name.is_empty()).then_some((name, start))
}

/// Every `thread '(name)'( (id))? panicked at file:line:col:\n  message` in `text`, in
/// order and without overlap, as `regex`'s `captures_iter` finds them.
pub fn panics(text: &str) -> Vec<Panic<'_>> {
    const AT: &str = "panicked at ";
    let mut out = Vec::new();
    let mut last_end = 0;
    for i in memmem::find_iter(text.as_bytes(), AT.as_bytes()) {
        if i < last_end {
            continue;
        }
        let Some((thread, start)) = thread_before(text, i) else {
            continue;
        };
        if start < last_end {
            continue;
        }
        let Some((file, line, message, end)) = location(text, i + AT.len()) else {
            continue;
        };
        last_end = end;
        out.push(Panic {
            thread: Some(thread),
            file,
            line,
            message,
            span: (start, end),
        });
    }
    out
}

/// The first panic in `text` with its thread, else the first `panicked at
/// file:line:col:\n  message` without one.
pub fn first_panic(text: &str) -> Option<Panic<'_>> {
    const AT: &str = "panicked at ";
    if let Some(p) = panics(text).into_iter().next() {
        return Some(p);
    }
    memmem::find_iter(text.as_bytes(), AT.as_bytes()).find_map(|i| {
        let (file, line, message, end) = location(text, i + AT.len())?;
        Some(Panic {
            thread: None,
            file,
            line,
            message,
            span: (i, end),
        })
    })
}

#[cfg(test)]
// The plugin bench compiles this file natively, as a `harness = false` test target.
#[allow(dead_code)]
mod tests {
    //! Each parser against the regex it replaces, on hand-picked edge cases and on lines
    //! generated from the shapes' own pieces (so that near misses are common).
    use super::*;
    use regex::Regex;

    const PIECES: &[&str] = &[
        "test ",
        "test result: ",
        "ok",
        "FAILED",
        "ignored",
        " ... ",
        "ok. ",
        "FAILED. ",
        " passed; ",
        " failed; ",
        " ignored",
        "---- ",
        " stdout ----",
        "error",
        "warning",
        "[E",
        "0308",
        "]",
        ": ",
        "--> ",
        "  ",
        "\t",
        "src/lib.rs",
        ":",
        "12",
        "7",
        "x",
        "tests::a",
        " ",
        "é",
        "٣",
        "'",
        "thread '",
        "main",
        "' ",
        "(42) ",
        "panicked at ",
        ":\n",
        "\n",
        "\n  \n",
        "msg",
        "(",
        ")",
        "--",
    ];

    /// A deterministic xorshift generator.
    fn rng(seed: u64) -> impl FnMut(usize) -> usize {
        let mut x = seed;
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        }
    }

    /// `n` texts made from `samples` (valid shapes) by up to three random edits each:
    /// inserting one of `PIECES`, deleting a character, cutting the text short, or
    /// joining two samples. Most stay near a match; many still match.
    fn generated(samples: &[&str], n: usize, seed: u64) -> Vec<String> {
        let mut r = rng(seed);
        (0..n)
            .map(|_| {
                let mut t = samples[r(samples.len())].to_string();
                for _ in 0..r(4) {
                    let at: Vec<usize> =
                        t.char_indices().map(|(i, _)| i).chain([t.len()]).collect();
                    let i = at[r(at.len())];
                    match r(4) {
                        0 => t.insert_str(i, PIECES[r(PIECES.len())]),
                        1 if i < t.len() => {
                            t.remove(i);
                        }
                        2 => t.truncate(i),
                        _ => t.push_str(samples[r(samples.len())]),
                    }
                }
                t
            })
            .collect()
    }

    const LINES: &[&str] = &[
        "test a ... ok",
        "test a ... FAILED",
        "test a::b ... ignored, slow",
        "test  ... ok",
        "test a\t... ok",
        "test a ...  ok",
        "test result: ok. 1 passed; 0 failed; 2 ignored; 0 measured",
        "test result: FAILED. 10 passed; 3 failed; 0 ignored",
        "test result: FAILED. 1 passed; x failed; 0 ignored",
        "test result: ok. ٣ passed; 0 failed; 0 ignored",
        "---- tests::a stdout ----",
        "---- tests::a b stdout ----",
        "----  stdout ----",
        "---- a stdout ---- ",
        "error[E0308]: mismatched types",
        "error[E]: x",
        "error[E12: x",
        "error[W1]: x",
        "error: ",
        "error:  spaced",
        "warning: unused variable: `x`",
        "warningx: y",
        "errors: y",
        "  --> src/lib.rs:12:5",
        "-->src/lib.rs:1:1",
        "   --> src/a b.rs:1:2",
        "--> src/lib.rs:12:",
        "--> :1:1",
        "  --> C:\\x.rs:1:1",
    ];

    fn single_lines() -> Vec<String> {
        let mut v: Vec<String> = LINES.iter().map(|s| s.to_string()).collect();
        v.extend(generated(LINES, 20_000, 0x9E37_79B9_7F4A_7C15));
        v.into_iter()
            .flat_map(|s| s.split('\n').map(str::to_string).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn line_parsers_match_their_regexes() {
        let test_re = Regex::new(r"^test (\S+) \.\.\. (ok|FAILED|ignored)").unwrap();
        let header_re = Regex::new(r"^---- (\S+) stdout ----$").unwrap();
        let result_re = Regex::new(
            r"^test result: (?:ok|FAILED)\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored",
        )
        .unwrap();
        let diag_re = Regex::new(r"^(error|warning)(?:\[(E[0-9]+)\])?: (.+)$").unwrap();
        let arrow_re = Regex::new(r"^\s*--> ([^:\s]+):([0-9]+):[0-9]+").unwrap();
        let mut matched = 0;
        for l in single_lines() {
            let l = l.as_str();
            let want = test_re
                .captures(l)
                .map(|c| (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str()));
            assert_eq!(test_line(l), want, "test line {l:?}");
            let want = header_re.captures(l).map(|c| c.get(1).unwrap().as_str());
            assert_eq!(stdout_header(l), want, "header {l:?}");
            let want = result_re
                .captures(l)
                .map(|c| [1, 2, 3].map(|i| c.get(i).unwrap().as_str()));
            assert_eq!(result_line(l), want, "result {l:?}");
            let want = diag_re.captures(l).map(|c| {
                (
                    c.get(1).unwrap().as_str(),
                    c.get(2).map(|m| m.as_str()),
                    c.get(3).unwrap().as_str(),
                )
            });
            assert_eq!(diag(l), want, "diag {l:?}");
            let want = arrow_re
                .captures(l)
                .map(|c| (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str()));
            assert_eq!(arrow(l), want, "arrow {l:?}");
            matched += usize::from(want.is_some() || test_line(l).is_some() || diag(l).is_some());
        }
        // The generated lines reach the matching branches, not only the misses.
        assert!(matched > 2_000, "only {matched} lines matched anything");
    }

    fn regex_panics<'a>(re: &Regex, text: &'a str) -> Vec<Panic<'a>> {
        re.captures_iter(text)
            .map(|c| {
                let whole = c.get(0).unwrap();
                let n = c.len();
                Panic {
                    thread: (n == 5).then(|| c.get(1).unwrap().as_str()),
                    file: c.get(n - 3).unwrap().as_str(),
                    line: c.get(n - 2).unwrap().as_str(),
                    message: c.get(n - 1).unwrap().as_str(),
                    span: (whole.start(), whole.end()),
                }
            })
            .collect()
    }

    #[test]
    fn panics_match_their_regex() {
        let full = Regex::new(
            r"thread '([^']+)'(?: \([0-9]+\))? panicked at ([^:\s]+):([0-9]+):[0-9]+:\n\s*(.*)",
        )
        .unwrap();
        let short = Regex::new(r"panicked at ([^:\s]+):([0-9]+):[0-9]+:\n\s*(.*)").unwrap();
        const TEXTS: &[&str] = &[
            "thread 'a' panicked at src/lib.rs:8:34:\nassertion failed\nmore",
            "thread 'a' (25078) panicked at src/lib.rs:8:34:\n  left: 1\n",
            "thread 'a' () panicked at src/lib.rs:8:34:\nx",
            "thread 'a' (1) (2) panicked at src/lib.rs:8:34:\nx",
            "thread 'a (1)' panicked at src/lib.rs:8:34:\nx",
            "thread 'a' panicked at src/lib.rs:8:34:\n\n\n   \n  late message",
            "thread 'a' panicked at src/lib.rs:8:34:\n",
            "thread 'a' panicked at src/lib.rs:8:34:\r\nx",
            "thread 'a' panicked at 'old style', src/lib.rs:1:2",
            "thread 'thread 'b' panicked at x.rs:1:2:\nm",
            "thread 'a\nb' panicked at x.rs:1:2:\nm thread 'c' panicked at y.rs:3:4:\nn",
            "thread 'a' panicked at x.rs:1:2:\nthread 'c' panicked at y.rs:3:4:\nn",
            "panicked at x.rs:1:2:\nno thread",
            "thread '' panicked at x.rs:1:2:\nm",
        ];
        let mut texts: Vec<String> = TEXTS.iter().map(|s| s.to_string()).collect();
        texts.extend(generated(TEXTS, 20_000, 0x2545_F491_4F6C_DD1D));
        let mut found = 0;
        for t in &texts {
            let want = regex_panics(&full, t);
            found += want.len();
            assert_eq!(panics(t), want, "panics in {t:?}");
            let first = want
                .into_iter()
                .next()
                .or_else(|| regex_panics(&short, t).into_iter().next());
            assert_eq!(first_panic(t), first, "first panic in {t:?}");
        }
        assert!(found > 5_000, "only {found} panics in the generated texts");
    }

    #[test]
    fn lines_split_as_str_lines_does() {
        for t in [
            "", "a", "a\n", "a\r\nb", "a\rb\n", "\n\n", "a\r", "a\r\r\n", "é\n٣",
        ] {
            assert_eq!(lines(t), t.lines().collect::<Vec<_>>(), "{t:?}");
        }
        for t in generated(LINES, 2_000, 7) {
            assert_eq!(lines(&t), t.lines().collect::<Vec<_>>(), "{t:?}");
        }
    }

    #[test]
    fn marks_are_set_wherever_their_shapes_can_be() {
        // The searches the marks replace, as the rules ran them.
        let summary_re = Regex::new(r"(?m)^\s*Summary \[").unwrap();
        let err_re = Regex::new(r"(?m)^---- (\S+) stdout ----\n(Error: .*)").unwrap();
        const TEXTS: &[&str] = &[
            "---- tests::a stdout ----\nError: boom\n",
            "---- tests::a stdout ----\r\nError: boom",
            "---- a b stdout ----\nError: x",
            "---- a stdout ----\n\nError: x",
            "    Summary [   0.231s] 2 tests run: 1 passed, 1 failed",
            "Summary [",
            "\u{a0}\u{2003}Summary [ x",
            "\x0b\x0c\tSummary [",
            "x Summary [",
            "{\"type\":\"suite\",\"event\":\"ok\"}",
            "  \t{ \"type\": \"test\" }",
            "\u{3000}{",
            "a {\"type\"}",
            "test a ... FAILED\n{",
        ];
        let mut seen = [0; 3];
        let texts = TEXTS.iter().map(|s| s.to_string()).chain(generated(
            TEXTS,
            20_000,
            0xD1B5_4A32_D192_ED03,
        ));
        for t in texts {
            let split = lines(&t);
            let m = marks(&split);
            let json = t.lines().any(|l| l.trim_start().starts_with('{'));
            let summary = t.lines().any(|l| l.trim_start().starts_with("Summary ["));
            let err_return = split.windows(2).any(|w| {
                w[0].starts_with("---- ")
                    && w[0].ends_with(" stdout ----")
                    && w[1].starts_with("Error: ")
            });
            assert_eq!(
                m,
                Marks {
                    json,
                    summary,
                    err_return
                },
                "{t:?}"
            );
            // Never false where the search it replaces finds something.
            assert!(m.summary || !summary_re.is_match(&t), "{t:?}");
            assert!(m.err_return || !err_re.is_match(&t), "{t:?}");
            for (n, on) in seen.iter_mut().zip([json, summary, err_return]) {
                *n += usize::from(on);
            }
        }
        // The generated texts hit every mark many times, and miss it too.
        assert!(seen.iter().all(|&n| n > 1_000 && n < 19_000), "{seen:?}");
    }
}
