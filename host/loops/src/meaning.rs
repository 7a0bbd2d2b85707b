//! What a step *means*, beyond its exact text: the identity of a failure however it is
//! worded, whether an edit changes code at all, whether two messages say the same thing,
//! whether an output is new. These let the detector judge progress in logs from other
//! agents, which carry no check counts and no file hashes.

use std::collections::BTreeSet;
use std::sync::{LazyLock, OnceLock};

use regex::Regex;
use sha2::{Digest, Sha256};

use super::signature::{failure_text, normalize_error, output_has, strip_volatile, ErrorCategory};
use super::StepView;

static ERROR_CODE: LazyLock<Regex> = LazyLock::new(|| {
    // rustc `E0308`, TypeScript `TS2345`, linters `E231`/`F401`/`SA1019`.
    Regex::new(r"\b(?:E\d{4}|TS\d{3,5}|[A-Z]{1,3}\d{3,4})\b").expect("valid regex")
});
static EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Failure|Panic)\b").expect("valid regex")
});
static FAILED_TEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)(?:FAILED\s+([\w./:\[\]-]+::[\w\[\]./-]+)|-{4} ([\w:]+) stdout -{4}|--- FAIL: (\w+)|\btest ([\w:]+) \.\.\. FAILED|[✕✖] ([^\n(]{3,80})|^failures:\n\s+([\w:]+)$|^\s*not ok \d+ - ([^\n#]{3,80}))",
    )
    .expect("valid regex")
});
static ASSERTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bassert(?:ion)?\b").expect("valid regex"));
/// A diagnostic headline (`error: unused import: ...`, `src/a.c:3:1: warning: ...`): its
/// message, without the location before it.
static DIAGNOSTIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\s*(?:[\w./\\-]+:\d+(?::\d+)?:\s*)?(?:error|warning):\s*(\S[^\n]*)$")
        .expect("valid regex")
});
static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z][a-z0-9_]*").expect("valid regex"));

/// The identity of a failure: its category plus the anchors a rewording keeps (error
/// codes, exception types, the failing tests), or, when there are none, its normalized
/// text. Two runs of the same failing assertion at other lines, with other timings or in
/// other words around the same exception, mean the same.
pub(crate) fn failure_meaning(category: ErrorCategory, text: &str) -> String {
    // Bounded: the anchors are near the top or listed in the summary at the end.
    let head: String = text.chars().take(8_000).collect();
    let mut anchors: BTreeSet<String> = BTreeSet::new();
    for m in ERROR_CODE.find_iter(&head) {
        anchors.insert(m.as_str().to_string());
    }
    for m in EXCEPTION.find_iter(&head) {
        anchors.insert(m.as_str().to_string());
    }
    for c in FAILED_TEST.captures_iter(&head) {
        if let Some(m) = c.iter().skip(1).flatten().next() {
            anchors.insert(format!("test:{}", m.as_str().trim()));
        }
    }
    if head.contains("panicked") {
        anchors.insert("panic".into());
    }
    // `assert x == y` and `AssertionError: ...` are two wordings of one failed assertion.
    if ASSERTION.is_match(&head) {
        anchors.insert("AssertionError".into());
    }
    if anchors.is_empty() {
        // A compiler's or linter's diagnostic without a code: its headline is what it
        // means; the source excerpt under it changes with every rewording of the code.
        for c in DIAGNOSTIC.captures_iter(&head) {
            anchors.insert(format!("diag:{}", normalize_error(&c[1])));
        }
    }
    if anchors.is_empty() {
        format!("{category}|{TEXT_MEANING}{}", normalize_error(text))
    } else {
        let list: Vec<String> = anchors.into_iter().collect();
        format!("{category}|{}", list.join(","))
    }
}

/// Marks a [`failure_meaning`] that is the failure's whole text, values masked.
const TEXT_MEANING: &str = "text:";

