//! The shape of a test or lint report as the SDK's facts: the plain report of
//! `shape.rs` (totals first, errors before warnings, a cap, then how many more and
//! their codes), stated about a tool.
//!
//! Shared by the built-in extractors (each includes this file with `#[path]`), so they
//! all keep one shape; it lives here because `host/builtins` rebuilds when this folder
//! changes.

#![allow(dead_code)] // Each extractor uses part of it.

// Relative to this file's folder, whichever crate includes it.
#[path = "shape.rs"]
mod shape;

use agentforge_plugin_sdk::{fact, Category, Fact};
pub use shape::{count, Finding, Severity};

/// The facts of `findings` about `tool`: errors first, then warnings, then notes (stable
/// within each), at most `shape::CAP` (10) of them, then one fact `N more <what>` naming the codes
/// of the rest (`F401 ×3, E711`), starting with `warning: ` when no error is among them.
/// Errors and warnings are error facts; notes are pattern facts.
pub fn findings(tool: &str, findings: Vec<Finding>, what: &str) -> Vec<Fact> {
    shape::ordered(findings, what)
        .into_iter()
        .map(|s| fact(category(s.kind), s.statement, tool))
        .collect()
}

/// The SDK's category of a plain report's fact.
pub fn category(kind: shape::Kind) -> Category {
    match kind {
        shape::Kind::Verification => Category::Verification,
        shape::Kind::Error => Category::Error,
        shape::Kind::Pattern => Category::Pattern,
    }
}
