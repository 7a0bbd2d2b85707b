//! Every recovery path's bound (issue 12, item 6). The hard ceilings are constants of
//! this crate; a sprint's configuration may lower a bound but never raise it, and a
//! [`Limits`] value cannot be changed once made (its fields are private): the decision
//! engine and the counting methods of [`crate::SprintState`] read it, nothing writes it.
//! The seed's authors saw a strategy reasoner raise its own fix-attempt limit and loop;
//! here no code path can.

use serde::{Deserialize, Serialize};

/// The ceilings no configuration can exceed (seed 002's defaults and issue 12's bounds).
pub mod ceiling {
    /// Fix attempts per verification.
    pub const FIX_ATTEMPTS: u32 = 5;
    /// Course corrections per sprint.
    pub const COURSE_CORRECTIONS: u32 = 5;
    /// Exit-gate attempts per sprint.
    pub const EXIT_GATE_ATTEMPTS: u32 = 3;
    /// Builder attempts per task without a completion report.
    pub const TASK_RETRIES: u32 = 3;
    /// Open tasks created mid-loop.
    pub const MID_LOOP_OPEN_TASKS: u32 = 15;
    /// Iterations of the value loop.
    pub const ITERATIONS: u32 = 200;
    /// Iterations without measured progress before a course correction.
    pub const NO_PROGRESS: u32 = 10;
    /// Service fixes without measured progress.
    pub const SERVICE_FIXES: u32 = 3;
    /// Verification generations per sprint.
    pub const QC_GENERATIONS: u32 = 3;
    /// Tokens per sprint, over every role.
    pub const TOKENS: u64 = 50_000_000;
    /// Failed tests of one feature before it is blocked (seed 003: `retry < 2` codes
    /// again, `retry >= 2` blocks).
    pub const FEATURE_RETRIES: u32 = 2;
    /// Initializer sessions that may end without a valid feature list.
    pub const INITIALIZER_ATTEMPTS: u32 = 2;
}

/// The `[value_loop]` settings a project may give (all optional: the ceiling is the
/// default, except the token budget's default of 5 million).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Fix attempts per verification.
    pub max_fix_attempts: Option<u32>,
    /// Course corrections per sprint.
    pub max_course_corrections: Option<u32>,
    /// Exit-gate attempts per sprint.
    pub max_exit_gate_attempts: Option<u32>,
    /// Builder attempts per task.
    pub max_task_retries: Option<u32>,
    /// Open mid-loop tasks.
    pub max_mid_loop_tasks: Option<u32>,
    /// Iterations.
    pub max_iterations: Option<u32>,
    /// Iterations without progress before a course correction.
    pub max_no_progress: Option<u32>,
    /// Service fixes without progress.
    pub max_service_fixes: Option<u32>,
    /// Tokens per sprint.
    pub token_budget: Option<u64>,
    /// Tasks done before verifications are generated (seed: 1).
    pub generate_verifications_after: Option<u32>,
    /// Tasks between critical evaluations (seed: 3).
    pub critical_eval_interval: Option<u32>,
    /// Feature-list policy: failed tests of a feature before it is blocked (seed 003: 2).
    pub max_feature_retries: Option<u32>,
}

/// A configured bound that is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// Above the hard ceiling.
    #[error("[value_loop] {key} = {value} is above its ceiling of {ceiling}; use a value from 1 to {ceiling}")]
    AboveCeiling {
        /// The key.
        key: &'static str,
        /// The value given.
        value: u64,
        /// The ceiling.
        ceiling: u64,
    },
    /// Zero, which would make the path unusable.
    #[error("[value_loop] {key} = 0 would never allow the step; use a value from 1 to {ceiling}")]
    Zero {
        /// The key.
        key: &'static str,
        /// The ceiling.
        ceiling: u64,
    },
}

/// The bounds one sprint runs with; made once, before the loop starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub(crate) max_fix_attempts: u32,
    pub(crate) max_course_corrections: u32,
    pub(crate) max_exit_gate_attempts: u32,
    pub(crate) max_task_retries: u32,
    pub(crate) max_mid_loop_tasks: u32,
    pub(crate) max_iterations: u32,
    pub(crate) max_no_progress: u32,
    pub(crate) max_service_fixes: u32,
    pub(crate) max_qc_generations: u32,
    pub(crate) token_budget: u64,
    pub(crate) generate_verifications_after: u32,
    pub(crate) critical_eval_interval: u32,
    pub(crate) max_feature_retries: u32,
    pub(crate) max_initializer_attempts: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(&LimitsConfig::default()).expect("the defaults are within the ceilings")
    }
}

fn bounded(
    key: &'static str,
    value: Option<u64>,
    default: u64,
    ceiling: u64,
) -> Result<u64, LimitsError> {
    match value {
        None => Ok(default),
        Some(0) => Err(LimitsError::Zero { key, ceiling }),
        Some(v) if v > ceiling => Err(LimitsError::AboveCeiling {
            key,
            value: v,
            ceiling,
        }),
        Some(v) => Ok(v),
    }
}

