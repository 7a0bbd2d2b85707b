//! `agentforge learn`, `agentforge patterns`, `agentforge guards ...` and
//! `agentforge traces`: the command side of [`agentforge::learning`] (seed 003, layer 3).

use anyhow::anyhow;
use clap::Subcommand;

use agentforge::config::Config;
use agentforge::graph::{Pattern, Rule, RuleStatus};
use agentforge::learning::{now, Learning};
use agentforge::state_store::TaskStore;

use super::{failed, usage, workspace_root, Failure, Global};

/// `agentforge guards <command>`: the rules learned from patterns.
#[derive(Subcommand, Debug)]
pub enum GuardsCommand {
    /// List the proposed rules, waiting for a person.
    Proposed,
    /// List every rule (proposed, approved, rejected).
    List,
    /// Approve a proposed rule: the `guard-learned-rules` guard enforces it from the next run.
    Approve {
        /// The rule's id (`agentforge guards proposed`).
        id: i64,
        /// Who approves (default: $USER).
        #[arg(long)]
        by: Option<String>,
    },
    /// Reject a proposed rule (it is proposed again only if its pattern doubles).
    Reject {
        /// The rule's id.
        id: i64,
        /// Why it is wrong (kept with the rule).
        #[arg(long)]
        reason: String,
        /// Who rejects (default: $USER).
        #[arg(long)]
        by: Option<String>,
    },
}

/// The workspace's trace database, with the project's `[learning]` settings.
fn learning(g: &Global) -> Result<Learning, Failure> {
    let root = workspace_root(g)?;
    let (config, _) = Config::load(g.config.as_deref(), &root).map_err(usage)?;
    config.validate("agentforge.toml").map_err(usage)?;
    if !config.learning.enabled {
        return Err(usage(anyhow!(
            "learning is off: set [learning] enabled = true in agentforge.toml"
        )));
    }
    Ok(Learning::new(&root, config.learning))
}

fn person(by: &Option<String>) -> String {
    by.clone()
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "a person".to_string())
}

/// `agentforge learn`: copies every task's traces from its log (what a failed copy left
/// out), embeds the traces without a vector (with `[learning.embeddings]`), groups them
/// into patterns and proposes rules.
pub fn learn(g: &Global, json: bool) -> Result<u8, Failure> {
    let l = learning(g)?;
    let store = TaskStore::new(&workspace_root(g)?);
    let mut copied = 0;
    for id in store.list().map_err(failed)? {
        let dir = store.open(&id).map_err(failed)?;
        let (Ok(spec), Ok(records)) = (dir.spec(), dir.read_actions()) else {
            eprintln!("warning: task `{id}`: its spec or log cannot be read; skipped");
            continue;
        };
        copied += l.sync_log(&spec, &records).map_err(failed)?;
    }
    // Traces without a vector of the configured model (recorded while the endpoint was
    // down or not configured, or before a model change): embedded in batches. Best
    // effort: the patterns are learnt whatever the endpoint does.
    let embedded = match l.backfill() {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "warning: {e}; the traces without a vector are embedded by the next `agentforge learn`"
            );
            None
        }
    };
    let report = l.learn().map_err(failed)?;
    if json {
        let v = serde_json::json!({
            "embeddings": embedded,
            "copied_from_logs": copied,
            "traces": report.traces,
            "patterns": report.patterns,
            "new_patterns": report.new_patterns,
            "proposed": report.proposed,
        });
        println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
        return Ok(0);
    }
    println!(
        "{} traces in {} patterns ({} new); {} copied from task logs",
        report.traces, report.patterns, report.new_patterns, copied
    );
    if let Some(e) = &embedded {
        println!(
            "{} traces embedded now; {} have a vector of {} ({} dimensions)",
            e.embedded, e.total, e.model, e.dimensions
        );
    }
    for r in &report.proposed {
        println!("proposed: {}", rule_line(r));
    }
    if !report.proposed.is_empty() {
        println!("approve with `agentforge guards approve <id>`, or reject with `agentforge guards reject <id> --reason ...`");
    }
    Ok(0)
}

/// `agentforge patterns`.
pub fn patterns(g: &Global, json: bool) -> Result<u8, Failure> {
    let l = learning(g)?;
    let patterns: Vec<Pattern> = if l.path().exists() {
        l.with_graph(|g| g.patterns()).map_err(failed)?
    } else {
        Vec::new()
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&patterns).map_err(failed)?
        );
        return Ok(0);
    }
    if patterns.is_empty() {
        println!("no patterns yet (run `agentforge learn` after tasks that were corrected)");
    }
    for p in &patterns {
        println!(
            "#{:<4} {:>4}x {:>3} tasks  {}  (first {}, last {})",
            p.id, p.count, p.task_count, p.description, p.first_seen, p.last_seen
        );
    }
    Ok(0)
}

fn rule_line(r: &Rule) -> String {
    let rule = &r.rule;
    let on = rule
        .target_glob
        .as_deref()
        .map(|g| format!(" on {g}"))
        .unwrap_or_default();
    format!(
        "#{} [{}] {} `{}`{on} when {}: {} (pattern: {})",
        r.id,
        r.status.as_str(),
        rule.effect.as_str(),
        rule.action,
        rule.condition.as_str(),
        rule.reason,
        rule.pattern
    )
}

/// `agentforge guards ...`.
pub fn guards(g: &Global, cmd: &GuardsCommand, json: bool) -> Result<u8, Failure> {
    let l = learning(g)?;
    let list = |status: Option<RuleStatus>| -> Result<u8, Failure> {
        let rules: Vec<Rule> = if l.path().exists() {
            l.with_graph(|g| g.rules(status)).map_err(failed)?
        } else {
            Vec::new()
        };
        if json {
            println!("{}", serde_json::to_string_pretty(&rules).map_err(failed)?);
        } else if rules.is_empty() {
            println!("no rules");
        } else {
            for r in &rules {
                println!("{}", rule_line(r));
            }
        }
        Ok(0)
    };
    match cmd {
        GuardsCommand::Proposed => list(Some(RuleStatus::Proposed)),
        GuardsCommand::List => list(None),
        GuardsCommand::Approve { id, by } => {
            let r = l
                .with_graph(|g| g.approve_rule(*id, &person(by), &now()))
                .map_err(usage)?;
            println!("approved: {}", rule_line(&r));
            println!("`guard-learned-rules` enforces it from the next run or resume");
            Ok(0)
        }
        GuardsCommand::Reject { id, reason, by } => {
            let r = l
                .with_graph(|g| g.reject_rule(*id, &person(by), reason, &now()))
                .map_err(usage)?;
            println!("rejected: {}", rule_line(&r));
            Ok(0)
        }
    }
}

/// `agentforge traces`: the newest traces, of one task or all.
pub fn traces(g: &Global, task: Option<&str>, limit: usize, json: bool) -> Result<u8, Failure> {
    let l = learning(g)?;
    let traces = if l.path().exists() {
        l.with_graph(|g| g.traces(task, limit)).map_err(failed)?
    } else {
        Vec::new()
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&traces).map_err(failed)?);
        return Ok(0);
    }
    for t in &traces {
        let e = &t.event;
        println!(
            "{} {} step {:<4} {:<17} {:<28} {}: {}",
            t.timestamp,
            t.context.task_id,
            t.context.step,
            e.source.as_str(),
            e.enforcer,
            e.what_happened,
            e.why
        );
    }
    Ok(0)
}
