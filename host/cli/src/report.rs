//! What a run looked like, from its task folder: `agentforge show` (what the model saw
//! and answered at one step, from the step's trajectory) and `agentforge report --html`
//! (one self-contained page: timeline with each step's cost, the task's cost, tokens per
//! step, loop warnings, facts, checks over time and the diff of the workspace changes).
//!
//! Both are built as typed views first ([`ShownStep`], [`RunReport`]) and rendered by a
//! minijinja template compiled into the binary; the HTML template escapes every value
//! (auto-escape on), so nothing the model or a tool wrote can become markup.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentforge_core::cost::{CostTotals, MicroUsd};
use agentforge_core::state::{ActionRecord, TaskState};
use agentforge_core::trajectory::{Answer, PromptSeen};
use agentforge_store::state_store::{StoreError, TaskDir};
use agentforge_store::tools::{self, BeforeChange, Workspace};
use serde::Serialize;

/// Why `show` or `report` cannot answer.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The task has no recorded step yet.
    #[error("task `{task}` has no recorded step yet; run it first (`agentforge run` or `agentforge resume {task}`)")]
    NoSteps {
        /// The task.
        task: String,
    },
    /// `--step` names a step the task does not have.
    #[error("task `{task}` has steps 1 to {last}; --step {step} is out of range (give a step from 1 to {last}, or leave --step out for the last)")]
    StepOutOfRange {
        /// The task.
        task: String,
        /// The step asked for.
        step: u64,
        /// Its last recorded step.
        last: u64,
    },
    /// The step was recorded before trajectories were kept.
    #[error("step {step} of task `{task}` has no trajectory (it was recorded before trajectories were kept); `agentforge task show {task}` shows its log record")]
    NoTrajectory {
        /// The task.
        task: String,
        /// The step.
        step: u64,
    },
    /// Reading the task folder failed (an unknown task, a damaged file...).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A snapshot of the task could not be read.
    #[error("cannot read the snapshots of task `{task}`: {source}")]
    Snapshot {
        /// The task.
        task: String,
        /// What failed.
        #[source]
        source: tools::ToolError,
    },
    /// The template failed (a bug: the views are typed).
    #[error("cannot render the {what}: {source}")]
    Render {
        /// `show` output or HTML report.
        what: &'static str,
        /// minijinja's error.
        #[source]
        source: minijinja::Error,
    },
    /// The report cannot be written to the path given.
    #[error(
        "cannot write the report to {path}: {source}; give --html a path in a writable folder"
    )]
    Write {
        /// The path given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ReportError {
    /// Whether the error is the user's input (an unknown task, a step out of range...),
    /// as opposed to a disk failure.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ReportError::NoSteps { .. }
                | ReportError::StepOutOfRange { .. }
                | ReportError::NoTrajectory { .. }
                | ReportError::Store(StoreError::NotFound { .. })
        )
    }
}

