//! Gates and guards: the traits a plugin implements and the macros that export them.

pub use crate::{Decision, Fact, Verdict};

/// One check run: handed to a gate, or returned by [`crate::run_check`].
#[derive(Debug, Clone)]
pub struct CheckRun {
    /// The check's name (`tests`, `clippy`...).
    pub check: String,
    /// Exit status; `None` when the command was killed (signal, timeout).
    pub exit_code: Option<i32>,
    /// The command was killed by its timeout.
    pub timed_out: bool,
    /// Its output (stdout and stderr, capped by the host: head and tail kept).
    pub output: String,
    /// Facts the extractors drew from the output (empty from [`crate::run_check`]).
    pub facts: Vec<Fact>,
}

/// A contract `check-run` and its facts as the SDK's [`CheckRun`]. Used by the macros.
#[doc(hidden)]
pub fn __check_run(
    run: crate::common_bindings::agentforge::plugin::types::CheckRun,
    facts: Vec<Fact>,
) -> CheckRun {
    CheckRun {
        check: run.check,
        exit_code: run.exit_code,
        timed_out: run.timed_out,
        output: run.output,
        facts,
    }
}

/// What a gate plugin implements; export it with [`crate::export_gate!`].
pub trait Gate {
    /// The checks this gate judges (`tests`, `clippy`...); `"*"` means any. For each
    /// check the host asks the gate naming it exactly, else a `"*"` gate.
    fn checks() -> Vec<String>;
    /// The verdict on one check run.
    fn evaluate(run: CheckRun) -> Verdict;
}

/// One action handed to a guard.
#[derive(Debug, Clone)]
pub struct ActionCheck {
    /// Tool name (`edit_file`, `complete`, `set_field`...).
    pub action: String,
    /// Main target (a path, a check name), when the action has one.
    pub target: Option<String>,
    /// The action's arguments, a JSON object as text.
    pub arguments_json: String,
    /// The task (`task.yaml`, with its `role`) as JSON text.
    pub task_json: String,
    /// The task's current state (`state.yaml`) as JSON text.
    pub state_json: String,
}

/// What a guard plugin implements; export it with [`crate::export_guard!`].
pub trait Guard {
    /// Allow, warn or deny one action.
    fn check(input: ActionCheck) -> Decision;
}

/// Exports a type implementing [`Gate`] as the plugin's `gate` world.
#[cfg(feature = "gate")]
#[macro_export]
macro_rules! export_gate {
    ($ty:ty) => {
        #[doc(hidden)]
        pub struct __AgentforgeGate;

        impl $crate::gate_bindings::Guest for __AgentforgeGate {
            fn checks() -> ::std::vec::Vec<::std::string::String> {
                <$ty as $crate::Gate>::checks()
            }

            fn evaluate(
                run: $crate::common_bindings::agentforge::plugin::types::CheckRun,
                facts: ::std::vec::Vec<$crate::Fact>,
            ) -> $crate::Verdict {
                <$ty as $crate::Gate>::evaluate($crate::__check_run(run, facts))
            }
        }

        $crate::gate_bindings::__export_gate_world!(__AgentforgeGate);
    };
}

/// Exports a type implementing [`Guard`] as the plugin's `guard` world.
#[cfg(feature = "guard")]
#[macro_export]
macro_rules! export_guard {
    ($ty:ty) => {
        #[doc(hidden)]
        pub struct __AgentforgeGuard;

        impl $crate::guard_bindings::Guest for __AgentforgeGuard {
            fn check(
                action: ::std::string::String,
                target: ::std::option::Option<::std::string::String>,
                arguments_json: ::std::string::String,
                task_json: ::std::string::String,
                state_json: ::std::string::String,
            ) -> $crate::Decision {
                <$ty as $crate::Guard>::check($crate::ActionCheck {
                    action,
                    target,
                    arguments_json,
                    task_json,
                    state_json,
                })
            }
        }

        $crate::guard_bindings::__export_guard_world!(__AgentforgeGuard);
    };
}
