//! The feature-list policy driven through whole lists with random outcomes (issue 14,
//! item 6): whatever the tests do (pass, fail, flip), whatever the initializer gives
//! (nothing, a list), every run ends within its bounds, no counter passes its bound on
//! the way, and the end says delivered exactly when every feature passed.

use agentforge_value_loop::features::{
    apply_report, decide, FeatureAction, FeatureBlock, FeatureDecision, FeatureList, FeatureStatus,
    Policy, TestFailure,
};
use agentforge_value_loop::limits::{ceiling, Limits, LimitsConfig};
use agentforge_value_loop::state::SprintState;
use agentforge_value_loop::StopReason;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// How the simulated sessions behave.
#[derive(Debug, Clone)]
struct World {
    seed: u64,
    /// Features given in the file (0: a goal only, the initializer writes them).
    features: usize,
    /// Chance a test passes.
    test_passes: f64,
    /// Chance the initializer reports a list.
    initializer_reports: f64,
    /// Chance a feature depends on an earlier one.
    depends: f64,
    /// Chance the file gives a feature as blocked / already passed.
    preset: f64,
    /// A lowered retry bound (none: the ceiling).
    retries: Option<u32>,
    /// A lowered iteration bound.
    iterations: Option<u32>,
    /// Tokens per session and the budget.
    tokens_per_session: u64,
    token_budget: Option<u64>,
}

fn worlds() -> impl Strategy<Value = World> {
    (
        any::<u64>(),
        0usize..8,
        prop_oneof![Just(0.0), Just(1.0), 0.0..1.0f64],
        prop_oneof![Just(0.0), Just(1.0), 0.0..1.0f64],
        0.0..1.0f64,
        prop_oneof![Just(0.0), 0.0..0.4f64],
        prop_oneof![Just(None), (1u32..=ceiling::FEATURE_RETRIES).prop_map(Some)],
        prop_oneof![Just(None), (1u32..30).prop_map(Some)],
        0u64..50_000,
        prop_oneof![Just(None), (1u64..300_000).prop_map(Some)],
    )
        .prop_map(|(seed, n, p, i, d, pre, r, it, t, tb)| World {
            seed,
            features: n,
            test_passes: p,
            initializer_reports: i,
            depends: d,
            preset: pre,
            retries: r,
            iterations: it,
            tokens_per_session: t,
            token_budget: tb,
        })
}

fn list_of(rng: &mut StdRng, w: &World, n: usize, presets: bool) -> serde_json::Value {
    let features: Vec<_> = (0..n)
        .map(|i| {
            let mut deps = vec![];
            if i > 0 && rng.random_bool(w.depends) {
                deps.push(format!("F-{}", rng.random_range(0..i) + 1));
            }
            let mut f = json!({
                "id": format!("F-{}", i + 1),
                "description": format!("feature {}", i + 1),
                "verify": ["true"],
                "depends_on": deps,
            });
            if presets && rng.random_bool(w.preset) {
                f["status"] = json!(if rng.random_bool(0.5) {
                    "blocked"
                } else {
                    "passed"
                });
            }
            f
        })
        .collect();
    json!({"features": features})
}