/// The name serde gives a unit enum value (`success`, `budget_exhausted`).
fn name_of<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The task's id, as its folder is named.
fn task_id(dir: &TaskDir) -> String {
    dir.path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// `agentforge show`

/// What the model saw and answered at one step.
#[derive(Debug, Clone, Serialize)]
pub struct ShownStep {
    /// The task.
    pub task: String,
    /// The step shown.
    pub step: u64,
    /// The task's last recorded step.
    pub last_step: u64,
    /// The provider that answered.
    pub provider: String,
    /// The model that answered.
    pub model: String,
    /// `POST <url>` (or `REPLAY replay:<file>#<line>`).
    pub endpoint: String,
    /// Attempts the call took.
    pub attempts: u32,
    /// The reply's HTTP status.
    pub status: u16,
    /// The system message.
    pub system: String,
    /// The user message.
    pub user: String,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// The answer, classified.
    pub answer: Answer,
    /// The answer's arguments (or text), pretty JSON.
    pub answer_detail: String,
    /// Provider-reported tokens in and out.
    pub input_tokens: u64,
    /// Provider-reported output tokens.
    pub output_tokens: u64,
    /// What the step did with it (the log's action, result, summary).
    pub action: String,
    /// The result.
    pub result: String,
    /// The summary.
    pub summary: String,
    /// Size of the trajectory on disk, compressed.
    pub stored_bytes: u64,
    /// Size of the trajectory's JSON.
    pub raw_bytes: u64,
}

/// The record of `step` (default: the last), checked against the task's steps.
fn record_at(dir: &TaskDir, step: Option<u64>) -> Result<(ActionRecord, u64), ReportError> {
    let task = task_id(dir);
    let records = dir.read_actions()?;
    let last = records.last().map_or(0, |r| r.step);
    if last == 0 {
        return Err(ReportError::NoSteps { task });
    }
    let want = step.unwrap_or(last);
    records
        .into_iter()
        .find(|r| r.step == want)
        .map(|r| (r, last))
        .ok_or(ReportError::StepOutOfRange {
            task,
            step: want,
            last,
        })
}

/// Reads step `step` (default: the last) of a task: its log record and its trajectory.
pub fn show_step(dir: &TaskDir, step: Option<u64>) -> Result<ShownStep, ReportError> {
    let (record, last_step) = record_at(dir, step)?;
    let task = task_id(dir);
    let reference = record
        .trajectory
        .as_ref()
        .ok_or_else(|| ReportError::NoTrajectory {
            task: task.clone(),
            step: record.step,
        })?;
    let t = dir.read_trajectory(reference)?;
    let (endpoint, attempts, status, seen) = match &t.exchange {
        Some(x) => (
            format!("{} {}", x.request.method, x.request.url),
            x.attempts,
            x.reply.status,
            PromptSeen::from_body(&x.request.body).unwrap_or_default(),
        ),
        None => ("(not recorded)".to_string(), 0, 0, PromptSeen::default()),
    };
    // Printed to a terminal: no escape sequence from the model or a file gets through.
    let clean = |s: &str| agentforge_core::sanitize::text(s).into_owned();
    let answer_detail = match &t.answer {
        Answer::ToolCall { arguments, .. } => {
            serde_json::to_string_pretty(arguments).unwrap_or_default()
        }
        Answer::NoToolCall { text } => text.clone(),
        Answer::Malformed { raw, error, .. } => format!("{raw}\n({error})"),
    };
    Ok(ShownStep {
        task,
        step: record.step,
        last_step,
        provider: t.provider,
        model: clean(&t.model),
        endpoint: clean(&endpoint),
        attempts,
        status,
        system: clean(&seen.system),
        user: clean(&seen.user),
        tools: seen.tools.iter().map(|n| clean(n)).collect(),
        answer: t.answer,
        answer_detail: clean(&answer_detail),
        input_tokens: t.usage.input_tokens,
        output_tokens: t.usage.output_tokens,
        action: clean(&record.action),
        result: name_of(&record.result),
        summary: agentforge_core::sanitize::line(&record.summary),
        stored_bytes: reference.bytes,
        raw_bytes: reference.raw_bytes,
    })
}

const SHOW_TEMPLATE: &str = include_str!("templates/show.txt.j2");
const REPORT_TEMPLATE: &str = include_str!("templates/report.html.j2");

/// The text `agentforge show` prints.
pub fn render_show(s: &ShownStep) -> Result<String, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.add_template("show.txt", SHOW_TEMPLATE)
        .and_then(|()| env.get_template("show.txt"))
        .and_then(|t| t.render(minijinja::context! { s => s }))
        .map_err(|source| ReportError::Render {
            what: "`show` output",
            source,
        })
}

// ---------------------------------------------------------------------------------------
// `agentforge report --html`

/// A run, as the HTML report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The task's id, type, goal and end.
    pub task: TaskHeader,
    /// One row per recorded step.
    pub steps: Vec<StepRow>,
    /// Tokens per step, laid out for the SVG plot.
    pub plot: TokenPlot,
    /// Loops the detector reported.
    pub loops: Vec<LoopRow>,
    /// The facts the run holds at its end.
    pub facts: Vec<FactRow>,
    /// The checks at each step they ran.
    pub checks: CheckGrid,
    /// The workspace changes.
    pub diff: Vec<FileDiff>,
    /// Trajectory bytes on disk over all steps, compressed and raw.
    pub trajectory_bytes: (u64, u64),
}

