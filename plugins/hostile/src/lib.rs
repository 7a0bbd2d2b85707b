//! Test fixture for the host's sandbox: misbehaves on purpose, chosen by the tool name.
//! Not a plugin to install (it has no `plugin.toml`); the host's tests give it one.

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};

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
            _ => vec![fact(
                Category::Inference,
                "hostile plugin was nice",
                &input.tool,
            )],
        }
    }
}

export_extractor!(Hostile);
