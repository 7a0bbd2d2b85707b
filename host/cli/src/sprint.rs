//! `agentforge run DIR` (a folder with VISION.md and PRD.md), `resume` of a sprint,
//! `status` and `render`: the value loop through the command line.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use serde::{Deserialize, Serialize};

use agentforge::config::Config;
use agentforge::executor::Runtime;
use agentforge::providers::{Provider, ProviderKind, RetryObserver};
use agentforge::sprint::roles::Role;
use agentforge::sprint::runner::RoleAfterStep;
use agentforge::sprint::runner::{RunOptions, RuntimeFactory, SprintOutcome, SprintRunner};
use agentforge::sprint::{SprintDir, SprintStore};
use agentforge::tools::Workspace;
use agentforge::value_loop::{Limits, SprintState, ValueMeasure};

use super::{failed, load_config, load_plugins, usage, Failure, Global, RunFlags};

/// What a sprint keeps of how it was run, so `resume` runs it the same way
/// (`run.json` in the sprint folder; never a key).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RunRecord {
    /// The folder of recorded sessions (`<seq>-<role>.jsonl`), for a replayed sprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replay: Option<PathBuf>,
    /// The plugin folders of the command line (absolute), so the roles of a resumed
    /// sprint run with the same plugins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    plugins: Vec<PathBuf>,
}

const RUN_RECORD: &str = "run.json";

/// Whether `path` is a sprint's input: a folder (VISION.md and PRD.md in it), or a
/// feature list ([`is_feature_list`]).
pub fn is_sprint_input(path: &Path) -> bool {
    path.is_dir() || is_feature_list(path)
}

/// The largest feature list read (a task file or anything else is not read whole).
const MAX_FEATURE_LIST_BYTES: u64 = 4 << 20;

/// Whether `path` is a feature list: a JSON object with `features` or `goal`, whatever
/// the file is called (a task file is YAML with neither).
pub fn is_feature_list(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.len() <= MAX_FEATURE_LIST_BYTES)
        && std::fs::read_to_string(path)
            .is_ok_and(|t| agentforge::value_loop::features::looks_like_feature_list(&t))
}

/// The copy of the feature list a sprint keeps (its input, compared on a second run).
const FEATURE_INPUT: &str = "features.input.json";

/// The sprint id a folder gives: its name, lower-cased, other characters as `-`.
fn sprint_id_of(dir: &Path) -> String {
    let name = std::fs::canonicalize(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| "sprint".to_string());
    let id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let id = id.trim_matches('-').to_string();
    if id.is_empty() {
        "sprint".to_string()
    } else {
        id
    }
}

/// Builds each role task's runtime: `[value_loop.roles.<role>]` over `[provider]`, or
/// the recorded session `<job>.jsonl` of the replay folder.
struct CliFactory<'a> {
    g: &'a Global,
    config: Config,
    replay: Option<PathBuf>,
    progress: bool,
    strict: bool,
    after_step: Option<RoleAfterStep>,
}

impl RuntimeFactory for CliFactory<'_> {
    fn after_step(&self) -> Option<RoleAfterStep> {
        self.after_step.clone()
    }

    fn runtime(&self, role: Role, job: &str) -> Result<Runtime, String> {
        let mut config = self.config.for_role(role.name());
        if let Some(dir) = &self.replay {
            let file = dir.join(format!("{job}.jsonl"));
            if !file.is_file() {
                return Err(format!(
                    "no recorded session {} for role task `{job}`: record one, or run the sprint with a model (without --replay)",
                    file.display()
                ));
            }
            config.provider.kind = ProviderKind::Replay;
            config.provider.replay = Some(file);
        }
        let mut provider =
            Provider::from_settings(&config.provider_settings()).map_err(|e| e.to_string())?;
        if self.progress {
            provider.on_retry(RetryObserver::new(|n| eprintln!("retry: {n}")));
        }
        let ws = Workspace::new(&self.g.workspace).map_err(|e| e.to_string())?;
        let mut rt = Runtime::new(ws, config, provider);
        rt.progress = self.progress;
        load_plugins(&mut rt, self.strict).map_err(|f| f.error.to_string())?;
        Ok(rt)
    }
}

