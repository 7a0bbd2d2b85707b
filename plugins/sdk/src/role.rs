//! The value loop's roles as task types: what the `schema-<role>` plugins share.
//!
//! The loop runs each role (planner, critic, builder...) as a task whose `task_type` is the
//! role's name and whose one input is its brief, `inputs.brief`: an object whose fields
//! (every one optional) are what the role is shown. A role's plugin describes what is its
//! own as a [`Role`], and its [`Schema`](crate::Schema) methods are [`Role::describe`] and
//! [`Role::build`]:
//!
//! ```ignore
//! use agentforge_plugin_sdk::role::Role;
//! use agentforge_plugin_sdk::serde_json::Value;
//! use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};
//!
//! const ROLE: Role = Role {
//!     name: "critic",
//!     description: "check the plan, read-only, and report what is wrong",
//!     shown: &["instructions", "plan"],
//!     graph: include_str!("../graph.json"),
//!     intro: "You are the critic of a value loop: ...",
//!     phases: &[("review", "")],
//!     budgets: &[("current_state", 10_000), ("total", 16_000)],
//!     success_criteria: &["The critique is reported with the report tool the instructions name"],
//!     inserts_files: false,
//! };
//!
//! pub struct Critic;
//!
//! impl Schema for Critic {
//!     fn describe() -> SchemaInfo {
//!         ROLE.describe()
//!     }
//!
//!     fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
//!         Ok(ROLE.build(&task))
//!     }
//! }
//!
//! export_schema!(Critic);
//! ```
//!
//! `current_state` is the brief ([`show_brief`]): each field present is a top-level key
//! of the same name, the role's own fields first ([`Role::shown`]), then the other known
//! fields in [`KNOWN`] order, then the fields no role knows, in the brief's order. Nothing
//! is dropped. A role that changes the workspace may have the host insert the files of
//! `task.files_expected` ([`insert_files`]).

use serde_json::{json, Value};

use crate::{CurrentState, SchemaInfo};

/// Every field a role's brief may have, in the order shown after the role's own.
pub const KNOWN: [&str; 13] = [
    "instructions",
    "vision",
    "prd",
    "discovery",
    "task",
    "plan",
    "verifications",
    "failing",
    "triage",
    "research",
    "vrc",
    "health",
    "findings",
];

/// Most files [`insert_files`] has the host insert: the host shows at most 16 per section.
pub const MAX_FILES: usize = 16;

/// A system prompt's lines after the role's paragraph: the task and where it stands.
const HEAD: &str = "\n\nYour task: {{ goal }}\nTask type: {{ task_type }}. Phase: {{ phase }} (step {{ step }} of {{ max_steps }}).";

/// A system prompt's last lines.
const FOOT: &str = "\n\nYou have no memory between steps: everything you know is in the context below.\n\nActions available: {{ actions | join(\", \") }}";

/// What a role's task type has of its own; the rest is this module's.
#[derive(Debug, Clone, Copy)]
pub struct Role {
    /// The task type, the role's name (`planner`, `qc_author`).
    pub name: &'static str,
    /// One line for `agentforge plugins list`.
    pub description: &'static str,
    /// The brief's fields this role reads, in the order shown: first in `current_state`,
    /// before the other [`KNOWN`] ones.
    pub shown: &'static [&'static str],
    /// The phase graph as JSON text (`include_str!("../graph.json")`); [`Role::describe`]
    /// panics if it is not JSON.
    pub graph: &'static str,
    /// The role in one paragraph (`You are the planner of a value loop: ...`): each
    /// system prompt's first.
    pub intro: &'static str,
    /// The phases that have a system prompt, with what to do in each: `("implement",
    /// "Make the smallest change...")`. An empty text adds nothing to the prompt (a
    /// read-only role's one `review` phase: `&[("review", "")]`).
    pub phases: &'static [(&'static str, &'static str)],
    /// Token budgets, by `[budget]` key (`current_state`, `total`); the others keep the
    /// project's values.
    pub budgets: &'static [(&'static str, u32)],
    /// Success criteria for tasks that list none.
    pub success_criteria: &'static [&'static str],
    /// Whether the host inserts the files of `task.files_expected` ([`insert_files`]).
    pub inserts_files: bool,
}

impl Role {
    /// The task type: [`Schema::describe`](crate::Schema::describe).
    pub fn describe(&self) -> SchemaInfo {
        SchemaInfo {
            name: self.name.into(),
            description: self.description.into(),
            budgets: self
                .budgets
                .iter()
                .map(|(key, tokens)| (key.to_string(), *tokens))
                .collect(),
            phase_graph: serde_json::from_str(self.graph).expect("graph.json is valid JSON"),
            prompts: self.prompts(),
            default_success_criteria: self
                .success_criteria
                .iter()
                .map(|c| c.to_string())
                .collect(),
        }
    }