impl Limits {
    /// The bounds of a configuration: each value within 1..=its ceiling.
    pub fn new(c: &LimitsConfig) -> Result<Limits, LimitsError> {
        use ceiling::*;
        let b32 = |key, v: Option<u32>, ceil: u32| -> Result<u32, LimitsError> {
            // Within u32: the ceiling is.
            bounded(key, v.map(u64::from), u64::from(ceil), u64::from(ceil)).map(|v| v as u32)
        };
        Ok(Limits {
            max_fix_attempts: b32("max_fix_attempts", c.max_fix_attempts, FIX_ATTEMPTS)?,
            max_course_corrections: b32(
                "max_course_corrections",
                c.max_course_corrections,
                COURSE_CORRECTIONS,
            )?,
            max_exit_gate_attempts: b32(
                "max_exit_gate_attempts",
                c.max_exit_gate_attempts,
                EXIT_GATE_ATTEMPTS,
            )?,
            max_task_retries: b32("max_task_retries", c.max_task_retries, TASK_RETRIES)?,
            max_mid_loop_tasks: b32(
                "max_mid_loop_tasks",
                c.max_mid_loop_tasks,
                MID_LOOP_OPEN_TASKS,
            )?,
            max_iterations: b32("max_iterations", c.max_iterations, ITERATIONS)?,
            max_no_progress: b32("max_no_progress", c.max_no_progress, NO_PROGRESS)?,
            max_service_fixes: b32("max_service_fixes", c.max_service_fixes, SERVICE_FIXES)?,
            max_qc_generations: QC_GENERATIONS,
            token_budget: bounded("token_budget", c.token_budget, 5_000_000, TOKENS)?,
            generate_verifications_after: bounded(
                "generate_verifications_after",
                c.generate_verifications_after.map(u64::from),
                1,
                1_000,
            )? as u32,
            critical_eval_interval: bounded(
                "critical_eval_interval",
                c.critical_eval_interval.map(u64::from),
                3,
                1_000,
            )? as u32,
            max_feature_retries: b32(
                "max_feature_retries",
                c.max_feature_retries,
                FEATURE_RETRIES,
            )?,
            max_initializer_attempts: INITIALIZER_ATTEMPTS,
        })
    }

    /// Fix attempts per verification.
    pub fn max_fix_attempts(&self) -> u32 {
        self.max_fix_attempts
    }
    /// Course corrections per sprint.
    pub fn max_course_corrections(&self) -> u32 {
        self.max_course_corrections
    }
    /// Exit-gate attempts per sprint.
    pub fn max_exit_gate_attempts(&self) -> u32 {
        self.max_exit_gate_attempts
    }
    /// Builder attempts per task.
    pub fn max_task_retries(&self) -> u32 {
        self.max_task_retries
    }
    /// Open mid-loop tasks.
    pub fn max_mid_loop_tasks(&self) -> u32 {
        self.max_mid_loop_tasks
    }
    /// Iterations.
    pub fn max_iterations(&self) -> u32 {
        self.max_iterations
    }
    /// Iterations without progress before a course correction.
    pub fn max_no_progress(&self) -> u32 {
        self.max_no_progress
    }
    /// Service fixes without progress.
    pub fn max_service_fixes(&self) -> u32 {
        self.max_service_fixes
    }
    /// Verification generations per sprint.
    pub fn max_qc_generations(&self) -> u32 {
        self.max_qc_generations
    }
    /// Tokens per sprint.
    pub fn token_budget(&self) -> u64 {
        self.token_budget
    }
    /// Tasks done before verifications are generated.
    pub fn generate_verifications_after(&self) -> u32 {
        self.generate_verifications_after
    }
    /// Tasks between critical evaluations.
    pub fn critical_eval_interval(&self) -> u32 {
        self.critical_eval_interval
    }
    /// Feature-list policy: failed tests of a feature before it is blocked.
    pub fn max_feature_retries(&self) -> u32 {
        self.max_feature_retries
    }
    /// Feature-list policy: initializer sessions before the sprint stops without a list.
    pub fn max_initializer_attempts(&self) -> u32 {
        self.max_initializer_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seed_bounds() {
        let l = Limits::default();
        assert_eq!(
            (
                l.max_fix_attempts(),
                l.max_course_corrections(),
                l.max_exit_gate_attempts(),
                l.max_task_retries(),
                l.max_mid_loop_tasks(),
                l.max_iterations()
            ),
            (5, 5, 3, 3, 15, 200)
        );
    }

    #[test]
    fn a_config_may_lower_a_bound_but_not_raise_it() {
        let lower = LimitsConfig {
            max_fix_attempts: Some(2),
            ..Default::default()
        };
        assert_eq!(Limits::new(&lower).unwrap().max_fix_attempts(), 2);
        let raise = LimitsConfig {
            max_fix_attempts: Some(6),
            ..Default::default()
        };
        let err = Limits::new(&raise).unwrap_err();
        assert_eq!(
            err,
            LimitsError::AboveCeiling {
                key: "max_fix_attempts",
                value: 6,
                ceiling: 5
            }
        );
        assert!(err.to_string().contains("max_fix_attempts = 6"));
        let zero = LimitsConfig {
            max_iterations: Some(0),
            ..Default::default()
        };
        assert!(matches!(
            Limits::new(&zero),
            Err(LimitsError::Zero {
                key: "max_iterations",
                ..
            })
        ));
    }

    #[test]
    fn the_feature_retry_bound_is_a_ceiling_too() {
        assert_eq!(Limits::default().max_feature_retries(), 2);
        let lower = LimitsConfig {
            max_feature_retries: Some(1),
            ..Default::default()
        };
        assert_eq!(Limits::new(&lower).unwrap().max_feature_retries(), 1);
        let raise = LimitsConfig {
            max_feature_retries: Some(3),
            ..Default::default()
        };
        assert_eq!(
            Limits::new(&raise).unwrap_err(),
            LimitsError::AboveCeiling {
                key: "max_feature_retries",
                value: 3,
                ceiling: 2
            }
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = toml_like(r#"{"max_fix_attempt": 3}"#).unwrap_err();
        assert!(err.contains("max_fix_attempt"), "{err}");
    }

    fn toml_like(json: &str) -> Result<LimitsConfig, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }
}
