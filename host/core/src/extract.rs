//! Understanding: facts extracted from tool output (seed 000 §4.2).
//!
//! Raw tool output is never shown to the model; the facts drawn from it are. The rule sets
//! are extractor plugins (`plugins/extract-*`, built in) behind [`FactExtractor`]; this
//! module runs them, makes the generic fact when none matched, and keeps the facts
//! (supersession, compaction, the optional model fallback).

use crate::state::{ActionResult, Fact, FactCategory};
use crate::text::cut;

/// Most facts kept in the task state.
pub const MAX_FACTS: usize = 20;

/// Start of the statement of the generic fact made when no rule matched.
pub const GENERIC_PREFIX: &str = "`";

/// Whether `f` is the generic fact made when no rule matched (it carries no counts).
pub fn is_generic(f: &Fact) -> bool {
    f.statement.starts_with(GENERIC_PREFIX)
}

/// Turns one tool output into facts.
pub trait FactExtractor: Send + Sync {
    /// Name, recorded as the facts' source.
    fn name(&self) -> &str;
    /// Extracts facts; an empty list means no rule matched.
    fn extract(&self, tool: &str, output: &str, result: ActionResult, step: u64) -> Vec<Fact>;
    /// [`FactExtractor::extract`] with what the host knows of the action: `details`, a JSON
    /// object such as an edit's [`crate::edit::EditRecord`]. Extractors that read it
    /// override this; the default ignores it.
    fn extract_details(
        &self,
        tool: &str,
        output: &str,
        result: ActionResult,
        step: u64,
        details: Option<&str>,
    ) -> Vec<Fact> {
        let _ = details;
        self.extract(tool, output, result, step)
    }
    /// Whether it names `tool` explicitly (not through `*`): only those read an action's
    /// result (see [`Extractors::extract_action`]).
    fn names(&self, _tool: &str) -> bool {
        false
    }
}

/// The extractors of a run, tried in order.
pub struct Extractors {
    list: Vec<Box<dyn FactExtractor>>,
}

impl Default for Extractors {
    /// No rule sets: every output gets the generic fact until extractors are added (the
    /// built-in plugins, `plugins/extract-*`, are added by
    /// `agentforge_engine::executor::Runtime::load_plugins`).
    fn default() -> Self {
        Extractors { list: Vec::new() }
    }
}

impl Extractors {
    /// Adds an extractor (used by the plugin loader).
    pub fn push(&mut self, e: Box<dyn FactExtractor>) {
        self.list.push(e);
    }

    /// All facts any extractor draws from `output`; a generic result fact if none matched.
    /// `tool` is the check or action name and becomes the source of verification facts.
    pub fn extract(&self, tool: &str, output: &str, result: ActionResult, step: u64) -> Vec<Fact> {
        let mut facts = self.matching(tool, output, result, step);
        if facts.is_empty() {
            let last = output
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(no output)");
            facts.push(fact(
                step,
                FactCategory::Verification,
                format!(
                    "{GENERIC_PREFIX}{tool}` result: {result}; last line: {}",
                    cut(last.trim(), 160)
                ),
                1.0,
                tool,
            ));
        }
        for (i, f) in facts.iter_mut().enumerate() {
            f.id = format!("f{step}-{}", i + 1);
        }
        facts
    }

    /// The facts extractors draw from an action's result (an edit's summary and error,
    /// and `details`, the host's record of it as JSON), without the generic fact: an
    /// action's own summary is already in `recent`. Ids are `f<step>-a<n>`, apart from
    /// those of the checks the same step ran.
    pub fn extract_action(
        &self,
        action: &str,
        text: &str,
        result: ActionResult,
        step: u64,
        details: Option<&str>,
    ) -> Vec<Fact> {
        // Only extractors naming the action: a `*` extractor (test output rules) would
        // read quoted file content in an edit's error as a test run.
        let mut facts = said_once(
            self.list
                .iter()
                .filter(|e| e.names(action))
                .flat_map(|e| e.extract_details(action, text, result, step, details)),
        );
        for (i, f) in facts.iter_mut().enumerate() {
            f.id = format!("f{step}-a{}", i + 1);
        }
        facts
    }

    /// Every extractor's facts, each said once.
    fn matching(&self, tool: &str, output: &str, result: ActionResult, step: u64) -> Vec<Fact> {
        // Two extractors may both know a tool: say each thing once.
        said_once(
            self.list
                .iter()
                .flat_map(|e| e.extract(tool, output, result, step)),
        )
    }
}

