use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use agentforge_core::state::{
    ActionResult, BlockedAction, CheckStatus, Fact, FactCategory, Verification,
};
use agentforge_core::working_memory::{ItemKind, MemoryItem};

fn fact(id: &str, category: FactCategory, statement: &str, confidence: f32, step: u64) -> Fact {
    Fact {
        id: id.into(),
        category,
        statement: statement.into(),
        confidence,
        source: "test".into(),
        step,
        supersedes: None,
    }
}

fn memory(key: &str, kind: ItemKind, content: String, step: u64) -> MemoryItem {
    MemoryItem {
        kind,
        key: key.into(),
        step,
        content,
        added_at: String::new(),
        expires_after_steps: None,
        pinned: false,
    }
}

fn tools() -> Vec<ToolSpec> {
    let path = json!({"type": "object", "properties": {"path": {"type": "string", "description": "Workspace-relative file path"}}, "required": ["path"]});
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file of the workspace.".into(),
            input_schema: path,
        },
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace exact text in a file.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string", "description": "Text to replace, exactly as in the file"},
                "new_text": {"type": "string"}
            }, "required": ["path", "old_text", "new_text"]}),
        },
        ToolSpec {
            name: "run_check".into(),
            description: "Run the verification checks.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        },
    ]
}

fn actions() -> Vec<ActionEntry> {
    vec![
        ActionEntry {
            name: "read_file".into(),
            when: "Need to examine code".into(),
        },
        ActionEntry {
            name: "edit_file".into(),
            when: "Know the exact text to change".into(),
        },
        ActionEntry {
            name: "run_check".into(),
            when: "After making changes".into(),
        },
    ]
}

fn verification() -> Verification {
    let mut checks = BTreeMap::new();
    checks.insert(
        "complexity".to_string(),
        CheckStatus {
            passing: false,
            summary: "Function 'execute' has complexity 15 (max 10)".into(),
            is_test: false,
            step: 3,
        },
    );
    checks.insert(
        "pytest".to_string(),
        CheckStatus {
            passing: true,
            summary: "42 passed".into(),
            is_test: true,
            step: 3,
        },
    );
    Verification {
        checks,
        ready_for_completion: false,
        last_run_step: Some(3),
    }
}

const SOURCE: &str =
    "def execute(self):\n    if self.ready:\n\tlog(\"tab-indented\")\n    return run(self)  \n";

/// Owned data the borrowed parts of a [`ContextInput`] point into.
struct Fixture {
    system: String,
    facts: Vec<Fact>,
    memory: Vec<MemoryItem>,
    verification: Verification,
    blocked: Vec<BlockedAction>,
    feedback: Option<String>,
    task: TaskFrame,
    current_state: Value,
    recent: Vec<RecentAction>,
    mode: ToolMode,
    instructions: Vec<InstructionFile>,
    precedents: Vec<Precedent>,
}

impl Fixture {
    fn small() -> Fixture {
        Fixture {
            system: "You are a careful software engineer. Fix one conformance violation.".into(),
            facts: vec![
                fact(
                    "f3-1",
                    FactCategory::Verification,
                    "Function 'execute' has cyclomatic complexity 15 (threshold exceeded)",
                    1.0,
                    3,
                ),
                fact(
                    "f4-1",
                    FactCategory::CodeStructure,
                    "File modified: fix_workflow.py",
                    1.0,
                    4,
                ),
                fact(
                    "f2-1",
                    FactCategory::Inference,
                    "The loop body can be extracted",
                    0.7,
                    2,
                ),
                fact(
                    "f1-1",
                    FactCategory::Inference,
                    "Old guess, superseded",
                    0.4,
                    1,
                ),
            ],
            memory: vec![memory(
                "full_file:src/helpers.py",
                ItemKind::LoadedContext,
                "def helper():\n    return 1\n".into(),
                2,
            )],
            verification: verification(),
            blocked: vec![BlockedAction {
                signature: "edit_file:src/fix_workflow.py".into(),
                reason: "Same edit failed 3 times: old_text not found".into(),
                since_step: 4,
            }],
            feedback: Some("complete refused: the complexity check is failing".into()),
            task: TaskFrame {
                id: "fix-V-abc123".into(),
                goal: "Fix conformance violation V-abc123".into(),
                success_criteria: vec![
                    "Conformance check passes".into(),
                    "Tests pass".into(),
                    "Minimal changes".into(),
                ],
                constraints: vec!["Only modify files related to the violation".into()],
                phase: "implement".into(),
                step: 5,
                max_steps: 20,
            },
            current_state: json!({
                "violation": {
                    "id": "V-abc123",
                    "check_id": "max-cyclomatic-complexity",
                    "severity": "warning",
                    "file_path": "src/fix_workflow.py",
                    "line_number": 145,
                    "message": "Function 'execute' has complexity 15 (max 10)",
                },
                "file_content": { "path": "src/fix_workflow.py", "lines": "120-185", "content": SOURCE },
            }),
            recent: vec![
                RecentAction {
                    step: 3,
                    action: "run_check".into(),
                    target: Some("complexity".into()),
                    result: ActionResult::Failure,
                    summary: "1 check failing".into(),
                    error: Some("Function 'execute' has complexity 15 (max 10)".into()),
                },
                RecentAction {
                    step: 4,
                    action: "read_file".into(),
                    target: Some("src/fix_workflow.py".into()),
                    result: ActionResult::Success,
                    summary: "Read fix_workflow.py (65 lines)".into(),
                    error: None,
                },
            ],
            mode: ToolMode::Native,
            instructions: Vec::new(),
            precedents: Vec::new(),
        }
    }

