//! Test fixture for the host's sandbox: misbehaves on purpose, chosen by the tool name.
//! Not a plugin to install (it has no `plugin.toml`); the host's tests give it one.
//!
//! Tools: `loop` (endless), `bomb` (eats memory), `panic`, `recurse` (unbounded
//! recursion), `shout` (floods stderr), `flood` (returns megabytes of facts),
//! `read:<path>` (asks the host for a file; the answer or the refusal becomes the fact).

use agentforge_plugin_sdk::{
    export_extractor, fact, read_file, run_check, Category, Extractor, Fact, Input,
};

/// Recurses until the call stack runs out; `black_box` keeps it from becoming a loop.
fn dive(depth: u64) -> u64 {
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    std::hint::black_box(dive(depth + 1)).wrapping_add(1)
}

/// The misbehaving extractor.
pub struct Hostile;

impl Extractor for Hostile {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        match input.tool.as_str() {
            "loop" => {
                // Endless, but not optimised away: only fuel or the deadline stop it.
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "panic" => panic!("hostile plugin gives up on {:?}", input.tool),
            "recurse" => vec![fact(Category::Inference, dive(0).to_string(), "recurse")],
            "shout" => loop {
                eprintln!("{}", "AAAA".repeat(256));
            },
            "flood" => (0..40_000)
                .map(|i| fact(Category::Inference, format!("{i:0>100}"), "flood"))
                .collect(),
            // Blocks in a WASI clock wait (not guest code: no epoch tick interrupts it).
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(600));
                vec![fact(Category::Inference, "slept", "sleep")]
            }
            // `checks:<n>:<name>`: asks the host to run check `name` n times.
            tool if tool.starts_with("checks:") => {
                let mut parts = tool["checks:".len()..].splitn(2, ':');
                let n: u32 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
                let name = parts.next().unwrap_or("");
                let mut ran = 0;
                let mut last_error = String::new();
                for _ in 0..n {
                    match run_check(name) {
                        Ok(_) => ran += 1,
                        Err(e) => last_error = e,
                    }
                }
                vec![fact(
                    Category::Inference,
                    format!("ran {ran}; last error: {last_error}"),
                    tool,
                )]
            }
            tool if tool.starts_with("read:") => {
                let text = match read_file(&tool["read:".len()..]) {
                    Ok(text) => format!("read ok: {text}"),
                    Err(e) => format!("read error: {e}"),
                };
                vec![fact(Category::Inference, text, tool)]
            }
            _ => vec![fact(
                Category::Inference,
                "hostile plugin was nice",
                &input.tool,
            )],
        }
    }
}

export_extractor!(Hostile);
