//! Gates and guards: the traits a plugin implements and the macros that export them.

pub use crate::{Decision, Fact, Verdict};

/// One check run handed to a gate.
#[derive(Debug, Clone)]
pub struct CheckRun {
    /// The check's name (`tests`, `clippy`...).
    pub check: String,
    /// Exit status; `None` when the command was killed (signal, timeout).
    pub exit_code: Option<i32>,
    /// Its output (stdout and stderr).
    pub output: String,
    /// Facts the extractors drew from the output.
    pub facts: Vec<Fact>,
}

/// What a gate plugin implements; export it with [`crate::export_gate!`].
pub trait Gate {
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
            fn evaluate(
                check: ::std::string::String,
                exit_code: ::std::option::Option<i32>,
                output: ::std::string::String,
                facts: ::std::vec::Vec<$crate::Fact>,
            ) -> $crate::Verdict {
                <$ty as $crate::Gate>::evaluate($crate::CheckRun {
                    check,
                    exit_code,
                    output,
                    facts,
                })
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
                state_json: ::std::string::String,
            ) -> $crate::Decision {
                <$ty as $crate::Guard>::check($crate::ActionCheck {
                    action,
                    target,
                    arguments_json,
                    state_json,
                })
            }
        }

        $crate::guard_bindings::__export_guard_world!(__AgentforgeGuard);
    };
}
