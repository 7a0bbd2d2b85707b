//! `agentforge show`, `agentforge report --html` and the start of `run --record`: the
//! command side of [`agentforge::report`] and [`agentforge::session`].

use std::path::Path;

use agentforge::report::{self, ReportError};
use agentforge::session::{SessionError, SessionRecorder};
use agentforge::state_store::{TaskDir, TaskStore};
use agentforge::tools::Workspace;

use super::{failed, usage, workspace_root, Failure, Global};

/// Exit code of a disk failure (`EX_IOERR`), as a run reports one.
const EXIT_IO: u8 = agentforge::executor::exit::IO;

/// The task's folder; an unknown id is the user's error.
fn open(g: &Global, task_id: &str) -> Result<TaskDir, Failure> {
    TaskStore::new(&workspace_root(g)?)
        .open(task_id)
        .map_err(usage)
}

/// A report error with its exit code: the user's input (64) or the disk (74).
fn report_failure(e: ReportError) -> Failure {
    match e {
        e if e.is_usage() => usage(e),
        e @ (ReportError::Write { .. } | ReportError::Store(_) | ReportError::Snapshot { .. }) => {
            Failure {
                code: EXIT_IO,
                error: e.into(),
            }
        }
        e => failed(e),
    }
}

/// `agentforge show <task> [--step N]`.
pub fn show(g: &Global, task_id: &str, step: Option<u64>) -> Result<u8, Failure> {
    let dir = open(g, task_id)?;
    let shown = report::show_step(&dir, step).map_err(report_failure)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&shown).map_err(failed)?);
    } else {
        print!("{}", report::render_show(&shown).map_err(report_failure)?);
    }
    Ok(0)
}

/// `agentforge report <task> --html OUT`.
pub fn report(g: &Global, task_id: &str, out: &Path) -> Result<u8, Failure> {
    let dir = open(g, task_id)?;
    let ws = Workspace::new(&g.workspace).map_err(usage)?;
    let built = report::build_report(&dir, &ws).map_err(report_failure)?;
    let html = report::render_html(&built).map_err(report_failure)?;
    report::write_html(out, &html).map_err(report_failure)?;
    if g.json {
        println!(
            "{}",
            serde_json::json!({"task": task_id, "html": out, "bytes": html.len(), "steps": built.steps.len()})
        );
    } else {
        println!(
            "wrote the report of task `{task_id}` ({} steps) to {} ({} bytes)",
            built.steps.len(),
            out.display(),
            html.len()
        );
    }
    Ok(0)
}

/// Before a recorded run's first step: the session file gets the steps already recorded.
pub fn begin_recording(recorder: &SessionRecorder, dir: &TaskDir) -> Result<(), Failure> {
    match recorder.begin(dir) {
        Ok(_) => Ok(()),
        Err(e @ SessionError::NoTrajectory { .. }) => Err(usage(e)),
        Err(e @ SessionError::Store(_)) => Err(Failure {
            code: EXIT_IO,
            error: anyhow::anyhow!(e).context(format!(
                "--record {}: cannot write the session; give a path in a writable folder",
                recorder.path().display()
            )),
        }),
    }
}