    /// The system prompt of each of [`Role::phases`], named `<name>.<phase>.j2`: the
    /// role's paragraph, the task and where it stands, what to do in the phase (when
    /// there is something), the actions available.
    pub fn prompts(&self) -> Vec<(String, String)> {
        self.phases
            .iter()
            .map(|(phase, what)| {
                let gap = if what.is_empty() { "" } else { "\n\n" };
                let source = [self.intro, HEAD, gap, what, FOOT].concat();
                (format!("{}.{phase}.j2", self.name), source)
            })
            .collect()
    }

    /// The `current_state` section for `task`: its brief ([`show_brief`]), with the
    /// task's files inserted when the role [inserts them](Role::inserts_files).
    pub fn build(&self, task: &Value) -> CurrentState {
        let mut out = show_brief(task, self.shown);
        if self.inserts_files {
            insert_files(&mut out);
        }
        out
    }
}

/// The `current_state` section showing `task`'s brief (`inputs.brief`): its fields
/// `shown` first, then the other [`KNOWN`] ones, then the unknown ones in the brief's
/// order, each a top-level key of the same name. A brief that is not an object is shown
/// as `brief`; no brief (or `null`) is an empty section.
pub fn show_brief(task: &Value, shown: &[&str]) -> CurrentState {
    let mut out = CurrentState::new();
    let brief = match task.get("inputs").and_then(|i| i.get("brief")) {
        Some(Value::Object(b)) => b,
        None | Some(Value::Null) => return out,
        Some(other) => {
            out.set("brief", other.clone());
            return out;
        }
    };
    let known = shown.iter().chain(KNOWN.iter()).copied();
    let unknown = brief.keys().map(String::as_str);
    for key in known.chain(unknown) {
        if let Some(v) = brief.get(key).filter(|_| !out.json.contains_key(key)) {
            out.set(key, v.clone());
        }
    }
    out
}