/// `agentforge run DIR`: creates the sprint from DIR's VISION.md and PRD.md (or resumes
/// it when it exists with the same inputs) and runs it.
pub async fn run(
    g: &Global,
    input: &Path,
    flags: &RunFlags,
    sprint: Option<&str>,
) -> Result<u8, Failure> {
    run_with(g, input, flags, sprint, None).await
}

/// [`run`], with `after_step` run after each step a role task records (a fleet worker's
/// checkpoint).
pub(crate) async fn run_with(
    g: &Global,
    input: &Path,
    flags: &RunFlags,
    sprint: Option<&str>,
    after_step: Option<RoleAfterStep>,
) -> Result<u8, Failure> {
    if input.is_file() {
        return run_features(g, input, flags, sprint, after_step).await;
    }
    let read = |name: &str| -> Result<String, Failure> {
        let p = input.join(name);
        std::fs::read_to_string(&p).map_err(|e| {
            usage(anyhow!(
                "{}: {e}; a sprint folder holds VISION.md (the outcome wanted) and PRD.md (what must hold)",
                p.display()
            ))
        })
    };
    let vision = read("VISION.md")?;
    let prd = read("PRD.md")?;
    let ws = super::workspace_root(g)?;
    super::check_writable(&ws)?;
    let id = sprint
        .map(str::to_string)
        .unwrap_or_else(|| sprint_id_of(input));
    let dir = open_or_create(
        &ws,
        &id,
        "VISION.md or PRD.md",
        |dir| {
            let same = |name: &str, text: &str| {
                std::fs::read_to_string(dir.path().join(name)).is_ok_and(|t| t == text)
            };
            same("VISION.md", &vision) && same("PRD.md", &prd)
        },
        |store| store.create(&SprintState::new(&id), &vision, &prd),
    )?;
    drive(g, dir, flags, false, after_step).await
}

/// The sprint `id` under the workspace: checked (letters, digits, `-`, `_`), then opened
/// when it exists with the same inputs (`same`), refused when its inputs differ (naming
/// `what` differs), or made by `create`. Shared by `run DIR` and `run features.json`.
fn open_or_create(
    ws: &Path,
    id: &str,
    what: &str,
    same: impl FnOnce(&SprintDir) -> bool,
    create: impl FnOnce(&SprintStore) -> Result<SprintDir, agentforge::sprint::SprintStoreError>,
) -> Result<SprintDir, Failure> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(usage(anyhow!(
            "--sprint `{id}`: use letters, digits, `-` and `_` only"
        )));
    }
    let store = SprintStore::new(ws);
    match store.open(id) {
        Ok(dir) => {
            if !same(&dir) {
                return Err(usage(anyhow!(
                    "sprint `{id}` already exists at {} with another {what}; resume it with `agentforge resume {id}`, or give the new sprint another id with --sprint",
                    dir.path().display()
                )));
            }
            eprintln!("sprint `{id}` exists with the same {what}: resuming");
            Ok(dir)
        }
        Err(_) => create(&store).map_err(failed),
    }
}

