//! The benchmark's native baseline: the rules of `plugins/extract-cargo`, the very file
//! the component is built from (`rules.rs`), compiled natively into the bench and put
//! behind the host's `FactExtractor` the way the plugin host states a component's facts.
//! Not used by runs (the component is).

use agentforge::extract::FactExtractor;
use agentforge::state_store::{ActionResult, Fact, FactCategory};

#[path = "../../../plugins/extract-cargo/src/rules.rs"]
mod rules;

/// extract-cargo's rules, run natively.
pub struct CargoRules;

impl FactExtractor for CargoRules {
    fn name(&self) -> &str {
        "extract-cargo"
    }

    fn extract(&self, tool: &str, output: &str, _result: ActionResult, step: u64) -> Vec<Fact> {
        rules::extract(tool, output)
            .into_iter()
            .map(|s| Fact {
                id: String::new(),
                category: match s.kind {
                    rules::Kind::Verification => FactCategory::Verification,
                    rules::Kind::Error => FactCategory::Error,
                    rules::Kind::Pattern => FactCategory::Pattern,
                },
                statement: s.statement,
                confidence: 1.0,
                source: tool.to_string(),
                step,
                supersedes: None,
            })
            .collect()
    }
}