/// Asks the host to insert, numbered, the files of the section's `task.files_expected`
/// (the strings among them; nothing when `task` is not an object). The task gets `files:
/// [{path}, ...]` (`files_expected` stays as it was) and the host sets each one's
/// `content` at `/task/files/<i>/content` (`null` when the file does not exist yet), at
/// most [`MAX_FILES`]; past them, `content` says to read the file. A task that already
/// has a `files` field keeps it; the list is then `files_expected_content`.
pub fn insert_files(out: &mut CurrentState) {
    let Some(Value::Object(task)) = out.json.get_mut("task") else {
        return;
    };
    let paths: Vec<String> = task
        .get("files_expected")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if paths.is_empty() {
        return;
    }
    let key = if task.contains_key("files") {
        "files_expected_content"
    } else {
        "files"
    };
    let not_shown = format!("(not shown: at most {MAX_FILES} files are inserted; read_file it)");
    let entries = paths.iter().enumerate().map(|(i, p)| {
        if i < MAX_FILES {
            json!({ "path": p })
        } else {
            json!({ "path": p, "content": not_shown })
        }
    });
    task.insert(key.to_string(), Value::Array(entries.collect()));
    for (i, p) in paths.iter().take(MAX_FILES).enumerate() {
        out.file(&format!("/task/{key}/{i}/content"), p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read-only role: one `review` phase with no text of its own.
    const READER: Role = Role {
        name: "reader",
        description: "read, and report it",
        shown: &["instructions", "failing", "triage", "research", "task"],
        graph: r#"{"initial": "review", "phases": [{"name": "review"}]}"#,
        intro: "You are the reader.",
        phases: &[("review", "")],
        budgets: &[("current_state", 10_600), ("total", 16_000)],
        success_criteria: &["It is read", "It is reported"],
        inserts_files: false,
    };

    /// A role that changes the workspace: two phases, the task's files inserted.
    const WRITER: Role = Role {
        name: "writer",
        phases: &[("analyze", "Read."), ("implement", "Write.")],
        inserts_files: true,
        ..READER
    };

    /// The section's keys, in order.
    fn keys(out: &CurrentState) -> Vec<&str> {
        out.json.keys().map(String::as_str).collect()
    }

    /// A task whose brief is `brief`.
    fn briefed(brief: Value) -> Value {
        json!({"inputs": {"brief": brief}})
    }

    #[test]
    fn describe_is_the_roles_own_with_a_prompt_per_phase() {
        let info = READER.describe();
        assert_eq!(info.name, "reader");
        assert_eq!(info.description, "read, and report it");
        assert_eq!(
            info.budgets,
            [("current_state".into(), 10_600), ("total".into(), 16_000)]
        );
        assert_eq!(info.phase_graph["phases"][0]["name"], "review");
        assert_eq!(
            info.default_success_criteria,
            ["It is read", "It is reported"]
        );
        // A phase without text: the role, the task and where it stands, the actions.
        assert_eq!(info.prompts.len(), 1);
        assert_eq!(info.prompts[0].0, "reader.review.j2");
        assert_eq!(
            info.prompts[0].1,
            ["You are the reader.", HEAD, FOOT].concat()
        );
        for part in ["{{ goal }}", "{{ phase }}", "{{ max_steps }}", "{{ actions"] {
            assert!(info.prompts[0].1.contains(part), "{part}");
        }
        // With text: it comes after the task, as a paragraph of its own.
        let prompts = WRITER.prompts();
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["writer.analyze.j2", "writer.implement.j2"]);
        let head = ["You are the reader.", HEAD].concat();
        assert_eq!(prompts[1].1, [&head, "\n\nWrite.", FOOT].concat());
    }

    #[test]
    fn the_roles_fields_first_then_the_other_known_then_the_unknown() {
        // The brief lists an unknown field, every known one in reverse, another unknown.
        let mut brief = json!({"zz_unknown": {"kept": true}});
        for k in KNOWN.iter().rev() {
            brief[*k] = json!(format!("the {k}"));
        }
        brief["also_unknown"] = json!([1, 2]);
        let out = show_brief(&briefed(brief), READER.shown);
        assert_eq!(
            keys(&out),
            [
                "instructions",
                "failing",
                "triage",
                "research",
                "task",
                "vision",
                "prd",
                "discovery",
                "plan",
                "verifications",
                "vrc",
                "health",
                "findings",
                "zz_unknown",
                "also_unknown"
            ]
        );
        for k in KNOWN {
            assert_eq!(out.json[k], json!(format!("the {k}")));
        }
        assert_eq!(out.json["zz_unknown"], json!({"kept": true}));
        assert_eq!(out.json["also_unknown"], json!([1, 2]));
        assert!(out.files.is_empty());
    }

    #[test]
    fn only_the_fields_present_are_shown() {
        let brief = json!({"extra": {"a": 1}, "plan": [], "instructions": "call report_x"});
        let out = READER.build(&briefed(brief));
        assert_eq!(keys(&out), ["instructions", "plan", "extra"]);
        assert_eq!(out.json["instructions"], "call report_x");
        assert!(READER.build(&json!({})).json.is_empty());
        assert!(READER.build(&briefed(Value::Null)).json.is_empty());
        let odd = READER.build(&briefed(json!("text")));
        assert_eq!(keys(&odd), ["brief"]);
        assert_eq!(odd.json["brief"], "text");
    }

    #[test]
    fn the_expected_files_are_inserted_by_the_host_when_the_role_says_so() {
        let task = json!({"id": "T1", "files_expected": ["src/a.rs", 3, "src/new.rs"]});
        let out = WRITER.build(&briefed(json!({ "task": task })));
        let t = &out.json["task"];
        assert_eq!(t["id"], "T1");
        assert_eq!(t["files_expected"], json!(["src/a.rs", 3, "src/new.rs"]));
        assert_eq!(
            t["files"],
            json!([{"path": "src/a.rs"}, {"path": "src/new.rs"}])
        );
        assert_eq!(
            out.files,
            [
                ("/task/files/0/content".into(), "src/a.rs".into()),
                ("/task/files/1/content".into(), "src/new.rs".into()),
            ]
        );
        // A role that does not insert them shows the task as it is.
        let out = READER.build(&briefed(json!({ "task": task })));
        assert_eq!(out.json["task"], task);
        assert!(out.files.is_empty());
    }

    #[test]
    fn at_most_16_files_and_a_files_field_of_the_task_is_kept() {
        let paths: Vec<String> = (0..17).map(|i| format!("src/f{i}.rs")).collect();
        let task = json!({"files": "mine", "files_expected": paths});
        let out = WRITER.build(&briefed(json!({ "task": task })));
        let t = &out.json["task"];
        assert_eq!(t["files"], "mine");
        let listed = t["files_expected_content"].as_array().unwrap();
        assert_eq!(listed.len(), 17);
        assert!(listed[15].get("content").is_none());
        assert!(listed[16]["content"]
            .as_str()
            .unwrap()
            .contains("read_file"));
        assert_eq!(out.files.len(), MAX_FILES);
        assert_eq!(
            out.files[15],
            (
                "/task/files_expected_content/15/content".to_string(),
                "src/f15.rs".to_string()
            )
        );
        // No task, a task that is not an object, no path: nothing to insert.
        for brief in [
            json!({}),
            json!({"task": "T1"}),
            json!({"task": {"files_expected": [1, null]}}),
            json!({"task": {"files_expected": "src/a.rs"}}),
        ] {
            let out = WRITER.build(&briefed(brief.clone()));
            assert!(out.files.is_empty(), "{brief}");
            assert_eq!(Value::Object(out.json), brief);
        }
    }
}