    /// Content scaled by `k`: file lines, facts, error lengths, memory, blocked actions,
    /// instruction files.
    fn scaled(k: usize) -> Fixture {
        let mut f = Fixture::small();
        f.instructions = ["src/AGENTS.md", "AGENTS.md", "CLAUDE.md"]
            .iter()
            .enumerate()
            .map(|(i, path)| InstructionFile {
                path: path.to_string(),
                content: (0..8 * k * (i + 1))
                    .map(|j| format!("- Rule {j} of {path}: keep functions under 10 branches.\n"))
                    .collect(),
                cut_from_bytes: None,
            })
            .collect();
        let file: String = (1..=100 * k)
            .map(|i| {
                format!(
                    "    value_{i} = compute(value_{}, \"item {i}\")  # step {i}\n",
                    i - 1
                )
            })
            .collect();
        f.current_state["file_content"]["content"] = Value::String(file);
        f.current_state["related"] = json!((0..5 * k)
            .map(|i| format!("src/module_{i}.py"))
            .collect::<Vec<_>>());
        f.facts = (0..2 * k)
            .map(|i| {
                let cat = [
                    FactCategory::CodeStructure,
                    FactCategory::Error,
                    FactCategory::Pattern,
                    FactCategory::Verification,
                ][i % 4];
                fact(
                    &format!("f{i}"),
                    cat,
                    &format!(
                        "Fact number {i} about function_{i} in module_{i}.py, observed at line {}",
                        i * 7
                    ),
                    0.8,
                    i as u64,
                )
            })
            .collect();
        let error: String = (0..20 * k)
            .map(|i| {
                format!("Traceback line {i}: File \"src/module_{i}.py\", line {i}, in handler\n")
            })
            .collect();
        f.recent = (0..3)
            .map(|i| RecentAction {
                step: 10 + i,
                action: "run_tests".into(),
                target: Some("tests/".into()),
                result: ActionResult::Failure,
                summary: format!(
                    "{} failed\n{}",
                    i + 1,
                    "FAILED tests/test_x.py::test_y - AssertionError\n".repeat(k)
                ),
                error: Some(error.clone()),
            })
            .collect();
        f.memory = (0..k.min(5))
            .map(|i| {
                let content: String = (0..40 * k)
                    .map(|j| format!("line {j} of loaded file {i}\n"))
                    .collect();
                memory(
                    &format!("full_file:src/loaded_{i}.py"),
                    ItemKind::LoadedContext,
                    content,
                    i as u64,
                )
            })
            .collect();
        f.blocked = (0..k)
            .map(|i| BlockedAction {
                signature: format!("edit_file:src/module_{i}.py"),
                reason: "Same edit failed 3 times".into(),
                since_step: i as u64,
            })
            .collect();
        f.feedback = Some("invalid reply: ".to_string() + &"no tool call; ".repeat(30 * k));
        f
    }

    fn input(&self) -> ContextInput<'_> {
        ContextInput {
            system_prompt: &self.system,
            instructions: &self.instructions,
            precedents: &self.precedents,
            task: self.task.clone(),
            not_yet: Vec::new(),
            focus: json!({
                "goal": self.task.goal,
                "task": "1/1 Fix the violation (0/2 subtasks done)",
                "subtask": "1.1 Make the failing test pass",
                "next": "1.2 Run clippy clean",
            }),
            current_state: self.current_state.clone(),
            facts: &self.facts,
            working_memory: &self.memory,
            recent_actions: self.recent.clone(),
            verification: &self.verification,
            feedback: self.feedback.as_deref(),
            blocked: &self.blocked,
            actions: actions(),
            recommended: Some("run_check".into()),
            tools: tools().into(),
            tool_mode: self.mode,
        }
    }
}

fn superseding(mut f: Fixture) -> Fixture {
    if let Some(x) = f.facts.iter_mut().find(|x| x.id == "f2-1") {
        x.supersedes = Some("f1-1".into());
    }
    f
}

/// The YAML between the fences of the user message.
fn context_yaml(user: &str) -> &str {
    let start = user.find("```yaml\n").expect("opening fence") + "```yaml\n".len();
    let end = user[start..].find("\n```").expect("closing fence") + start + 1;
    &user[start..end]
}

