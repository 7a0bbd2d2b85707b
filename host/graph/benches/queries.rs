//! The benchmark's queries: realistic steps against the generated traces.

use agentforge_graph::PrecedentQuery;

/// (name, query)
pub fn queries() -> Vec<(&'static str, PrecedentQuery)> {
    vec![
        (
            "code_implement_target",
            PrecedentQuery {
                task_id: "task-new-1".into(),
                task_type: "code".into(),
                phase: "implement".into(),
                role: None,
                targets: vec!["src/net/client.rs".into(), "src/net/retry.rs".into()],
                text: "Add retry with exponential backoff to the HTTP client. Subtask: \
                       implement the retry loop in src/net/client.rs and cover it with tests"
                    .into(),
                limit: 5,
            },
        ),
        (
            "bugfix_verify_same_task",
            PrecedentQuery {
                task_id: "task-01234".into(),
                task_type: "bugfix".into(),
                phase: "verify".into(),
                role: None,
                targets: vec!["tests/parser_parse.rs".into()],
                text: "Fix the panic when parsing an empty config file. Subtask: make the \
                       failing test pass, run cargo test, then call complete"
                    .into(),
                limit: 5,
            },
        ),
        (
            "builder_role",
            PrecedentQuery {
                task_id: "task-new-2".into(),
                task_type: "builder".into(),
                phase: "implement".into(),
                role: Some("builder".into()),
                targets: vec!["src/auth/view.rs".into(), "src/auth/handler.rs".into()],
                text: "Build the login form with input validation and error messages".into(),
                limit: 8,
            },
        ),
        (
            "common_words_only",
            PrecedentQuery {
                task_id: "task-new-3".into(),
                task_type: "code".into(),
                phase: "verify".into(),
                role: None,
                targets: vec![],
                text: "Agent called complete: run cargo test, edit the file, then complete \
                       the task after the check passes"
                    .into(),
                limit: 5,
            },
        ),
    ]
}
