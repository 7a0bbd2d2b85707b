//! The views a person reads (seed 002 section 16): IMPLEMENTATION_PLAN.md,
//! VALUE_CHECKLIST.md and DELIVERY_REPORT.md, rendered from the sprint state only. Pure
//! functions: no agent edits these files and nothing reads them back.

use std::fmt::Write;

use crate::decide::StopReason;
use crate::measure::ValueMeasure;
use crate::state::{Block, SprintState, SprintTask, TaskStatus, VerificationStatus};

fn mark(t: &SprintTask) -> &'static str {
    match t.status {
        TaskStatus::Done => "[x]",
        TaskStatus::InProgress => "[>]",
        TaskStatus::Blocked => "[B]",
        TaskStatus::Descoped => "[~]",
        TaskStatus::Pending => "[ ]",
    }
}

fn block_text(b: &Block) -> String {
    match b {
        Block::HumanAction { instructions, .. } => format!("needs a person: {instructions}"),
        Block::RetriesExhausted { attempts } => {
            format!("not completed after {attempts} attempts")
        }
        Block::Other { reason } => reason.clone(),
    }
}

/// One line per field, skipping empty ones.
fn task_details(out: &mut String, t: &SprintTask) {
    let fields = [
        ("Value", t.value.clone()),
        ("Acceptance", t.acceptance.clone()),
        ("Depends on", t.dependencies.join(", ")),
        ("PRD", t.prd_section.clone()),
        ("Files", t.files_expected.join(", ")),
    ];
    for (k, v) in fields {
        if !v.is_empty() {
            let _ = writeln!(out, "  - {k}: {v}");
        }
    }
    if let Some(b) = &t.block {
        let _ = writeln!(out, "  - Blocked: {}", block_text(b));
    }
}

/// IMPLEMENTATION_PLAN.md: the tasks by phase, in creation order.
pub fn implementation_plan(s: &SprintState) -> String {
    let mut out = format!("# Implementation plan: {}\n\n", s.sprint);
    let done = s
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Done)
        .count();
    let _ = writeln!(
        out,
        "{done} of {} tasks done. Rendered from the sprint state; edits here are not read.\n",
        s.tasks.len()
    );
    let mut phases: Vec<&str> = Vec::new();
    for t in &s.tasks {
        if !phases.contains(&t.phase.as_str()) {
            phases.push(&t.phase);
        }
    }
    for phase in phases {
        let title = if phase.is_empty() { "Unphased" } else { phase };
        let _ = writeln!(out, "## {title}\n");
        for t in s.tasks.iter().filter(|t| t.phase == phase) {
            let _ = writeln!(
                out,
                "- {} **{}** ({}): {}",
                mark(t),
                t.id,
                t.source.name(),
                t.description
            );
            task_details(&mut out, t);
        }
        out.push('\n');
    }
    out
}

/// VALUE_CHECKLIST.md: each task's acceptance against the verifications that prove it,
/// and the latest VRC.
pub fn value_checklist(s: &SprintState) -> String {
    let m = ValueMeasure::of(s);
    let mut out = format!("# Value checklist: {}\n\n", s.sprint);
    let _ = writeln!(
        out,
        "Measured: {} verifications passing of {}, {} acceptance criteria proven, backed VRC {:.1}%.\n",
        m.verifications_passing,
        s.verifications.len(),
        m.acceptance_proven,
        f64::from(m.backed_vrc_permille) / 10.0
    );
    let _ = writeln!(out, "## Acceptance\n");
    for t in s.tasks.iter().filter(|t| t.status != TaskStatus::Descoped) {
        let proofs: Vec<String> = s
            .verifications
            .iter()
            .filter(|v| v.proves.contains(&t.id))
            .map(|v| format!("{} {:?}", v.id, v.status).to_lowercase())
            .collect();
        let proven = !proofs.is_empty()
            && t.status == TaskStatus::Done
            && s.verifications
                .iter()
                .filter(|v| v.proves.contains(&t.id))
                .all(|v| v.status == VerificationStatus::Passed);
        let _ = writeln!(
            out,
            "- [{}] {}: {}",
            if proven { "x" } else { " " },
            t.id,
            t.acceptance
        );
        let _ = writeln!(
            out,
            "  - verified by: {}",
            if proofs.is_empty() {
                "no verification yet".to_string()
            } else {
                proofs.join(", ")
            }
        );
    }
    let _ = writeln!(out, "\n## Verifications\n");
    for v in &s.verifications {
        let _ = writeln!(
            out,
            "- {} ({}): {:?}, {} fix attempts, `{}`",
            v.id, v.category, v.status, v.attempts, v.command
        );
    }
    if let Some(vrc) = s.vrc_history.last() {
        let _ = writeln!(
            out,
            "\n## Latest VRC (iteration {})\n\n{:.0}% claimed, {:?}: {}",
            vrc.iteration,
            vrc.value_score * 100.0,
            vrc.recommendation,
            vrc.summary
        );
        for g in &vrc.gaps {
            let _ = writeln!(out, "- gap {} ({}): {}", g.id, g.severity, g.description);
        }
    }
    out
}