/// Whether a [`failure_meaning`] pins the failure down by itself: it names an error code
/// (a compiler's or linter's code says what went wrong, whatever the message adds) or it
/// is the failure's whole text with only values masked. Meanings anchored only on a test
/// name or an exception type do not: one test failing with other values or another
/// exception is still being debugged.
pub(crate) fn meaning_is_precise(meaning: &str) -> bool {
    let rest = meaning.split_once('|').map_or(meaning, |(_, r)| r);
    rest.starts_with(TEXT_MEANING)
        || rest.split(',').any(|a| {
            a.starts_with("diag:") || ERROR_CODE.find(a).is_some_and(|m| m.len() == a.len())
        })
}

static LOCATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\w./\\-]+:\d+(?::\d+)?|\bline \d+").expect("valid regex"));

/// The first line a failure reports, exactly but for locations and what changes between
/// identical runs (timings, temporary paths): the values in it (`assert 4 == 5`) stay, so
/// two failures with this equal are the very same failure, not just one of a kind.
pub(crate) fn failure_headline(s: &StepView) -> String {
    // Not the output's last line: that is often a runner's generic trailer (`FAIL pkg`).
    let text = failure_text(s);
    // Taken from the output, the error line comes with the detail indented under it (a
    // failed test's header says which test, the detail what failed).
    let from_output = s.output.as_deref().is_some_and(|o| output_has(o, text));
    let line = if from_output {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    } else {
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    };
    strip_volatile(&LOCATION.replace_all(&line, "L"))
}

static LINE_COMMENT: LazyLock<Regex> = LazyLock::new(|| {
    // `#`, `//` and `--` comments to the end of the line (not `#[attr]`, `#!`, `#include`).
    Regex::new(r"(?m)(?:\s//[^\n]*$|^\s*//[^\n]*$|\s#(?:[^\[!a-z\n][^\n]*)?$|^\s*#(?:[^\[!a-z\n][^\n]*)?$|\s--\s[^\n]*$)")
        .expect("valid regex")
});
static BLOCK_COMMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)/\*.*?\*/").expect("valid regex"));

/// One line of code with comments and all whitespace dropped and quotes unified: two
/// lines that differ only in spacing, comments or quote style normalize equal.
fn code_line(line: &str) -> String {
    let no_comment = LINE_COMMENT.replace_all(line, "");
    no_comment
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| if c == '\'' { '"' } else { c })
        .collect()
}

/// A text's code lines, normalized by [`code_line`], empty ones dropped.
pub(crate) fn code_lines(text: &str) -> Vec<String> {
    let text = BLOCK_COMMENT.replace_all(text, "");
    text.lines()
        .map(code_line)
        .filter(|l| !l.is_empty())
        .collect()
}

/// What an edit from `old` to `new` changes in the code: the lines it removes and the
/// lines it adds, after the lines both share at the start and the end (the context the
/// agent quoted) are dropped. Both empty: the edit changes only whitespace or comments.
pub(crate) fn code_diff(old: &str, new: &str) -> (Vec<String>, Vec<String>) {
    let (a, b) = (code_lines(old), code_lines(new));
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let rest = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(rest)
        .take_while(|(x, y)| x == y)
        .count();
    (
        a[prefix..a.len() - suffix].to_vec(),
        b[prefix..b.len() - suffix].to_vec(),
    )
}

/// A content id of code that ignores whitespace and comments.
pub(crate) fn code_id(text: &str) -> String {
    hex(&code_lines(text).join("\n"))
}

fn hex(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

static VOLATILE: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?",
        r"\b\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds|m)\b",
        r"/tmp/[\w.-]+",
        r"\b0x[0-9a-fA-F]+\b",
        r"\b(?:pid|PID)\s*\d+",
        r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp][Mm])?\b",
        r"(?i)\b(?:about\s+|an?\s+)?\d*\s*(?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?)\s+ago\b",
        r"(?i)\b(?:elapsed|took|duration|in)\s*:?\s*(?:\d+h\s*)?(?:\d+m\s*)?\d+(?:\.\d+)?s\b",
    ]
    .iter()
    .map(|r| Regex::new(r).expect("valid regex"))
    .collect()
});

/// Longest output text compared: its head and its tail, where progress shows.
const MAX_OUTPUT: usize = 64 * 1024;