fn section<'p>(p: &'p BuiltPrompt, name: &str) -> &'p SectionTokens {
    p.sections.iter().find(|s| s.name == name).expect(name)
}

fn assert_exact_total(p: &BuiltPrompt) {
    let tools_json = if p.tools.is_empty() {
        String::new()
    } else {
        let defs: Vec<Value> = p
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        serde_json::to_string(&defs).unwrap()
    };
    let recount = MESSAGE_OVERHEAD
        + count_tokens(&p.system)
        + count_tokens(&p.user)
        + count_tokens(&tools_json);
    assert_eq!(p.total_tokens, recount);
}

#[test]
fn small_context_renders_exactly() {
    let fx = superseding(Fixture::small());
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    insta::assert_snapshot!("small_context_user", p.user);
    assert!(p.compressions.is_empty(), "{:?}", p.compressions);
    assert!(p.sections.iter().all(|s| !s.compressed));
    assert_exact_total(&p);
    assert_eq!(p.tools.len(), 3);
    // The YAML parses back, and the file content is a readable block.
    let parsed: Value = serde_yaml_ng::from_str(context_yaml(&p.user)).unwrap();
    assert_eq!(parsed["current_state"]["file_content"]["content"], SOURCE);
    assert_eq!(parsed["task"]["step"], "5 of 20");
    assert!(
        p.user.contains("content: |\n      def execute(self):\n"),
        "{}",
        p.user
    );
}

#[test]
fn huge_file_many_facts_long_errors_fit() {
    let mut fx = Fixture::scaled(1);
    let file: String = (1..=5000)
        .map(|i| format!("line {i}: x = f({i})\n"))
        .collect();
    fx.current_state["file_content"]["content"] = Value::String(file);
    fx.facts = (0..40)
        .map(|i| {
            fact(
                &format!("f{i}"),
                [FactCategory::Error, FactCategory::CodeStructure][i % 2],
                &format!("Observation {i} about src/module_{i}.py"),
                0.9,
                i as u64,
            )
        })
        .collect();
    for r in &mut fx.recent {
        r.error = Some(format!(
            "RuntimeError: {}",
            "very long error text ".repeat(200)
        ));
    }
    let budgets = Budgets::default();
    let p = build(&fx.input(), &budgets).unwrap();
    assert!(p.total_tokens <= budgets.total, "{}", p.total_tokens);
    assert_exact_total(&p);
    for s in &p.sections {
        assert!(s.tokens <= s.budget, "{s:?}");
    }
    let yaml = context_yaml(&p.user);
    let parsed: Value = serde_yaml_ng::from_str(yaml).unwrap();
    let content = parsed["current_state"]["file_content"]["content"]
        .as_str()
        .unwrap();
    assert!(
        content.starts_with("line 1: x = f(1)\nline 2: x = f(2)\n"),
        "{content}"
    );
    assert!(content.ends_with("line 5000: x = f(5000)\n"), "{content}");
    assert!(content.contains(" lines omitted ...\n"), "{content}");
    assert!(section(&p, "current_state").compressed);
    // 40 facts do not fit 300 tokens: lists cut with "... and X more".
    assert!(section(&p, "understanding").compressed);
    assert!(yaml.contains("more"), "{yaml}");
    // Errors cut.
    let errors: Vec<&str> = parsed["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["error"].as_str())
        .collect();
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .all(|e| e.chars().count() < 560 && e.contains("chars omitted")),
        "{errors:?}"
    );
    let report = render_report(&p);
    assert!(report.contains("=== compressions ==="));
    assert!(
        report.contains("- current_state: 1 long text cut to first/last"),
        "{report}"
    );
    assert!(report.contains("- understanding: "), "{report}");
    assert!(report.contains("- recent_actions: "), "{report}");
}

#[test]
fn report_of_a_moderate_case() {
    let mut fx = Fixture::scaled(2);
    fx.mode = ToolMode::Native;
    let budgets = Budgets {
        total: 3000,
        system_prompt: 100,
        task_frame: 150,
        instructions: 200,
        precedents: 100,
        focus: 100,
        current_state: 600,
        working_memory: 300,
        understanding: 120,
        recent_actions: 250,
        verification_status: 100,
        feedback: 80,
        available_actions: 600,
    };
    budgets.validate().unwrap();
    let p = build(&fx.input(), &budgets).unwrap();
    assert!(p.total_tokens <= budgets.total);
    assert_exact_total(&p);
    insta::assert_snapshot!("moderate_report", render_report(&p));
}