/// The task's header.
#[derive(Debug, Clone, Serialize)]
pub struct TaskHeader {
    /// Id.
    pub id: String,
    /// Task type.
    pub task_type: String,
    /// Goal.
    pub goal: String,
    /// Status (`complete`, `escalated`...).
    pub status: String,
    /// Why it ended so.
    pub reason: Option<String>,
    /// Steps recorded.
    pub steps: u64,
    /// Step budget.
    pub max_steps: u64,
    /// Provider and model it last ran with.
    pub provider: Option<String>,
    /// Context tokens over all steps (host count).
    pub context_tokens: u64,
    /// Largest prompt.
    pub max_context_tokens: u64,
    /// Provider-reported input tokens.
    pub input_tokens: u64,
    /// Provider-reported output tokens.
    pub output_tokens: u64,
    /// Files the run changed.
    pub files_modified: Vec<String>,
    /// What the task's model calls cost (`$0.0426`), or `unknown (...)` while any step's
    /// cost is unknown (never `$0.00` for a call nobody priced).
    pub cost: String,
    /// Whether [`TaskHeader::cost`] is known.
    pub cost_known: bool,
}

/// One step of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    /// Step.
    pub step: u64,
    /// Phase it ran in.
    pub phase: String,
    /// Action.
    pub action: String,
    /// Target.
    pub target: String,
    /// Result (`success`, `failure`, `partial`, `skipped`).
    pub result: String,
    /// Summary.
    pub summary: String,
    /// Error, if any.
    pub error: Option<String>,
    /// Prompt tokens (host count).
    pub context_tokens: u64,
    /// Provider-reported input tokens.
    pub input_tokens: u64,
    /// Provider-reported output tokens.
    pub output_tokens: u64,
    /// What the step's model call cost (`$0.0048`), or `unknown` (an unpriced model, no
    /// usage reported).
    pub cost: String,
    /// Whether [`StepRow::cost`] is known.
    pub cost_known: bool,
    /// Wall time of the action.
    pub duration_ms: u64,
    /// The loop detected at this step, if any.
    pub loop_type: Option<String>,
}

/// A line plot of context tokens per step, in SVG user units.
#[derive(Debug, Clone, Serialize)]
pub struct TokenPlot {
    /// Width of the drawing.
    pub width: u32,
    /// Height of the drawing.
    pub height: u32,
    /// Left edge of the plot area (room for the axis labels).
    pub left: u32,
    /// Bottom edge of the plot area.
    pub bottom: u32,
    /// One point per step.
    pub points: Vec<PlotPoint>,
    /// Labels of the y axis.
    pub y_ticks: Vec<PlotTick>,
}

/// One step's point.
#[derive(Debug, Clone, Serialize)]
pub struct PlotPoint {
    /// Step.
    pub step: u64,
    /// Tokens.
    pub tokens: u64,
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
}

/// A label of the y axis.
#[derive(Debug, Clone, Serialize)]
pub struct PlotTick {
    /// y.
    pub y: f64,
    /// Tokens at that height.
    pub label: u64,
}

/// A loop the detector reported.
#[derive(Debug, Clone, Serialize)]
pub struct LoopRow {
    /// Step.
    pub step: u64,
    /// Loop type.
    pub loop_type: String,
    /// What was seen.
    pub description: String,
    /// How to break it.
    pub suggestions: Vec<String>,
    /// The action blocked because of it.
    pub blocked: Option<String>,
}

/// A fact the run holds.
#[derive(Debug, Clone, Serialize)]
pub struct FactRow {
    /// Step that produced it.
    pub step: u64,
    /// Category.
    pub category: String,
    /// The sentence.
    pub statement: String,
    /// Where it came from.
    pub source: String,
}

/// Checks over time: one column per step where checks ran.
#[derive(Debug, Clone, Serialize)]
pub struct CheckGrid {
    /// The steps (columns).
    pub steps: Vec<u64>,
    /// One row per check.
    pub rows: Vec<CheckRow>,
}

