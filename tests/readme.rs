//! The README's command table against the binary's own `--help`, so neither can drift:
//! every (sub)command `agentforge --help` lists has a row, and every row names a command
//! the binary has.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agentforge"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run agentforge --help");
    assert!(out.status.success(), "agentforge {args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The names in the `Commands:` section of a clap help text (without `help`).
fn listed(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command path of the binary, down to the leaves: `run`, `task new`,
/// `plugins list`, `plugins cache clean`...
fn binary_commands() -> BTreeSet<String> {
    fn leaves(path: Vec<String>, all: &mut BTreeSet<String>) {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let subs = listed(&help(&args));
        if subs.is_empty() {
            all.insert(path.join(" "));
        }
        for s in subs {
            let mut longer = path.clone();
            longer.push(s);
            leaves(longer, all);
        }
    }
    let mut all = BTreeSet::new();
    for top in listed(&help(&[])) {
        leaves(vec![top], &mut all);
    }
    all
}

/// The command paths in the first cell of each row of README's `## Commands` table.
fn readme_commands() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let table = readme
        .split("## Commands")
        .nth(1)
        .expect("README has a `## Commands` section");
    let mut all = BTreeSet::new();
    for row in table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
    {
        let cell = row
            .trim_start_matches('|')
            .split(" | ")
            .next()
            .unwrap_or("");
        // `agentforge task list` / `task show <id>`: one row, two commands.
        for code in cell.split('`').skip(1).step_by(2) {
            let words: Vec<&str> = code
                .split_whitespace()
                .skip_while(|w| *w == "agentforge")
                .take_while(|w| {
                    w.starts_with(|c: char| c.is_ascii_lowercase())
                        && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                })
                .collect();
            if !words.is_empty() {
                all.insert(words.join(" "));
            }
        }
    }
    all
}

#[test]
fn readme_command_table_matches_help() {
    let binary = binary_commands();
    let readme = readme_commands();
    assert!(
        binary.len() >= 8,
        "parsed too few commands from --help: {binary:?}"
    );
    let missing: Vec<_> = binary.difference(&readme).collect();
    let stale: Vec<_> = readme.difference(&binary).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "README.md's command table and `agentforge --help` differ.\n\
         commands without a README row: {missing:?}\n\
         README rows for no command: {stale:?}\n\
         Update the `## Commands` table in README.md."
    );
}