/// `agentforge run features.json`: a sprint of the feature-list policy (seed 003:
/// initializer -> coding -> tester per feature), created from the checked list (or
/// resumed when it exists with the same list) and run.
async fn run_features(
    g: &Global,
    input: &Path,
    flags: &RunFlags,
    sprint: Option<&str>,
    after_step: Option<RoleAfterStep>,
) -> Result<u8, Failure> {
    use agentforge::value_loop::features::{self, Policy};
    let text =
        std::fs::read_to_string(input).map_err(|e| usage(anyhow!("{}: {e}", input.display())))?;
    // Checked at the boundary: an error names the file, the feature and the field.
    let list = features::parse_file(&text, &input.display().to_string())
        .map_err(|e| usage(anyhow!("{e}")))?;
    let ws = super::workspace_root(g)?;
    super::check_writable(&ws)?;
    // The id: --sprint, or the name of the list's folder (a list is usually
    // `features.json`, so its own name says little).
    let id = sprint.map(str::to_string).unwrap_or_else(|| {
        sprint_id_of(
            input
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        )
    });
    let dir = open_or_create(
        &ws,
        &id,
        "feature list",
        |dir| std::fs::read_to_string(dir.path().join(FEATURE_INPUT)).is_ok_and(|t| t == text),
        |store| {
            let mut initial = SprintState::new(&id);
            initial.policy = Policy::FeatureList;
            // No pre-loop gates: the initializer is the policy's first decision.
            initial.phase = agentforge::value_loop::state::SprintPhase::ValueLoop;
            initial.feature_list = Some(list.into_list());
            store.create_with(&initial, &[(FEATURE_INPUT, &text)])
        },
    )?;
    drive(g, dir, flags, false, after_step).await
}

/// `agentforge resume ID` for a sprint.
pub async fn resume(
    g: &Global,
    id: &str,
    flags: &RunFlags,
    confirm_pause: bool,
) -> Result<u8, Failure> {
    let ws = super::workspace_root(g)?;
    let dir = SprintStore::new(&ws).open(id).map_err(usage)?;
    drive(g, dir, flags, confirm_pause, None).await
}

/// The sprint a role task belongs to (`None`: an ordinary task), from the record the
/// runner keeps in its folder and its id `<sprint>-<seq>-...`.
pub fn role_task_sprint(task_dir: &Path) -> Option<String> {
    agentforge::sprint::report_tools::RoleTools::load(task_dir)?;
    let id = task_dir.file_name()?.to_string_lossy().into_owned();
    // `<sprint>-<seq>-<role>` or `<sprint>-<seq>-<part>-<role>`: the sprint is what
    // comes before the three-digit sequence number.
    let parts: Vec<&str> = id.split('-').collect();
    let at = parts
        .iter()
        .rposition(|p| p.len() >= 3 && p.chars().all(|c| c.is_ascii_digit()))?;
    Some(parts[..at].join("-"))
}

/// The sprint's state for a command that only reads (`status`, `render`): repaired from
/// the log when no runner holds the sprint, else the runner's last saved state (a repair
/// now could cut a line the runner is writing).
fn read_state(dir: &SprintDir) -> Result<SprintState, Failure> {
    match dir.lock() {
        Ok(_lock) => dir.recover().map(|(s, _)| s).map_err(failed),
        Err(agentforge::state_store::StoreError::Busy { .. }) => dir.load_state().map_err(failed),
        Err(e) => Err(failed(e)),
    }
}

/// Whether `id` names a sprint of the workspace.
pub fn exists(g: &Global, id: &str) -> bool {
    super::workspace_root(g)
        .ok()
        .is_some_and(|ws| SprintStore::new(&ws).open(id).is_ok())
}

