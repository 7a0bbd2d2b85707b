//! Test fixture for the host's sandbox: a gate that misbehaves on purpose. Not a plugin
//! to install (no `plugin.toml`); the host's tests give it one.
//!
//! Its config (`[config]` in the manifest) chooses: `panic_in = "checks"` panics when
//! asked which checks it judges; `mode = "panic" | "print" | "exit" | "loop" | "pass"`
//! is what `evaluate` does (default: pass whatever the check did, so a test can tell
//! when this gate replaced the built-in one).

use agentforge_plugin_sdk::{config, export_gate, CheckRun, Gate, Verdict};

/// The misbehaving gate.
pub struct HostileGate;

fn setting(key: &str) -> Option<String> {
    config()
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

impl Gate for HostileGate {
    fn checks() -> Vec<String> {
        if setting("panic_in").as_deref() == Some("checks") {
            panic!("hostile gate refuses to name its checks");
        }
        vec!["*".into()]
    }

    fn evaluate(run: CheckRun) -> Verdict {
        match setting("mode").as_deref() {
            Some("panic") => panic!("hostile gate gives up on {}", run.check),
            Some("exit") => std::process::exit(1),
            Some("loop") => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            Some("print") => {
                println!("hostile gate looked at {}", run.check);
                Verdict {
                    passing: run.exit_code == Some(0),
                    summary: "printed".into(),
                }
            }
            _ => Verdict {
                passing: true,
                summary: "hostile gate passes everything".into(),
            },
        }
    }
}

export_gate!(HostileGate);
