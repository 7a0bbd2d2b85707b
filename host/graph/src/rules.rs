//! Rules learned from patterns: proposed by [`Graph::learn`], approved or rejected by a
//! person, and read by the learned-rules guard ([`Graph::approved_rules`]).

use std::collections::HashMap;
use std::fmt;

use agentforge_core::trace::{Trace, TraceContext, TraceEvent, TraceKind, TraceSource};
use rusqlite::{params, OptionalExtension, Row, Transaction};
use serde::{Deserialize, Serialize};

use crate::patterns::LearnSettings;
use crate::traces::{insert_traces, parse_source, parsed};
use crate::{Graph, GraphError};

/// Where a rule stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleStatus {
    /// Proposed by `learn`, waiting for a person.
    Proposed,
    /// Approved: the learned-rules guard enforces it.
    Approved,
    /// Rejected: not enforced, and its pattern is proposed again only once its count has
    /// doubled since.
    Rejected,
}

impl RuleStatus {
    /// The snake_case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleStatus::Proposed => "proposed",
            RuleStatus::Approved => "approved",
            RuleStatus::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> Option<RuleStatus> {
        [
            RuleStatus::Proposed,
            RuleStatus::Approved,
            RuleStatus::Rejected,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

impl fmt::Display for RuleStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a learned rule applies to its action (the guard checks it against the step's
/// state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleCondition {
    /// Whenever the action (on the rule's target glob, if any) is called.
    Always,
    /// No file changed in the task yet (`guard-verify-implementation`'s denials).
    NoFilesChanged,
    /// No test passed since the last change (`guard-tested-evidence`'s denials).
    NoPassingTestSinceLastChange,
    /// The task's checks are not ready (`guard-complete-verified`, refused `complete`s).
    ChecksNotReady,
    /// The loop detector's warning is active (loop detections).
    LoopWarningActive,
}

impl RuleCondition {
    /// The snake_case name, as stored and serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleCondition::Always => "always",
            RuleCondition::NoFilesChanged => "no_files_changed",
            RuleCondition::NoPassingTestSinceLastChange => "no_passing_test_since_last_change",
            RuleCondition::ChecksNotReady => "checks_not_ready",
            RuleCondition::LoopWarningActive => "loop_warning_active",
        }
    }

    fn parse(s: &str) -> Option<RuleCondition> {
        [
            RuleCondition::Always,
            RuleCondition::NoFilesChanged,
            RuleCondition::NoPassingTestSinceLastChange,
            RuleCondition::ChecksNotReady,
            RuleCondition::LoopWarningActive,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// What the guard does when a learned rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleEffect {
    /// Refuse the action.
    Deny,
    /// Let it run with a warning.
    Warn,
}

impl RuleEffect {
    /// The snake_case name, as stored and serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleEffect::Deny => "deny",
            RuleEffect::Warn => "warn",
        }
    }

    fn parse(s: &str) -> Option<RuleEffect> {
        [RuleEffect::Deny, RuleEffect::Warn]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// A rule as the learned-rules guard reads it. Its JSON is a contract with the guard
/// plugin:
///
/// ```json
/// {"id": 3, "action": "complete", "target_glob": null, "condition": "no_files_changed",
///  "effect": "deny", "reason": "...", "pattern": "<pattern description>"}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedRule {
    /// The rule's id ([`Rule::id`]).
    pub id: i64,
    /// The action it applies to (`complete`, `edit_file`...).
    pub action: String,
    /// The targets it applies to (an exact target or `dir/**`); `null` for any target.
    pub target_glob: Option<String>,
    /// When it applies.
    pub condition: RuleCondition,
    /// What the guard does then.
    pub effect: RuleEffect,
    /// What to do instead, citing the pattern (shown to the model).
    pub reason: String,
    /// The pattern's description when the rule was proposed.
    pub pattern: String,
}

/// A learned rule with its history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// Its id.
    pub id: i64,
    /// The pattern it was learned from ([`crate::Pattern::id`]).
    pub pattern_id: i64,
    /// Proposed, approved or rejected.
    pub status: RuleStatus,
    /// What the guard reads.
    pub rule: LearnedRule,
    /// When `learn` proposed it (the `now` it was given).
    pub proposed_at: String,
    /// When it was last approved or rejected.
    pub decided_at: Option<String>,
    /// Who approved or rejected it.
    pub decided_by: Option<String>,
    /// The reason given for a rejection.
    pub note: Option<String>,
}

const RULE_COLUMNS: &str = "id, pattern_id, status, action, target_glob, condition, effect, \
     reason, pattern, proposed_at, decided_at, decided_by, note";

/// [`RULE_COLUMNS`] of the table aliased `r`.
fn qualified_rule_columns() -> String {
    RULE_COLUMNS
        .split(", ")
        .map(|c| format!("r.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Graph {
    /// The rules with `status` (all when `None`), oldest first.
    pub fn rules(&self, status: Option<RuleStatus>) -> Result<Vec<Rule>, GraphError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {RULE_COLUMNS} FROM rules WHERE ?1 IS NULL OR status = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map(params![status.map(RuleStatus::as_str)], |r| {
            rule_from_row(r, 0)
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Approves rule `id` (proposed, or rejected before) in the name of `by`, and records
    /// an `approval` trace of it (kind [`TraceKind::Approval`], source
    /// [`TraceSource::PersonCorrection`], enforcer `by`; approvals belong to no pattern and
    /// are never precedents).
    pub fn approve_rule(&mut self, id: i64, by: &str, now: &str) -> Result<Rule, GraphError> {
        let tx = self.write()?;
        let rule = decide(&tx, id, RuleStatus::Approved, by, None, now)?;
        let project: String = tx
            .query_row(
                "SELECT project FROM traces WHERE kind != 'approval' ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or_default();
        let r = &rule.rule;
        let trace = Trace {
            key: format!("rule-{id}#approval#{now}"),
            project,
            timestamp: now.to_string(),
            context: TraceContext {
                task_id: format!("rule-{id}"),
                task_type: "learned_rule".into(),
                phase: "approval".into(),
                role: None,
                step: 0,
            },
            event: TraceEvent {
                kind: TraceKind::Approval,
                source: TraceSource::PersonCorrection,
                enforcer: by.to_string(),
                action: r.action.clone(),
                target: r.target_glob.clone(),
                what_happened: format!(
                    "{by} approved learned rule {id}: {} `{}` when {}",
                    r.effect.as_str(),
                    r.action,
                    r.condition.as_str()
                ),
                what_was_correct: r.reason.clone(),
                why: format!("learned from: {}", r.pattern),
            },
        };
        insert_traces(&tx, std::slice::from_ref(&trace))?;
        tx.commit()?;
        Ok(rule)
    }

    /// Rejects rule `id` (proposed, or approved before) in the name of `by`, keeping
    /// `reason`. Its pattern is not proposed again until its count has doubled.
    pub fn reject_rule(
        &mut self,
        id: i64,
        by: &str,
        reason: &str,
        now: &str,
    ) -> Result<Rule, GraphError> {
        let tx = self.write()?;
        let rule = decide(&tx, id, RuleStatus::Rejected, by, Some(reason), now)?;
        tx.commit()?;
        Ok(rule)
    }

    /// The approved rules, oldest first, as the learned-rules guard reads them.
    pub fn approved_rules(&self) -> Result<Vec<LearnedRule>, GraphError> {
        Ok(self
            .rules(Some(RuleStatus::Approved))?
            .into_iter()
            .map(|r| r.rule)
            .collect())
    }
}

/// Sets rule `id`'s status, with who, when, why and the pattern's count at that moment.
fn decide(
    tx: &Transaction<'_>,
    id: i64,
    status: RuleStatus,
    by: &str,
    note: Option<&str>,
    now: &str,
) -> Result<Rule, GraphError> {
    let current = rule(tx, id)?;
    if current.status == status {
        return Err(GraphError::RuleAlreadyDecided {
            id,
            status: current.status,
        });
    }
    // The pattern's live count (traces recorded since the last `learn` included).
    let count: i64 = tx.query_row(
        "SELECT max(p.count, coalesce((SELECT c.count FROM pattern_counts c WHERE c.key = p.key), 0)) \
         FROM patterns p WHERE p.id = ?1",
        params![current.pattern_id],
        |r| r.get(0),
    )?;
    tx.execute(
        "UPDATE rules SET status = ?2, decided_at = ?3, decided_by = ?4, decided_count = ?5, \
         note = ?6 WHERE id = ?1",
        params![id, status.as_str(), now, by, count, note],
    )?;
    rule(tx, id)
}

/// Rule `id`, or [`GraphError::RuleNotFound`].
fn rule(tx: &Transaction<'_>, id: i64) -> Result<Rule, GraphError> {
    tx.query_row(
        &format!("SELECT {RULE_COLUMNS} FROM rules WHERE id = ?1"),
        params![id],
        |r| rule_from_row(r, 0),
    )
    .optional()?
    .ok_or(GraphError::RuleNotFound { id })
}

/// Reads a rule from [`RULE_COLUMNS`] starting at column `at`.
fn rule_from_row(row: &Row<'_>, at: usize) -> rusqlite::Result<Rule> {
    let id = row.get(at)?;
    Ok(Rule {
        id,
        pattern_id: row.get(at + 1)?,
        status: parsed(row, at + 2, RuleStatus::parse)?,
        rule: LearnedRule {
            id,
            action: row.get(at + 3)?,
            target_glob: row.get(at + 4)?,
            condition: parsed(row, at + 5, RuleCondition::parse)?,
            effect: parsed(row, at + 6, RuleEffect::parse)?,
            reason: row.get(at + 7)?,
            pattern: row.get(at + 8)?,
        },
        proposed_at: row.get(at + 9)?,
        decided_at: row.get(at + 10)?,
        decided_by: row.get(at + 11)?,
        note: row.get(at + 12)?,
    })
}

/// The approved rules by their pattern's key (for precedents); the newest of a pattern.
pub(crate) fn approved_by_pattern(
    conn: &rusqlite::Connection,
) -> Result<HashMap<String, LearnedRule>, GraphError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT p.key, {} FROM rules r JOIN patterns p ON p.id = r.pattern_id \
         WHERE r.status = 'approved' ORDER BY r.id",
        qualified_rule_columns()
    ))?;
    let mut out = HashMap::new();
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let key: String = row.get(0)?;
        let rule = rule_from_row(row, 1)?;
        out.insert(key, rule.rule);
    }
    Ok(out)
}

/// Proposes a rule for every pattern seen at least `propose_threshold` times in at least
/// `min_tasks` tasks that has none yet: no rule at all, or only a rejected one whose
/// pattern's count has doubled since the rejection.
pub(crate) fn propose(
    tx: &Transaction<'_>,
    settings: &LearnSettings,
    now: &str,
) -> Result<Vec<Rule>, GraphError> {
    struct Candidate {
        id: i64,
        source: TraceSource,
        enforcer: String,
        action: String,
        target_glob: Option<String>,
        count: i64,
        example_correct: String,
        description: String,
    }
    let candidates = {
        let mut stmt = tx.prepare_cached(
            "SELECT id, source, enforcer, action, target_glob, count, example_correct, \
             description FROM patterns WHERE count >= ?1 AND task_count >= ?2 \
             ORDER BY count DESC, key",
        )?;
        let rows = stmt.query_map(
            params![settings.propose_threshold, settings.min_tasks],
            |r| {
                Ok(Candidate {
                    id: r.get(0)?,
                    source: parsed(r, 1, parse_source)?,
                    enforcer: r.get(2)?,
                    action: r.get(3)?,
                    target_glob: r.get(4)?,
                    count: r.get(5)?,
                    example_correct: r.get(6)?,
                    description: r.get(7)?,
                })
            },
        )?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    let mut proposed = Vec::new();
    for p in candidates {
        let latest: Option<(String, Option<i64>)> = tx
            .query_row(
                "SELECT status, decided_count FROM rules WHERE pattern_id = ?1 \
                 ORDER BY id DESC LIMIT 1",
                params![p.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let due = match latest {
            None => true,
            Some((status, decided)) => {
                status == RuleStatus::Rejected.as_str() && p.count >= 2 * decided.unwrap_or(0)
            }
        };
        if !due {
            continue;
        }
        let (condition, effect) = rule_shape(p.source, &p.enforcer);
        let target_glob = match condition {
            RuleCondition::Always => p.target_glob.clone(),
            _ => None,
        };
        let reason = reason(
            condition,
            effect,
            &p.action,
            target_glob.as_deref(),
            &p.example_correct,
        );
        tx.execute(
            "INSERT INTO rules (pattern_id, status, action, target_glob, condition, effect, \
             reason, pattern, proposed_at, proposed_count) \
             VALUES (?1, 'proposed', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                p.id,
                p.action,
                target_glob,
                condition.as_str(),
                effect.as_str(),
                reason,
                p.description,
                now,
                p.count,
            ],
        )?;
        proposed.push(rule(tx, tx.last_insert_rowid())?);
    }
    Ok(proposed)
}

/// The condition and effect of the rule learned from a pattern of `source` by `enforcer`.
///
/// Denials (and refused `complete`s) deny, with the condition the known guards check;
/// warnings warn under the same conditions; a loop detection denies repeating the action
/// while the loop warning is active; auto-reverts and people's corrections warn always.
pub(crate) fn rule_shape(source: TraceSource, enforcer: &str) -> (RuleCondition, RuleEffect) {
    let known = match enforcer {
        "guard-verify-implementation" => Some(RuleCondition::NoFilesChanged),
        "guard-tested-evidence" => Some(RuleCondition::NoPassingTestSinceLastChange),
        "guard-complete-verified" => Some(RuleCondition::ChecksNotReady),
        _ => None,
    };
    match source {
        TraceSource::GuardDenial => (known.unwrap_or(RuleCondition::Always), RuleEffect::Deny),
        TraceSource::RefusedComplete => (
            known.unwrap_or(RuleCondition::ChecksNotReady),
            RuleEffect::Deny,
        ),
        TraceSource::LoopDetection => (RuleCondition::LoopWarningActive, RuleEffect::Deny),
        TraceSource::GuardWarning => (known.unwrap_or(RuleCondition::Always), RuleEffect::Warn),
        TraceSource::AutoRevert | TraceSource::PersonCorrection => {
            (RuleCondition::Always, RuleEffect::Warn)
        }
    }
}

/// The rule's reason: what not to do, what to do instead (the pattern's most frequent
/// `what_was_correct`). The pattern is not repeated in it: whoever shows a rule cites
/// the pattern beside the reason (the guard's denial, `guards list`), and the guard cuts
/// a reason at 300 characters.
fn reason(
    condition: RuleCondition,
    effect: RuleEffect,
    action: &str,
    target_glob: Option<&str>,
    correct: &str,
) -> String {
    let when = match condition {
        RuleCondition::Always => target_glob
            .map(|g| format!(" on `{g}`"))
            .unwrap_or_default(),
        RuleCondition::NoFilesChanged => " before changing a file".to_string(),
        RuleCondition::NoPassingTestSinceLastChange => {
            " before a test passes after your last change".to_string()
        }
        RuleCondition::ChecksNotReady => " before the checks pass".to_string(),
        RuleCondition::LoopWarningActive => " again while a loop warning is active".to_string(),
    };
    let mut out = match effect {
        RuleEffect::Deny => format!("Do not call `{action}`{when}."),
        RuleEffect::Warn => format!("Take care calling `{action}`{when}: it was flagged before."),
    };
    let correct = correct.trim();
    if !correct.is_empty() {
        out.push_str(" Instead: ");
        out.push_str(correct);
        if !correct.ends_with(['.', '!', '?']) {
            out.push('.');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_enforcer_and_the_source() {
        use RuleCondition as C;
        use RuleEffect as E;
        use TraceSource as S;
        let cases = [
            (
                S::GuardDenial,
                "guard-verify-implementation",
                C::NoFilesChanged,
                E::Deny,
            ),
            (
                S::GuardDenial,
                "guard-tested-evidence",
                C::NoPassingTestSinceLastChange,
                E::Deny,
            ),
            (
                S::GuardDenial,
                "guard-complete-verified",
                C::ChecksNotReady,
                E::Deny,
            ),
            (S::RefusedComplete, "executor", C::ChecksNotReady, E::Deny),
            (
                S::LoopDetection,
                "loop-detector",
                C::LoopWarningActive,
                E::Deny,
            ),
            (S::GuardDenial, "guard-protected-paths", C::Always, E::Deny),
            (S::AutoRevert, "auto-revert", C::Always, E::Warn),
            (S::GuardWarning, "guard-large-edit", C::Always, E::Warn),
            (S::PersonCorrection, "alice", C::Always, E::Warn),
        ];
        for (source, enforcer, condition, effect) in cases {
            assert_eq!(
                rule_shape(source, enforcer),
                (condition, effect),
                "{enforcer}"
            );
        }
    }

    #[test]
    fn the_reason_says_what_to_do_instead_and_leaves_the_pattern_to_its_citation() {
        let r = reason(
            RuleCondition::NoFilesChanged,
            RuleEffect::Deny,
            "complete",
            None,
            "Edit the files the subtask names first",
        );
        assert_eq!(
            r,
            "Do not call `complete` before changing a file. Instead: Edit the files the \
             subtask names first."
        );
    }

    #[test]
    fn names_round_trip() {
        for s in [
            RuleStatus::Proposed,
            RuleStatus::Approved,
            RuleStatus::Rejected,
        ] {
            assert_eq!(RuleStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        for c in [
            RuleCondition::Always,
            RuleCondition::NoFilesChanged,
            RuleCondition::NoPassingTestSinceLastChange,
            RuleCondition::ChecksNotReady,
            RuleCondition::LoopWarningActive,
        ] {
            assert_eq!(RuleCondition::parse(c.as_str()), Some(c));
            assert_eq!(
                serde_json::to_string(&c).unwrap(),
                format!("\"{}\"", c.as_str())
            );
        }
        for e in [RuleEffect::Deny, RuleEffect::Warn] {
            assert_eq!(RuleEffect::parse(e.as_str()), Some(e));
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                format!("\"{}\"", e.as_str())
            );
        }
    }
}