async fn drive(
    g: &Global,
    dir: SprintDir,
    flags: &RunFlags,
    confirm_pause: bool,
    after_step: Option<RoleAfterStep>,
) -> Result<u8, Failure> {
    if let Some(file) = &flags.record {
        return Err(usage(anyhow!(
            "--record {}: it records one task's run; a sprint's role tasks keep their trajectories in their task folders (`agentforge show <task>`)",
            file.display()
        )));
    }
    if flags.max_cost_usd.is_some() {
        // A cap per role task would not bound the sprint; a sprint-wide one is not built.
        return Err(usage(anyhow!(
            "--max-cost-usd caps a task run; a sprint's cost is not capped yet (its cost per role is in `agentforge status`)"
        )));
    }
    let ws = super::workspace_root(g)?;
    let record_path = dir.path().join(RUN_RECORD);
    let mut record: RunRecord = std::fs::read_to_string(&record_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if let Some(r) = &flags.replay {
        if !r.is_dir() {
            return Err(usage(anyhow!(
                "--replay {}: a sprint replays from a folder of recorded sessions (`<seq>-<role>.jsonl`), not a file",
                r.display()
            )));
        }
        record.replay = Some(std::path::absolute(r).unwrap_or(r.clone()));
    }
    if flags.provider.is_some() && flags.replay.is_none() {
        record.replay = None;
    }
    if !flags.plugins.is_empty() {
        record.plugins = flags
            .plugins
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or(p.clone()))
            .collect();
    }
    let text = serde_json::to_vec_pretty(&record).map_err(failed)?;
    agentforge::state_store::atomic_write(&record_path, &text)
        .with_context(|| format!("cannot write {}", record_path.display()))
        .map_err(failed)?;
    // The flags' provider and model apply to every role not routed elsewhere; the
    // recorded sessions are chosen per role task by the factory.
    let mut plain = RunFlags {
        provider: flags.provider.clone(),
        model: flags.model.clone(),
        replay: None,
        max_steps: flags.max_steps,
        max_cost_usd: None,
        plugins: record.plugins.clone(),
        strict: flags.strict,
        quiet: flags.quiet,
        ..RunFlags::default()
    };
    if record.replay.is_some() {
        plain.provider = Some("replay".into());
    }
    let mut config = load_config_for_sprint(g, &plain, &ws, record.replay.is_some())?;
    if let Some(n) = flags.max_steps {
        // `--max-steps` bounds every role task of this run, over `[value_loop.roles]`.
        config.limits.max_steps = n;
        for role in agentforge::config::VALUE_LOOP_ROLES {
            config
                .value_loop
                .roles
                .entry(role.to_string())
                .or_default()
                .max_steps = Some(n);
        }
    }
    let limits = Limits::new(&config.value_loop.limits)
        .map_err(|e| usage(anyhow!("[value_loop.limits]: {e}")))?;
    // The host's own measurements (verifications, the pause's check) run commands before
    // any role task does: the checks' environment policy and masks apply to them too.
    agentforge::secrets::install(
        config
            .env_policy()
            .map_err(|e| usage(anyhow!("[checks.env]: {e}")))?,
    );
    let factory = CliFactory {
        g,
        config,
        replay: record.replay.clone(),
        progress: !flags.quiet,
        strict: flags.strict,
        after_step,
    };
    super::start_token_counting();
    let stop = agentforge::executor::StopRequest::new();
    let signal = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let sprint_id = dir
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let watcher = tokio::spawn(super::watch_signals(
        stop.clone(),
        signal.clone(),
        sprint_id.clone(),
    ));
    let runner = SprintRunner::new(
        &ws,
        dir.clone(),
        limits,
        &factory,
        RunOptions {
            progress: !flags.quiet,
            confirm_pause,
            plan_gates: factory.config.value_loop.plan_gates.clone(),
            vrc_every_iteration: factory.config.value_loop.vrc_every_iteration,
        },
        stop,
    );
    let result = runner.run().await;
    watcher.abort();
    let outcome = match result {
        Ok(o) => o,
        Err(e @ agentforge::sprint::runner::RunnerError::Busy(_)) => {
            return Err(Failure {
                code: super::EXIT_BUSY,
                error: e.into(),
            })
        }
        Err(agentforge::sprint::runner::RunnerError::Interrupted) => {
            eprintln!("interrupted; `agentforge resume {sprint_id}` continues");
            let sig = signal.load(std::sync::atomic::Ordering::SeqCst);
            return Ok(128 + u8::try_from(sig).unwrap_or(2));
        }
        Err(e) => {
            return Err(failed(anyhow!(
                "{e}\nsprint `{sprint_id}` keeps every recorded iteration; continue it with `agentforge resume {sprint_id}`"
            )))
        }
    };
    let state = dir.load_state().map_err(failed)?;
    print_status(g, &dir, &state, Some(&outcome))?;
    Ok(outcome.exit_code())
}