/// How a sprint ended, for the report.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The exit gate passed.
    Delivered,
    /// The loop stopped.
    Stopped(StopReason),
}

/// DELIVERY_REPORT.md: what was delivered, measured, and what was not.
pub fn delivery_report(s: &SprintState, outcome: &Outcome) -> String {
    delivery_report_with_cost(s, outcome, None)
}

/// [`delivery_report`] with a `- Cost:` line beside the tokens: `cost` is the sprint's
/// cost as the host shows it (money is the host's, not the sprint state's: it is summed
/// from the role tasks' records).
pub fn delivery_report_with_cost(s: &SprintState, outcome: &Outcome, cost: Option<&str>) -> String {
    let m = ValueMeasure::of(s);
    let mut out = format!("# Delivery report: {}\n\n## Summary\n\n", s.sprint);
    let verdict = match outcome {
        Outcome::Delivered => "delivered: the exit gate passed".to_string(),
        Outcome::Stopped(r) => format!("stopped before delivery: {}", stop_text(r)),
    };
    let count = |st: TaskStatus| s.tasks.iter().filter(|t| t.status == st).count();
    let lines = [
        format!("- Outcome: {verdict}"),
        format!(
            "- Tasks: {} done, {} blocked, {} descoped, {} open, of {}",
            count(TaskStatus::Done),
            count(TaskStatus::Blocked),
            count(TaskStatus::Descoped),
            count(TaskStatus::Pending) + count(TaskStatus::InProgress),
            s.tasks.len()
        ),
        format!(
            "- Verifications: {} of {} passing; {} acceptance criteria proven",
            m.verifications_passing,
            s.verifications.len(),
            m.acceptance_proven
        ),
        format!(
            "- Value (VRC backed by passing verifications): {:.1}%",
            f64::from(m.backed_vrc_permille) / 10.0
        ),
        format!(
            "- Iterations: {}; course corrections: {}; exit-gate attempts: {}",
            s.iteration, s.course_corrections, s.exit_gate_attempts
        ),
        format!("- Tokens: {}", s.tokens_used),
    ];
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    if let Some(c) = cost {
        let _ = writeln!(out, "- Cost: {c}");
    }
    let _ = writeln!(out, "\n## Deliverables\n");
    for t in &s.tasks {
        let label = match t.status {
            TaskStatus::Done => "DELIVERED",
            TaskStatus::Descoped => "DESCOPED",
            TaskStatus::Blocked => "BLOCKED",
            TaskStatus::InProgress => "IN PROGRESS",
            TaskStatus::Pending => "NOT STARTED",
        };
        let _ = writeln!(out, "- [{label}] {}: {}", t.id, t.description);
        if let Some(b) = &t.block {
            let _ = writeln!(out, "  - {}", block_text(b));
        }
    }
    let failing: Vec<_> = s
        .verifications
        .iter()
        .filter(|v| v.status == VerificationStatus::Failed)
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "\n## Still failing\n");
        for v in failing {
            let last = v
                .failures
                .last()
                .map(|f| f.output.lines().next().unwrap_or("").to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "- {} after {} fix attempts: {}",
                v.id, v.attempts, last
            );
        }
    }
    if !s.services.is_empty() {
        let _ = writeln!(out, "\n## Services (health at the end)\n");
        for svc in &s.services {
            let _ = writeln!(
                out,
                "- {} ({}): {}",
                svc.name,
                svc.check,
                if svc.healthy { "up" } else { "DOWN" }
            );
        }
    }
    out
}

/// A stop reason in words (the delivery reports of both policies).
pub fn stop_text(r: &StopReason) -> String {
    match r {
        StopReason::IterationLimit { max } => format!("the iteration bound ({max}) was reached"),
        StopReason::TokenBudget { used, budget } => {
            format!("the token budget was spent ({used} of {budget})")
        }
        StopReason::CourseCorrectionsSpent { max } => {
            format!("no measured progress and all {max} course corrections spent")
        }
        StopReason::ExitGateAttemptsSpent { max } => {
            format!("the exit gate did not pass in {max} attempts")
        }
        StopReason::Escalated { reason } => format!("escalated to a person: {reason}"),
        StopReason::InitializerSpent { max } => {
            format!("the initializer gave no valid feature list in {max} attempts")
        }
        StopReason::FeaturesBlocked { passed, blocked } => {
            format!("{blocked} feature(s) blocked, {passed} passed")
        }
    }
}
