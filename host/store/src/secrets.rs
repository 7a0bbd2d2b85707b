//! Keys the host holds: kept out of the checks' environment, masked in what it stores
//! or shows.
//!
//! Two lines of defence against a check (code the model wrote) leaking an API key:
//!
//! 1. [`EnvPolicy`]: checks run with an environment built explicitly (see
//!    [`crate::commands::run_command`]): every variable matching the deny list
//!    ([`DEFAULT_DENY`] plus `[checks.env] deny`) is left out, and in allow-list mode
//!    (`[checks.env] allow`) only [`ALLOW_BASE`] and the allowed names are passed.
//!    The provider's key variable never passes.
//! 2. [`Secrets`]: the values of the variables holding keys (the provider's key, and
//!    every denied variable whose name says it holds one, see
//!    [`EnvPolicy::holds_secret`]), at least [`MIN_SECRET_LEN`] characters long, are
//!    replaced by [`MASK`] in command output, the action log, the state, working memory,
//!    every request to the model and the errors the binary prints.
//!
//! Both are process-wide, like the environment they describe: [`install`] sets them
//! from the configuration when a run starts (`executor::Runtime::new`); until then the
//! defaults apply.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// What a secret value is replaced with.
pub const MASK: &str = "***";

/// Shorter values are not masked: they would match ordinary text everywhere.
pub const MIN_SECRET_LEN: usize = 8;

/// Variables never passed to checks (globs on names, matched without case): provider
/// and cloud credentials, tokens, passwords, the SSH agent.
pub const DEFAULT_DENY: &[&str] = &[
    "*_API_KEY*",
    "*_APIKEY*",
    "API_KEY",
    "*_KEY",
    "*_ACCESS_KEY*",
    "*_PRIVATE_KEY*",
    "*_TOKEN",
    "*_TOKEN_*",
    "TOKEN",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_CREDENTIALS*",
    "AWS_*",
    "AZURE_*",
    "ANTHROPIC_*",
    "OPENAI_*",
    "AGENTFORGE_*KEY*",
    "SSH_AUTH_SOCK",
];

/// In allow-list mode, what checks always get besides `[checks.env] allow` (minus the
/// deny list): what shells, compilers and test runners need to work.
pub const ALLOW_BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "XDG_*",
    "CI",
    "CARGO_*",
    "RUSTUP_*",
    "RUSTC*",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUST_*",
    "PYTHON*",
    "VIRTUAL_ENV",
    "CONDA_*",
    "GO*",
    "NODE_*",
    "NPM_CONFIG_*",
    "JAVA_HOME",
    "CC",
    "CXX",
    "AR",
    "LD_LIBRARY_PATH",
    "PKG_CONFIG_PATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Words in a variable name that say its value is a key (for masking values of the
/// broad default patterns: `AWS_REGION` is left out of checks but not masked).
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];

/// A `[checks.env]` glob that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid environment variable glob `{pattern}` in `{field}`: {message}; use e.g. `MY_*` or `DB_PASSWORD`")]
pub struct EnvPolicyError {
    /// `checks.env.deny` or `checks.env.allow`.
    pub field: &'static str,
    /// The pattern.
    pub pattern: String,
    /// The parser's message.
    pub message: String,
}

fn glob_set(field: &'static str, patterns: &[&str]) -> Result<GlobSet, EnvPolicyError> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = GlobBuilder::new(p)
            .case_insensitive(true)
            .build()
            .map_err(|e| EnvPolicyError {
                field,
                pattern: p.to_string(),
                message: e.kind().to_string(),
            })?;
        b.add(g);
    }
    b.build().map_err(|e| EnvPolicyError {
        field,
        pattern: patterns.join(", "),
        message: e.to_string(),
    })
}

/// Which environment variables checks get (see the module docs).
#[derive(Debug, Clone)]
pub struct EnvPolicy {
    /// The built-in deny list.
    default_deny: GlobSet,
    /// `[checks.env] deny`.
    deny: GlobSet,
    /// `[checks.env] allow` with [`ALLOW_BASE`], in allow-list mode.
    allow: Option<GlobSet>,
    /// Variables named exactly (the provider's key variable): never passed, always masked.
    forced: Vec<String>,
}

impl Default for EnvPolicy {
    /// The built-in deny list, no allow list; `ANTHROPIC_API_KEY` and `OPENAI_API_KEY`
    /// forced.
    fn default() -> Self {
        EnvPolicy::new(&[], &[]).expect("the built-in globs compile")
    }
}

