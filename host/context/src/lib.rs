//! The context builder: turns on-disk task state into the exact prompt of one step,
//! within a hard token budget (seed 001 "Context Schema" and "Token Budget
//! Enforcement", seed 000 §4.5 and Appendix A).
//!
//! Every model call is a fresh two-message conversation: a system prompt and one user
//! message holding the context as compact YAML, plus the offered tools. The user
//! message is rendered from typed serde structs, one top-level key per section, in a
//! fixed order:
//!
//! ```yaml
//! task:           # id, goal, "step: 5 of 20", phase, success_criteria, constraints
//! project_instructions: # AGENTS.md / CLAUDE.md / .agentforge/instructions.md, nearest first
//! precedents:     # past enforcement events like this step's (seed 003), most relevant first
//! focus:          # the current branch of the plan, loop warnings
//! current_state:  # the task type's schema value (file contents as `|` blocks)
//! understanding:  # facts by category: "statement (conf: 0.9)"
//! working_memory: # loaded items: key + content
//! verification:   # passing, failing, tests_ok, ready, one line per check
//! recent:         # last actions: step, action, target, result, summary, error
//! feedback:       # what went wrong last step, blocked actions with reasons
//! actions:        # available (name + when), recommended
//! ```
//!
//! Each section is measured with the real tokenizer ([`count_tokens`]) against its
//! [`Budgets`] entry and compressed, when over, in the seed's order (long text to
//! head/tail lines, recent actions 3 -> 2 -> 1, summaries to one line, errors and long
//! strings to 500 chars and fewer, lists to their first items; instruction files cut with
//! [`agentforge_core::text::cut`], then the farthest left out). If the whole prompt is
//! still over `total`, the oldest working-memory items are dropped, then
//! `current_state` is shrunk further, then the other sections. The result is
//! deterministic and never over `total`; when even the system prompt and the tool
//! definitions do not fit, [`build`] fails with [`ContextError::OverBudget`].
//!
//! Sections are counted one by one (their counts add up exactly, see `tokens`), so a
//! typical build tokenizes the prompt about once.

pub mod prompts;
pub mod schemas;

mod compress;
mod memo;
mod tokens;
mod yaml;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use agentforge_core::model::{ToolMode, ToolSpec};
use agentforge_core::state::{
    ActionResult, BlockedAction, CheckStatus, Fact, FactCategory, Verification,
};
use agentforge_core::text_mode::text_mode_instructions;
use agentforge_core::working_memory::{ItemKind, MemoryItem};
use agentforge_store::instructions::InstructionFile;

use compress::{
    cut_list, one_line, shrink_value, text, Candidate, Knob, Params, Stage, Stats, CHARS_FLOOR,
    CHARS_MIN, CHARS_STD, ITEMS_FLOOR, LINES_FLOOR,
};
use tokens::{count_cached, count_capped, count_capped_cached, Count};

pub use tokens::{
    count_tokens, preload as preload_tokenizer, save_counts as save_token_counts,
    use_count_file as use_token_count_file,
};

/// Tokens added by the chat format around the two messages and the reply priming
/// (3 per message + 3, as OpenAI documents for its chat models).
pub const MESSAGE_OVERHEAD: usize = 3 * 2 + 3;

/// Opens the user message.
const HEAD: &str = "# Context\n```yaml\n";
/// Closes the user message (Text mode appends the tool instructions after it).
const SUFFIX: &str = "```\n\nWhat is your NEXT action? Call exactly one tool.";

/// Token budgets of the prompt, per section and in total (`[budget]` in
/// `agentforge.toml`). The section budgets must add up to at most `total`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Budgets {
    /// Hard limit of everything sent: system + user message + tool definitions.
    pub total: usize,
    /// The phase's system prompt (not compressible).
    pub system_prompt: usize,
    /// `task:` (id, goal, step, phase, criteria, constraints).
    pub task_frame: usize,
    /// `project_instructions:` (the project's instruction files, nearest first).
    pub instructions: usize,
    /// `precedents:` (past enforcement events relevant to the step, from the trace
    /// database).
    pub precedents: usize,
    /// `focus:` (the current branch of the plan, loop warnings).
    pub focus: usize,
    /// `current_state:` (the task type's schema value, file contents).
    pub current_state: usize,
    /// `working_memory:` (items loaded with `load_context`).
    pub working_memory: usize,
    /// `understanding:` (facts).
    pub understanding: usize,
    /// `recent:` (the last actions).
    pub recent_actions: usize,
    /// `verification:`.
    pub verification_status: usize,
    /// `feedback:` (last step's problem, blocked actions).
    pub feedback: usize,
    /// `actions:` plus the tool definitions JSON (or the Text-mode instructions).
    pub available_actions: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            total: 8000,
            system_prompt: 800,
            task_frame: 500,
            // Taken from `current_state` (2600 before the section existed), so the
            // total and every task type's budgets stay as they were.
            instructions: 600,
            // Taken from `working_memory` (1000 before the section existed), so the
            // total and every task type's budgets stay as they were.
            precedents: 200,
            focus: 400,
            current_state: 2000,
            working_memory: 800,
            understanding: 300,
            recent_actions: 800,
            verification_status: 200,
            feedback: 200,
            available_actions: 1200,
        }
    }
}

impl Budgets {
    /// The section budgets by field name (everything but `total`).
    fn sections(&self) -> [(&'static str, usize); 12] {
        [
            ("system_prompt", self.system_prompt),
            ("task_frame", self.task_frame),
            ("instructions", self.instructions),
            ("precedents", self.precedents),
            ("focus", self.focus),
            ("current_state", self.current_state),
            ("working_memory", self.working_memory),
            ("understanding", self.understanding),
            ("recent_actions", self.recent_actions),
            ("verification_status", self.verification_status),
            ("feedback", self.feedback),
            ("available_actions", self.available_actions),
        ]
    }

    /// Sets the budgets named in `entries` (`[budget]` keys, e.g. a task type's); an
    /// unknown key is an error naming it.
    pub fn apply(&mut self, entries: &[(String, u32)]) -> Result<(), BudgetError> {
        if entries.is_empty() {
            return Ok(());
        }
        // Through serde, so the keys are exactly the struct's fields (one source).
        let serde_json::Value::Object(mut map) =
            serde_json::to_value(&*self).expect("budgets serialize")
        else {
            unreachable!("budgets serialize to an object")
        };
        for (key, value) in entries {
            if !map.contains_key(key) {
                return Err(BudgetError::Unknown {
                    key: key.clone(),
                    known: map.keys().cloned().collect(),
                });
            }
            map.insert(key.clone(), serde_json::Value::from(*value));
        }
        *self = serde_json::from_value(serde_json::Value::Object(map))
            .expect("budgets deserialize from their own keys");
        Ok(())
    }

    /// Checks that no budget is zero and that the sections add up to at most `total`.
    /// The message names the offending field.
    pub fn validate(&self) -> Result<(), BudgetError> {
        if self.total == 0 {
            return Err(BudgetError::Zero("total"));
        }
        for (name, value) in self.sections() {
            if value == 0 {
                return Err(BudgetError::Zero(name));
            }
        }
        let sum: usize = self.sections().iter().map(|(_, v)| v).sum();
        if sum > self.total {
            return Err(BudgetError::OverTotal {
                sum,
                parts: self
                    .sections()
                    .iter()
                    .map(|(n, v)| format!("{n} {v}"))
                    .collect::<Vec<_>>()
                    .join(" + "),
                total: self.total,
            });
        }
        Ok(())
    }
}

/// A `[budget]` table that cannot work; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// A key that is no budget.
    #[error("unknown budget `{key}` (known: {})", known.join(", "))]
    Unknown {
        /// The key given.
        key: String,
        /// The budgets there are.
        known: Vec<String>,
    },
    /// A budget of zero tokens.
    #[error("{0} must be at least 1 token")]
    Zero(&'static str),
    /// Sections that do not fit the total.
    #[error("the section budgets add up to {sum} tokens ({parts}), over total = {total}: lower a section or raise total")]
    OverTotal {
        /// Their sum.
        sum: usize,
        /// `name value + ...`.
        parts: String,
        /// `total`.
        total: usize,
    },
}

/// The task frame: what the task is and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFrame {
    /// Task id.
    pub id: String,
    /// One-sentence goal.
    pub goal: String,
    /// Measurable success criteria.
    pub success_criteria: Vec<String>,
    /// Constraints on how to work.
    pub constraints: Vec<String>,
    /// Current phase.
    pub phase: String,
    /// Step about to run (1-based).
    pub step: u64,
    /// Step budget.
    pub max_steps: u64,
}