/// One check across the steps.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRow {
    /// Check name.
    pub name: String,
    /// One cell per column of [`CheckGrid::steps`].
    pub cells: Vec<CheckCell>,
}

/// A check at one step.
#[derive(Debug, Clone, Serialize)]
pub struct CheckCell {
    /// `pass`, `fail`, or `none` (not run at that step).
    pub state: &'static str,
    /// The gate's summary.
    pub summary: String,
}

/// One changed file.
#[derive(Debug, Clone, Serialize)]
pub struct FileDiff {
    /// Workspace-relative path.
    pub path: String,
    /// `modified`, `created`, `deleted` or `binary`.
    pub change: &'static str,
    /// Unified diff lines.
    pub lines: Vec<DiffLine>,
    /// Lines left out past [`MAX_DIFF_LINES`].
    pub omitted: usize,
}

/// One line of a unified diff.
#[derive(Debug, Clone, Serialize)]
pub struct DiffLine {
    /// `hunk`, `add`, `del` or `ctx`.
    pub kind: &'static str,
    /// The text (without its newline).
    pub text: String,
}

/// Most diff lines shown per file.
pub const MAX_DIFF_LINES: usize = 2_000;

/// Largest workspace file the report reads for the diff.
pub const MAX_DIFF_FILE_BYTES: u64 = 4 * 1024 * 1024;

const PLOT_WIDTH: u32 = 720;
const PLOT_HEIGHT: u32 = 220;
const PLOT_LEFT: u32 = 56;
const PLOT_BOTTOM: u32 = 190;
const PLOT_TOP: u32 = 16;
const PLOT_RIGHT: u32 = 16;

/// Lays out one point per step: x by step, y by tokens from 0 to the largest value.
fn token_plot(steps: &[(u64, u64)]) -> TokenPlot {
    let max = steps.iter().map(|s| s.1).max().unwrap_or(0).max(1);
    let n = steps.len().max(2) as f64 - 1.0;
    let span_x = f64::from(PLOT_WIDTH - PLOT_LEFT - PLOT_RIGHT);
    let span_y = f64::from(PLOT_BOTTOM - PLOT_TOP);
    let y_of = |t: u64| f64::from(PLOT_BOTTOM) - span_y * t as f64 / max as f64;
    let round = |v: f64| (v * 10.0).round() / 10.0;
    let points = steps
        .iter()
        .enumerate()
        .map(|(i, &(step, tokens))| PlotPoint {
            step,
            tokens,
            x: round(f64::from(PLOT_LEFT) + span_x * i as f64 / n),
            y: round(y_of(tokens)),
        })
        .collect();
    let y_ticks = (0..=4)
        .map(|k| {
            let label = max * k / 4;
            PlotTick {
                y: round(y_of(label)),
                label,
            }
        })
        .collect();
    TokenPlot {
        width: PLOT_WIDTH,
        height: PLOT_HEIGHT,
        left: PLOT_LEFT,
        bottom: PLOT_BOTTOM,
        points,
        y_ticks,
    }
}