impl EnvPolicy {
    /// The built-in deny list plus `deny`; allow-list mode when `allow` is not empty.
    pub fn new(deny: &[String], allow: &[String]) -> Result<EnvPolicy, EnvPolicyError> {
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let allow = if allow.is_empty() {
            None
        } else {
            let mut all = ALLOW_BASE.to_vec();
            all.extend(refs(allow));
            Some(glob_set("checks.env.allow", &all)?)
        };
        Ok(EnvPolicy {
            default_deny: glob_set("checks.env.deny", DEFAULT_DENY)?,
            deny: glob_set("checks.env.deny", &refs(deny))?,
            allow,
            forced: vec![
                agentforge_core::model::ANTHROPIC_API_KEY_ENV.to_string(),
                agentforge_core::model::OPENAI_API_KEY_ENV.to_string(),
            ],
        })
    }

    /// Also denies (and masks) the variable `name` exactly: the provider's configured
    /// key variable, whatever it is called.
    pub fn force_deny(&mut self, name: &str) {
        if !self.forced.iter().any(|f| f == name) {
            self.forced.push(name.to_string());
        }
    }

    fn is_forced(&self, name: &str) -> bool {
        self.forced.iter().any(|f| f == name)
    }

    /// Whether a check gets the variable `name`.
    pub fn passes(&self, name: &str) -> bool {
        if self.is_forced(name) || self.default_deny.is_match(name) || self.deny.is_match(name) {
            return false;
        }
        self.allow.as_ref().is_none_or(|a| a.is_match(name))
    }

    /// Whether the value of `name` is a key to mask: the provider's key variable, a
    /// variable of `[checks.env] deny`, or one of the built-in deny list whose name says
    /// it holds a key (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, ...), so that
    /// `AWS_REGION` or `ANTHROPIC_BASE_URL` stay readable.
    pub fn holds_secret(&self, name: &str) -> bool {
        if self.is_forced(name) || self.deny.is_match(name) {
            return true;
        }
        let upper = name.to_ascii_uppercase();
        self.default_deny.is_match(name) && SECRET_WORDS.iter().any(|w| upper.contains(w))
    }

    /// The environment a check gets out of `vars` (the host's).
    pub fn child_env<I>(&self, vars: I) -> Vec<(std::ffi::OsString, std::ffi::OsString)>
    where
        I: IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    {
        vars.into_iter()
            .filter(|(k, _)| self.passes(&k.to_string_lossy()))
            .collect()
    }
}

/// Secret values, and their masking.
#[derive(Default)]
pub struct Secrets {
    /// One automaton over every value (longest first wins), `None` when there is none.
    matcher: Option<AhoCorasick>,
    count: usize,
}

impl std::fmt::Debug for Secrets {
    /// Never the values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.count)
    }
}

impl Secrets {
    /// The values of `vars` whose name `policy` says holds a key, at least
    /// [`MIN_SECRET_LEN`] characters long.
    pub fn collect<I>(vars: I, policy: &EnvPolicy) -> Secrets
    where
        I: IntoIterator<Item = (String, String)>,
    {
        Secrets::collect_with(vars, policy, Vec::new())
    }