/// One of the last actions, as shown in `recent:`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentAction {
    /// Step it ran at.
    pub step: u64,
    /// Action (tool) name.
    pub action: String,
    /// Main target (file, check).
    pub target: Option<String>,
    /// Outcome.
    pub result: ActionResult,
    /// One-line summary (may hold a multi-line tool result; cut when over budget).
    pub summary: String,
    /// Error text, if any.
    pub error: Option<String>,
}

/// A past enforcement event relevant to the step (seed 003's precedent: a guard's
/// denial, an auto-revert, a loop...), as `precedents:` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Precedent {
    /// How often and where it happened (`4 times in 2 tasks, last 2026-11-26`).
    pub seen: String,
    /// What the agent did.
    pub happened: String,
    /// What would have been right.
    pub correct: String,
    /// The approved rule that now enforces it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// One available action, as shown in `actions:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionEntry {
    /// Tool name.
    pub name: String,
    /// When to use it (preconditions, short).
    pub when: String,
}

/// Everything one step's prompt is built from.
#[derive(Debug, Clone)]
pub struct ContextInput<'a> {
    /// The phase's system prompt, already rendered.
    pub system_prompt: &'a str,
    /// The task frame.
    pub task: TaskFrame,
    /// The project's instruction files, nearest first
    /// (`agentforge_store::instructions::discover`). Empty leaves the section out.
    pub instructions: &'a [InstructionFile],
    /// Past enforcement events relevant to this step, most relevant first. Empty leaves
    /// the section out.
    pub precedents: &'a [Precedent],
    /// The current branch of the plan (goal, task, subtask, next subtask, loop
    /// warnings), built by `focus::FocusTree::branch_view`. `Null` leaves it out.
    pub focus: Value,
    /// Task-type specific state built by a context schema (maps, lists, file
    /// contents as multi-line strings). `Null` leaves the section out.
    pub current_state: Value,
    /// Facts; superseded ones are not shown.
    pub facts: &'a [Fact],
    /// Working memory items, oldest first.
    pub working_memory: &'a [MemoryItem],
    /// Last actions, oldest first; only the last 3 are shown.
    pub recent_actions: Vec<RecentAction>,
    /// Verification status.
    pub verification: &'a Verification,
    /// What went wrong last step (refused `complete`, invalid reply...).
    pub feedback: Option<&'a str>,
    /// Actions refused until further notice.
    pub blocked: &'a [BlockedAction],
    /// Actions available in this phase.
    pub actions: Vec<ActionEntry>,
    /// The action the phase recommends.
    pub recommended: Option<String>,
    /// Offered actions whose preconditions do not hold yet, with why
    /// (`complete`: verification not yet passing).
    pub not_yet: Vec<(String, String)>,
    /// Tool definitions offered to the model (shared with the prompt and the request).
    pub tools: Arc<[ToolSpec]>,
    /// Native tool calling, or tools described in the user message.
    pub tool_mode: ToolMode,
}

/// Token use of one budgeted part of the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SectionTokens {
    /// Budget field name (`system_prompt`, `task_frame`, ... `available_actions`).
    pub name: String,
    /// Tokens it takes.
    pub tokens: usize,
    /// Its budget.
    pub budget: usize,
    /// Whether it was compressed to fit.
    pub compressed: bool,
}

/// The exact prompt of one step and its token accounting.
#[derive(Debug, Clone)]
pub struct BuiltPrompt {
    /// The system message.
    pub system: String,
    /// The user message (YAML context, question, Text-mode instructions).
    pub user: String,
    /// Tools sent with the request (empty in Text mode).
    pub tools: Arc<[ToolSpec]>,
    /// Per-section tokens, in prompt order. They add up to `total_tokens` minus the
    /// framing (the user message's opening and closing lines and
    /// [`MESSAGE_OVERHEAD`]).
    pub sections: Vec<SectionTokens>,
    /// system + user + tools JSON + per-message overhead; never over `budget`.
    pub total_tokens: usize,
    /// The total budget it was built for.
    pub budget: usize,
    /// What was compressed, in prompt order, each note naming its section.
    pub compressions: Vec<String>,
    /// Each instruction file and how much of it the prompt shows, nearest first.
    pub instructions: Vec<InstructionShown>,
    /// Set when the counts above are byte lengths ([`build_for_step`]): the texts to
    /// count once the tokenizer is there ([`BuiltPrompt::make_exact`]).
    unmeasured: Option<Box<Unmeasured>>,
}

/// One instruction file as a prompt shows it (`agentforge context` lists them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstructionShown {
    /// Workspace-relative path.
    pub path: String,
    /// The file's characters (of what was read: at most the store's read cap).
    pub chars: usize,
    /// The characters shown; `0` when the file was left out.
    pub shown_chars: usize,
    /// Whether the text shown is cut (to fit `budget.instructions`, or at the read cap).
    pub cut: bool,
    /// Whether the file was left out to fit the budget.
    pub left_out: bool,
    /// The text shown, as in the prompt (empty when left out).
    #[serde(skip)]
    shown: String,
}

impl InstructionShown {
    /// The tokens of the text shown (its content, without the YAML around it).
    pub fn tokens(&self) -> usize {
        count_cached(&self.shown)
    }
}

/// The parts of a prompt built on byte counts, as they were counted.
#[derive(Debug, Clone)]
struct Unmeasured {
    /// The system prompt as counted (before any masking of the text sent).
    system: String,
    tools_json: String,
    tail: String,
    /// Each section's text, in [`Section::ALL`] order.
    sections: Vec<Option<String>>,
}

impl BuiltPrompt {
    /// Whether the token counts are exact (false: upper bounds from [`build_for_step`]).
    pub fn is_exact(&self) -> bool {
        self.unmeasured.is_none()
    }