/// The configuration of a sprint run: the workspace's, with the command line's provider
/// and model. A replayed sprint names its recording per role task, so `[provider]
/// replay` is not needed.
fn load_config_for_sprint(
    g: &Global,
    flags: &RunFlags,
    ws: &Path,
    replayed: bool,
) -> Result<Config, Failure> {
    if replayed {
        // Validation wants a recording for the replay provider: the factory sets each
        // role task's; a placeholder stands in for the check.
        let mut f = RunFlags {
            provider: flags.provider.clone(),
            model: flags.model.clone(),
            replay: Some(PathBuf::from("(per role task)")),
            max_steps: flags.max_steps,
            max_cost_usd: None,
            plugins: flags.plugins.clone(),
            strict: flags.strict,
            quiet: flags.quiet,
            ..RunFlags::default()
        };
        f.provider = None;
        return load_config(g, &f, ws, None);
    }
    load_config(g, flags, ws, None)
}

/// The sprint `id` names, or the workspace's only / most recent one.
fn pick(g: &Global, id: Option<&str>) -> Result<SprintDir, Failure> {
    let ws = super::workspace_root(g)?;
    let store = SprintStore::new(&ws);
    if let Some(id) = id {
        return store.open(id).map_err(usage);
    }
    let root = ws.join(".agentforge").join("sprints");
    let mut best: Option<(std::time::SystemTime, String)> = None;
    if let Ok(rd) = std::fs::read_dir(&root) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                continue;
            }
            let t = e
                .path()
                .join(agentforge::sprint::LOG_FILE)
                .metadata()
                .and_then(|m| m.modified())
                .or_else(|_| e.metadata().and_then(|m| m.modified()))
                .unwrap_or(std::time::UNIX_EPOCH);
            if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
                best = Some((t, name));
            }
        }
    }
    let (_, id) = best.ok_or_else(|| {
        usage(anyhow!(
            "no sprint in {}: start one with `agentforge run DIR` (DIR holds VISION.md and PRD.md)",
            root.display()
        ))
    })?;
    store.open(&id).map_err(usage)
}

/// `agentforge status [SPRINT]`.
pub fn status(g: &Global, id: Option<&str>) -> Result<u8, Failure> {
    let dir = pick(g, id)?;
    let state = read_state(&dir)?;
    // A runner may be appending a line: what cannot be read now is left out.
    let outcome = dir.recorded_end().ok().flatten();
    print_status(g, &dir, &state, outcome.as_ref())?;
    Ok(0)
}

/// `agentforge render [SPRINT]`: rewrites the views from the state.
pub fn render(g: &Global, id: Option<&str>) -> Result<u8, Failure> {
    let dir = pick(g, id)?;
    let state = read_state(&dir)?;
    // A runner may be appending a line: what cannot be read now is left out.
    let outcome = dir.recorded_end().ok().flatten();
    agentforge::sprint::runner::write_views(&dir, &state, outcome.as_ref()).map_err(failed)?;
    for name in [
        "IMPLEMENTATION_PLAN.md",
        "VALUE_CHECKLIST.md",
        "DELIVERY_REPORT.md",
        // A feature-list sprint's views.
        "FEATURE_REPORT.md",
        "features.json",
    ] {
        let p = dir.path().join(name);
        if p.is_file() {
            println!("{}", p.display());
        }
    }
    Ok(0)
}