    /// [`Secrets::collect`], and `extra` values besides.
    fn collect_with<I>(vars: I, policy: &EnvPolicy, extra: Vec<String>) -> Secrets
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut values: Vec<String> = vars
            .into_iter()
            .filter(|(k, v)| v.trim().chars().count() >= MIN_SECRET_LEN && policy.holds_secret(k))
            .map(|(_, v)| v)
            .chain(extra)
            .collect();
        values.sort();
        values.dedup();
        Secrets::of(values)
    }

    /// Masks exactly `values` (each at least [`MIN_SECRET_LEN`] characters; shorter
    /// ones are ignored).
    pub fn of(values: Vec<String>) -> Secrets {
        let values: Vec<String> = values
            .into_iter()
            .filter(|v| v.chars().count() >= MIN_SECRET_LEN)
            .collect();
        if values.is_empty() {
            return Secrets::default();
        }
        // Leftmost-longest: a key containing another is masked whole.
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&values)
            .ok();
        Secrets {
            count: values.len(),
            matcher,
        }
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `text` with every value replaced by [`MASK`] (borrowed when none occurs).
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.matcher {
            Some(m) if m.is_match(text) => Cow::Owned(m.replace_all(text, &vec![MASK; self.count])),
            _ => Cow::Borrowed(text),
        }
    }

    /// Masks `text` in place.
    pub fn mask_string(&self, text: &mut String) {
        if let Cow::Owned(masked) = self.mask(text) {
            *text = masked;
        }
    }

    /// Masks every string (and map key) inside `value`, a record or state about to be
    /// stored; returns whether anything was masked. Values holding no secret are left
    /// untouched without being rebuilt.
    pub fn mask_serde<T: Serialize + DeserializeOwned>(&self, value: &mut T) -> bool {
        let Some(m) = &self.matcher else {
            return false;
        };
        let Ok(mut json) = serde_json::to_value(&*value) else {
            return false;
        };
        if !contains_secret(m, &json) {
            return false;
        }
        self.mask_json(&mut json);
        match serde_json::from_value(json) {
            Ok(masked) => {
                *value = masked;
                true
            }
            // Every stored type round-trips through JSON (the log is JSON); should one
            // not, keeping it unmasked beats losing the step.
            Err(e) => {
                eprintln!("warning: could not mask secrets in a stored record: {e}");
                false
            }
        }
    }

    /// Masks every string and map key inside `value`.
    pub fn mask_json(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.mask_string(s),
            Value::Array(a) => a.iter_mut().for_each(|v| self.mask_json(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    self.mask_json(&mut v);
                    map.insert(self.mask(&k).into_owned(), v);
                }
            }
            _ => {}
        }
    }
}

fn contains_secret(m: &AhoCorasick, value: &Value) -> bool {
    match value {
        Value::String(s) => m.is_match(s),
        Value::Array(a) => a.iter().any(|v| contains_secret(m, v)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| m.is_match(k) || contains_secret(m, v)),
        _ => false,
    }
}

/// The installed policy and the secrets collected with it.
struct Installed {
    policy: Arc<EnvPolicy>,
    secrets: Arc<Secrets>,
}

static INSTALLED: RwLock<Option<Installed>> = RwLock::new(None);

/// Values added with [`add_values`]: kept apart from the environment's, so a later
/// [`install`] (each run's runtime installs its policy) masks them still.
static ADDED: RwLock<Vec<String>> = RwLock::new(Vec::new());

fn added() -> Vec<String> {
    ADDED.read().unwrap_or_else(|p| p.into_inner()).clone()
}

fn env_strings() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().map(|(k, v)| {
        (
            k.to_string_lossy().into_owned(),
            v.to_string_lossy().into_owned(),
        )
    })
}

/// Makes `policy` the process's: checks run with it, and the values of the current
/// environment it says hold keys are masked from now on.
pub fn install(policy: EnvPolicy) {
    let secrets = Secrets::collect_with(env_strings(), &policy, added());
    let mut slot = INSTALLED.write().unwrap_or_else(|p| p.into_inner());
    *slot = Some(Installed {
        policy: Arc::new(policy),
        secrets: Arc::new(secrets),
    });
}

fn installed<T>(pick: impl Fn(&Installed) -> Arc<T>) -> Arc<T> {
    if let Some(i) = INSTALLED.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return pick(i);
    }
    // Nothing configured yet: the defaults, collected once.
    let mut slot = INSTALLED.write().unwrap_or_else(|p| p.into_inner());
    let i = slot.get_or_insert_with(|| {
        let policy = EnvPolicy::default();
        Installed {
            secrets: Arc::new(Secrets::collect_with(env_strings(), &policy, added())),
            policy: Arc::new(policy),
        }
    });
    pick(i)
}

/// Masks `values` from now on, beside the environment's keys: secrets the host holds that
/// no variable's name marks as one (an MCP server's `Authorization` header written in the
/// config, a value read through `${VAR}` from a variable of any name). Values shorter than
/// [`MIN_SECRET_LEN`] are ignored, as everywhere.
pub fn add_values(values: impl IntoIterator<Item = String>) {
    let mut new: Vec<String> = values
        .into_iter()
        .filter(|v| v.trim().chars().count() >= MIN_SECRET_LEN)
        .collect();
    if new.is_empty() {
        return;
    }
    {
        let mut slot = ADDED.write().unwrap_or_else(|p| p.into_inner());
        new.retain(|v| !slot.contains(v));
        slot.extend(new);
    }
    let policy = policy();
    let secrets = Secrets::collect_with(env_strings(), &policy, added());
    let mut slot = INSTALLED.write().unwrap_or_else(|p| p.into_inner());
    *slot = Some(Installed {
        policy,
        secrets: Arc::new(secrets),
    });
}

