//! The process monitor's deterministic layers (seed 002 section 11.2, layers 0 and 1):
//! metrics collected every iteration at no model cost (value velocity as an EMA,
//! token efficiency with a CUSUM of its shortfalls, fail-pass-fail churn per
//! verification, recurring error hashes, file hotspots) and thresholds that turn them
//! into GREEN / YELLOW / RED with the triggers that fired. Its status is shown in
//! `status` and given to course correction; it never changes a bound (it has no access
//! to [`crate::Limits`] beyond reading the token budget).
//!
//! Velocity is measured on [`crate::ValueMeasure`]'s backed VRC score, not the raw
//! score an evaluator claims.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::state::{SprintState, TaskStatus};

/// The monitor's thresholds (seed 002 `LoopConfig`'s `pm_*` values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorConfig {
    /// No status other than GREEN before this iteration.
    pub min_iterations: u32,
    /// EMA smoothing factor.
    pub ema_alpha: f64,
    /// Velocity (value per iteration, 0..1) below which value has plateaued.
    pub plateau_threshold: f64,
    /// Fail-pass-fail transitions of one verification for YELLOW.
    pub churn_yellow: u32,
    /// ... and for RED.
    pub churn_red: u32,
    /// The same error this many times is RED.
    pub error_recurrence: u32,
    /// Budget share over value share at or above this is RED.
    pub budget_value_ratio: f64,
    /// One file touched in more than this share of iterations is YELLOW.
    pub file_hotspot_pct: f64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            min_iterations: 5,
            ema_alpha: 0.3,
            plateau_threshold: 0.01,
            churn_yellow: 2,
            churn_red: 3,
            error_recurrence: 3,
            budget_value_ratio: 2.0,
            file_hotspot_pct: 50.0,
        }
    }
}

/// What the host observed in one iteration (measured, not reported by a role).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterationObservation {
    /// Tokens spent in the iteration.
    pub tokens: u64,
    /// Files the iteration changed (from the workspace, not from a completion report).
    pub files_changed: Vec<String>,
    /// Normalised texts of the errors the iteration's verification runs printed.
    pub errors: Vec<String>,
}

/// Overall health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum Health {
    /// Nothing fired.
    #[default]
    Green,
    /// A warning sign.
    Yellow,
    /// Degraded: course correction should know.
    Red,
}

/// One trigger that fired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    /// `plateau`, `churn`, `error_recurrence`, `budget_divergence`, `file_hotspot`.
    pub name: &'static str,
    /// Its level.
    pub level: Health,
    /// The numbers behind it.
    pub detail: String,
}

/// The collected metrics, kept in the sprint's monitor file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessMonitor {
    /// EMA of the backed value's change per iteration (0..1 scale).
    pub value_velocity_ema: f64,
    /// EMA of value change per 1,000 tokens.
    pub token_efficiency_ema: f64,
    /// CUSUM of efficiency below its EMA.
    pub cusum_efficiency: f64,
    /// Per verification: fail-pass-fail transitions.
    pub churn: BTreeMap<String, u32>,
    /// Per error text hash: occurrences.
    pub error_counts: BTreeMap<String, u32>,
    /// Per file: iterations that changed it.
    pub file_touches: BTreeMap<String, u32>,
    /// Backed value (permille) at the last observation.
    pub last_value_permille: u32,
    /// Per verification: its status at the last observation (`p`/`f`) and whether it
    /// has failed, passed since, so the next failure is churn.
    pub last_status: BTreeMap<String, (bool, bool)>,
    /// Iterations observed.
    pub iterations: u32,
}