/// Runs one whole list; returns the end and the iterations spent.
fn run(w: &World) -> Result<(FeatureDecision, SprintState, Limits), TestCaseError> {
    let limits = Limits::new(&LimitsConfig {
        max_feature_retries: w.retries,
        max_iterations: w.iterations,
        token_budget: w.token_budget,
        ..Default::default()
    })
    .unwrap();
    let max = limits.max_feature_retries();
    let mut rng = StdRng::seed_from_u64(w.seed);
    let mut s = SprintState::new("p");
    s.policy = Policy::FeatureList;
    let file = list_of(&mut rng, w, w.features, true);
    let mut text = file.clone();
    text["goal"] = json!("the goal");
    let parsed = agentforge_value_loop::features::parse_file(&text.to_string(), "p.json")
        .expect("generated lists are valid");
    s.feature_list = Some(parsed.into_list());
    // The longest a list can take: the initializer's attempts, then per feature at most
    // `max` coding sessions, `max` tests and one block.
    let per_feature = 2 * u64::from(max) + 1;
    let worst = u64::from(limits.max_initializer_attempts()) + 8 * per_feature;
    let mut steps = 0u64;
    loop {
        let d = decide(&limits, &s);
        let FeatureDecision::Act { action } = d.clone() else {
            return Ok((d, s, limits));
        };
        steps += 1;
        prop_assert!(steps <= worst, "did not end within {worst} iterations");
        s.iteration += 1;
        let list = s.feature_list.get_or_insert_with(FeatureList::default);
        match action {
            FeatureAction::Initialize => {
                list.initializer_attempts += 1;
                s.tokens_used += w.tokens_per_session;
                if rng.random_bool(w.initializer_reports) {
                    let n = rng.random_range(1..6);
                    let l = list_of(&mut rng, w, n, false);
                    apply_report(&l, &mut s).map_err(TestCaseError::fail)?;
                }
            }
            FeatureAction::Code { feature } => {
                let f = list.feature(&feature).unwrap().clone();
                // Coded only once its dependencies passed.
                for d in &f.depends_on {
                    prop_assert_eq!(list.feature(d).unwrap().status, FeatureStatus::Passed);
                }
                list.coding_done(&feature, &limits)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                s.tokens_used += w.tokens_per_session;
            }
            FeatureAction::Test { feature } => {
                let failure = (!rng.random_bool(w.test_passes)).then(|| TestFailure {
                    command: "true".into(),
                    exit_code: Some(1),
                    output: "failed".into(),
                });
                list.record_test(&feature, failure, &limits)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            FeatureAction::Block { feature, why } => {
                if let FeatureBlock::RetriesExhausted { failed_tests } = why {
                    prop_assert_eq!(failed_tests, max);
                }
                list.block(&feature, why)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
        // No counter passes its bound, after every iteration.
        let list = s.feature_list.as_ref().unwrap();
        prop_assert!(list.initializer_attempts <= limits.max_initializer_attempts());
        for f in &list.features {
            prop_assert!(f.retry <= max, "{} retry {} > {max}", f.id, f.retry);
            prop_assert!(
                f.coding_sessions <= max,
                "{}: {} coding sessions",
                f.id,
                f.coding_sessions
            );
            prop_assert!(f.tests <= max, "{}: {} tests", f.id, f.tests);
        }
        prop_assert!(s.iteration <= limits.max_iterations());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn every_feature_list_ends_within_its_bounds(w in worlds()) {
        let (end, s, limits) = run(&w)?;
        let list = s.feature_list.clone().unwrap_or_default();
        match end {
            FeatureDecision::Done { passed, blocked } => {
                // Nothing left in flight or pending; every feature passed or is blocked.
                for f in &list.features {
                    prop_assert!(
                        matches!(f.status, FeatureStatus::Passed | FeatureStatus::Blocked),
                        "{} ended {:?}", f.id, f.status
                    );
                    if f.status == FeatureStatus::Passed {
                        prop_assert_eq!(f.tested, Some(true));
                    }
                    if let Some(FeatureBlock::Dependency { feature }) = &f.block {
                        prop_assert_eq!(list.feature(feature).unwrap().status, FeatureStatus::Blocked);
                    }
                }
                prop_assert_eq!((passed + blocked) as usize, list.features.len());
                prop_assert!(!list.features.is_empty());
                // Tests that always pass deliver a list nobody set aside.
                if w.test_passes == 1.0 && list.features.iter().all(|f| f.block.is_none()) {
                    prop_assert_eq!(blocked, 0);
                }
            }
            FeatureDecision::Stop(StopReason::InitializerSpent { max }) => {
                prop_assert!(list.features.is_empty());
                prop_assert_eq!(list.initializer_attempts, max);
            }
            FeatureDecision::Stop(StopReason::IterationLimit { max }) => {
                prop_assert_eq!(s.iteration, max);
            }
            FeatureDecision::Stop(StopReason::TokenBudget { used, budget }) => {
                prop_assert!(used >= budget);
                prop_assert_eq!(Some(budget), w.token_budget.or(Some(limits.token_budget())));
            }
            other => prop_assert!(false, "unexpected end {:?}", other),
        }
    }
}

/// The brief's case, driven by hand: one feature passes at once, one after a retry, one
/// is blocked after two failed tests, and the feature after it still runs.
#[test]
fn pass_retry_blocked_and_the_next_still_runs() {
    let limits = Limits::default();
    let mut s = SprintState::new("p");
    s.policy = Policy::FeatureList;
    let text = json!({"features": [
        {"id": "F-1", "description": "a", "verify": ["true"]},
        {"id": "F-2", "description": "b", "verify": ["true"]},
        {"id": "F-3", "description": "c", "verify": ["true"]},
        {"id": "F-4", "description": "d", "verify": ["true"]},
        {"id": "F-5", "description": "e", "verify": ["true"], "depends_on": ["F-3"]},
    ]});
    s.feature_list = Some(
        agentforge_value_loop::features::parse_file(&text.to_string(), "f.json")
            .unwrap()
            .into_list(),
    );
    // Test results in order: F-1 pass; F-2 fail, pass; F-3 fail, fail; F-4 pass (F-5,
    // which depends on F-3, is blocked).
    let mut results = vec![true, false, true, false, false, true].into_iter();
    let mut trail = vec![];
    loop {
        let d = decide(&limits, &s);
        let FeatureDecision::Act { action } = d.clone() else {
            assert_eq!(
                d,
                FeatureDecision::Done {
                    passed: 3,
                    blocked: 2
                }
            );
            break;
        };
        let list = s.feature_list.as_mut().unwrap();
        trail.push(match &action {
            FeatureAction::Initialize => "init".to_string(),
            FeatureAction::Code { feature } => format!("code {feature}"),
            FeatureAction::Test { feature } => format!("test {feature}"),
            FeatureAction::Block { feature, .. } => format!("block {feature}"),
        });
        match action {
            FeatureAction::Code { feature } => list.coding_done(&feature, &limits).unwrap(),
            FeatureAction::Test { feature } => {
                let pass = results.next().unwrap();
                let failure = (!pass).then(|| TestFailure {
                    command: "true".into(),
                    exit_code: Some(1),
                    output: String::new(),
                });
                list.record_test(&feature, failure, &limits).unwrap();
            }
            FeatureAction::Block { feature, why } => list.block(&feature, why).unwrap(),
            FeatureAction::Initialize => unreachable!(),
        }
    }
    assert_eq!(
        trail,
        [
            "code F-1",
            "test F-1",
            "code F-2",
            "test F-2",
            "code F-2",
            "test F-2",
            "code F-3",
            "test F-3",
            "code F-3",
            "test F-3",
            "block F-3",
            "code F-4",
            "test F-4",
            "block F-5"
        ]
    );
}
