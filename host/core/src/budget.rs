//! Adaptive step budget (seed 000 `AdaptiveBudget`: runaway detection, progress
//! extension).
//!
//! A task starts with a base step budget (`max_steps`). When it is used up and the task
//! is measurably progressing (a check went from failing to passing within the last
//! `stall_window` steps), the budget grows by `extension` steps, up to
//! `base × ceiling_factor`. A task that makes no progress over a whole window while the
//! loop detector fires in it is stopped early, budget left or not.
//!
//! [`decide`] is a pure function of the policy and a per-step [`ProgressPoint`] history,
//! so the decision can be replayed from the log.

use serde::{Deserialize, Serialize};

use crate::state::Verification;

/// How the step budget adapts (`[budget]`-style configuration; every field optional).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetPolicy {
    /// Steps added per extension (0: never extend).
    pub extension: u64,
    /// Most steps a task may get, as a multiple of its base budget (at least 1).
    pub ceiling_factor: f64,
    /// Steps over which progress is measured; a task without progress over a full
    /// window in which a loop was detected is stopped (0: measure over the whole
    /// history, never stop early).
    pub stall_window: u64,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        BudgetPolicy {
            extension: 5,
            ceiling_factor: 2.0,
            stall_window: 8,
        }
    }
}

impl BudgetPolicy {
    /// Most steps a task with a base budget of `base` may get: `base × ceiling_factor`
    /// rounded down, never less than `base` (a factor below 1, NaN or infinite counts
    /// as 1).
    pub fn ceiling(&self, base: u64) -> u64 {
        let f = self.ceiling_factor;
        if !f.is_finite() || f <= 1.0 {
            return base;
        }
        let c = (base as f64 * f).floor();
        if c >= u64::MAX as f64 {
            u64::MAX
        } else {
            (c as u64).max(base)
        }
    }
}

/// Where a task's base step budget came from. Precedence, highest first: the command
/// line's `--max-steps`, the task file's `max_steps`, the config's `[limits] max_steps`
/// (30 by default). The choice is recorded in the task's state, so `resume` keeps it
/// unless given `--max-steps` again.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// `--max-steps` on `run` or `resume`: a hard cap, never extended.
    Flag,
    /// The task file's `max_steps`.
    Task,
    /// `[limits] max_steps` of the configuration.
    Config,
}

/// A task's base step budget and where it came from (see [`LimitSource`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepLimit {
    /// Steps the task may take before the adaptive budget decides.
    pub base: u64,
    /// Which setting gave it.
    pub source: LimitSource,
}

impl StepLimit {
    /// The limit by precedence: `flag`, else `task`, else `config`.
    pub fn resolve(flag: Option<u64>, task: Option<u64>, config: u64) -> StepLimit {
        match (flag, task) {
            (Some(base), _) => StepLimit {
                base,
                source: LimitSource::Flag,
            },
            (None, Some(base)) => StepLimit {
                base,
                source: LimitSource::Task,
            },
            (None, None) => StepLimit {
                base: config,
                source: LimitSource::Config,
            },
        }
    }

    /// Whether the adaptive budget may extend the task past `base`: not when the user
    /// set the limit on the command line, which is taken as a promise.
    pub fn extensible(&self) -> bool {
        self.source != LimitSource::Flag
    }

    /// The policy to apply under this limit: `policy`, without extensions for a hard cap.
    pub fn policy(&self, policy: &BudgetPolicy) -> BudgetPolicy {
        let mut p = policy.clone();
        if !self.extensible() {
            p.extension = 0;
        }
        p
    }
}

/// What to do with a task's step budget.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetDecision {
    /// Keep going within the current budget.
    Continue,
    /// The budget is used up but the task progresses: add `by` steps.
    Extend {
        /// Steps to add to the current maximum.
        by: u64,
        /// Why, for the status and the log.
        reason: String,
    },
    /// Stop the task (budget exhausted or stalled).
    Stop {
        /// Why, for the status and the log.
        reason: String,
    },
}

/// The verification state after one step, oldest first in a history.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProgressPoint {
    /// The step.
    pub step: u64,
    /// Checks passing after it.
    pub checks_passing: usize,
    /// Checks failing after it.
    pub checks_failing: usize,
    /// The loop detector fired at this step.
    #[serde(default)]
    pub loop_detected: bool,
}