    /// Makes the counts exact, counting with the tokenizer (waiting for it to load): the
    /// prompt was built on byte counts that cut nothing, so exact counts change nothing
    /// of the text. Does nothing when the counts are exact already.
    pub fn make_exact(&mut self) {
        let Some(u) = self.unmeasured.take() else {
            return;
        };
        let system_tokens = count_cached(&u.system);
        let tools_tokens = count_cached(&u.tools_json);
        let suffix_tokens = count_cached(SUFFIX);
        let tool_tokens = tools_tokens + count_cached(&u.tail).saturating_sub(suffix_tokens);
        let mut total =
            system_tokens + tool_tokens + MESSAGE_OVERHEAD + count_cached(HEAD) + suffix_tokens;
        // `sections[0]` is the system prompt; the rest follow `Section::ALL`.
        self.sections[0].tokens = system_tokens;
        for ((s, text), row) in Section::ALL
            .iter()
            .zip(&u.sections)
            .zip(self.sections.iter_mut().skip(1))
        {
            let tokens = text.as_deref().map_or(0, count_cached);
            total += tokens;
            row.tokens = tokens
                + if *s == Section::Actions {
                    tool_tokens
                } else {
                    0
                };
        }
        self.total_tokens = total;
    }
}

/// Why a prompt could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// Nothing more can be cut and the prompt is still over the total budget.
    #[error("the prompt needs at least {needed} tokens but budget.total is {budget}: {breakdown}")]
    OverBudget {
        /// Smallest prompt that could be built.
        needed: usize,
        /// `budget.total`.
        budget: usize,
        /// Where the tokens go, and which budget to raise.
        breakdown: String,
    },
}

/// The user-message sections, in prompt order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Section {
    Task,
    Instructions,
    Precedents,
    Focus,
    CurrentState,
    Understanding,
    WorkingMemory,
    Verification,
    Recent,
    Feedback,
    Actions,
}

impl Section {
    const ALL: [Section; 11] = [
        Section::Task,
        Section::Instructions,
        Section::Precedents,
        Section::Focus,
        Section::CurrentState,
        Section::Understanding,
        Section::WorkingMemory,
        Section::Verification,
        Section::Recent,
        Section::Feedback,
        Section::Actions,
    ];

    /// Order in which sections are shrunk when the total is over (after their own
    /// budgets are met): working memory (oldest items), current state, then the rest.
    /// The project's instructions hold for the whole task: they go after the facts and
    /// before the last actions.
    /// Precedents are advice from other tasks: they give way before this task's state.
    const TOTAL_ORDER: [Section; 11] = [
        Section::WorkingMemory,
        Section::Precedents,
        Section::CurrentState,
        Section::Focus,
        Section::Understanding,
        Section::Instructions,
        Section::Recent,
        Section::Feedback,
        Section::Verification,
        Section::Task,
        Section::Actions,
    ];

    fn key(self) -> &'static str {
        match self {
            Section::Task => "task",
            Section::Instructions => "project_instructions",
            Section::Precedents => "precedents",
            Section::Focus => "focus",
            Section::CurrentState => "current_state",
            Section::Understanding => "understanding",
            Section::WorkingMemory => "working_memory",
            Section::Verification => "verification",
            Section::Recent => "recent",
            Section::Feedback => "feedback",
            Section::Actions => "actions",
        }
    }

    fn budget_name(self) -> &'static str {
        match self {
            Section::Task => "task_frame",
            Section::Instructions => "instructions",
            Section::Precedents => "precedents",
            Section::Focus => "focus",
            Section::CurrentState => "current_state",
            Section::Understanding => "understanding",
            Section::WorkingMemory => "working_memory",
            Section::Verification => "verification_status",
            Section::Recent => "recent_actions",
            Section::Feedback => "feedback",
            Section::Actions => "available_actions",
        }
    }

    fn budget(self, b: &Budgets) -> usize {
        match self {
            Section::Task => b.task_frame,
            Section::Instructions => b.instructions,
            Section::Precedents => b.precedents,
            Section::Focus => b.focus,
            Section::CurrentState => b.current_state,
            Section::Understanding => b.understanding,
            Section::WorkingMemory => b.working_memory,
            Section::Verification => b.verification_status,
            Section::Recent => b.recent_actions,
            Section::Feedback => b.feedback,
            Section::Actions => b.available_actions,
        }
    }

    /// The note for `keep` items kept out of `of`.
    fn keep_note(self, kept: usize, of: usize) -> String {
        let dropped = of - kept;
        match self {
            Section::Recent => {
                format!("kept the newest {kept} of {of} actions ({dropped} dropped)")
            }
            Section::Understanding => {
                format!("kept the {kept} most confident of {of} facts ({dropped} left out)")
            }
            Section::Instructions => {
                format!("kept the nearest {kept} of {of} instruction files ({dropped} left out)")
            }
            _ => format!("dropped the {dropped} oldest of {of} items"),
        }
    }

    /// The compression ladder, in the seed's order, then past the usual floors.
    fn ladder(self) -> &'static [Stage] {
        use Knob::{Chars, Items, Keep, Lines};
        use Stage::{Omit, Range, SingleLine};
        const MAX: usize = usize::MAX;
        const GENERIC: &[Stage] = &[
            Range(Lines, LINES_FLOOR, MAX),
            Range(Chars, CHARS_FLOOR, CHARS_STD),
            Range(Items, ITEMS_FLOOR, MAX),
            Range(Lines, 0, LINES_FLOOR - 1),
            Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
            Range(Items, 0, ITEMS_FLOOR - 1),
        ];
        match self {
            Section::Task | Section::Feedback | Section::Focus => GENERIC,
            // Fewer whole precedents (the least relevant go first) before shorter ones.
            Section::Precedents => &[
                Range(Items, 1, MAX),
                Range(Chars, CHARS_FLOOR, CHARS_STD),
                Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
                Range(Items, 0, 0),
            ],
            // Every file cut to the same length (the longest first), down to a few
            // hundred characters; then the farthest files left out; then shorter.
            Section::Instructions => &[
                Range(Chars, INSTRUCTION_CHARS_FLOOR, MAX),
                Range(Keep, 1, MAX),
                Range(Chars, CHARS_MIN, INSTRUCTION_CHARS_FLOOR - 1),
                Range(Keep, 0, 0),
            ],
            Section::Understanding => &[
                Range(Lines, LINES_FLOOR, MAX),
                Range(Chars, CHARS_FLOOR, CHARS_STD),
                Range(Keep, ITEMS_FLOOR, MAX),
                Range(Lines, 0, LINES_FLOOR - 1),
                Range(Keep, 1, ITEMS_FLOOR - 1),
                Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
                Range(Keep, 0, 0),
            ],
            Section::CurrentState => &[
                Range(Lines, LINES_FLOOR, MAX),
                Range(Chars, CHARS_FLOOR, CHARS_STD),
                Range(Items, ITEMS_FLOOR, MAX),
                Range(Lines, 0, LINES_FLOOR - 1),
                Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
                Range(Items, 0, ITEMS_FLOOR - 1),
                Omit,
            ],
            Section::WorkingMemory => &[
                Range(Lines, LINES_FLOOR, MAX),
                SingleLine,
                Range(Chars, CHARS_FLOOR, CHARS_STD),
                Range(Keep, 1, MAX),
                Range(Lines, 0, LINES_FLOOR - 1),
                Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
                Range(Keep, 0, 0),
            ],
            Section::Recent => &[
                Range(Lines, LINES_FLOOR, MAX),
                Range(Keep, 1, 2),
                SingleLine,
                Range(Chars, CHARS_FLOOR, CHARS_STD),
                Range(Lines, 0, LINES_FLOOR - 1),
                Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
                Range(Keep, 0, 0),
            ],
            Section::Verification | Section::Actions => &[
                Range(Chars, CHARS_FLOOR, CHARS_STD),
                Range(Items, ITEMS_FLOOR, MAX),
                Range(Chars, CHARS_MIN, CHARS_FLOOR - 1),
                Range(Items, 0, ITEMS_FLOOR - 1),
            ],
        }
    }
}