#[test]
fn total_never_exceeds_budget_as_content_grows() {
    let tight = Budgets {
        total: 4000,
        system_prompt: 400,
        task_frame: 300,
        instructions: 200,
        precedents: 100,
        focus: 150,
        current_state: 850,
        working_memory: 400,
        understanding: 200,
        recent_actions: 400,
        verification_status: 150,
        feedback: 150,
        available_actions: 700,
    };
    let mut sizes = Vec::new();
    for k in 1..=50 {
        let mut fx = Fixture::scaled(k);
        fx.mode = if k % 2 == 0 {
            ToolMode::Text
        } else {
            ToolMode::Native
        };
        for budgets in [Budgets::default(), tight.clone()] {
            let p = build(&fx.input(), &budgets).unwrap();
            assert!(
                p.total_tokens <= budgets.total,
                "k={k}: {} > {}",
                p.total_tokens,
                budgets.total
            );
            assert_exact_total(&p);
            serde_yaml_ng::from_str::<Value>(context_yaml(&p.user)).unwrap();
            if budgets.total == 8000 && fx.mode == ToolMode::Native {
                sizes.push(p.total_tokens);
            }
        }
    }
    // Once over budget, the prompt stays near the budget instead of growing.
    let big = &sizes[10..];
    let (min, max) = (big.iter().min().unwrap(), big.iter().max().unwrap());
    assert!(max - min < 800, "sizes vary too much: {sizes:?}");
}

#[test]
fn recent_actions_are_cut_in_the_seed_order() {
    let mut fx = Fixture::small();
    fx.recent = (0..3)
        .map(|i| RecentAction {
            step: 10 + i,
            action: "run_tests".into(),
            target: Some("tests/".into()),
            result: ActionResult::Failure,
            summary: format!(
                "{} failed\nFAILED tests/test_a.py::test_{i}\nFAILED tests/test_b.py::test_{i}",
                i + 1
            ),
            error: Some(format!(
                "AssertionError number {i}: {}",
                "expected 3 but got 4; ".repeat(30)
            )),
        })
        .collect();
    let build_with = |recent_budget: usize| {
        let budgets = Budgets {
            recent_actions: recent_budget,
            ..Budgets::default()
        };
        let p = build(&fx.input(), &budgets).unwrap();
        let parsed: Value = serde_yaml_ng::from_str(context_yaml(&p.user)).unwrap();
        let recent = parsed["recent"].as_array().unwrap().clone();
        (
            section(&p, "recent_actions").tokens,
            recent,
            p.compressions.clone(),
        )
    };
    let (full, recent, notes) = build_with(5000);
    assert_eq!(recent.len(), 3);
    assert!(notes.is_empty());

    // 3 -> 2: whole actions dropped (oldest first) before anything else is cut.
    let (two, recent, notes) = build_with(full - 1);
    assert_eq!(recent.len(), 2, "{notes:?}");
    assert_eq!(recent[0]["step"], 11);
    assert!(recent[1]["summary"].as_str().unwrap().contains('\n'));
    assert!(!recent[1]["error"].as_str().unwrap().contains("omitted"));
    assert_eq!(
        notes,
        ["recent_actions: kept the newest 2 of 3 actions (1 dropped)"]
    );

    // 2 -> 1.
    let (one, recent, notes) = build_with(two - 1);
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0]["step"], 12);
    assert!(recent[0]["summary"].as_str().unwrap().contains('\n'));
    assert_eq!(
        notes,
        ["recent_actions: kept the newest 1 of 3 actions (2 dropped)"]
    );

    // Then summaries to one line, errors untouched.
    let (single, recent, notes) = build_with(one - 1);
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0]["summary"], "3 failed [+2 more lines]");
    assert!(!recent[0]["error"].as_str().unwrap().contains("omitted"));
    assert_eq!(notes[1], "recent_actions: 1 summary cut to one line");

    // Then errors to 500 chars, then fewer.
    let (_, recent, notes) = build_with(single - 1);
    let error = recent[0]["error"].as_str().unwrap();
    assert!(error.contains("chars omitted"), "{error}");
    assert!(
        notes[2].starts_with("recent_actions: 1 string cut to "),
        "{notes:?}"
    );
    let (_, recent, _) = build_with(60);
    let error = recent[0]["error"].as_str().unwrap();
    assert!(error.chars().count() < 200, "{error}");
}

#[test]
fn lists_are_cut_after_long_text() {
    // current_state holds a long file and a long list: the file is cut first; the
    // list only once the file is down to its floor.
    let mut fx = Fixture::small();
    let file: String = (1..=400).map(|i| format!("line {i}\n")).collect();
    fx.current_state = json!({"content": file, "files": (0..30).map(|i| format!("src/f{i}.py")).collect::<Vec<_>>()});
    let budgets = |n| Budgets {
        current_state: n,
        ..Budgets::default()
    };
    let p = build(&fx.input(), &budgets(400)).unwrap();
    let parsed: Value = serde_yaml_ng::from_str(context_yaml(&p.user)).unwrap();
    assert_eq!(
        parsed["current_state"]["files"].as_array().unwrap().len(),
        30
    );
    assert!(
        p.compressions[0].starts_with("current_state: 1 long text cut"),
        "{:?}",
        p.compressions
    );
    let p = build(&fx.input(), &budgets(150)).unwrap();
    let parsed: Value = serde_yaml_ng::from_str(context_yaml(&p.user)).unwrap();
    let files = parsed["current_state"]["files"].as_array().unwrap();
    assert!(files.len() < 30);
    assert!(files
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .starts_with("... and "));
    assert!(section(&p, "current_state").tokens <= 150);
}

