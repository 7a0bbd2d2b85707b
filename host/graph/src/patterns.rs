//! Patterns: the traces grouped by (source, enforcer, action), regrouped by
//! [`Graph::learn`], which then proposes rules ([`crate::rules`]).

use std::collections::{HashMap, HashSet};

use agentforge_core::trace::TraceSource;
use rusqlite::{params, Transaction};
use serde::{Deserialize, Serialize};

use crate::rules::{propose, Rule};
use crate::traces::{parse_source, parsed};
use crate::{Graph, GraphError};

/// How many task ids a pattern lists ([`Pattern::tasks`]).
pub(crate) const PATTERN_TASKS: usize = 20;

/// When `learn` proposes a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LearnSettings {
    /// A pattern needs at least this many traces (default 3).
    pub propose_threshold: u32,
    /// ... in at least this many distinct tasks (default 1).
    pub min_tasks: u32,
}

impl Default for LearnSettings {
    fn default() -> Self {
        LearnSettings {
            propose_threshold: 3,
            min_tasks: 1,
        }
    }
}

/// What one `learn` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnReport {
    /// The traces grouped (approvals are not).
    pub traces: u64,
    /// The patterns there are now.
    pub patterns: usize,
    /// How many of them this `learn` saw first.
    pub new_patterns: usize,
    /// The rules it proposed.
    pub proposed: Vec<Rule>,
}

/// Traces of one source, enforcer and action, as the last `learn` grouped them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    /// Stable across `learn`s.
    pub id: i64,
    /// `source:enforcer:action`.
    pub key: String,
    /// The traces' source.
    pub source: TraceSource,
    /// Their enforcer.
    pub enforcer: String,
    /// Their action.
    pub action: String,
    /// The target when all traces have the same one, `dir/**` when they all lie in one
    /// folder, else (or when some trace has no target) none.
    pub target_glob: Option<String>,
    /// How many traces.
    pub count: u64,
    /// The distinct tasks, most recently seen first, at most 20.
    pub tasks: Vec<String>,
    /// How many distinct tasks.
    pub task_count: u64,
    /// The earliest trace's timestamp.
    pub first_seen: String,
    /// The latest trace's timestamp.
    pub last_seen: String,
    /// The most frequent `why` (the latest among equals).
    pub example_why: String,
    /// One line: "guard-verify-implementation denied `complete` 5 times in 2 tasks".
    pub description: String,
}

impl Graph {
    /// Regroups all traces into patterns (an upsert: a pattern keeps its id) and proposes a
    /// rule for every pattern with at least `settings.propose_threshold` traces in at least
    /// `settings.min_tasks` tasks that has none yet (proposed, approved or rejected; a
    /// rejected one's pattern is proposed again once its count has doubled since the
    /// rejection). `now` (RFC 3339) dates the proposals. One transaction.
    pub fn learn(
        &mut self,
        settings: &LearnSettings,
        now: &str,
    ) -> Result<LearnReport, GraphError> {
        let tx = self.write()?;
        let (traces, patterns, new_patterns) = regroup(&tx)?;
        let proposed = propose(&tx, settings, now)?;
        tx.commit()?;
        Ok(LearnReport {
            traces,
            patterns,
            new_patterns,
            proposed,
        })
    }