impl ProgressPoint {
    /// The point of `step` from the task's verification status.
    pub fn from_verification(step: u64, v: &Verification, loop_detected: bool) -> ProgressPoint {
        ProgressPoint {
            step,
            checks_passing: v.passing(),
            checks_failing: v.failing(),
            loop_detected,
        }
    }
}

/// The last `stall_window` points and the point they are compared with.
struct Window<'a> {
    points: &'a [ProgressPoint],
    baseline: ProgressPoint,
    /// As many points as the window is long (a stall can be judged).
    full: bool,
}

impl Window<'_> {
    fn of(history: &[ProgressPoint], stall_window: u64) -> Window<'_> {
        let n = usize::try_from(stall_window).unwrap_or(usize::MAX);
        let start = if n == 0 {
            0
        } else {
            history.len().saturating_sub(n)
        };
        let points = &history[start..];
        // The step before the window, else the window's own first point.
        let baseline = history
            .get(start.wrapping_sub(1))
            .or(points.first())
            .copied()
            .unwrap_or_default();
        Window {
            points,
            baseline,
            full: n > 0 && points.len() >= n,
        }
    }

    fn last(&self) -> ProgressPoint {
        self.points.last().copied().unwrap_or(self.baseline)
    }

    /// More checks passing or fewer failing at the end than at the baseline.
    fn progressed(&self) -> bool {
        let last = self.last();
        last.checks_passing > self.baseline.checks_passing
            || last.checks_failing < self.baseline.checks_failing
    }

    fn loop_step(&self) -> Option<u64> {
        self.points.iter().find(|p| p.loop_detected).map(|p| p.step)
    }

    fn describe(&self) -> String {
        let last = self.last();
        format!(
            "passing {} -> {}, failing {} -> {}",
            self.baseline.checks_passing,
            last.checks_passing,
            self.baseline.checks_failing,
            last.checks_failing
        )
    }
}