#[test]
fn total_over_drops_oldest_memory_then_shrinks_current_state() {
    let mut fx = Fixture::small();
    fx.memory = (0..4)
        .map(|i| {
            memory(
                &format!("full_file:src/m{i}.py"),
                ItemKind::LoadedContext,
                "x = 1\n".repeat(40),
                i,
            )
        })
        .collect();
    fx.memory[0].pinned = true;
    let roomy = Budgets {
        total: 100_000,
        working_memory: 5000,
        ..Budgets::default()
    };
    let all = build(&fx.input(), &roomy).unwrap();
    let wm = section(&all, "working_memory").tokens;
    // A total that forces dropping about two items.
    let budgets = Budgets {
        total: all.total_tokens - wm / 3,
        working_memory: 5000,
        ..Budgets::default()
    };
    let p = build(&fx.input(), &budgets).unwrap();
    assert!(p.total_tokens <= budgets.total);
    let parsed: Value = serde_yaml_ng::from_str(context_yaml(&p.user)).unwrap();
    let items = parsed["working_memory"].as_array().unwrap();
    let keys: Vec<&str> = items.iter().filter_map(|i| i["key"].as_str()).collect();
    // The pinned oldest item stays; the oldest unpinned ones go.
    assert_eq!(keys, ["full_file:src/m0.py", "full_file:src/m3.py"]);
    assert!(items[0].as_str().unwrap().contains("2 older items dropped"));
    assert!(
        p.compressions
            .iter()
            .any(|c| c.contains("working_memory") && c.ends_with("(to fit the total)")),
        "{:?}",
        p.compressions
    );
    assert!(!section(&p, "current_state").compressed);
}

#[test]
fn over_budget_when_the_system_prompt_alone_exceeds_the_total() {
    let mut fx = Fixture::small();
    fx.system = "Follow every rule. ".repeat(3000);
    let err = build(&fx.input(), &Budgets::default()).unwrap_err();
    let ContextError::OverBudget { needed, budget, .. } = &err;
    assert!(*needed > 8000);
    assert_eq!(*budget, 8000);
    let msg = err.to_string();
    assert!(msg.contains("budget.total"), "{msg}");
    assert!(msg.contains("budget.system_prompt"), "{msg}");
    assert!(msg.contains("raise budget.total to at least"), "{msg}");
}

#[test]
fn system_prompt_over_its_own_budget_is_reported_but_fits_the_total() {
    let mut fx = Fixture::small();
    fx.system = "Follow every rule. ".repeat(300);
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    assert!(p.total_tokens <= 8000);
    assert!(
        p.compressions[0].starts_with("system_prompt: "),
        "{:?}",
        p.compressions
    );
}

#[test]
fn budgets_validate_names_the_field() {
    assert_eq!(Budgets::default().validate(), Ok(()));
    let sum: usize = Budgets::default().sections().iter().map(|(_, v)| v).sum();
    assert!(sum <= Budgets::default().total);
    let zero = Budgets {
        feedback: 0,
        ..Budgets::default()
    };
    assert!(zero
        .validate()
        .unwrap_err()
        .to_string()
        .contains("feedback"));
    let over = Budgets {
        current_state: 5000,
        ..Budgets::default()
    };
    let msg = over.validate().unwrap_err().to_string();
    assert!(
        msg.contains("total") && msg.contains("current_state 5000"),
        "{msg}"
    );
    // Read from `[budget]`: unknown keys are refused, missing ones default.
    let b: Budgets = toml::from_str("total = 9000").unwrap();
    assert_eq!(b.total, 9000);
    assert_eq!(b.current_state, 2000);
    assert_eq!(b.instructions, 600);
    assert!(toml::from_str::<Budgets>("totl = 1").is_err());
}

#[test]
fn text_mode_sends_no_tools_and_describes_them() {
    let mut fx = Fixture::small();
    fx.mode = ToolMode::Text;
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    assert!(p.tools.is_empty());
    assert!(p
        .user
        .contains("What is your NEXT action? Call exactly one tool.\n\n"));
    assert!(p.user.ends_with(&text_mode_instructions(&tools())));
    assert_exact_total(&p);
}

#[test]
fn build_is_deterministic() {
    let fx = Fixture::scaled(7);
    let a = build(&fx.input(), &Budgets::default()).unwrap();
    let b = build(&fx.input(), &Budgets::default()).unwrap();
    assert_eq!(a.user, b.user);
    assert_eq!(a.compressions, b.compressions);
    assert_eq!(a.total_tokens, b.total_tokens);
}

