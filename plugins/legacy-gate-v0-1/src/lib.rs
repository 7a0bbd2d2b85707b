//! Test fixture: a gate built against the frozen `agentforge:plugin@0.1.0` contract
//! (`wit/snapshots/0.1.0`) with wit-bindgen directly, as a plugin written before 0.2.0
//! was. The host must still load it (its manifest says `api = "0.1.0"`) and call it
//! through its 0.1.0 binding: `evaluate(check, exit-code, output, facts)`, no `checks`.
//!
//! A check passes iff it exited 0; the summary is `legacy gate: exit <code>` or
//! `legacy gate: killed` (0.1.0 cannot tell a timeout from another kill).

// The generated export shim takes `evaluate`'s flattened parameters.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "../../wit/snapshots/0.1.0",
    world: "agentforge:plugin/gate@0.1.0",
});

// The world `use`s `fact` and `verdict`: generated at the top level as `Fact`, `Verdict`.
use agentforge::plugin::host::{log, LogLevel};

struct LegacyGate;

impl Guest for LegacyGate {
    fn evaluate(
        check: String,
        exit_code: Option<i32>,
        _output: String,
        _facts: Vec<Fact>,
    ) -> Verdict {
        // Uses the 0.1.0 host too, so its import stays in the component.
        log(LogLevel::Debug, &format!("legacy gate judges `{check}`"));
        let summary = match exit_code {
            Some(code) => format!("legacy gate: exit {code}"),
            None => "legacy gate: killed".to_string(),
        };
        Verdict {
            passing: exit_code == Some(0),
            summary,
        }
    }
}

export!(LegacyGate);
