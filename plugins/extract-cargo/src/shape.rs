//! The shape of a test or lint report, in plain Rust (no plugin types): one totals fact
//! in the tool's own terms, then each failing test or diagnostic (errors before warnings,
//! notes last) up to a cap, then how many more there are and which codes they carry.
//!
//! A model reads these facts instead of the output, so what a cap drops must be the least
//! important part, and what it drops must still be counted.
//!
//! Plain so that one source serves the component and a native build: `report.rs` turns
//! these into the SDK's facts for the built-in extractors, and the plugin benchmark
//! (`host/cli/benches/native_rules.rs`) compiles `rules.rs`, which uses this file, for
//! the host to measure the component against the very same rules.

#![allow(dead_code)] // Each includer uses part of it.

/// How many failing tests or diagnostics a report names one by one.
pub const CAP: usize = 10;

/// How serious one finding is; reports list errors first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// A failing test, a compile error, an error-level diagnostic.
    Error,
    /// A warning.
    Warning,
    /// A note, an info or style remark: never reported as an error.
    Note,
}

/// One failing test or diagnostic.
#[derive(Debug, Clone)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// Its code or rule (`E0308`, `F401`, `no-unused-vars`), when it has one.
    pub code: Option<String>,
    /// The whole statement (`test x fails at a.py:3: ...`, `F401 at a.py:1: ...`).
    pub statement: String,
}

impl Finding {
    /// A finding with no code.
    pub fn new(severity: Severity, statement: impl Into<String>) -> Finding {
        Finding {
            severity,
            code: None,
            statement: statement.into(),
        }
    }

    /// The same finding, carrying `code`.
    pub fn code(mut self, code: impl Into<String>) -> Finding {
        let code = code.into();
        if !code.is_empty() {
            self.code = Some(code);
        }
        self
    }
}

/// A fact's category, as the plugin contract names the ones reports use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A totals fact (`tests: 3 passed, 1 failed`).
    Verification,
    /// A failing test, an error or a warning.
    Error,
    /// A note.
    Pattern,
}

/// One fact of a report: its category and statement (the source is the tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stated {
    /// Its category.
    pub kind: Kind,
    /// What it says.
    pub statement: String,
}

impl Stated {
    /// A fact of `kind` saying `statement`.
    pub fn new(kind: Kind, statement: impl Into<String>) -> Stated {
        Stated {
            kind,
            statement: statement.into(),
        }
    }
}

/// `n` and `word`, plural when `n` is not 1 (`1 error`, `3 errors`).
pub fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The facts of `findings`: errors first, then warnings, then notes (stable within each),
/// at most [`CAP`] of them, then one fact `N more <what>` naming the codes of the rest
/// (`F401 ×3, E711`), starting with `warning: ` when no error is among them. Errors and
/// warnings are error facts; notes are pattern facts.
pub fn ordered(mut findings: Vec<Finding>, what: &str) -> Vec<Stated> {
    findings.sort_by_key(|f| f.severity);
    let rest = findings.split_off(findings.len().min(CAP));
    let mut out: Vec<Stated> = findings
        .into_iter()
        .map(|f| Stated::new(kind(f.severity), f.statement))
        .collect();
    if !rest.is_empty() {
        let mut codes: Vec<(&str, usize)> = Vec::new();
        for code in rest.iter().filter_map(|f| f.code.as_deref()) {
            match codes.iter_mut().find(|(c, _)| *c == code) {
                Some((_, n)) => *n += 1,
                None => codes.push((code, 1)),
            }
        }
        let listed: Vec<String> = codes
            .iter()
            .map(|(c, n)| {
                if *n == 1 {
                    c.to_string()
                } else {
                    format!("{c} ×{n}")
                }
            })
            .collect();
        // A gate tells warnings from failures by the `warning` a statement starts with.
        let mut s = match rest[0].severity {
            Severity::Warning => format!("warning: {} more {what}", rest.len()),
            _ => format!("{} more {what}", rest.len()),
        };
        if !listed.is_empty() {
            s.push_str(&format!(": {}", listed.join(", ")));
        }
        out.push(Stated::new(kind(rest[0].severity), s));
    }
    out
}

/// The category of a finding of `severity`.
pub fn kind(severity: Severity) -> Kind {
    match severity {
        Severity::Error | Severity::Warning => Kind::Error,
        Severity::Note => Kind::Pattern,
    }
}

#[cfg(test)]
mod tests {
    // Full paths, no imports: the plugin benchmark compiles this file too, where the
    // tests themselves are left out.

    #[test]
    fn errors_come_first_and_the_rest_is_counted_with_its_codes() {
        use super::{count, ordered, Finding, Kind, Severity, CAP};
        let mut all: Vec<Finding> = (0..12)
            .map(|i| Finding::new(Severity::Warning, format!("w{i}")).code("W1"))
            .collect();
        all.push(Finding::new(Severity::Error, "e0").code("E1"));
        all.push(Finding::new(Severity::Note, "n0"));
        let facts = ordered(all, "diagnostics");
        let s: Vec<&str> = facts.iter().map(|f| f.statement.as_str()).collect();
        assert_eq!(s[0], "e0");
        assert_eq!(facts[0].kind, Kind::Error);
        assert_eq!(s.len(), CAP + 1);
        assert_eq!(s[CAP], "warning: 4 more diagnostics: W1 ×3");
        assert_eq!(count(1, "error"), "1 error");
        assert_eq!(count(0, "error"), "0 errors");
    }
}