/// Working memory of small items after a long oldest one, and facts whose length grows
/// with their step: what is cut first (the pinning, the confidence) decides how much
/// fits.
fn uneven(pinned: bool, long_facts_confident: bool) -> Fixture {
    let mut f = Fixture::scaled(3);
    f.memory = (0..5)
        .map(|i| {
            let lines = if i == 0 { 150 } else { 3 };
            let content = (0..lines)
                .map(|j| format!("line {j} of item {i}\n"))
                .collect();
            memory(&format!("note:{i}"), ItemKind::LoadedContext, content, i)
        })
        .collect();
    f.memory[0].pinned = pinned;
    f.facts = (0..12)
        .map(|i| {
            let conf = if long_facts_confident {
                0.5 + i as f32 / 100.0
            } else {
                0.9 - i as f32 / 100.0
            };
            let statement = format!("fact {i}: {}", "detail ".repeat(1 + 4 * i));
            fact(
                &format!("f{i}"),
                FactCategory::Pattern,
                &statement,
                conf,
                i as u64,
            )
        })
        .collect();
    f
}

/// The fits remembered from earlier builds ([`memo`]) never change a prompt: every
/// build below, made after builds of inputs that differ from it in one way each (what a
/// section shows, or only what orders its cut: pinning, confidence, key order, line
/// ends), and again after itself, equals the same build made without the memo.
#[test]
fn remembered_fits_never_change_a_prompt() {
    let variants: Vec<(&str, Fixture)> = vec![
        ("scaled 3", Fixture::scaled(3)),
        ("scaled 4", Fixture::scaled(4)),
        ("scaled 7", Fixture::scaled(7)),
        ("small items, a long one pinned", uneven(true, false)),
        ("small items, a long one not pinned", uneven(false, false)),
        ("facts, the long ones most confident", uneven(false, true)),
        ("facts, the short ones most confident", uneven(false, false)),
        ("scaled 7, a fact reworded", {
            let mut f = Fixture::scaled(7);
            f.facts[0]
                .statement
                .push_str(" and much more besides, at length");
            f
        }),
        ("scaled 7, CRLF file", {
            let mut f = Fixture::scaled(7);
            let file = f.current_state["file_content"]["content"]
                .as_str()
                .unwrap()
                .replace('\n', "\r\n");
            f.current_state["file_content"]["content"] = Value::String(file);
            f
        }),
        ("scaled 7, keys reordered", {
            let mut f = Fixture::scaled(7);
            let Value::Object(m) = f.current_state.take() else {
                panic!("current_state is a map")
            };
            f.current_state = Value::Object(m.into_iter().rev().collect());
            f
        }),
        ("scaled 7, a long instruction file", {
            let mut f = Fixture::scaled(7);
            f.instructions[0].cut_from_bytes = Some(70_000);
            f
        }),
        ("scaled 7, a longer instruction file, the same start", {
            let mut f = Fixture::scaled(7);
            f.instructions[0].cut_from_bytes = Some(80_000);
            f
        }),
        ("scaled 7, instructions short", {
            let mut f = Fixture::scaled(7);
            for i in &mut f.instructions {
                i.content = "- One rule.\n".into();
            }
            f
        }),
    ];
    let tight = |total: usize| Budgets {
        total,
        ..Budgets::default()
    };
    let budgets = [
        Budgets::default(),
        tight(6000),
        tight(4500),
        Budgets {
            current_state: 600,
            working_memory: 900,
            understanding: 150,
            instructions: 300,
            ..Budgets::default()
        },
    ];
    for b in &budgets {
        for (name, fx) in &variants {
            // The second build with the memo finds every remembered section.
            let with = build(&fx.input(), b).and_then(|_| build(&fx.input(), b));
            let without = memo::without(|| build(&fx.input(), b));
            match (with, without) {
                (Ok(with), Ok(without)) => {
                    assert_eq!(with.user, without.user, "{name}, {b:?}");
                    assert_eq!(with.compressions, without.compressions, "{name}, {b:?}");
                    assert_eq!(with.sections, without.sections, "{name}, {b:?}");
                    assert_eq!(with.total_tokens, without.total_tokens, "{name}, {b:?}");
                }
                (Err(with), Err(without)) => {
                    assert_eq!(with.to_string(), without.to_string(), "{name}, {b:?}")
                }
                (with, without) => panic!("{name}, {b:?}: {with:?} vs {without:?}"),
            }
        }
    }
}