/// A fingerprint of a step's output, what changes between identical runs (timings,
/// timestamps, temporary paths, addresses) left out: from the text when the log has it,
/// else the recorded hash. `None` when the log has neither.
pub(crate) fn output_fingerprint(s: &StepView) -> Option<String> {
    if let Some(text) = &s.output {
        let text = if text.len() > MAX_OUTPUT {
            let mut head = MAX_OUTPUT / 2;
            while !text.is_char_boundary(head) {
                head -= 1;
            }
            let mut tail = text.len() - MAX_OUTPUT / 2;
            while !text.is_char_boundary(tail) {
                tail += 1;
            }
            format!("{}\n{}", &text[..head], &text[tail..])
        } else {
            text.clone()
        };
        let mut t = text;
        for re in VOLATILE.iter() {
            t = re.replace_all(&t, "_").into_owned();
        }
        return Some(format!("t:{}", hex(t.trim())));
    }
    s.output_hash.as_ref().map(|h| format!("h:{h}"))
}

static VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"`[^`\n]{0,200}`|"[^"\n]{0,200}"|'[^'\n]{0,200}'|[\w.~-]*(?:/[\w.~-]+)+|\b[0-9a-fA-F]{7,}\b|\d+(?:\.\d+)*[a-zµ]{0,3}"#)
        .expect("valid regex")
});

/// Longest output text whose wording is compared.
const MAX_WORDING: usize = 8 * 1024;

/// A fingerprint of what an output text says in words, its values (numbers, durations,
/// quoted names, paths, hashes) left out: two failures of one command that differ here
/// report other things (`pending` became `pass`), not the same thing with other values.
/// `None` when the step has no output text.
pub(crate) fn output_wording(s: &StepView) -> Option<String> {
    let text = s.output.as_deref()?;
    // Its head and its tail: where a status table or a run's progress shows.
    let text = if text.len() > MAX_WORDING {
        let mut head = MAX_WORDING / 2;
        while !text.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = text.len() - MAX_WORDING / 2;
        while !text.is_char_boundary(tail) {
            tail += 1;
        }
        format!("{}\n{}", &text[..head], &text[tail..])
    } else {
        text.to_string()
    };
    let words = VALUE.replace_all(&text, "_");
    let words: Vec<&str> = words.split_whitespace().collect();
    Some(hex(&words.join(" ")))
}

/// Whether output `now` shows something that output `then` of the same call did not.
/// Hashes of texts with the same length are taken as the same output with other timings
/// (a hash cannot tell a new duration from new content; a build getting further or a new
/// page of a file changes the length).
pub(crate) fn output_differs(
    now: &StepView,
    now_fp: Option<&str>,
    now_text: &Stripped,
    then: &StepView,
    then_fp: Option<&str>,
    then_text: &Stripped,
) -> bool {
    match (now_fp, then_fp) {
        (Some(a), Some(b)) if a != b => {
            let hash_only = a.starts_with("h:") || b.starts_with("h:");
            if !(hash_only && now.output_len.is_some() && now.output_len == then.output_len) {
                return true;
            }
            // Same length, other hash: new timings, or a counter that moved (12/140 ->
            // 37/140). The summary tells them apart when there is one.
            let (x, y) = (now_text.said(now), then_text.said(then));
            x != y || x.trim().is_empty()
        }
        // No output recorded: the one-line summary is all there is ("still running,
        // 61/247 crates"); an error reworded is not new output.
        (None, None) => {
            let (x, y) = (now_text.summary(now), then_text.summary(then));
            !x.is_empty() && x != y
        }
        _ => false,
    }
}

/// A step's summary and error with what changes between identical runs left out
/// ([`strip_volatile`]), as [`output_differs`] compares them: worked out the first time
/// a comparison needs them and kept with the step (a run compares the same steps again
/// at every step). Always asked with the step it is kept for.
#[derive(Debug, Default)]
pub(crate) struct Stripped {
    summary: OnceLock<String>,
    said: OnceLock<String>,
}