fn print_status(
    g: &Global,
    dir: &SprintDir,
    s: &SprintState,
    outcome: Option<&SprintOutcome>,
) -> Result<(), Failure> {
    // One write at the end, whose failure (a closed pipe: `status | head`) is ignored.
    let mut out = String::new();
    macro_rules! outln {
        ($o:ident, $($t:tt)*) => {{
            use std::fmt::Write as _;
            let _ = writeln!($o, $($t)*);
        }};
    }
    let m = ValueMeasure::of(s);
    let events = dir.read_events().unwrap_or_default();
    let monitor = events.iter().rev().find_map(|e| e.monitor.clone());
    // The project's bounds (the token budget is one of the monitor's inputs).
    let limits = agentforge::config::Config::load(g.config.as_deref(), &super::workspace_root(g)?)
        .ok()
        .and_then(|(c, _)| Limits::new(&c.value_loop.limits).ok())
        .unwrap_or_default();
    let health = monitor
        .as_ref()
        .map(|mo| mo.evaluate(s, &limits, &Default::default()));
    let mut tokens: std::collections::BTreeMap<String, u64> = Default::default();
    for e in &events {
        for (k, v) in &e.tokens {
            *tokens.entry(k.clone()).or_default() += v;
        }
    }
    let cost_per_role = agentforge::sprint::cost_per_role(&events);
    if s.policy == agentforge::value_loop::features::Policy::FeatureList {
        return print_feature_status(g, dir, s, outcome, &events, &tokens, &cost_per_role);
    }
    if g.json {
        let v = serde_json::json!({
            "sprint": s.sprint,
            "phase": s.phase,
            "iteration": s.iteration,
            "outcome": outcome,
            "pause": s.pause,
            "last_event": events.last().map(|e| serde_json::json!({"seq": e.seq, "outcome": e.outcome})),
            "tasks": s.tasks.iter().map(|t| serde_json::json!({"id": t.id, "status": t.status, "source": t.source.name(), "description": t.description})).collect::<Vec<_>>(),
            "verifications": s.verifications.iter().map(|v| serde_json::json!({"id": v.id, "status": v.status, "attempts": v.attempts})).collect::<Vec<_>>(),
            "measure": m,
            "health": health.as_ref().map(|(h, t)| serde_json::json!({"status": h, "triggers": t.iter().map(|x| x.detail.clone()).collect::<Vec<_>>()})),
            "tokens_used": s.tokens_used,
            "tokens_per_role": tokens,
            "cost_per_role": cost_per_role.iter().map(|(r, c)| (r.clone(), super::cost_json(Some(*c)))).collect::<std::collections::BTreeMap<_, _>>(),
            "folder": dir.path(),
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v).map_err(failed)?);
        flush(&out);
        return Ok(());
    }
    let phase = serde_json::to_value(s.phase).map_err(failed)?;
    outln!(
        out,
        "sprint `{}`: {} after {} iteration(s){}",
        s.sprint,
        phase.as_str().unwrap_or_default(),
        s.iteration,
        match outcome {
            Some(SprintOutcome::Delivered) => " — delivered".to_string(),
            Some(o) => format!(
                " — {}",
                serde_json::to_value(o)
                    .ok()
                    .and_then(|v| v
                        .get("outcome")
                        .and_then(|x| x.as_str())
                        .map(str::to_string))
                    .unwrap_or_default()
            ),
            None => String::new(),
        }
    );
    if let Some(SprintOutcome::Paused { instructions }) = outcome {
        outln!(out, "paused: {instructions}");
    }
    if let Some(p) = &s.pause {
        outln!(
            out,
            "paused for a person: task {}: {}{}",
            p.task_id,
            p.instructions,
            p.verification
                .as_deref()
                .map(|c| format!(" (resumes when `{c}` passes)"))
                .unwrap_or_else(|| " (resume with --confirm-pause once done)".to_string())
        );
    }
    if outcome.is_none() {
        if let Some(e) = events.last() {
            outln!(out, "last event: #{} {}", e.seq, e.outcome);
        }
    }
    let count = |st| s.tasks.iter().filter(|t| t.status == st).count();
    use agentforge::value_loop::state::TaskStatus as T;
    outln!(
        out,
        "tasks: {} done, {} pending, {} blocked, {} descoped (of {})",
        count(T::Done),
        count(T::Pending) + count(T::InProgress),
        count(T::Blocked),
        count(T::Descoped),
        s.tasks.len()
    );
    outln!(out,
        "verifications: {} of {} passing; acceptance criteria proven: {}; value (VRC backed): {:.1}%",
        m.verifications_passing,
        s.verifications.len(),
        m.acceptance_proven,
        f64::from(m.backed_vrc_permille) / 10.0
    );
    if let Some((h, triggers)) = &health {
        let h = serde_json::to_value(h).map_err(failed)?;
        outln!(
            out,
            "health: {}{}",
            h.as_str().unwrap_or_default(),
            if triggers.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    triggers
                        .iter()
                        .map(|t| t.detail.clone())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        );
    }
    outln!(
        out,
        "tokens: {} ({})",
        s.tokens_used,
        tokens
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(c) = agentforge::sprint::cost_summary(&cost_per_role) {
        outln!(out, "cost: {c}");
    }
    outln!(out, "folder: {}", dir.path().display());
    flush(&out);
    Ok(())
}

/// `status` of a feature-list sprint: each feature's status, tests and retries.
fn print_feature_status(
    g: &Global,
    dir: &SprintDir,
    s: &SprintState,
    outcome: Option<&SprintOutcome>,
    events: &[agentforge::sprint::Event],
    tokens: &std::collections::BTreeMap<String, u64>,
    cost_per_role: &std::collections::BTreeMap<String, agentforge::cost::CostTotals>,
) -> Result<(), Failure> {
    use agentforge::value_loop::features::FeatureStatus as F;
    use std::fmt::Write as _;
    let empty = Default::default();
    let list: &agentforge::value_loop::features::FeatureList =
        s.feature_list.as_ref().unwrap_or(&empty);
    let mut out = String::new();
    if g.json {
        let v = serde_json::json!({
            "sprint": s.sprint,
            "policy": s.policy,
            "phase": s.phase,
            "iteration": s.iteration,
            "outcome": outcome,
            "last_event": events.last().map(|e| serde_json::json!({"seq": e.seq, "outcome": e.outcome})),
            "goal": list.goal,
            "features": list.features.iter().map(|f| serde_json::json!({
                "id": f.id, "status": f.status, "tested": f.tested, "retry": f.retry,
                "coding_sessions": f.coding_sessions, "tests": f.tests, "block": f.block,
            })).collect::<Vec<_>>(),
            "initializer_attempts": list.initializer_attempts,
            "tokens_used": s.tokens_used,
            "tokens_per_role": tokens,
            "cost_per_role": cost_per_role.iter().map(|(r, c)| (r.clone(), super::cost_json(Some(*c)))).collect::<std::collections::BTreeMap<_, _>>(),
            "folder": dir.path(),
        });
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&v).map_err(failed)?);
        flush(&out);
        return Ok(());
    }
    let end = match outcome {
        Some(SprintOutcome::Delivered) => " — delivered".to_string(),
        Some(o) => format!(
            " — {}",
            serde_json::to_value(o)
                .ok()
                .and_then(|v| v
                    .get("outcome")
                    .and_then(|x| x.as_str())
                    .map(str::to_string))
                .unwrap_or_default()
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "sprint `{}` (feature list): {} iteration(s){end}",
        s.sprint, s.iteration
    );
    if outcome.is_none() {
        if let Some(e) = events.last() {
            let _ = writeln!(out, "last event: #{} {}", e.seq, e.outcome);
        }
    }
    let _ = writeln!(
        out,
        "features: {} passed, {} blocked, {} open (of {})",
        list.count(F::Passed),
        list.count(F::Blocked),
        list.count(F::Pending) + list.count(F::Completed) + list.count(F::Failed),
        list.features.len()
    );
    for f in &list.features {
        let _ = writeln!(
            out,
            "  {} [{}] {} (coding {}, tests {}, failed {})",
            f.id,
            f.status.name(),
            f.description,
            f.coding_sessions,
            f.tests,
            f.retry
        );
    }
    let _ = writeln!(
        out,
        "tokens: {} ({})",
        s.tokens_used,
        tokens
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(c) = agentforge::sprint::cost_summary(cost_per_role) {
        let _ = writeln!(out, "cost: {c}");
    }
    let _ = writeln!(out, "folder: {}", dir.path().display());
    flush(&out);
    Ok(())
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn flush(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}