/// A prompt built on byte counts (what [`build_for_step`] sends while the tokenizer
/// loads) is the very prompt exact counting builds when the bytes cut nothing, and its
/// counts become the exact ones; when the bytes would cut, it is not used; and when
/// every count is a remembered one, it is the exact prompt, exactly counted.
#[test]
fn byte_bound_prompts_match_exact_ones() {
    // Remember the counts of everything but a feedback line no other test uses.
    let warm = superseding(Fixture::small());
    build(&warm.input(), &Budgets::default()).unwrap();
    let mut fx = superseding(Fixture::small());
    fx.feedback = Some("byte-bound check: zebra quartz nebula 7f3a9c2e".into());

    let (bounded, bytes_used) =
        tokens::with_byte_bounds(|| build_counted(&fx.input(), &Budgets::default()));
    let mut bounded = bounded.unwrap();
    assert!(bytes_used, "the new feedback line was never counted");
    assert!(!bounded.is_exact());
    assert!(bounded.compressions.is_empty() && bounded.sections.iter().all(|s| !s.compressed));
    let exact = build(&fx.input(), &Budgets::default()).unwrap();
    assert!(exact.is_exact());
    assert_eq!(bounded.user, exact.user);
    assert_eq!(bounded.system, exact.system);
    assert!(
        bounded.total_tokens > exact.total_tokens,
        "bytes bound tokens from above"
    );
    bounded.make_exact();
    assert!(bounded.is_exact());
    assert_eq!(bounded.total_tokens, exact.total_tokens);
    assert_eq!(bounded.sections, exact.sections);
    assert_exact_total(&bounded);

    // Everything counted before: no byte length is used, whatever the budgets cut.
    let tight = Budgets {
        total: exact.total_tokens - 40,
        ..Budgets::default()
    };
    let cut_exact = build(&fx.input(), &tight).unwrap();
    assert!(!cut_exact.compressions.is_empty(), "the tight budget cuts");
    let (again, bytes_used) = tokens::with_byte_bounds(|| build_counted(&fx.input(), &tight));
    assert!(!bytes_used);
    let again = again.unwrap();
    assert_eq!(again.user, cut_exact.user);
    assert_eq!(again.total_tokens, cut_exact.total_tokens);
}

/// Instruction files as `agentforge_store::instructions::discover` gives them.
fn instruction_files() -> Vec<InstructionFile> {
    let rules = |path: &str, n: usize| InstructionFile {
        path: path.into(),
        content: (1..=n)
            .map(|j| format!("- {path} rule {j}: run `cargo test` before `complete`.\n"))
            .collect(),
        cut_from_bytes: None,
    };
    vec![
        InstructionFile {
            path: ".agentforge/instructions.md".into(),
            content: "Answer in English. Never touch `vendor/`.\n".into(),
            cut_from_bytes: None,
        },
        rules("crates/date/AGENTS.md", 3),
        rules("AGENTS.md", 60),
        InstructionFile {
            path: "CLAUDE.md".into(),
            content: "# Project\nUse the 2021 edition.\n".into(),
            cut_from_bytes: Some(70_000),
        },
    ]
}

/// The `project_instructions:` section of a user message (up to the next top-level key).
fn instructions_yaml(user: &str) -> &str {
    let yaml = context_yaml(user);
    let start = yaml
        .find("project_instructions:\n")
        .expect("instructions section");
    let rest = &yaml[start + 1..];
    let end = rest
        .find("\nfocus:")
        .or_else(|| rest.find("\ncurrent_state:"))
        .expect("a section after instructions");
    &yaml[start..start + 1 + end + 1]
}

#[test]
fn instructions_render_nearest_first_after_the_task() {
    let mut fx = Fixture::small();
    fx.instructions = instruction_files();
    fx.instructions.truncate(2);
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    assert_exact_total(&p);
    assert!(!section(&p, "instructions").compressed);
    let yaml = context_yaml(&p.user);
    assert!(
        yaml.find("project_instructions:") > yaml.find("task:"),
        "{yaml}"
    );
    assert!(
        yaml.find("project_instructions:") < yaml.find("focus:"),
        "{yaml}"
    );
    insta::assert_snapshot!("instructions_whole", instructions_yaml(&p.user));
    let parsed: Value = serde_yaml_ng::from_str(yaml).unwrap();
    assert_eq!(
        parsed["project_instructions"][1]["content"],
        fx.instructions[1].content.as_str()
    );
    // No files, no section (and 0 tokens in the table).
    fx.instructions.clear();
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    assert!(!p.user.contains("project_instructions:"));
    assert_eq!(section(&p, "instructions").tokens, 0);
    assert!(p.instructions.is_empty());
}