/// A stable key for error recurrence: SHA-256 of the trimmed text, first 16 hex digits.
fn error_key(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.trim().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

impl ProcessMonitor {
    /// Layer 0: folds one iteration into the metrics.
    pub fn observe(&mut self, s: &SprintState, obs: &IterationObservation, c: &MonitorConfig) {
        self.iterations += 1;
        let value = crate::measure::ValueMeasure::of(s).backed_vrc_permille;
        let delta = (f64::from(value) - f64::from(self.last_value_permille)) / 1000.0;
        self.last_value_permille = value;
        self.value_velocity_ema =
            c.ema_alpha * delta + (1.0 - c.ema_alpha) * self.value_velocity_ema;
        let efficiency = delta / (obs.tokens.max(1) as f64 / 1000.0);
        let target = self.token_efficiency_ema;
        self.token_efficiency_ema =
            c.ema_alpha * efficiency + (1.0 - c.ema_alpha) * self.token_efficiency_ema;
        self.cusum_efficiency = (self.cusum_efficiency + (target - efficiency)).max(0.0);
        for v in &s.verifications {
            use crate::state::VerificationStatus::*;
            let entry = self
                .last_status
                .entry(v.id.clone())
                .or_insert((false, false));
            match v.status {
                Failed => {
                    if entry.1 {
                        *self.churn.entry(v.id.clone()).or_default() += 1;
                    }
                    *entry = (true, false);
                }
                Passed if entry.0 => entry.1 = true,
                _ => {}
            }
        }
        for e in &obs.errors {
            *self.error_counts.entry(error_key(e)).or_default() += 1;
        }
        for f in &obs.files_changed {
            *self.file_touches.entry(f.clone()).or_default() += 1;
        }
    }

    /// Layer 1: the thresholds. Read-only.
    pub fn evaluate(
        &self,
        s: &SprintState,
        limits: &Limits,
        c: &MonitorConfig,
    ) -> (Health, Vec<Trigger>) {
        let mut t = Vec::new();
        if s.iteration < c.min_iterations {
            return (Health::Green, t);
        }
        let budget_pct = s.tokens_used as f64 / limits.token_budget() as f64 * 100.0;
        if self.value_velocity_ema < c.plateau_threshold {
            t.push(Trigger {
                name: "plateau",
                level: Health::Red,
                detail: format!(
                    "value velocity {:.3}/iteration < {}",
                    self.value_velocity_ema, c.plateau_threshold
                ),
            });
        }
        if let Some((id, n)) = self.churn.iter().max_by_key(|(_, n)| **n) {
            let level = if *n >= c.churn_red {
                Some(Health::Red)
            } else if *n >= c.churn_yellow {
                Some(Health::Yellow)
            } else {
                None
            };
            if let Some(level) = level {
                t.push(Trigger {
                    name: "churn",
                    level,
                    detail: format!("verification {id} failed again after passing {n} times"),
                });
            }
        }
        if let Some(n) = self.error_counts.values().max() {
            if *n >= c.error_recurrence {
                t.push(Trigger {
                    name: "error_recurrence",
                    level: Health::Red,
                    detail: format!("the same error {n} times"),
                });
            }
        }
        let done = s
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Done)
            .count() as f64;
        let value_pct = done / (s.tasks.len().max(1) as f64) * 100.0;
        if budget_pct > 0.0 && value_pct > 0.0 && budget_pct / value_pct >= c.budget_value_ratio {
            t.push(Trigger {
                name: "budget_divergence",
                level: Health::Red,
                detail: format!("{budget_pct:.0}% of the budget for {value_pct:.0}% of the tasks"),
            });
        }
        if let Some((f, n)) = self.file_touches.iter().max_by_key(|(_, n)| **n) {
            if f64::from(*n) > f64::from(s.iteration) * c.file_hotspot_pct / 100.0 {
                t.push(Trigger {
                    name: "file_hotspot",
                    level: Health::Yellow,
                    detail: format!("{f} changed in {n} of {} iterations", s.iteration),
                });
            }
        }
        let health = t.iter().map(|t| t.level).max().unwrap_or_default();
        (health, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Verification;

    fn state(iteration: u32) -> SprintState {
        let mut s = SprintState::new("s");
        s.iteration = iteration;
        s.verifications
            .push(Verification::new("v1", "unit", "true"));
        s
    }

    #[test]
    fn quiet_before_the_minimum_iterations() {
        let m = ProcessMonitor::default();
        let (h, t) = m.evaluate(&state(2), &Limits::default(), &MonitorConfig::default());
        assert_eq!(h, Health::Green);
        assert!(t.is_empty());
    }

    #[test]
    fn fail_pass_fail_is_churn_and_a_repeated_error_is_red() {
        let c = MonitorConfig::default();
        let mut m = ProcessMonitor::default();
        let mut s = state(10);
        let obs = |e: &str| IterationObservation {
            tokens: 1000,
            files_changed: vec!["src/app.py".into()],
            errors: vec![e.into()],
        };
        for round in 0..3 {
            s.record_run("v1", Some(1), "boom").unwrap();
            m.observe(&s, &obs("KeyError: 'id'"), &c);
            s.record_run("v1", Some(0), "").unwrap();
            m.observe(&s, &obs(&format!("other {round}")), &c);
        }
        s.record_run("v1", Some(1), "boom").unwrap();
        m.observe(&s, &obs("KeyError: 'id'"), &c);
        assert_eq!(m.churn["v1"], 3);
        let (h, t) = m.evaluate(&s, &Limits::default(), &c);
        assert_eq!(h, Health::Red);
        let names: Vec<_> = t.iter().map(|t| t.name).collect();
        assert!(names.contains(&"churn"), "{names:?}");
        assert!(names.contains(&"error_recurrence"), "{names:?}");
        assert!(names.contains(&"file_hotspot"), "{names:?}");
    }

    #[test]
    fn rising_backed_value_is_not_a_plateau() {
        use crate::state::{Recommendation, VrcSnapshot};
        let c = MonitorConfig::default();
        let mut m = ProcessMonitor::default();
        let mut s = SprintState::new("s");
        for i in 0..10 {
            s.verifications
                .push(Verification::new(format!("v{i}"), "unit", "true"));
        }
        for i in 0..6u32 {
            s.iteration = i + 1;
            s.record_run(&format!("v{i}"), Some(0), "").unwrap();
            s.vrc_history.push(VrcSnapshot {
                iteration: i + 1,
                deliverables_total: 10,
                deliverables_verified: i + 1,
                deliverables_blocked: 0,
                value_score: f64::from(i + 1) / 10.0,
                gaps: vec![],
                recommendation: Recommendation::Continue,
                summary: String::new(),
                full: false,
                fallback: false,
            });
            m.observe(&s, &IterationObservation::default(), &c);
        }
        let (h, t) = m.evaluate(&s, &Limits::default(), &c);
        assert!(!t.iter().any(|t| t.name == "plateau"), "{t:?}");
        assert_eq!(h, Health::Green);
    }
}