/// The checks at each step where one ran (its status's step is that step).
fn check_grid(records: &[ActionRecord]) -> CheckGrid {
    let mut names: Vec<String> = Vec::new();
    for r in records {
        for name in r.state_after.verification.checks.keys() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    let ran: Vec<&ActionRecord> = records
        .iter()
        .filter(|r| {
            r.state_after
                .verification
                .checks
                .values()
                .any(|c| c.step == r.step)
        })
        .collect();
    let rows = names
        .iter()
        .map(|name| CheckRow {
            name: name.clone(),
            cells: ran
                .iter()
                .map(|r| match r.state_after.verification.checks.get(name) {
                    Some(c) if c.step == r.step => CheckCell {
                        state: if c.passing { "pass" } else { "fail" },
                        summary: c.summary.clone(),
                    },
                    _ => CheckCell {
                        state: "none",
                        summary: String::new(),
                    },
                })
                .collect(),
        })
        .collect();
    CheckGrid {
        steps: ran.iter().map(|r| r.step).collect(),
        rows,
    }
}

/// The changes of the run: each file a recorded step changed, from its content before
/// the run's first change of it (the earliest snapshot that lists it) to its content in
/// the workspace now. A change the run undid (an auto-revert) shows nothing.
fn workspace_diff(
    dir: &TaskDir,
    ws: &Workspace,
    last_step: u64,
) -> Result<Vec<FileDiff>, ReportError> {
    let task = task_id(dir);
    let snapshot_err = |source| ReportError::Snapshot {
        task: task.clone(),
        source,
    };
    let mut snapshots: Vec<(u64, PathBuf)> = match std::fs::read_dir(dir.snapshots_dir()) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let step: u64 = name.strip_prefix("step-")?.parse().ok()?;
                // A snapshot past the last record is an interrupted step's.
                (step <= last_step).then(|| (step, e.path()))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    snapshots.sort();
    let mut before: BTreeMap<String, BeforeChange> = BTreeMap::new();
    for (_, snap) in &snapshots {
        for (path, content) in tools::snapshot_contents(snap).map_err(snapshot_err)? {
            before.entry(path).or_insert(content);
        }
    }
    let mut out = Vec::new();
    for (path, old) in before {
        let now = match ws.read_bounded(&path, MAX_DIFF_FILE_BYTES) {
            Ok(r) if !r.truncated => Some(r.bytes),
            Ok(_) => {
                out.push(FileDiff {
                    path,
                    change: "binary",
                    lines: vec![DiffLine {
                        kind: "hunk",
                        text: format!("larger than {MAX_DIFF_FILE_BYTES} bytes: not shown"),
                    }],
                    omitted: 0,
                });
                continue;
            }
            Err(_) => None,
        };
        let old = match old {
            BeforeChange::Absent => None,
            BeforeChange::Content(c) => Some(c),
        };
        if old == now {
            continue;
        }
        let change = match (&old, &now) {
            (None, _) => "created",
            (_, None) => "deleted",
            _ => "modified",
        };
        let (Ok(a), Ok(b)) = (
            String::from_utf8(old.unwrap_or_default()),
            String::from_utf8(now.unwrap_or_default()),
        ) else {
            out.push(FileDiff {
                path,
                change: "binary",
                lines: vec![DiffLine {
                    kind: "hunk",
                    text: "binary content changed".to_string(),
                }],
                omitted: 0,
            });
            continue;
        };
        let mut lines = Vec::new();
        let diff = similar::TextDiff::from_lines(&a, &b);
        for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
            lines.push(DiffLine {
                kind: "hunk",
                text: hunk.header().to_string(),
            });
            for change in hunk.iter_changes() {
                let (kind, sign) = match change.tag() {
                    similar::ChangeTag::Insert => ("add", '+'),
                    similar::ChangeTag::Delete => ("del", '-'),
                    similar::ChangeTag::Equal => ("ctx", ' '),
                };
                let text = change.value().trim_end_matches(['\n', '\r']);
                lines.push(DiffLine {
                    kind,
                    text: format!("{sign}{text}"),
                });
            }
        }
        let omitted = lines.len().saturating_sub(MAX_DIFF_LINES);
        lines.truncate(MAX_DIFF_LINES);
        out.push(FileDiff {
            path,
            change,
            lines,
            omitted,
        });
    }
    Ok(out)
}