#[test]
fn oversize_instructions_are_cut_with_a_note_then_the_farthest_left_out() {
    let mut fx = Fixture::small();
    fx.instructions = instruction_files();
    let budgets = Budgets {
        instructions: 350,
        current_state: 2250,
        ..Budgets::default()
    };
    let p = build(&fx.input(), &budgets).unwrap();
    assert_exact_total(&p);
    let s = section(&p, "instructions");
    assert!(s.compressed && s.tokens <= 350, "{s:?}");
    insta::assert_snapshot!("instructions_cut", instructions_yaml(&p.user));
    let yaml: Value = serde_yaml_ng::from_str(context_yaml(&p.user)).unwrap();
    let big = yaml["project_instructions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == "AGENTS.md")
        .expect("the long file is cut, not left out");
    // `core::text::cut`: a prefix of the file and `…`, and a note saying so.
    let content = big["content"].as_str().unwrap();
    assert!(content.ends_with('…'), "{content}");
    assert!(fx.instructions[2]
        .content
        .starts_with(content.trim_end_matches('…')));
    let note = big["cut"].as_str().unwrap();
    assert!(
        note.contains("characters to fit budget.instructions; read_file `AGENTS.md` for the rest"),
        "{note}"
    );
    // The read cap is said too, for the file the store cut.
    assert!(
        p.user.contains("the file has 70000 bytes, only the first"),
        "{}",
        p.user
    );
    let shown: Vec<(&str, bool, bool)> = p
        .instructions
        .iter()
        .map(|f| (f.path.as_str(), f.cut, f.left_out))
        .collect();
    assert_eq!(shown[2], ("AGENTS.md", true, false), "{shown:?}");
    assert!(p
        .compressions
        .iter()
        .any(|c| c.starts_with("instructions: ")));

    // Tighter: the farthest files go, the nearest stay, and the note names them.
    let budgets = Budgets {
        instructions: 90,
        current_state: 2510,
        ..Budgets::default()
    };
    let p = build(&fx.input(), &budgets).unwrap();
    assert_exact_total(&p);
    assert!(section(&p, "instructions").tokens <= 90);
    assert_eq!(p.instructions[0].path, ".agentforge/instructions.md");
    assert!(!p.instructions[0].left_out);
    assert!(p.instructions[3].left_out, "{:?}", p.instructions);
    assert!(
        p.user
            .contains("farther instruction files left out to fit budget.instructions: ")
            || p.user
                .contains("farther instruction file left out to fit budget.instructions: "),
        "{}",
        p.user
    );
    let report = render_report(&p);
    assert!(
        report.contains("=== instructions (nearest first) ==="),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "{:<40} left out to fit budget.instructions",
            "CLAUDE.md"
        )),
        "{report}"
    );
    assert!(report.contains("\ninstructions "), "{report}");
}

fn precedent(i: usize) -> Precedent {
    Precedent {
        seen: format!("{} times in 2 tasks, last 2026-11-2{}", 3 + i, i % 10),
        happened: format!(
            "guard-verify-implementation denied `complete` (attempt {i}): no file changed since the task began"
        ),
        correct: "change the files the task names, run the checks, then complete".into(),
        rule: (i == 0).then(|| "learned rule #3 denies `complete` while no file changed".into()),
    }
}

#[test]
fn precedents_are_shown_after_the_instructions_most_relevant_first() {
    let mut fx = Fixture::small();
    fx.precedents = (0..2).map(precedent).collect();
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    assert_exact_total(&p);
    let at = |key: &str| {
        p.user
            .find(key)
            .unwrap_or_else(|| panic!("{key} in {}", p.user))
    };
    assert!(at("precedents:") < at("focus:"));
    assert!(at("attempt 0") < at("attempt 1"));
    let section = p.sections.iter().find(|s| s.name == "precedents").unwrap();
    assert!(section.tokens > 0 && section.tokens <= section.budget);
    insta::assert_snapshot!("precedents_section", section_text(&p.user, "precedents:"));
}

#[test]
fn precedents_over_their_budget_keep_the_most_relevant() {
    let mut fx = Fixture::small();
    fx.precedents = (0..40).map(precedent).collect();
    let p = build(&fx.input(), &Budgets::default()).unwrap();
    assert_exact_total(&p);
    let section = p.sections.iter().find(|s| s.name == "precedents").unwrap();
    assert!(section.compressed, "{section:?}");
    assert!(
        section.tokens <= Budgets::default().precedents,
        "{section:?}"
    );
    assert!(
        p.user.contains("attempt 0"),
        "the first is kept: {}",
        p.user
    );
    assert!(
        !p.user.contains("attempt 39"),
        "the last is dropped: {}",
        p.user
    );
}

#[test]
fn no_precedents_no_section() {
    let p = build(&Fixture::small().input(), &Budgets::default()).unwrap();
    assert!(!p.user.contains("precedents:"));
    let section = p.sections.iter().find(|s| s.name == "precedents").unwrap();
    assert_eq!(section.tokens, 0);
}

/// The lines of one top-level section of the YAML context.
fn section_text(user: &str, key: &str) -> String {
    let start = user.find(key).expect("section present");
    let rest = &user[start..];
    let end = rest[1..]
        .find("\n")
        .map(|_| {
            rest.lines()
                .skip(1)
                .position(|l| !l.starts_with(' ') && !l.starts_with('-'))
                .map(|n| rest.lines().take(n + 1).map(|l| l.len() + 1).sum::<usize>())
                .unwrap_or(rest.len())
        })
        .unwrap_or(rest.len());
    rest[..end.min(rest.len())].to_string()
}
