//! cargo: libtest results (text and `--format json`), cargo nextest runs, test panics with
//! their location, and rustc/clippy diagnostics (cargo build, cargo clippy, rustc).
//!
//! The rules are plain Rust in `rules.rs` (the same file the plugin benchmark compiles
//! natively); this crate states their facts through the SDK.

mod rules;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use rules::Kind;

/// The cargo extractor.
pub struct Cargo;

impl Extractor for Cargo {
    fn handles() -> Vec<String> {
        // Check names are the project's own (`tests`, `check`...): read every output.
        vec!["*".to_string()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        rules::extract(&input.tool, &input.output)
            .into_iter()
            .map(|s| {
                let category = match s.kind {
                    Kind::Verification => Category::Verification,
                    Kind::Error => Category::Error,
                    Kind::Pattern => Category::Pattern,
                };
                fact(category, s.statement, &input.tool)
            })
            .collect()
    }
}

export_extractor!(Cargo);