impl Stripped {
    /// The summary of `s`, stripped.
    pub(crate) fn summary(&self, s: &StepView) -> &str {
        self.summary.get_or_init(|| strip_volatile(&s.summary))
    }

    /// The summary and the error of `s`, stripped, on two lines.
    pub(crate) fn said(&self, s: &StepView) -> &str {
        self.said.get_or_init(|| {
            format!(
                "{}\n{}",
                self.summary(s),
                strip_volatile(s.error.as_deref().unwrap_or(""))
            )
        })
    }
}

/// Words that carry no content in a plan or status message.
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "then",
    "that",
    "this",
    "with",
    "will",
    "to",
    "it",
    "is",
    "be",
    "so",
    "of",
    "in",
    "on",
    "for",
    "a",
    "an",
    "i",
    "ll",
    "we",
    "now",
    "next",
    "again",
    "afterwards",
    "let",
    "me",
    "my",
    "step",
    "plan",
    "should",
    "can",
    "by",
    "from",
    "as",
    "at",
    "do",
    "fix",
    "first",
    "after",
    "make",
    "sure",
    "are",
    "was",
    "which",
    "what",
    "have",
    "has",
    "need",
    "going",
];

/// The content words of a message, crudely stemmed.
pub(crate) fn content_words(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    WORD.find_iter(&lower)
        .map(|m| m.as_str())
        .filter(|w| w.len() > 2 && !STOPWORDS.contains(w))
        .map(|w| {
            let w = w
                .strip_suffix("ing")
                .or_else(|| w.strip_suffix("es"))
                .or_else(|| w.strip_suffix("ed"))
                .or_else(|| w.strip_suffix('s'))
                .filter(|r| r.len() >= 3)
                .unwrap_or(w);
            w.to_string()
        })
        .collect()
}

/// Whether two messages say mostly the same thing: at least two fifths of the shorter
/// one's content words (and at least three) are in the other; `strict`, three fifths
/// (for messages with something new learned in between, which share the task's words).
pub(crate) fn same_message(a: &BTreeSet<String>, b: &BTreeSet<String>, strict: bool) -> bool {
    let common = a.intersection(b).count();
    let shorter = a.len().min(b.len());
    let share = if strict { 3 } else { 2 };
    common >= 3 && 5 * common >= share * shorter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewording_keeps_the_meaning() {
        let a = failure_meaning(
            ErrorCategory::TestFailure,
            "FAILED tests/test_fees.py::test_fee - AssertionError: assert 0.59000001 == 0.59\n1 failed in 0.41s",
        );
        let b = failure_meaning(
            ErrorCategory::TestFailure,
            "FAILED tests/test_fees.py::test_fee - AssertionError: expected 0.59, got 0.5900001 (line 13)",
        );
        assert_eq!(a, b);
        let bare = failure_meaning(
            ErrorCategory::TestFailure,
            "FAILED tests/test_fees.py::test_fee - assert 0.5900000000000001 == 0.59",
        );
        assert_eq!(a, bare);
        let c = failure_meaning(
            ErrorCategory::TestFailure,
            "FAILED tests/test_fees.py::test_other - AssertionError: assert 1 == 2",
        );
        assert_ne!(a, c);
    }

    #[test]
    fn cosmetic_edits_change_no_code() {
        let (r, a) = code_diff(
            "    return amount * 0.029 + 0.3",
            "    return amount*0.029 + 0.3  # stripe fee",
        );
        assert!(r.is_empty() && a.is_empty());
        let (r, a) = code_diff("x = 1\ny = 2\nz = 3", "x = 1\ny = 3\nz = 3");
        assert_eq!((r, a), (vec!["y=2".to_string()], vec!["y=3".to_string()]));
    }

    #[test]
    fn paraphrased_plans_are_the_same_message() {
        let a = content_words("I will change parse_date so that it handles the timezone offset (fromisoformat), then run the tests.");
        let b = content_words("The fix is to switch parse_date to fromisoformat to handle the timezone offset, then run the tests again.");
        assert!(same_message(&a, &b, false));
        let c = content_words("All tests pass now; the timezone work is complete.");
        assert!(!same_message(&a, &c, false));
    }
}