/// The facts in order, each (category, statement) once. Linear: an extractor may
/// return hundreds of thousands of facts within its output cap.
fn said_once(facts: impl Iterator<Item = Fact>) -> Vec<Fact> {
    let mut seen = std::collections::HashSet::new();
    facts
        .filter(|f| seen.insert((f.category, f.statement.clone())))
        .collect()
}

fn fact(
    step: u64,
    category: FactCategory,
    statement: String,
    confidence: f32,
    source: &str,
) -> Fact {
    Fact {
        id: String::new(),
        category,
        statement,
        confidence,
        source: source.to_string(),
        step,
        supersedes: None,
    }
}

/// Merges new facts into the store: a new verification or error fact from a source
/// supersedes the older ones from that source, and the store keeps the
/// [`MAX_FACTS`] most valuable (confidence, then category, then recency).
pub fn merge_facts(store: &mut Vec<Fact>, new: Vec<Fact>) {
    // A source that reports again (a check re-run) replaces everything it said before:
    // its old verification facts and its old errors.
    // The latest step each source reports at (a map: linear in the number of facts).
    let mut rerun: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for f in new
        .iter()
        .filter(|f| matches!(f.category, FactCategory::Verification | FactCategory::Error))
    {
        let step = rerun.entry(f.source.as_str()).or_insert(f.step);
        *step = (*step).max(f.step);
    }
    let mut replaced: Vec<Fact> = Vec::new();
    store.retain(|o| {
        let stale = matches!(o.category, FactCategory::Verification | FactCategory::Error)
            && rerun
                .get(o.source.as_str())
                .is_some_and(|step| o.step < *step);
        if stale {
            replaced.push(o.clone());
        }
        !stale
    });
    for mut f in new {
        if let Some(old) = replaced
            .iter()
            .find(|o| o.source == f.source && o.category == f.category)
        {
            f.supersedes.get_or_insert_with(|| old.id.clone());
        }
        store.push(f);
    }
    if store.len() > MAX_FACTS {
        let score = |f: &Fact| {
            let cat = match f.category {
                FactCategory::Verification => 3.0,
                FactCategory::Error => 2.5,
                FactCategory::CodeStructure => 2.0,
                FactCategory::Pattern => 1.5,
                FactCategory::Inference => 1.0,
            };
            f.confidence as f64 * 10.0 + cat + f.step as f64 * 0.01
        };
        store.sort_by(|a, b| score(b).total_cmp(&score(a)));
        store.truncate(MAX_FACTS);
        store.sort_by_key(|f| f.step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_fact_when_no_rule_matches() {
        let facts = Extractors::default().extract("lint", "all good\n", ActionResult::Success, 2);
        assert_eq!(facts.len(), 1);
        assert!(facts[0].statement.contains("all good"));
    }

    #[test]
    fn newer_verification_fact_supersedes_older() {
        let with_id = |mut f: Fact, id: &str| {
            f.id = id.to_string();
            f
        };
        let mut store = Vec::new();
        merge_facts(
            &mut store,
            vec![
                with_id(
                    fact(
                        1,
                        FactCategory::Verification,
                        "tests: 1 passed, 1 failed".into(),
                        1.0,
                        "tests",
                    ),
                    "f1-1",
                ),
                with_id(
                    fact(
                        1,
                        FactCategory::Error,
                        "tests::adds panicked at src/lib.rs:12".into(),
                        1.0,
                        "tests",
                    ),
                    "f1-2",
                ),
            ],
        );
        merge_facts(
            &mut store,
            vec![with_id(
                fact(
                    2,
                    FactCategory::Verification,
                    "tests: 2 passed, 0 failed".into(),
                    1.0,
                    "tests",
                ),
                "f2-1",
            )],
        );
        assert_eq!(store.len(), 1, "{store:?}");
        assert_eq!(store[0].statement, "tests: 2 passed, 0 failed");
        assert_eq!(store[0].supersedes.as_deref(), Some("f1-1"));
    }

    #[test]
    fn store_is_compacted_to_max() {
        let mut store = Vec::new();
        for s in 0..40 {
            let mut f = fact(
                s,
                FactCategory::Inference,
                format!("fact {s}"),
                0.5,
                &format!("src{s}"),
            );
            f.id = format!("f{s}-1");
            merge_facts(&mut store, vec![f]);
        }
        assert_eq!(store.len(), MAX_FACTS);
        assert!(store.iter().all(|f| f.step >= 20), "most recent kept");
    }
}

/// Highest confidence a model-extracted fact may carry: the model's reading of an output
/// is never as certain as a rule's.
pub const MODEL_CONFIDENCE_CAP: f32 = 0.8;
/// Most facts taken from one model answer.
const MODEL_MAX_FACTS: usize = 5;
/// Name of the tool the fallback offers the model.
pub const REPORT_FACTS_TOOL: &str = "report_facts";

/// The model-based fallback (seed 000 §4.2): when no rule matched an output, ask the
/// model for at most five facts. Off by default (`[understanding] model_fallback`):
/// it costs an extra model call per unmatched output.
pub mod model {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::model::{ModelReply, ModelRequest, ToolMode, ToolSpec};

    /// The request asking for facts about `output` of `tool`.
    pub fn request(
        step: u64,
        model: &str,
        tool: &str,
        result: ActionResult,
        output: &str,
    ) -> ModelRequest {
        let tail: Vec<&str> = output.lines().rev().take(80).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        ModelRequest {
            step,
            effort: None,
            model: model.to_string(),
            system: "You turn tool output into at most five short facts for a coding agent: \
                     what passed, what failed, where (file:line), and why. Only state what the \
                     output shows. Call report_facts exactly once."
                .to_string(),
            user: format!(
                "Tool: {tool}\nResult: {result}\nOutput (last {} lines):\n```\n{}\n```",
                tail.len(),
                tail.join("\n")
            ),
            tools: std::sync::Arc::from([ToolSpec {
                name: REPORT_FACTS_TOOL.to_string(),
                description: "Report facts drawn from the output.".to_string(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"facts": {"type": "array", "maxItems": MODEL_MAX_FACTS, "items": {
                        "type": "object",
                        "properties": {
                            "category": {"type": "string", "enum": ["code_structure", "inference", "pattern", "verification", "error"]},
                            "statement": {"type": "string"},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 1}
                        },
                        "required": ["category", "statement", "confidence"],
                        "additionalProperties": false
                    }}},
                    "required": ["facts"],
                    "additionalProperties": false
                }),
            }]),
            max_output_tokens: 512,
            tool_mode: ToolMode::Native,
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reported {
        facts: Vec<ReportedFact>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ReportedFact {
        category: FactCategory,
        statement: String,
        confidence: f32,
    }

    /// Facts from the model's answer, confidence capped at [`MODEL_CONFIDENCE_CAP`];
    /// an answer that does not fit is an error (the caller keeps the generic fact).
    pub fn parse(reply: &ModelReply, tool: &str, step: u64) -> Result<Vec<Fact>, String> {
        let ModelReply::ToolCall { name, arguments } = reply else {
            return Err("the model did not call report_facts".to_string());
        };
        if name != REPORT_FACTS_TOOL {
            return Err(format!("the model called `{name}` instead of report_facts"));
        }
        let r: Reported = serde_json::from_value(arguments.clone()).map_err(|e| e.to_string())?;
        Ok(r.facts
            .into_iter()
            .filter(|f| !f.statement.trim().is_empty())
            .take(MODEL_MAX_FACTS)
            .enumerate()
            .map(|(i, f)| Fact {
                id: format!("f{step}-m{}", i + 1),
                category: f.category,
                statement: cut(f.statement.trim(), 200).into_owned(),
                confidence: f.confidence.clamp(0.0, MODEL_CONFIDENCE_CAP),
                source: tool.to_string(),
                step,
                supersedes: None,
            })
            .collect())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn confidence_is_capped_and_shape_checked() {
            let reply = ModelReply::ToolCall {
                name: REPORT_FACTS_TOOL.into(),
                arguments: json!({"facts": [
                    {"category": "error", "statement": "build fails in src/a.rs:3", "confidence": 0.99},
                    {"category": "verification", "statement": "2 tests pass", "confidence": 0.5}
                ]}),
            };
            let facts = parse(&reply, "tests", 4).unwrap();
            assert_eq!(facts.len(), 2);
            assert_eq!(facts[0].confidence, MODEL_CONFIDENCE_CAP);
            assert_eq!(facts[1].confidence, 0.5);
            assert_eq!(facts[0].source, "tests");
            let bad = ModelReply::ToolCall {
                name: REPORT_FACTS_TOOL.into(),
                arguments: json!({"facts": [{"category": "guess", "statement": "x", "confidence": 1}]}),
            };
            assert!(parse(&bad, "tests", 4).is_err());
            assert!(parse(&ModelReply::NoToolCall { text: "hm".into() }, "t", 1).is_err());
        }

        #[test]
        fn request_sends_the_output_tail_and_one_tool() {
            let out: String = (0..200).map(|i| format!("line {i}\n")).collect();
            let r = request(3, "m", "lint", ActionResult::Failure, &out);
            assert!(r.user.contains("line 199") && !r.user.contains("line 100\n"));
            assert_eq!(r.tools.len(), 1);
        }
    }
}