    /// The patterns as the last `learn` grouped them, the most frequent first.
    pub fn patterns(&self) -> Result<Vec<Pattern>, GraphError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, key, source, enforcer, action, target_glob, count, tasks, task_count, \
             first_seen, last_seen, example_why, description FROM patterns \
             ORDER BY count DESC, key",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Pattern {
                id: r.get(0)?,
                key: r.get(1)?,
                source: parsed(r, 2, parse_source)?,
                enforcer: r.get(3)?,
                action: r.get(4)?,
                target_glob: r.get(5)?,
                count: r.get::<_, i64>(6)?.max(0) as u64,
                tasks: parsed(r, 7, |s| serde_json::from_str(s).ok())?,
                task_count: r.get::<_, i64>(8)?.max(0) as u64,
                first_seen: r.get(9)?,
                last_seen: r.get(10)?,
                example_why: r.get(11)?,
                description: r.get(12)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

/// A (time, id) position: what "earlier" and "later" mean for traces.
type At = (i64, i64);

/// One pattern being grouped.
struct Group {
    source: String,
    enforcer: String,
    action: String,
    count: u64,
    /// Task -> when it was last seen.
    tasks: HashMap<String, At>,
    /// The lexicographically smallest and largest targets: their common folder is every
    /// target's.
    min_target: Option<String>,
    max_target: Option<String>,
    untargeted: bool,
    first: (At, String),
    last: (At, String),
    /// Text -> (how often, last seen).
    whys: HashMap<String, (u64, At)>,
    corrects: HashMap<String, (u64, At)>,
}

/// Regroups every trace that belongs to a pattern; returns (traces, patterns, new patterns).
fn regroup(tx: &Transaction<'_>) -> Result<(u64, usize, usize), GraphError> {
    let mut groups: HashMap<String, Group> = HashMap::new();
    let mut traces = 0u64;
    {
        let mut stmt = tx.prepare(
            "SELECT id, pattern_key, source, enforcer, action, target, task_id, time_ms, \
             timestamp, why, what_was_correct FROM traces WHERE pattern_key IS NOT NULL",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            traces += 1;
            let at: At = (r.get(7)?, r.get(0)?);
            let key: String = r.get(1)?;
            let timestamp: String = r.get(8)?;
            let g = match groups.get_mut(&key) {
                Some(g) => g,
                None => groups.entry(key).or_insert(Group {
                    source: r.get(2)?,
                    enforcer: r.get(3)?,
                    action: r.get(4)?,
                    count: 0,
                    tasks: HashMap::new(),
                    min_target: None,
                    max_target: None,
                    untargeted: false,
                    first: (at, timestamp.clone()),
                    last: (at, timestamp.clone()),
                    whys: HashMap::new(),
                    corrects: HashMap::new(),
                }),
            };
            g.count += 1;
            let task: String = r.get(6)?;
            let seen = g.tasks.entry(task).or_insert(at);
            *seen = (*seen).max(at);
            match r.get::<_, Option<String>>(5)? {
                None => g.untargeted = true,
                Some(t) => {
                    if g.min_target.as_ref().is_none_or(|m| t < *m) {
                        g.min_target = Some(t.clone());
                    }
                    if g.max_target.as_ref().is_none_or(|m| t > *m) {
                        g.max_target = Some(t);
                    }
                }
            }
            if at < g.first.0 {
                g.first = (at, timestamp.clone());
            }
            if at > g.last.0 {
                g.last = (at, timestamp);
            }
            for (map, text) in [(&mut g.whys, r.get(9)?), (&mut g.corrects, r.get(10)?)] {
                let e = map.entry(text).or_insert((0, at));
                e.0 += 1;
                e.1 = e.1.max(at);
            }
        }
    }
    let known: HashSet<String> = {
        let mut stmt = tx.prepare("SELECT key FROM patterns")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut upsert = tx.prepare(
        "INSERT INTO patterns (key, source, enforcer, action, target_glob, count, tasks, \
         task_count, first_seen, last_seen, example_why, example_correct, description) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
         ON CONFLICT (key) DO UPDATE SET target_glob = excluded.target_glob, \
         count = excluded.count, tasks = excluded.tasks, task_count = excluded.task_count, \
         first_seen = excluded.first_seen, last_seen = excluded.last_seen, \
         example_why = excluded.example_why, example_correct = excluded.example_correct, \
         description = excluded.description",
    )?;
    let mut new_patterns = 0;
    let patterns = groups.len();
    for (key, g) in groups {
        if !known.contains(&key) {
            new_patterns += 1;
        }
        let source = parse_source(&g.source);
        let target_glob = if g.untargeted {
            None
        } else {
            target_glob(g.min_target.as_deref(), g.max_target.as_deref())
        };
        let task_count = g.tasks.len() as u64;
        let mut tasks: Vec<(String, At)> = g.tasks.into_iter().collect();
        tasks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        tasks.truncate(PATTERN_TASKS);
        let tasks: Vec<String> = tasks.into_iter().map(|(t, _)| t).collect();
        let description = describe(
            source,
            &g.enforcer,
            &g.action,
            target_glob.as_deref(),
            g.count,
            task_count,
        );
        upsert.execute(params![
            key,
            g.source,
            g.enforcer,
            g.action,
            target_glob,
            g.count as i64,
            serde_json::to_string(&tasks).unwrap_or_else(|_| "[]".into()),
            task_count as i64,
            g.first.1,
            g.last.1,
            most_frequent(g.whys),
            most_frequent(g.corrects),
            description,
        ])?;
    }
    Ok((traces, patterns, new_patterns))
}

/// The most frequent text, the latest seen among equals.
fn most_frequent(texts: HashMap<String, (u64, At)>) -> String {
    texts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1))
        .map(|(t, _)| t)
        .unwrap_or_default()
}

/// The glob of targets whose lexicographic extremes are `min` and `max`: the target when
/// they are equal (escaped, so `src/[id].rs` matches only itself), `dir/**` for the
/// deepest folder every target is in, else none.
pub(crate) fn target_glob(min: Option<&str>, max: Option<&str>) -> Option<String> {
    let (min, max) = (min?, max?);
    if min == max {
        return Some(globset::escape(min));
    }
    // The common prefix of the extremes is every target's (they sort between them).
    let common = min
        .char_indices()
        .zip(max.chars())
        .find(|((_, a), b)| a != b)
        .map_or(min.len().min(max.len()), |((i, _), _)| i);
    let dir = &min[..min[..common].rfind('/')?];
    (!dir.is_empty()).then(|| format!("{}/**", globset::escape(dir)))
}