// ---------------------------------------------------------------------------------
// Typed views of the sections (what the YAML is rendered from).

#[derive(Serialize)]
struct TaskView {
    id: String,
    goal: String,
    step: String,
    phase: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    success_criteria: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    constraints: Vec<String>,
}

/// Characters every instruction file keeps before the farthest files are left out.
const INSTRUCTION_CHARS_FLOOR: usize = 400;

/// One entry of `project_instructions:`: a file (with a note when it is cut), or the note
/// naming the files left out.
#[derive(Serialize)]
#[serde(untagged)]
enum InstructionEntry {
    File {
        file: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        cut: Option<String>,
        content: String,
    },
    Note(String),
}

/// What of one instruction file a rendering shows: its text (cut or whole), and the
/// note saying it was cut; `None` when the file is left out.
fn instruction_text<'f>(
    f: &'f InstructionFile,
    chars: Option<usize>,
    st: &mut Stats,
) -> (Cow<'f, str>, Option<String>) {
    let total = f.content.chars().count();
    st.max_chars = st.max_chars.max(total);
    let shown = match chars {
        Some(max) => agentforge_core::text::cut(&f.content, max),
        None => Cow::Borrowed(f.content.as_str()),
    };
    let mut note = None;
    if let Cow::Owned(_) = shown {
        let kept = chars.unwrap_or(total);
        st.char_cuts += 1;
        st.chars_omitted += total - kept;
        // The model can read the rest itself, except in `.agentforge/`.
        let rest = if f.path.starts_with(".agentforge/") {
            "the rest is not shown".to_string()
        } else {
            format!("read_file `{}` for the rest", f.path)
        };
        note = Some(format!(
            "cut to its first {kept} of {total} characters to fit budget.instructions; {rest}"
        ));
    }
    if let Some(bytes) = f.cut_from_bytes {
        let read = format!(
            "the file has {bytes} bytes, only the first {} were read",
            f.content.len()
        );
        note = Some(match note {
            Some(n) => format!("{n}; {read}"),
            None => read,
        });
    }
    (shown, note)
}

/// Facts by category, most important categories first.
#[derive(Serialize, Default)]
struct UnderstandingView {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    verification: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    error: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    code_structure: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pattern: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inference: Vec<String>,
}

/// Display order of fact categories (matches [`UnderstandingView`]).
const CATEGORY_ORDER: [FactCategory; 5] = [
    FactCategory::Verification,
    FactCategory::Error,
    FactCategory::CodeStructure,
    FactCategory::Pattern,
    FactCategory::Inference,
];

#[derive(Serialize)]
#[serde(untagged)]
enum MemoryEntry {
    Item { key: String, content: String },
    Note(String),
}

