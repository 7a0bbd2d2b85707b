//! Suggestions that help break a loop: concrete, per loop type and per action
//! (seed 000 `_suggest_for_identical`, extended to the other loop types).

use super::analysis::Info;
use super::signature::{failure_text, ActionCategory, ErrorCategory};

fn s(text: impl Into<String>) -> String {
    text.into()
}

fn target_of(i: &Info<'_>) -> String {
    format!("`{}`", i.view.target.as_deref().unwrap_or(&i.view.action))
}

fn generic() -> Vec<String> {
    vec![
        s("Try a fundamentally different approach"),
        s("Re-analyze the problem from scratch"),
        s("Consider using 'escalate' if stuck"),
    ]
}

/// The first line of an error, cut short, for quoting in a suggestion.
fn excerpt(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let cut: String = line.chars().take(120).collect();
    if cut.len() < line.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// For the same action failing again and again (ported from `_suggest_for_identical`).
pub(crate) fn identical(last: &Info<'_>) -> Vec<String> {
    let error = failure_text(last.view);
    let lower = error.to_lowercase();
    let target = target_of(last);
    let category = last.sig.error;
    let mut out = Vec::new();
    match last.view.action.as_str() {
        "edit_file" if lower.contains("occurs") => out.extend([
            format!("old_text matches several places in {target}: include more surrounding lines so it matches exactly once"),
            s("Or use replace_lines with the line numbers from read_file"),
        ]),
        "edit_file" if category == Some(ErrorCategory::NotFound) => out.extend([
            format!("The text to replace may have changed - re-read {target} before editing it again"),
            s("Use replace_lines with line numbers instead of text matching"),
            s("Check for whitespace differences (tabs vs spaces); copy old_text exactly from read_file output, without the `  12| ` line-number prefixes"),
        ]),
        "edit_file" => out.push(s("Try a different edit approach")),
        "extract_function" if lower.contains("control flow") => out.extend([
            s("The selected lines contain early returns or breaks"),
            s("Try simplify_conditional first to restructure the code"),
            s("Select a different range that doesn't cross control flow boundaries"),
        ]),
        "extract_function" => out.extend([
            s("Check that line numbers are still valid (file may have changed)"),
            s("Re-analyze the function to get updated extraction suggestions"),
        ]),
        "replace_lines" => out.extend([
            format!("The line numbers are out of date: read {target} again for its current length and lines"),
            s("Or use edit_file with the exact text to replace instead of line numbers"),
        ]),
        "write_file" => out.push(format!(
            "Writing {target} again fails the same way: fix the cause ({}) instead",
            excerpt(error)
        )),
        "run_check" | "run_tests" => {
            out.extend([
                s("Repeated checking without modification won't change the result"),
                s("Make a code change before checking again"),
            ]);
            match category {
                Some(ErrorCategory::Timeout) => out.push(s(
                    "It times out every time: find what hangs (the test named in the output) instead of re-running it",
                )),
                Some(ErrorCategory::CompileError | ErrorCategory::SyntaxError) => out.push(format!(
                    "The code does not build: fix this first: {}",
                    excerpt(error)
                )),
                _ => out.push(format!("Fix what the output reports: {}", excerpt(error))),
            }
        }
        "read_file" | "load_context" if category == Some(ErrorCategory::NotFound) => out.extend([
            format!("{target} does not exist: use search to find the right path"),
            s("If the file should exist, create it with write_file"),
        ]),
        "search" if category == Some(ErrorCategory::NotFound) => out.extend([
            s("The folder given as `path` does not exist: drop `path` to search the whole workspace"),
        ]),
        "complete" => out.extend([
            format!(
                "complete is refused until verification passes: fix what fails first ({})",
                excerpt(error)
            ),
            s("Run run_tests to see the failing output, then change the code it points to"),
        ]),
        "invalid_reply" => out.extend([
            s("Reply with exactly one tool call whose arguments are a JSON object matching the tool's schema, not prose"),
            s("If the work is done call complete; if you are stuck call escalate"),
        ]),
        _ => {}
    }
    if category == Some(ErrorCategory::Refused) && last.view.action != "complete" {
        out.insert(
            0,
            format!(
                "The host refuses this action: {}; do what the refusal asks instead",
                excerpt(error)
            ),
        );
    }
    if out.is_empty() {
        out = generic();
    }
    out
}

/// For one signature repeated without progress.
pub(crate) fn repetition(last: &Info<'_>, n: usize) -> Vec<String> {
    let target = target_of(last);
    if last.failed {
        return identical(last);
    }
    match last.category {
        ActionCategory::Read => vec![
            format!("You have read {target} {n} times and it has not changed since: use what you read and make the change now"),
            s("Keep what you learn in mind instead of re-reading; load_context keeps it in working memory"),
        ],
        ActionCategory::Search => vec![
            s("This search returns the same results each time: open one of the hits or search for something else"),
        ],
        ActionCategory::Check => vec![
            format!("Re-running {target} without a change gives the same result: change the code first"),
            s("Read the failure output once and fix the first error it reports"),
        ],
        ActionCategory::Edit => vec![
            format!("This change to {target} was already made: the file does not change. Write different content or fix a different file"),
            s("Re-read the failing output: the problem is probably not in this file"),
        ],
        ActionCategory::Message => vec![
            format!("You have stated this plan {n} times without carrying it out: make the change it describes now"),
            s("If something keeps you from acting on it, say what, or escalate"),
        ],
        _ => generic(),
    }
}

fn stale_note(i: &Info<'_>) -> Option<String> {
    let target = target_of(i);
    match i.category {
        ActionCategory::Edit if !i.failed => Some(format!(
            "`{}` on {target} changes nothing: write different content",
            i.view.action
        )),
        ActionCategory::Edit => Some(format!(
            "`{}` on {target} keeps failing: {}",
            i.view.action,
            excerpt(failure_text(i.view))
        )),
        ActionCategory::Check => Some(s(
            "Re-running checks between identical steps won't change the result",
        )),
        ActionCategory::Read => Some(format!("{target} has not changed since you last read it")),
        ActionCategory::Search => Some(s("The search results are the same as last time")),
        _ => None,
    }
}

/// For A-B-A-B.
pub(crate) fn alternation(a: &Info<'_>, b: &Info<'_>) -> Vec<String> {
    let mut out = vec![format!(
        "You are alternating between `{}` and `{}` without progress",
        a.approach.trim_end_matches(':'),
        b.approach.trim_end_matches(':')
    )];
    out.extend(stale_note(a));
    out.extend(stale_note(b).filter(|n| !out.contains(n)));
    out.push(s(
        "Step back: re-read the failing output and form a new hypothesis before the next change",
    ));
    out
}

/// For A fails, B fails, A fails again.
pub(crate) fn error_cycle(a: &Info<'_>, b: &Info<'_>) -> Vec<String> {
    let mut out = vec![format!(
        "Both approaches (`{}`, `{}`) have failed repeatedly",
        a.approach.trim_end_matches(':'),
        b.approach.trim_end_matches(':')
    )];
    if a.sig.error == Some(ErrorCategory::NotFound) || b.sig.error == Some(ErrorCategory::NotFound)
    {
        out.push(s(
            "Re-read the file first: the text or lines you target are not what you think they are",
        ));
    }
    if a.sig.error == Some(ErrorCategory::TestRegression)
        || b.sig.error == Some(ErrorCategory::TestRegression)
    {
        out.push(s("Each change breaks passing tests and is undone: find out which tests break and why before the next change"));
    }
    out.extend([
        s("Consider a fundamentally different strategy"),
        s("The code structure may not support the intended change"),
        s("Use 'cannot_fix' if no viable approach exists"),
    ]);
    out
}

/// For reworks of the same code that go back to a failure already had.
pub(crate) fn attempts_cycle(first: &Info<'_>, other: &Info<'_>) -> Vec<String> {
    let error = |i: &Info<'_>| excerpt(failure_text(i.view));
    vec![
        format!(
            "Your changes take turns between two failures: `{}` and `{}`; each fix of one brings the other back",
            error(first),
            error(other)
        ),
        s("Read both failures together: they constrain the same code; find the one change that satisfies both before editing again"),
        s("Do not go back to an approach that already failed: its failure is known"),
        s("Consider a fundamentally different strategy, or escalate if both constraints cannot hold at once"),
    ]
}

/// For different actions failing with one kind of error.
pub(crate) fn semantic(category: ErrorCategory) -> Vec<String> {
    let specific = match category {
        ErrorCategory::NotFound => "What you are looking for does not exist: search the workspace for it (or create it) instead of guessing paths or text",
        ErrorCategory::TestRegression => "Every change breaks passing tests and is undone: run the tests and read which ones break and why before changing the code again",
        ErrorCategory::Timeout => "Everything times out: find the hang (a deadlock, an endless loop, a test waiting for input) by reading the test that runs too long",
        ErrorCategory::CompileError => "The code does not compile, so every check fails the same way: fix the compile error at the location the compiler reports first",
        ErrorCategory::SyntaxError => "The code does not parse: re-read the lines around the reported position and fix the brackets or indentation",
        ErrorCategory::Refused => "The host refuses these actions: read the refusal reason and do what it asks",
        ErrorCategory::TestFailure => "The same tests fail whatever you run: change the code the failing test exercises",
        ErrorCategory::InvalidReply => "Reply with exactly one tool call whose arguments match the tool's schema",
        ErrorCategory::Dependency => "The environment lacks what the code needs (a module, a package, the module root): find out what is installed and where the project root is before running more commands",
        ErrorCategory::Other => "The same error comes back whatever you try: read it closely before the next attempt",
    };
    vec![
        s(specific),
        s("The underlying issue persists across approaches"),
        s("Re-examine the root cause before trying more variations"),
        s("Consider if the problem is fixable at all; escalate if it is not"),
    ]
}

/// For a long read/check-only streak (edits that changed only whitespace or comments
/// included).
pub(crate) fn read_only(stale: &[&Info<'_>], all_passing: bool) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = stale.iter().find(|i| i.noop) {
        out.push(format!(
            "Your edits to {} changed only whitespace or comments, so the failure cannot change: change what the code does",
            target_of(e)
        ));
    }
    if all_passing {
        out.push(s("All checks pass: if the task is done, call complete now"));
    }
    let mut again: Vec<String> = Vec::new();
    for i in stale {
        let what = match &i.view.target {
            Some(t) => format!("{} {t}", i.view.action),
            None => i.view.action.clone(),
        };
        if !again.contains(&what) {
            again.push(what);
        }
    }
    if !again.is_empty() {
        out.push(format!(
            "You repeated these without anything changing in between: {}",
            again.join(", ")
        ));
    }
    if all_passing {
        out.push(s(
            "If something is left to do, make that change instead of checking again",
        ));
    } else {
        out.extend([
            s("Analysis phase appears complete"),
            s("Make an actual code modification"),
            s("Use edit_file or replace_lines to fix what the failing check reports"),
        ]);
    }
    out
}

/// For changes that leave verification exactly as it was.
pub(crate) fn unchanged(files: &[&str], changes: usize, failure: Option<&str>) -> Vec<String> {
    let mut out = vec![format!(
        "{changes} changes to {} left the same failure in place{}",
        files.join(", "),
        failure.map(|f| format!(": {f}")).unwrap_or_default()
    )];
    out.extend([
        s("Actions are not affecting the failure: the cause is probably not where you are editing; read the failing test and trace what it calls"),
        s("Revert to the last good version and try a different approach"),
        s("Consider escalate if you cannot find the cause"),
    ]);
    out
}

/// For a file flipping between versions.
pub(crate) fn file_oscillation(file: &str) -> Vec<String> {
    vec![
        format!("`{file}` keeps returning to a version it already had: you are undoing your own changes"),
        s("Decide which version is right from the test expectations before editing again"),
        s("If each version fixes one test and breaks another, look for one change that satisfies both"),
    ]
}

/// For a check flipping between failures.
pub(crate) fn verification_oscillation() -> Vec<String> {
    vec![
        s("Fixing one failure brings back another that was fixed before"),
        s("Read both failures together: they constrain the same code differently; make one change that satisfies both"),
        s("Run the whole suite after each change and keep the fixes that pass"),
    ]
}