/// The process's environment policy for checks.
pub fn policy() -> Arc<EnvPolicy> {
    installed(|i| i.policy.clone())
}

/// The process's secret values.
pub fn secrets() -> Arc<Secrets> {
    installed(|i| i.secrets.clone())
}

/// `text` with the process's secret values masked.
pub fn mask(text: &str) -> String {
    secrets().mask(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn default_policy_keeps_tools_and_drops_keys() {
        let p = EnvPolicy::default();
        for keep in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUSTUP_TOOLCHAIN",
            "LANG",
            "PYTHONPATH",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(p.passes(keep), "{keep} should pass");
        }
        for drop in [
            "ANTHROPIC_API_KEY",
            "anthropic_api_key",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "GITHUB_TOKEN",
            "CARGO_REGISTRY_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            "DB_PASSWORD",
            "MY_CLIENT_SECRET",
            "AGENTFORGE_TEST_KEY",
            "SSH_AUTH_SOCK",
            "GEMINI_API_KEY",
        ] {
            assert!(!p.passes(drop), "{drop} should be denied");
        }
    }

    #[test]
    fn configured_deny_and_allow_list_mode() {
        let mut p = EnvPolicy::new(&["DATABASE_URL".into()], &["MY_*".into()]).unwrap();
        p.force_deny("LLM_KEY_VAR");
        assert!(p.passes("PATH") && p.passes("MY_SETTING") && p.passes("CARGO_HOME"));
        assert!(
            !p.passes("UNLISTED"),
            "allow-list mode passes only what it lists"
        );
        assert!(!p.passes("MY_API_KEY"), "deny wins over allow");
        assert!(!p.passes("DATABASE_URL") && !p.passes("LLM_KEY_VAR"));
        assert!(p.holds_secret("DATABASE_URL") && p.holds_secret("LLM_KEY_VAR"));
        assert!(!p.holds_secret("AWS_REGION") && !p.holds_secret("ANTHROPIC_BASE_URL"));
        assert!(p.holds_secret("AWS_SESSION_TOKEN"));
    }

    #[test]
    fn bad_globs_name_the_field() {
        let err = EnvPolicy::new(&["[oops".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("checks.env.deny") && err.contains("[oops"),
            "{err}"
        );
    }

    #[test]
    fn masks_values_of_key_variables_only() {
        let p = EnvPolicy::default();
        let s = Secrets::collect(
            vars(&[
                ("ANTHROPIC_API_KEY", "sk-ant-0123456789"),
                ("GITHUB_TOKEN", "short"),
                ("AWS_REGION", "eu-west-1x"),
                ("HOME", "/home/someone"),
            ]),
            &p,
        );
        assert_eq!(format!("{s:?}"), "Secrets(1 values)");
        assert_eq!(
            s.mask("key=sk-ant-0123456789; region eu-west-1x; short /home/someone"),
            "key=***; region eu-west-1x; short /home/someone"
        );
        assert!(matches!(s.mask("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn added_values_are_masked_and_survive_a_new_install() {
        add_values(["mcp-header-value-0123".to_string(), "short".to_string()]);
        assert_eq!(mask("Bearer mcp-header-value-0123"), "Bearer ***");
        // Each run's runtime installs its policy again: the added values stay masked.
        install(EnvPolicy::default());
        assert_eq!(mask("x mcp-header-value-0123"), "x ***");
        assert_eq!(mask("short"), "short");
    }

    #[test]
    fn overlapping_values_are_masked_whole() {
        let s = Secrets::of(vec!["abcdefgh".into(), "abcdefgh-longer".into()]);
        assert_eq!(s.mask("x abcdefgh-longer y abcdefgh"), "x *** y ***");
    }

    #[test]
    fn mask_serde_reaches_nested_strings_and_keys() {
        let s = Secrets::of(vec!["topsecret-123".into()]);
        let mut v: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        v.insert(
            "k topsecret-123".into(),
            vec!["a".into(), "b topsecret-123".into()],
        );
        assert!(s.mask_serde(&mut v));
        assert!(!s.mask_serde(&mut v), "nothing left to mask");
        assert_eq!(v["k ***"], vec!["a".to_string(), "b ***".to_string()]);
    }
}