#[derive(Serialize)]
#[serde(untagged)]
enum TestsOk {
    Known(bool),
    Unknown(&'static str),
}

#[derive(Serialize)]
struct VerificationView {
    passing: usize,
    failing: usize,
    tests_ok: TestsOk,
    ready: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    checks: Vec<String>,
}

#[derive(Serialize)]
struct RecentView {
    step: u64,
    action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    result: ActionResult,
    summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One entry of `precedents:`, or the note saying how many were left out.
#[derive(Serialize)]
#[serde(untagged)]
enum PrecedentItem {
    Item {
        seen: String,
        happened: String,
        correct: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    Note(String),
}

#[derive(Serialize)]
struct FeedbackView {
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    blocked: Vec<String>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ActionItem {
    Action {
        name: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        when: String,
    },
    Note(String),
}

#[derive(Serialize)]
struct ActionsView {
    available: Vec<ActionItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recommended: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_yet: Vec<String>,
}

/// Renders a typed view as one YAML section.
fn emit<T: Serialize>(key: &str, view: &T) -> String {
    let value = serde_json::to_value(view).expect("context views serialize to JSON");
    yaml::section(key, &value)
}

fn owned(c: Cow<'_, str>) -> String {
    c.into_owned()
}

/// `0.9`, `1.0`, `0.85`.
fn confidence(c: f32) -> String {
    let c = if c.is_finite() {
        c.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let s = format!("{c:.2}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

/// The input, prepared once: facts grouped and sorted, drop order of memory items.
struct Prepared<'a> {
    input: &'a ContextInput<'a>,
    /// Facts by display category, newest first, each with its priority rank.
    facts: [Vec<(&'a Fact, usize)>; 5],
    /// Number of facts shown when nothing is cut.
    fact_count: usize,
    recent: &'a [RecentAction],
    /// Working-memory indices in the order they are dropped: unpinned oldest first,
    /// then pinned oldest first.
    memory_drop_order: Vec<usize>,
    checks: Vec<(&'a str, &'a CheckStatus)>,
}

impl<'a> Prepared<'a> {
    fn new(input: &'a ContextInput<'a>) -> Prepared<'a> {
        let superseded: Vec<&str> = input
            .facts
            .iter()
            .filter_map(|f| f.supersedes.as_deref())
            .collect();
        let mut facts: [Vec<(&Fact, usize)>; 5] = Default::default();
        for f in input.facts {
            if superseded.contains(&f.id.as_str()) {
                continue;
            }
            let slot = CATEGORY_ORDER
                .iter()
                .position(|c| *c == f.category)
                .unwrap_or(0);
            facts[slot].push((f, 0));
        }
        for list in &mut facts {
            // Newest first.
            list.sort_by_key(|(f, _)| std::cmp::Reverse(f.step));
        }
        // Priority: most confident, then newest; `keep` shows the first ones.
        let mut order: Vec<(usize, usize)> = (0..5)
            .flat_map(|slot| (0..facts[slot].len()).map(move |i| (slot, i)))
            .collect();
        order.sort_by(|&(sa, ia), &(sb, ib)| {
            let (a, b) = (facts[sa][ia].0, facts[sb][ib].0);
            b.confidence
                .total_cmp(&a.confidence)
                .then(b.step.cmp(&a.step))
        });
        for (rank, &(slot, i)) in order.iter().enumerate() {
            facts[slot][i].1 = rank;
        }
        let fact_count = order.len();
        let n = input.recent_actions.len();
        let recent = &input.recent_actions[n.saturating_sub(3)..];
        let wm = input.working_memory;
        let memory_drop_order = (0..wm.len())
            .filter(|&i| !wm[i].pinned)
            .chain((0..wm.len()).filter(|&i| wm[i].pinned))
            .collect();
        let mut checks: Vec<(&str, &CheckStatus)> = input
            .verification
            .checks
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        // Failing first, so cutting the list keeps them.
        checks.sort_by_key(|(_, c)| c.passing);
        Prepared {
            input,
            facts,
            fact_count,
            recent,
            memory_drop_order,
            checks,
        }
    }

    /// Renders one section with the given compression; `None` when it is empty.
    fn render(&self, s: Section, p: &Params, st: &mut Stats) -> Option<String> {
        let input = self.input;
        let t = |x: &str, st: &mut Stats| owned(text(x, p, st));
        Some(match s {
            Section::Task => {
                let task = &input.task;
                let step = if task.max_steps > 0 {
                    format!("{} of {}", task.step, task.max_steps)
                } else {
                    task.step.to_string()
                };
                let criteria = task.success_criteria.iter().map(|c| t(c, st)).collect();
                let constraints = task.constraints.iter().map(|c| t(c, st)).collect();
                let view = TaskView {
                    id: t(&task.id, st),
                    goal: t(&task.goal, st),
                    step,
                    phase: t(&task.phase, st),
                    success_criteria: cut_list(criteria, p, st, |m| m),
                    constraints: cut_list(constraints, p, st, |m| m),
                };
                emit(s.key(), &view)
            }
            Section::Instructions => {
                let files = input.instructions;
                if files.is_empty() {
                    return None;
                }
                st.keepable = files.len();
                let keep = p.keep.unwrap_or(files.len()).min(files.len());
                if p.keep.is_some() {
                    st.kept = Some((keep, files.len()));
                }
                let mut entries: Vec<InstructionEntry> = files[..keep]
                    .iter()
                    .map(|f| {
                        let (content, cut) = instruction_text(f, p.chars, st);
                        InstructionEntry::File {
                            file: f.path.clone(),
                            cut,
                            content: content.into_owned(),
                        }
                    })
                    .collect();
                // The sizes of the files left out bound the searches too.
                for f in &files[keep..] {
                    st.max_chars = st.max_chars.max(f.content.chars().count());
                }
                if keep < files.len() {
                    let names: Vec<&str> = files[keep..].iter().map(|f| f.path.as_str()).collect();
                    entries.push(InstructionEntry::Note(format!(
                        "... {} farther instruction {} left out to fit budget.instructions: {}",
                        names.len(),
                        if names.len() == 1 { "file" } else { "files" },
                        names.join(", ")
                    )));
                }
                emit(s.key(), &entries)
            }
            Section::Precedents => {
                if input.precedents.is_empty() {
                    return None;
                }
                let items = input
                    .precedents
                    .iter()
                    .map(|pr| PrecedentItem::Item {
                        seen: t(&pr.seen, st),
                        happened: t(&pr.happened, st),
                        correct: t(&pr.correct, st),
                        rule: pr.rule.as_deref().map(|r| t(r, st)),
                    })
                    .collect();
                emit(s.key(), &cut_list(items, p, st, PrecedentItem::Note))
            }
            Section::Focus => {
                if input.focus.is_null() {
                    return None;
                }
                let v = shrink_value(&input.focus, p, st);
                yaml::section(s.key(), &v)
            }
            Section::CurrentState => {
                if input.current_state.is_null() {
                    return None;
                }
                if p.omit {
                    st.omitted = true;
                    return Some(yaml::section(
                        s.key(),
                        &Value::String(
                            "(left out to fit the token budget; raise budget.current_state)"
                                .to_string(),
                        ),
                    ));
                }
                let v = shrink_value(&input.current_state, p, st);
                yaml::section(s.key(), &v)
            }
            Section::Understanding => {
                let total = self.fact_count;
                if total == 0 {
                    return None;
                }
                // `keep` keeps the most confident (then newest) facts overall; each
                // category list says how many of its facts were left out.
                st.keepable = total;
                let keep = p.keep.unwrap_or(total).min(total);
                if p.keep.is_some() {
                    st.kept = Some((keep, total));
                }
                let mut lists: [Vec<String>; 5] = Default::default();
                for (slot, facts) in self.facts.iter().enumerate() {
                    let mut left_out = 0;
                    for &(f, rank) in facts {
                        if rank >= keep {
                            left_out += 1;
                            continue;
                        }
                        let line = format!(
                            "{} (conf: {})",
                            t(&f.statement, st),
                            confidence(f.confidence)
                        );
                        lists[slot].push(line);
                    }
                    if left_out > 0 {
                        lists[slot].push(compress::more_marker(left_out));
                    }
                }
                let [verification, error, code_structure, pattern, inference] = lists;
                let view = UnderstandingView {
                    verification,
                    error,
                    code_structure,
                    pattern,
                    inference,
                };
                emit(s.key(), &view)
            }
            Section::WorkingMemory => {
                let items = input.working_memory;
                if items.is_empty() {
                    return None;
                }
                st.keepable = items.len();
                let keep = p.keep.unwrap_or(items.len()).min(items.len());
                let dropped = &self.memory_drop_order[..items.len() - keep];
                if p.keep.is_some() {
                    st.kept = Some((keep, items.len()));
                }
                let mut entries = Vec::with_capacity(keep + 1);
                if !dropped.is_empty() {
                    entries.push(MemoryEntry::Note(format!(
                        "... {} older {} dropped to fit the token budget",
                        dropped.len(),
                        if dropped.len() == 1 { "item" } else { "items" }
                    )));
                }
                for (i, item) in items.iter().enumerate() {
                    if dropped.contains(&i) {
                        continue;
                    }
                    let is_result = item.kind == ItemKind::ActionResult;
                    let content = one_line(&item.content, p.single_line && is_result, st);
                    entries.push(MemoryEntry::Item {
                        key: item.key.clone(),
                        content: t(&content, st),
                    });
                }
                emit(s.key(), &entries)
            }
            Section::Verification => {
                let v = input.verification;
                let mut scratch = Stats::default();
                let checks = self
                    .checks
                    .iter()
                    .map(|(name, c)| {
                        let summary = one_line(&c.summary, true, &mut scratch);
                        let status = if c.passing { "pass" } else { "FAIL" };
                        let line = if summary.trim().is_empty() {
                            format!("{name}: {status}")
                        } else {
                            format!("{name}: {status} - {}", summary.trim())
                        };
                        t(&line, st)
                    })
                    .collect();
                let view = VerificationView {
                    passing: v.passing(),
                    failing: v.failing(),
                    tests_ok: match v.tests_passing() {
                        Some(ok) => TestsOk::Known(ok),
                        None => TestsOk::Unknown("not run"),
                    },
                    ready: v.ready_for_completion,
                    checks: cut_list(checks, p, st, |m| m),
                };
                emit(s.key(), &view)
            }
            Section::Recent => {
                if self.recent.is_empty() {
                    return None;
                }
                let n = self.recent.len();
                st.keepable = n;
                let keep = p.keep.unwrap_or(n).min(n);
                if p.keep.is_some() {
                    st.kept = Some((keep, n));
                }
                let views: Vec<RecentView> = self.recent[n - keep..]
                    .iter()
                    .map(|r| RecentView {
                        step: r.step,
                        action: r.action.clone(),
                        target: r.target.as_deref().map(|x| t(x, st)),
                        result: r.result,
                        summary: {
                            let one = one_line(&r.summary, p.single_line, st);
                            t(&one, st)
                        },
                        error: r.error.as_deref().map(|e| t(e, st)),
                    })
                    .collect();
                if views.is_empty() {
                    let note = format!("... {n} recent actions left out to fit the token budget");
                    return Some(yaml::section(
                        s.key(),
                        &Value::Array(vec![Value::String(note)]),
                    ));
                }
                emit(s.key(), &views)
            }
            Section::Feedback => {
                if input.feedback.is_none() && input.blocked.is_empty() {
                    return None;
                }
                let blocked = input
                    .blocked
                    .iter()
                    .map(|b| t(&format!("{}: {}", b.signature, b.reason), st))
                    .collect();
                let view = FeedbackView {
                    message: input.feedback.map(|m| t(m, st)),
                    blocked: cut_list(blocked, p, st, |m| m),
                };
                emit(s.key(), &view)
            }
            Section::Actions => {
                let available = input
                    .actions
                    .iter()
                    .map(|a| ActionItem::Action {
                        name: a.name.clone(),
                        when: t(&a.when, st),
                    })
                    .collect();
                let view = ActionsView {
                    available: cut_list(available, p, st, ActionItem::Note),
                    recommended: input.recommended.clone(),
                    not_yet: input
                        .not_yet
                        .iter()
                        .map(|(name, why)| t(&format!("{name}: {why}"), st))
                        .collect(),
                };
                emit(s.key(), &view)
            }
        })
    }

    /// Renders and counts (up to `cap`). Uncompressed sections go through the
    /// token cache: they often repeat from one step to the next.
    fn measure(&self, s: Section, p: Params, cap: usize) -> Rendered {
        let mut stats = Stats::default();
        let text = self.render(s, &p, &mut stats);
        let count = match &text {
            Some(t) if p == Params::default() => count_capped_cached(t, cap),
            Some(t) => count_capped(t, cap),
            None => Count::Exact(0),
        };
        Rendered {
            text,
            count,
            stats,
            params: p,
        }
    }

    /// Compresses a section along `ladder`, starting from `start`, until it fits
    /// `target` tokens or the ladder is exhausted. The returned count is exact.
    ///
    /// A fit of the same section input, start, target and ladder as an earlier one is
    /// not searched or rendered again: its result is the rendering found then
    /// ([`memo`]). Not while counts are byte bounds, which fit differently.
    fn fit(&self, s: Section, start: Params, target: usize, ladder: &[Stage]) -> Rendered {
        let cap = target.saturating_mul(2).saturating_add(256);
        let key = if tokens::is_bounded() {
            None
        } else {
            self.fit_key(s, &start, target, ladder)
        };
        if let Some(fitted) = key.and_then(memo::get) {
            return fitted;
        }
        let cur = self.search_fit(s, start, target, ladder, cap);
        if let Some(key) = key {
            memo::put(key, &cur);
        }
        cur
    }

    /// The digest of everything a fit of `s` depends on, for the sections whose input
    /// is large enough to be worth it; `None` for the others, which are always searched.
    fn fit_key(&self, s: Section, start: &Params, target: usize, ladder: &[Stage]) -> Option<u128> {
        let mut d = memo::Digest::new(s, start, target, ladder);
        let input = self.input;
        // The inputs are taken apart field by field, each either digested or said to be
        // unread by `render` (or read through what is digested: a fact's category is its
        // list, its step its place in it), so that a field added later does not compile
        // until it is placed here.
        match s {
            Section::Instructions => {
                for f in input.instructions {
                    let InstructionFile {
                        path,
                        content,
                        cut_from_bytes,
                    } = f;
                    d.str(path);
                    d.str(content);
                    d.u64(cut_from_bytes.map_or(0, |b| b.saturating_add(1)));
                }
            }
            Section::Focus => d.value(&input.focus),
            Section::CurrentState => d.value(&input.current_state),
            Section::Understanding => {
                for facts in &self.facts {
                    d.u64(facts.len() as u64);
                    for (f, rank) in facts {
                        let Fact {
                            statement,
                            confidence,
                            id: _,
                            category: _,
                            source: _,
                            step: _,
                            supersedes: _,
                        } = f;
                        d.str(statement);
                        d.u64(u64::from(confidence.to_bits()));
                        d.u64(*rank as u64);
                    }
                }
            }
            Section::WorkingMemory => {
                for item in input.working_memory {
                    let MemoryItem {
                        kind,
                        key,
                        content,
                        pinned,
                        step: _,
                        added_at: _,
                        expires_after_steps: _,
                    } = item;
                    d.u64(u64::from(*kind == ItemKind::ActionResult));
                    d.u64(u64::from(*pinned));
                    d.str(key);
                    d.str(content);
                }
            }
            Section::Task
            | Section::Precedents
            | Section::Verification
            | Section::Recent
            | Section::Feedback
            | Section::Actions => return None,
        }
        Some(d.finish())
    }

    /// [`Prepared::fit`]'s search.
    fn search_fit(
        &self,
        s: Section,
        start: Params,
        target: usize,
        ladder: &[Stage],
        cap: usize,
    ) -> Rendered {
        let mut cur = self.measure(s, start, cap);
        if !cur.fits(target) {
            // Sizes seen without any cut bound the searches.
            let natural = if start == Params::default() {
                cur.stats.clone()
            } else {
                let mut st = Stats::default();
                let _ = self.render(s, &Params::default(), &mut st);
                st
            };
            for stage in ladder {
                match *stage {
                    Stage::SingleLine => {
                        if cur.params.single_line {
                            continue;
                        }
                        let p = Params {
                            single_line: true,
                            ..cur.params
                        };
                        cur = self.measure(s, p, cap);
                    }
                    Stage::Omit => {
                        let p = Params {
                            omit: true,
                            ..cur.params
                        };
                        cur = self.measure(s, p, cap);
                    }
                    Stage::Range(knob, lo, hi) => {
                        let Some((top, at_current)) = range_top(knob, hi, &natural, &cur.params)
                        else {
                            continue;
                        };
                        if lo > top {
                            continue;
                        }
                        let base = cur.params;
                        // When `top + 1` cuts exactly what the current rendering cuts,
                        // its count is already known.
                        let above = at_current.then(|| (cur.tokens(), cur.exact()));
                        match compress::search(lo, top, target, above, |v| {
                            self.measure(s, base.with(knob, v), cap)
                        }) {
                            Ok((_, fitted)) => {
                                cur = fitted;
                                break;
                            }
                            Err(at_lo) => cur = at_lo,
                        }
                    }
                }
                if cur.fits(target) {
                    break;
                }
            }
        }
        if let (Count::Over(_), Some(t)) = (cur.count, &cur.text) {
            cur.count = Count::Exact(count_cached(t));
        }
        cur
    }
}

/// The largest useful value of `knob` for a [`Stage::Range`] capped at `hi`: below
/// what would cut nothing, and below the current setting; with whether `top + 1`
/// renders the same as the current parameters. `None` when nothing is left to cut.
fn range_top(knob: Knob, hi: usize, natural: &Stats, cur: &Params) -> Option<(usize, bool)> {
    let no_cut_below = match knob {
        // A string of L lines is cut by N when L > 2N + 1.
        Knob::Lines => natural.max_lines.checked_sub(2).map(|x| x / 2),
        Knob::Chars => natural.max_chars.checked_sub(1),
        Knob::Items => natural.max_items.checked_sub(1),
        Knob::Keep => natural.keepable.checked_sub(1),
    }?;
    let current_top = match cur.get(knob) {
        Some(c) => c.checked_sub(1)?.min(no_cut_below),
        None => no_cut_below,
    };
    Some(if hi < current_top {
        (hi, false)
    } else {
        (current_top, true)
    })
}

/// One measured rendering of a section.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    text: Option<String>,
    count: Count,
    stats: Stats,
    params: Params,
}

impl Rendered {
    fn tokens_exact(&self) -> usize {
        self.count.value()
    }
}

impl Candidate for Rendered {
    fn fits(&self, target: usize) -> bool {
        self.count.fits(target)
    }
    fn tokens(&self) -> usize {
        self.count.value()
    }
    fn exact(&self) -> bool {
        matches!(self.count, Count::Exact(_))
    }
}

/// Builds the prompt of one step within `budgets` (see the module docs).
///
/// Deterministic: the same input and budgets always give the same prompt. Fails only
/// when the prompt cannot fit `budgets.total` even with every section at its most
/// compressed (for instance a system prompt larger than the total).
pub fn build(input: &ContextInput, budgets: &Budgets) -> Result<BuiltPrompt, ContextError> {
    build_counted(input, budgets)
}

/// [`build`] for a step about to ask the model, without waiting for the tokenizer when it
/// is still loading (the first step of a `run` or `resume`): the prompt is built with the
/// counts remembered from earlier counting ([`use_token_count_file`]) and byte lengths
/// (upper bounds) for the rest. When every count was a remembered one, that is the exact
/// build. When some were byte lengths but nothing was cut, it is the very prompt exact
/// counts give (they are lower), so it is sent while the tokenizer loads and its counts
/// are made exact after the request ([`BuiltPrompt::make_exact`]). Otherwise, and once the
/// tokenizer is loaded, this is [`build`].
pub fn build_for_step(
    input: &ContextInput,
    budgets: &Budgets,
) -> Result<BuiltPrompt, ContextError> {
    if !tokens::is_loaded() {
        let (bounded, bytes_used) = tokens::with_byte_bounds(|| build_counted(input, budgets));
        match bounded {
            Ok(mut p) if !bytes_used => {
                p.unmeasured = None;
                return Ok(p);
            }
            Ok(p) if p.compressions.is_empty() && p.sections.iter().all(|s| !s.compressed) => {
                return Ok(p)
            }
            Err(e) if !bytes_used => return Err(e),
            _ => {}
        }
    }
    build_counted(input, budgets)
}

/// The tool definitions as the JSON the budget counts. The same tools are offered step
/// after step (a phase's list, usually the very same shared list), so the last list and
/// its JSON are kept: comparing the list is cheaper than building and serializing its
/// schemas again, and the same allocation needs no comparison at all.
fn tool_definitions_json(tools: &Arc<[ToolSpec]>) -> String {
    static LAST: std::sync::Mutex<Option<(Arc<[ToolSpec]>, String)>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((kept, json)) = &*last {
        if Arc::ptr_eq(kept, tools) || **kept == **tools {
            return json.clone();
        }
    }
    let defs: Vec<Value> = tools
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
            })
        })
        .collect();
    let json = serde_json::to_string(&defs).expect("tool definitions serialize");
    *last = Some((Arc::clone(tools), json.clone()));
    json
}

fn build_counted(input: &ContextInput, budgets: &Budgets) -> Result<BuiltPrompt, ContextError> {
    let native = matches!(input.tool_mode, ToolMode::Native);
    let system_tokens = count_cached(input.system_prompt);
    let (tools_json, tail) = if native && input.tools.is_empty() {
        (String::new(), SUFFIX.to_string())
    } else if native {
        (tool_definitions_json(&input.tools), SUFFIX.to_string())
    } else {
        (
            String::new(),
            format!("{SUFFIX}\n\n{}", text_mode_instructions(&input.tools)),
        )
    };
    let tools_tokens = count_cached(&tools_json);
    let suffix_tokens = count_cached(SUFFIX);
    let tail_tokens = count_cached(&tail);
    let head_tokens = count_cached(HEAD);
    // Text-mode instructions describe the tools: they count as available actions.
    let instructions_tokens = tail_tokens.saturating_sub(suffix_tokens);
    let tool_tokens = tools_tokens + instructions_tokens;
    let framing = MESSAGE_OVERHEAD + head_tokens + suffix_tokens;
    let fixed = system_tokens + tool_tokens + framing;

    let mut notes = Vec::new();
    if system_tokens > budgets.system_prompt {
        notes.push(format!(
            "system_prompt: {system_tokens} tokens, over its {} budget (not compressible)",
            budgets.system_prompt
        ));
    }
    if tool_tokens > budgets.available_actions {
        notes.push(format!(
            "available_actions: the tool definitions alone take {tool_tokens} tokens, over the {} budget",
            budgets.available_actions
        ));
    }
    if fixed > budgets.total {
        return Err(over_budget(
            fixed,
            budgets,
            system_tokens,
            tool_tokens,
            framing,
            0,
        ));
    }

    let prep = Prepared::new(input);
    let targets = Section::ALL.map(|s| match s {
        Section::Actions => budgets.available_actions.saturating_sub(tool_tokens),
        s => s.budget(budgets),
    });
    let mut fitted: Vec<Rendered> = Section::ALL
        .iter()
        .zip(targets)
        .map(|(&s, target)| prep.fit(s, Params::default(), target, s.ladder()))
        .collect();
    let mut for_total = [false; Section::ALL.len()];
    let mut total = fixed + fitted.iter().map(Rendered::tokens_exact).sum::<usize>();

    // The sections fit their own budgets (as far as they can); now the total.
    for s in Section::TOTAL_ORDER {
        if total <= budgets.total {
            break;
        }
        let i = Section::ALL.iter().position(|x| *x == s).expect("listed");
        let cur = &fitted[i];
        let tokens = cur.tokens_exact();
        if tokens == 0 {
            continue;
        }
        let target = tokens.saturating_sub(total - budgets.total);
        let next = if s == Section::WorkingMemory {
            // Drop the oldest items only.
            prep.fit(
                s,
                cur.params,
                target,
                &[Stage::Range(Knob::Keep, 0, usize::MAX)],
            )
        } else {
            prep.fit(s, Params::default(), target, s.ladder())
        };
        if next.tokens_exact() < tokens {
            total = total - tokens + next.tokens_exact();
            fitted[i] = next;
            for_total[i] = true;
        }
    }
    if total > budgets.total {
        let context = total - fixed;
        return Err(over_budget(
            total,
            budgets,
            system_tokens,
            tool_tokens,
            framing,
            context,
        ));
    }

    let mut user = String::with_capacity(
        HEAD.len()
            + tail.len()
            + fitted
                .iter()
                .filter_map(|r| r.text.as_ref())
                .map(String::len)
                .sum::<usize>(),
    );
    user.push_str(HEAD);
    let mut sections = vec![SectionTokens {
        name: "system_prompt".to_string(),
        tokens: system_tokens,
        budget: budgets.system_prompt,
        compressed: false,
    }];
    for (i, (s, r)) in Section::ALL.iter().zip(&fitted).enumerate() {
        if let Some(t) = &r.text {
            user.push_str(t);
        }
        let mut tokens = r.tokens_exact();
        if *s == Section::Actions {
            tokens += tool_tokens;
        }
        let budget = s.budget(budgets);
        let mut section_notes = r
            .stats
            .notes(s.budget_name(), &r.params, |k, of| s.keep_note(k, of));
        if for_total[i] {
            for n in &mut section_notes {
                n.push_str(" (to fit the total)");
            }
        } else if tokens > budget && *s != Section::Actions {
            section_notes.push(format!(
                "{}: {tokens} tokens at its most compressed, over its {budget} budget",
                s.budget_name()
            ));
        }
        notes.extend(section_notes);
        sections.push(SectionTokens {
            name: s.budget_name().to_string(),
            tokens,
            budget,
            compressed: r.stats.compressed(),
        });
    }
    user.push_str(&tail);
    let shown_params = Section::ALL
        .iter()
        .position(|s| *s == Section::Instructions)
        .map(|i| fitted[i].params)
        .unwrap_or_default();

    // (Byte bounds mix with remembered exact counts, so they need not add up.)
    debug_assert!(
        tokens::is_bounded()
            || total
                == MESSAGE_OVERHEAD
                    + count_tokens(input.system_prompt)
                    + count_tokens(&user)
                    + count_tokens(&tools_json),
        "section counts must add up to the count of the whole prompt"
    );

    Ok(BuiltPrompt {
        system: input.system_prompt.to_string(),
        user,
        tools: if native {
            Arc::clone(&input.tools)
        } else {
            Arc::from([])
        },
        unmeasured: tokens::is_bounded().then(|| {
            Box::new(Unmeasured {
                system: input.system_prompt.to_string(),
                tools_json: tools_json.clone(),
                tail: tail.clone(),
                sections: fitted.iter().map(|r| r.text.clone()).collect(),
            })
        }),
        sections,
        total_tokens: total,
        budget: budgets.total,
        compressions: notes,
        instructions: instructions_shown(input.instructions, &shown_params),
    })
}

/// What the prompt shows of each instruction file, given the section's compression.
fn instructions_shown(files: &[InstructionFile], p: &Params) -> Vec<InstructionShown> {
    let keep = p.keep.unwrap_or(files.len()).min(files.len());
    let mut scratch = Stats::default();
    files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let chars = f.content.chars().count();
            if i >= keep {
                return InstructionShown {
                    path: f.path.clone(),
                    chars,
                    shown_chars: 0,
                    cut: false,
                    left_out: true,
                    shown: String::new(),
                };
            }
            let (shown, note) = instruction_text(f, p.chars, &mut scratch);
            InstructionShown {
                path: f.path.clone(),
                chars,
                shown_chars: match p.chars {
                    Some(max) if max < chars => max,
                    _ => chars,
                },
                cut: note.is_some(),
                left_out: false,
                shown: shown.into_owned(),
            }
        })
        .collect()
}