/// "guard-verify-implementation denied `complete` 5 times in 2 tasks".
fn describe(
    source: Option<TraceSource>,
    enforcer: &str,
    action: &str,
    target_glob: Option<&str>,
    count: u64,
    tasks: u64,
) -> String {
    let verb = match source {
        Some(TraceSource::GuardDenial) => "denied",
        Some(TraceSource::GuardWarning) => "warned about",
        Some(TraceSource::AutoRevert) => "reverted",
        Some(TraceSource::LoopDetection) => "saw a loop of",
        Some(TraceSource::RefusedComplete) => "refused",
        Some(TraceSource::PersonCorrection) => "corrected",
        None => "flagged",
    };
    let on = target_glob
        .map(|g| format!(" on `{g}`"))
        .unwrap_or_default();
    let times = if count == 1 { "time" } else { "times" };
    let in_tasks = if tasks == 1 { "task" } else { "tasks" };
    format!("{enforcer} {verb} `{action}`{on} {count} {times} in {tasks} {in_tasks}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn globs() {
        let g = |a: &str, b: &str| target_glob(Some(a), Some(b));
        assert_eq!(g("src/lib.rs", "src/lib.rs").as_deref(), Some("src/lib.rs"));
        assert_eq!(g("src/a.rs", "src/ab/c.rs").as_deref(), Some("src/**"));
        assert_eq!(
            g("src/net/a.rs", "src/net/b.rs").as_deref(),
            Some("src/net/**")
        );
        assert_eq!(g("src/a.rs", "srcx/b.rs"), None);
        assert_eq!(g("/a", "/b"), None);
        assert_eq!(g("cargo test", "cargo clippy"), None);
        assert_eq!(g("dé/é.rs", "dé/è.rs").as_deref(), Some("dé/**"));
        // A target's own glob characters match only themselves.
        assert_eq!(
            g("app/[id]/page.tsx", "app/[id]/page.tsx").as_deref(),
            Some("app/[[]id[]]/page.tsx")
        );
        assert_eq!(
            g("app/[id]/a.tsx", "app/[id]/b.tsx").as_deref(),
            Some("app/[[]id[]]/**")
        );
        let exact = globset::Glob::new(&g("src/*.rs", "src/*.rs").unwrap())
            .unwrap()
            .compile_matcher();
        assert!(exact.is_match("src/*.rs") && !exact.is_match("src/lib.rs"));
        assert_eq!(target_glob(None, None), None);
    }

    #[test]
    fn descriptions() {
        assert_eq!(
            describe(
                Some(TraceSource::GuardDenial),
                "guard-verify-implementation",
                "complete",
                None,
                5,
                2
            ),
            "guard-verify-implementation denied `complete` 5 times in 2 tasks"
        );
        assert_eq!(
            describe(
                Some(TraceSource::GuardDenial),
                "guard-protected-paths",
                "edit_file",
                Some("config/**"),
                1,
                1
            ),
            "guard-protected-paths denied `edit_file` on `config/**` 1 time in 1 task"
        );
    }

    proptest! {
        /// Every target lies under the glob of the set's extremes, and no deeper folder
        /// holds them all.
        #[test]
        fn the_glob_covers_every_target_and_is_the_deepest(
            targets in prop::collection::vec("[ab]{1,2}(/[ab]{1,2}){0,3}", 1..8)
        ) {
            let min = targets.iter().min().map(String::as_str);
            let max = targets.iter().max().map(String::as_str);
            match target_glob(min, max) {
                Some(g) if !g.ends_with("/**") => {
                    prop_assert!(targets.iter().all(|t| *t == g));
                }
                Some(g) => {
                    let dir = &g[..g.len() - 3];
                    let prefix = format!("{dir}/");
                    prop_assert!(targets.iter().all(|t| t.starts_with(&prefix)));
                    // No child folder of `dir` holds them all.
                    let first = &targets[0][dir.len() + 1..];
                    if let Some(child) = first.split('/').next().filter(|_| first.contains('/')) {
                        let deeper = format!("{dir}/{child}/");
                        prop_assert!(!targets.iter().all(|t| t.starts_with(&deeper)));
                    }
                }
                None => {
                    let first_dir = targets[0].split('/').next().unwrap();
                    let prefix = format!("{first_dir}/");
                    let all_in = targets.iter().all(|t| t.starts_with(&prefix));
                    let all_equal = targets.iter().all(|t| *t == targets[0]);
                    prop_assert!(!all_in && !all_equal);
                }
            }
        }
    }
}