/// Builds the report of a task from its folder and the workspace it ran in.
pub fn build_report(dir: &TaskDir, ws: &Workspace) -> Result<RunReport, ReportError> {
    let spec = dir.spec()?;
    let records = dir.read_actions()?;
    let state: TaskState = match records.last() {
        Some(r) => r.state_after.clone(),
        None => dir.load_state()?,
    };
    let provider = dir
        .load_provider()?
        .map(|p| format!("{} `{}`", p.kind, p.model));
    let steps: Vec<StepRow> = records
        .iter()
        .map(|r| StepRow {
            step: r.step,
            phase: r.phase.clone(),
            action: r.action.clone(),
            target: r.target.clone().unwrap_or_default(),
            result: name_of(&r.result),
            summary: r.summary.clone(),
            error: r.error.clone(),
            context_tokens: r.context_tokens,
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cost: r
                .cost_usd_micros
                .map_or_else(|| "unknown".to_string(), |c| c.to_string()),
            cost_known: r.cost_usd_micros.is_some(),
            duration_ms: r.duration_ms,
            loop_type: r.loop_detection.as_ref().map(|l| l.loop_type.clone()),
        })
        .collect();
    let plot = token_plot(
        &records
            .iter()
            .map(|r| (r.step, r.context_tokens))
            .collect::<Vec<_>>(),
    );
    let loops = records
        .iter()
        .filter_map(|r| r.loop_detection.as_ref())
        .map(|l| LoopRow {
            step: l.step,
            loop_type: l.loop_type.clone(),
            description: l.description.clone(),
            suggestions: l.suggestions.clone(),
            blocked: l.blocked.clone(),
        })
        .collect();
    let facts = state
        .facts
        .iter()
        .map(|f| FactRow {
            step: f.step,
            category: name_of(&f.category),
            statement: f.statement.clone(),
            source: f.source.clone(),
        })
        .collect();
    // The state's total is the task's (it keeps the costs of steps an undo took back); a
    // task recorded before costs were has none: its steps' costs are unknown.
    let cost = state.cost.unwrap_or(CostTotals {
        usd_micros: MicroUsd::ZERO,
        unpriced_steps: state.step,
    });
    let trajectory_bytes = records
        .iter()
        .filter_map(|r| r.trajectory.as_ref())
        .fold((0, 0), |(c, r), t| (c + t.bytes, r + t.raw_bytes));
    Ok(RunReport {
        task: TaskHeader {
            id: spec.id.clone(),
            task_type: spec.task_type.clone(),
            goal: spec.goal.clone(),
            status: name_of(&state.status),
            reason: state.status_reason.clone(),
            steps: state.step,
            max_steps: state.max_steps,
            provider,
            context_tokens: state.tokens.context_tokens,
            max_context_tokens: state.tokens.max_context_tokens,
            input_tokens: state.tokens.input_tokens,
            output_tokens: state.tokens.output_tokens,
            files_modified: state.files_modified.clone(),
            cost: cost.to_string(),
            cost_known: cost.known().is_some(),
        },
        checks: check_grid(&records),
        diff: workspace_diff(dir, ws, state.step)?,
        steps,
        plot,
        loops,
        facts,
        trajectory_bytes,
    })
}

/// The report as one self-contained HTML page (inline CSS and SVG, no script, nothing
/// loaded from elsewhere). Every value is HTML-escaped by the template engine.
pub fn render_html(report: &RunReport) -> Result<String, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // Escape everything, whatever the template's name says.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("report.html", REPORT_TEMPLATE)
        .and_then(|()| env.get_template("report.html"))
        .and_then(|t| t.render(minijinja::context! { r => report }))
        .map_err(|source| ReportError::Render {
            what: "HTML report",
            source,
        })
}

/// Writes `html` to `out` (atomically: a reader never sees half a page).
pub fn write_html(out: &Path, html: &str) -> Result<(), ReportError> {
    agentforge_store::state_store::atomic_write(out, html.as_bytes()).map_err(|source| {
        ReportError::Write {
            path: out.display().to_string(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_spans_its_area_from_zero_to_the_largest_value() {
        let p = token_plot(&[(1, 100), (2, 400), (3, 200)]);
        assert_eq!(p.points.len(), 3);
        assert_eq!(p.points[0].x, f64::from(PLOT_LEFT));
        assert_eq!(p.points[2].x, f64::from(PLOT_WIDTH - PLOT_RIGHT));
        assert_eq!(p.points[1].y, f64::from(PLOT_TOP));
        assert!(p.points[0].y > p.points[2].y);
        assert_eq!(p.y_ticks.first().map(|t| t.label), Some(0));
        assert_eq!(p.y_ticks.last().map(|t| t.label), Some(400));
        // One step still plots inside the area.
        let one = token_plot(&[(1, 0)]);
        assert_eq!(one.points[0].y, f64::from(PLOT_BOTTOM));
    }
}
