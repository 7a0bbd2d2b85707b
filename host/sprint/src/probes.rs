//! What the host measures itself: verification commands (run in parallel, each
//! time-boxed) and the health of the services discovery found (HTTP or TCP). Their
//! results are the only inputs of measured value; no role's report counts.

use std::path::Path;
use std::time::Duration;

use agentforge_store::commands::{run_command, CommandLimits};
use agentforge_value_loop::state::Service;

/// Seconds one verification command may run (seed 002: 120 s).
pub const VERIFICATION_TIMEOUT_SECS: u64 = 120;
/// Bytes of a verification's output kept in the sprint state (its tail).
pub const KEPT_OUTPUT_BYTES: usize = 4000;
/// How long a health probe waits.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// One verification run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Verification id.
    pub id: String,
    /// Exit code (`None`: killed at the time box, or could not start).
    pub exit_code: Option<i32>,
    /// Output tail.
    pub output: String,
}

/// Runs `(id, command)` pairs in parallel in `root`, each within 120 s.
pub async fn run_verifications(root: &Path, commands: &[(String, String)]) -> Vec<Ran> {
    let limits = CommandLimits {
        timeout: Duration::from_secs(VERIFICATION_TIMEOUT_SECS),
        output_cap_bytes: 256 * 1024,
    };
    let mut set = tokio::task::JoinSet::new();
    for (i, (id, command)) in commands.iter().enumerate() {
        let (id, command, root) = (id.clone(), command.clone(), root.to_path_buf());
        set.spawn(async move {
            let ran = match run_command(&command, &root, &limits).await {
                Ok(out) => {
                    let mut text = out.output.clone();
                    if out.timed_out {
                        text.push_str(&format!("\n[killed after {VERIFICATION_TIMEOUT_SECS} s]"));
                    }
                    Ran {
                        id,
                        exit_code: if out.timed_out { None } else { out.exit_code },
                        output: crate::roles::tail(&text, KEPT_OUTPUT_BYTES),
                    }
                }
                Err(e) => Ran {
                    id,
                    exit_code: None,
                    output: e.to_string(),
                },
            };
            (i, ran)
        });
    }
    let mut out: Vec<(usize, Ran)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok(r) = joined {
            out.push(r);
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// Whether a service answers: `http://...` (any status below 500) or `tcp://host:port`.
pub async fn healthy(service: &Service) -> bool {
    let check = service.check.trim();
    if let Some(addr) = check.strip_prefix("tcp://") {
        return matches!(
            tokio::time::timeout(HEALTH_TIMEOUT, tokio::net::TcpStream::connect(addr)).await,
            Ok(Ok(_))
        );
    }
    if check.starts_with("http://") || check.starts_with("https://") {
        let Ok(client) = agentforge_providers::client_builder()
            .timeout(HEALTH_TIMEOUT)
            .build()
        else {
            return false;
        };
        return match client.get(check).send().await {
            Ok(r) => r.status().as_u16() < 500,
            Err(_) => false,
        };
    }
    false
}
