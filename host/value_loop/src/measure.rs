//! Measured value (issue 12, item 5): what a sprint has delivered, computed only from
//! verified state. An iteration made progress when this measure rose above the best it
//! has ever been, so an oscillation (fix A breaks B, fix B breaks A) or a restarted
//! service that breaks again is never progress, whatever the actions report.

use serde::{Deserialize, Serialize};

use crate::state::{SprintState, TaskStatus, VerificationStatus};

/// The least rise of the VRC part (in thousandths) that counts as progress.
pub const MIN_VRC_RISE_PERMILLE: u32 = 50;

/// The value a sprint has, in three measured parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueMeasure {
    /// Verifications whose last run passed.
    pub verifications_passing: u32,
    /// Done tasks whose acceptance is proven: at least one verification that names the
    /// task (`proves`) passes, and none that names it fails.
    pub acceptance_proven: u32,
    /// The latest VRC score in thousandths, capped by the share of verifications passing:
    /// a score counts only as far as passing verifications back it.
    pub backed_vrc_permille: u32,
}

impl ValueMeasure {
    /// Measures a sprint's state.
    pub fn of(state: &SprintState) -> ValueMeasure {
        let counted: Vec<_> = state
            .verifications
            .iter()
            .filter(|v| v.status != VerificationStatus::Blocked)
            .collect();
        let passing = counted
            .iter()
            .filter(|v| v.status == VerificationStatus::Passed)
            .count() as u32;
        let proven = state
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Done)
            .filter(|t| {
                let naming: Vec<_> = counted
                    .iter()
                    .filter(|v| v.proves.iter().any(|p| p == &t.id))
                    .collect();
                !naming.is_empty()
                    && naming
                        .iter()
                        .all(|v| v.status == VerificationStatus::Passed)
            })
            .count() as u32;
        let backed = match (state.vrc_history.last(), counted.len()) {
            (Some(vrc), n) if n > 0 => {
                let claimed = (vrc.value_score.clamp(0.0, 1.0) * 1000.0).round() as u32;
                let support = passing * 1000 / n as u32;
                claimed.min(support)
            }
            _ => 0,
        };
        ValueMeasure {
            verifications_passing: passing,
            acceptance_proven: proven,
            backed_vrc_permille: backed,
        }
    }

    /// Whether any part is above `best` (the high-water mark). The VRC part counts only
    /// when it rose by [`MIN_VRC_RISE_PERMILLE`]: a score that creeps up by a point each
    /// iteration (a role's judgement, only capped by the passing verifications) must not
    /// keep resetting the stuck rule and the service-fix bound.
    pub fn exceeds(&self, best: &ValueMeasure) -> bool {
        self.verifications_passing > best.verifications_passing
            || self.acceptance_proven > best.acceptance_proven
            || self.backed_vrc_permille >= best.backed_vrc_permille + MIN_VRC_RISE_PERMILLE
    }

    /// The part-wise maximum.
    pub fn max(&self, other: &ValueMeasure) -> ValueMeasure {
        ValueMeasure {
            verifications_passing: self.verifications_passing.max(other.verifications_passing),
            acceptance_proven: self.acceptance_proven.max(other.acceptance_proven),
            backed_vrc_permille: self.backed_vrc_permille.max(other.backed_vrc_permille),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Recommendation, SprintTask, TaskSource, Verification, VrcSnapshot};

    fn vrc(score: f64) -> VrcSnapshot {
        VrcSnapshot {
            iteration: 1,
            deliverables_total: 2,
            deliverables_verified: 2,
            deliverables_blocked: 0,
            value_score: score,
            gaps: vec![],
            recommendation: Recommendation::ShipReady,
            summary: String::new(),
            full: true,
            fallback: false,
        }
    }

    fn sprint() -> SprintState {
        let mut s = SprintState::new("s");
        let mut t = SprintTask::new("T1", TaskSource::Plan, "d", "v", "a");
        t.status = TaskStatus::Done;
        s.tasks.push(t);
        let mut a = Verification::new("a", "unit", "true");
        a.proves = vec!["T1".into()];
        s.verifications.push(a);
        s.verifications.push(Verification::new("b", "unit", "true"));
        s
    }

    #[test]
    fn a_vrc_score_counts_only_as_far_as_verifications_back_it() {
        let mut s = sprint();
        s.vrc_history.push(vrc(1.0));
        assert_eq!(ValueMeasure::of(&s).backed_vrc_permille, 0);
        s.record_run("a", Some(0), "").unwrap();
        let m = ValueMeasure::of(&s);
        assert_eq!(m.backed_vrc_permille, 500);
        assert_eq!(m.acceptance_proven, 1);
        assert_eq!(m.verifications_passing, 1);
    }

    #[test]
    fn an_oscillation_is_progress_once_only() {
        let mut s = sprint();
        s.record_run("a", Some(0), "").unwrap();
        s.record_run("b", Some(1), "").unwrap();
        assert!(s.finish_iteration(), "first pass is progress");
        // Fix b, break a; then fix a, break b: the same count each time.
        s.record_run("b", Some(0), "").unwrap();
        s.record_run("a", Some(1), "").unwrap();
        assert!(!s.finish_iteration());
        s.record_run("a", Some(0), "").unwrap();
        s.record_run("b", Some(1), "").unwrap();
        assert!(!s.finish_iteration());
        assert_eq!(s.iterations_without_progress, 2);
        // Both pass: above the high-water mark.
        s.record_run("b", Some(0), "").unwrap();
        assert!(s.finish_iteration());
        assert_eq!(s.iterations_without_progress, 0);
    }

    #[test]
    fn a_failing_verification_naming_a_task_unproves_it() {
        let mut s = sprint();
        s.verifications[1].proves = vec!["T1".into()];
        s.record_run("a", Some(0), "").unwrap();
        s.record_run("b", Some(1), "").unwrap();
        assert_eq!(ValueMeasure::of(&s).acceptance_proven, 0);
    }

    #[test]
    fn a_vrc_score_that_creeps_up_is_not_progress() {
        use crate::state::{Recommendation, Verification, VrcSnapshot};
        let mut s = SprintState::new("s");
        s.verifications.push(Verification::new("a", "unit", "true"));
        s.record_run("a", Some(0), "").unwrap();
        assert!(s.finish_iteration());
        let vrc = |score: f64| VrcSnapshot {
            iteration: 1,
            deliverables_total: 1,
            deliverables_verified: 1,
            deliverables_blocked: 0,
            value_score: score,
            gaps: vec![],
            recommendation: Recommendation::Continue,
            summary: String::new(),
            full: false,
            fallback: false,
        };
        s.vrc_history.push(vrc(0.50));
        assert!(s.finish_iteration(), "the first score, from nothing");
        for score in [0.51, 0.52, 0.53, 0.54] {
            s.vrc_history.push(vrc(score));
            assert!(!s.finish_iteration(), "{score}");
        }
        // The creep raised the high-water mark: a rise counts from 0.54.
        s.vrc_history.push(vrc(0.60));
        assert!(s.finish_iteration(), "0.06 over the best");
    }
}