/// Decides on a task's step budget: call it after every step (stall detection) and
/// when `steps_done` reaches `current_max`. `base` is the task's original budget,
/// `history` one point per step, oldest first.
///
/// - no progress over a full `stall_window` with a loop detected in it: `Stop`;
/// - budget left: `Continue`;
/// - budget used up and `extension` is 0, or at the ceiling (`base × ceiling_factor`):
///   `Stop`;
/// - budget used up with progress in the window: `Extend` by `extension`, clamped to
///   the ceiling;
/// - budget used up without progress: `Stop`.
pub fn decide(
    policy: &BudgetPolicy,
    base: u64,
    current_max: u64,
    steps_done: u64,
    history: &[ProgressPoint],
) -> BudgetDecision {
    let w = Window::of(history, policy.stall_window);
    let progressed = w.progressed();
    if w.full && !progressed {
        if let Some(at) = w.loop_step() {
            return BudgetDecision::Stop {
                reason: format!(
                    "stalled: no check went from failing to passing in the last {} steps ({}) and a loop was detected at step {at}",
                    w.points.len(),
                    w.describe()
                ),
            };
        }
    }
    if steps_done < current_max {
        return BudgetDecision::Continue;
    }
    if policy.extension == 0 {
        return BudgetDecision::Stop {
            reason: format!("step budget of {current_max} used up (extensions are disabled)"),
        };
    }
    let ceiling = policy.ceiling(base);
    if current_max >= ceiling {
        return BudgetDecision::Stop {
            reason: format!(
                "step budget used up: {steps_done} steps, the ceiling of {ceiling} steps ({base} x {}) reached",
                policy.ceiling_factor
            ),
        };
    }
    if !progressed {
        return BudgetDecision::Stop {
            reason: format!(
                "step budget of {current_max} used up with no progress in the last {} steps ({})",
                w.points.len(),
                w.describe()
            ),
        };
    }
    let by = policy.extension.min(ceiling - current_max);
    BudgetDecision::Extend {
        by,
        reason: format!(
            "progress in the last {} steps ({}): step budget extended from {current_max} to {} (ceiling {ceiling})",
            w.points.len(),
            w.describe(),
            current_max + by
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points for steps 1.. from `(passing, failing, loop)`.
    fn history(points: &[(usize, usize, bool)]) -> Vec<ProgressPoint> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(p, f, l))| ProgressPoint {
                step: i as u64 + 1,
                checks_passing: p,
                checks_failing: f,
                loop_detected: l,
            })
            .collect()
    }

    fn flat(n: usize, loop_at: Option<usize>) -> Vec<ProgressPoint> {
        history(
            &(0..n)
                .map(|i| (1, 2, Some(i) == loop_at))
                .collect::<Vec<_>>(),
        )
    }

    fn policy() -> BudgetPolicy {
        BudgetPolicy::default()
    }

    fn reason(d: BudgetDecision) -> String {
        match d {
            BudgetDecision::Stop { reason } | BudgetDecision::Extend { reason, .. } => reason,
            BudgetDecision::Continue => panic!("expected a reason, got Continue"),
        }
    }

    #[test]
    fn continues_within_the_budget() {
        assert_eq!(decide(&policy(), 10, 10, 0, &[]), BudgetDecision::Continue);
        // No progress and no loop: not a stall.
        assert_eq!(
            decide(&policy(), 20, 20, 9, &flat(9, None)),
            BudgetDecision::Continue
        );
        // A loop, but a check was fixed in the window: progressing.
        let mut h = flat(9, Some(8));
        h[8].checks_passing = 2;
        h[8].checks_failing = 1;
        assert_eq!(decide(&policy(), 20, 20, 9, &h), BudgetDecision::Continue);
    }

    #[test]
    fn stops_a_stalled_task_early() {
        let d = decide(&policy(), 20, 20, 9, &flat(9, Some(5)));
        let r = reason(d.clone());
        assert!(matches!(d, BudgetDecision::Stop { .. }));
        assert!(r.starts_with("stalled"), "{r}");
        assert!(r.contains("last 8 steps"), "{r}");
        assert!(r.contains("loop was detected at step 6"), "{r}");
    }

    #[test]
    fn a_loop_before_the_window_is_not_a_stall() {
        let h = flat(10, Some(0));
        assert_eq!(decide(&policy(), 20, 20, 10, &h), BudgetDecision::Continue);
    }

    #[test]
    fn no_stall_is_judged_before_a_full_window() {
        let h = flat(7, Some(3));
        assert_eq!(decide(&policy(), 20, 20, 7, &h), BudgetDecision::Continue);
    }

    #[test]
    fn extends_a_progressing_task_when_the_budget_is_used_up() {
        // A check went from failing to passing (passing count up).
        let h = history(&[(0, 2, false), (0, 2, false), (1, 1, false)]);
        let d = decide(&policy(), 10, 10, 10, &h);
        assert!(matches!(d, BudgetDecision::Extend { by: 5, .. }), "{d:?}");
        assert!(reason(d).contains("extended from 10 to 15"));
        // Failing count down only (a failing check was removed from the verification set).
        let h = history(&[(3, 2, false), (3, 1, false)]);
        assert!(matches!(
            decide(&policy(), 10, 10, 10, &h),
            BudgetDecision::Extend { by: 5, .. }
        ));
    }

    #[test]
    fn extension_is_clamped_to_the_ceiling() {
        let h = history(&[(0, 1, false), (1, 0, false)]);
        // base 10 x 2.0 = 20; at 18 only 2 more.
        assert!(matches!(
            decide(&policy(), 10, 18, 18, &h),
            BudgetDecision::Extend { by: 2, .. }
        ));
    }

    #[test]
    fn stops_at_the_ceiling_even_with_progress() {
        let h = history(&[(0, 1, false), (1, 0, false)]);
        let d = decide(&policy(), 10, 20, 20, &h);
        assert!(matches!(d, BudgetDecision::Stop { .. }));
        assert!(reason(d).contains("ceiling of 20 steps (10 x 2)"));
    }

    #[test]
    fn stops_without_progress_when_the_budget_is_used_up() {
        for h in [
            vec![],
            flat(3, None),
            history(&[(2, 0, false), (1, 1, false)]),
        ] {
            let d = decide(&policy(), 10, 10, 10, &h);
            assert!(matches!(d, BudgetDecision::Stop { .. }), "{d:?}");
            assert!(reason(d).contains("used up with no progress"));
        }
        // Progress that happened before the window does not count.
        let mut h = history(&[(0, 2, false), (2, 0, false)]);
        h.extend(flat(8, None).into_iter().map(|p| ProgressPoint {
            step: p.step + 2,
            checks_passing: 2,
            checks_failing: 0,
            ..p
        }));
        assert!(matches!(
            decide(&policy(), 10, 10, 10, &h),
            BudgetDecision::Stop { .. }
        ));
    }

    #[test]
    fn zero_extension_or_window() {
        let h = history(&[(0, 1, false), (1, 0, false)]);
        let no_ext = BudgetPolicy {
            extension: 0,
            ..policy()
        };
        let d = decide(&no_ext, 10, 10, 10, &h);
        assert!(matches!(d, BudgetDecision::Stop { .. }));
        assert!(reason(d).contains("extensions are disabled"));
        // Window 0: progress over the whole history, never a stall stop.
        let whole = BudgetPolicy {
            stall_window: 0,
            ..policy()
        };
        let mut long = history(&[(0, 1, false)]);
        long.extend(flat(30, Some(20)).into_iter().map(|p| ProgressPoint {
            step: p.step + 1,
            checks_passing: 1,
            checks_failing: 0,
            ..p
        }));
        assert_eq!(decide(&whole, 40, 40, 31, &long), BudgetDecision::Continue);
        assert!(matches!(
            decide(&whole, 31, 31, 31, &long),
            BudgetDecision::Extend { .. }
        ));
    }

    #[test]
    fn policy_defaults_ceiling_and_strict_parsing() {
        let p: BudgetPolicy = toml::from_str("extension = 3").unwrap();
        assert_eq!(
            p,
            BudgetPolicy {
                extension: 3,
                ..BudgetPolicy::default()
            }
        );
        assert!(toml::from_str::<BudgetPolicy>("extention = 3").is_err());
        assert_eq!(policy().ceiling(10), 20);
        let f = |ceiling_factor| BudgetPolicy {
            ceiling_factor,
            ..policy()
        };
        assert_eq!(f(1.5).ceiling(7), 10);
        assert_eq!(f(0.5).ceiling(7), 7);
        assert_eq!(f(f64::NAN).ceiling(7), 7);
        assert_eq!(f(f64::INFINITY).ceiling(7), 7);
        assert_eq!(f(1e30).ceiling(7), u64::MAX);
    }

    #[test]
    fn points_come_from_the_verification_status() {
        use crate::state::CheckStatus;
        let mut v = Verification::default();
        for (name, passing) in [("a", true), ("b", false), ("c", true)] {
            v.checks.insert(
                name.into(),
                CheckStatus {
                    passing,
                    summary: String::new(),
                    is_test: false,
                    step: 1,
                },
            );
        }
        assert_eq!(
            ProgressPoint::from_verification(4, &v, true),
            ProgressPoint {
                step: 4,
                checks_passing: 2,
                checks_failing: 1,
                loop_detected: true
            }
        );
    }

    #[test]
    fn step_limit_precedence_flag_task_config() {
        let flag = StepLimit::resolve(Some(3), Some(10), 30);
        assert_eq!((flag.base, flag.source), (3, LimitSource::Flag));
        assert!(!flag.extensible());
        let task = StepLimit::resolve(None, Some(10), 30);
        assert_eq!((task.base, task.source), (10, LimitSource::Task));
        assert!(task.extensible());
        let config = StepLimit::resolve(None, None, 30);
        assert_eq!((config.base, config.source), (30, LimitSource::Config));
    }

    #[test]
    fn a_flag_limit_is_never_extended() {
        let mut h = flat(4, None);
        h[3].checks_passing = 3;
        h[3].checks_failing = 0;
        let soft = StepLimit::resolve(None, Some(4), 30);
        assert!(matches!(
            decide(&soft.policy(&policy()), 4, 4, 4, &h),
            BudgetDecision::Extend { .. }
        ));
        let hard = StepLimit::resolve(Some(4), Some(4), 30);
        assert!(matches!(
            decide(&hard.policy(&policy()), 4, 4, 4, &h),
            BudgetDecision::Stop { .. }
        ));
    }
}