fn over_budget(
    needed: usize,
    budgets: &Budgets,
    system: usize,
    tools: usize,
    framing: usize,
    context: usize,
) -> ContextError {
    let mut breakdown = format!(
        "system prompt {system} tokens (budget.system_prompt {}), tool definitions {tools} \
         (budget.available_actions {}), framing {framing}",
        budgets.system_prompt, budgets.available_actions
    );
    if context > 0 {
        let _ = write!(breakdown, ", context at its most compressed {context}");
    }
    let _ = write!(breakdown, "; raise budget.total to at least {needed}");
    if system > budgets.system_prompt {
        let _ = write!(
            breakdown,
            " or shorten the system prompt (over budget.system_prompt)"
        );
    } else if tools > budgets.available_actions {
        let _ = write!(
            breakdown,
            " or offer fewer tools (over budget.available_actions)"
        );
    }
    ContextError::OverBudget {
        needed,
        budget: budgets.total,
        breakdown,
    }
}

/// Renders the exact prompt (system message, user message, tools) followed by a
/// per-section token table and the list of compressions, for
/// `agentforge context <task-id>`.
pub fn render_report(p: &BuiltPrompt) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "=== system ===\n{}\n", p.system.trim_end());
    let _ = writeln!(out, "=== user ===\n{}\n", p.user.trim_end());
    if p.tools.is_empty() {
        let _ = writeln!(out, "=== tools ===\n(none sent)\n");
    } else {
        let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        let _ = writeln!(
            out,
            "=== tools ({}: {}) ===\n{}\n",
            p.tools.len(),
            names.join(", "),
            serde_json::to_string_pretty(&p.tools).unwrap_or_default()
        );
    }
    let _ = writeln!(out, "=== tokens (o200k_base) ===");
    let _ = writeln!(
        out,
        "{:<22}{:>8}{:>8}{:>7}",
        "section", "tokens", "budget", "use"
    );
    let mut sum = 0;
    for s in &p.sections {
        sum += s.tokens;
        let mark = if s.compressed { " *" } else { "" };
        let over = if s.tokens > s.budget { " over" } else { "" };
        let _ = writeln!(
            out,
            "{:<22}{:>8}{:>8}{:>6}%{mark}{over}",
            s.name,
            s.tokens,
            s.budget,
            percent(s.tokens, s.budget)
        );
    }
    let _ = writeln!(
        out,
        "{:<22}{:>8}{:>8}",
        "framing",
        p.total_tokens.saturating_sub(sum),
        "-"
    );
    let _ = writeln!(
        out,
        "{:<22}{:>8}{:>8}{:>6}%",
        "total",
        p.total_tokens,
        p.budget,
        percent(p.total_tokens, p.budget)
    );
    if p.sections.iter().any(|s| s.compressed) {
        let _ = writeln!(out, "(* compressed)");
    }
    let _ = writeln!(out, "\n=== instructions (nearest first) ===");
    if p.instructions.is_empty() {
        let _ = writeln!(
            out,
            "(none: no AGENTS.md or CLAUDE.md from the task's folders up to the workspace root, no .agentforge/instructions.md)"
        );
    }
    for f in &p.instructions {
        let shown = if f.left_out {
            "left out to fit budget.instructions".to_string()
        } else if f.cut {
            format!(
                "{} tokens, cut: {} of {} characters shown",
                f.tokens(),
                f.shown_chars,
                f.chars
            )
        } else {
            format!("{} tokens", f.tokens())
        };
        let _ = writeln!(out, "{:<40} {shown}", f.path);
    }
    let _ = writeln!(out, "\n=== compressions ===");
    if p.compressions.is_empty() {
        let _ = writeln!(out, "(none)");
    }
    for c in &p.compressions {
        let _ = writeln!(out, "- {c}");
    }
    out
}

fn percent(n: usize, of: usize) -> usize {
    (n * 100 + of / 2).checked_div(of).unwrap_or(0)
}
