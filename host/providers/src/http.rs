//! Shared HTTP machinery of the HTTP providers: one `reqwest::Client` per
//! provider, POST of a JSON body with retries (exponential backoff with
//! jitter, `retry-after` honoured), error classification and key redaction.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::StatusCode;

use std::collections::BTreeMap;

use agentforge_core::model::{WireExchange, WireReply, WireRequest, SECRET_HEADERS};

use super::ProviderError;

/// Why a 2xx JSON body is not a valid response of its wire format: what it lacks
/// (retried like garbage, then reported as an invalid response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MissingField(pub &'static str);
use agentforge_core::text::cut;

/// Longest `retry-after` honoured when `max_backoff` is shorter: a server
/// asking for more than this is capped so a run cannot hang for hours.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// How failed attempts are retried.
///
/// Retryable: HTTP 429, 500-599 (including Anthropic's 529 "overloaded"),
/// timeouts, connection errors (refused, reset, dropped without an answer)
/// and a 2xx body that is not a valid response. Other 4xx are never retried.
///
/// The wait before retry `n` (1-based) is `initial_backoff * 2^(n-1)`, capped
/// at `max_backoff`, with jitter (uniform in `[half, full]` of that). When the
/// server sends `retry-after` (seconds or an HTTP date) or `retry-after-ms`,
/// that wait is used instead, capped at `max(max_backoff, RETRY_AFTER_CAP)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Backoff before the first retry.
    pub initial_backoff: Duration,
    /// Upper bound of the exponential backoff.
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// Total attempts (first + retries).
    pub fn max_attempts(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }

    /// The un-jittered backoff before retry `retry` (1-based).
    pub fn base_backoff(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(31);
        let factor = 1u32 << exp;
        self.initial_backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }

    /// The jittered backoff before retry `retry` (1-based): uniform in
    /// `[base/2, base]`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let base = self.base_backoff(retry);
        let half = base / 2;
        let spread = u64::try_from((base - half).as_nanos()).unwrap_or(u64::MAX);
        let jitter = if spread == 0 {
            0
        } else {
            rand::rng().random_range(0..=spread)
        };
        half + Duration::from_nanos(jitter)
    }

    /// The wait for a server-provided `retry-after`, capped.
    pub fn retry_after_wait(&self, retry_after: Duration) -> Duration {
        retry_after.min(self.max_backoff.max(RETRY_AFTER_CAP))
    }
}

/// One failed attempt that is about to be retried, as reported to a
/// [`RetryObserver`] before the wait.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    /// Provider name (`anthropic`, `openai`).
    pub provider: &'static str,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// Attempts allowed in all (first + retries).
    pub max_attempts: u32,
    /// Why it failed (key-free).
    pub cause: String,
    /// The wait before the next attempt.
    pub wait: Duration,
}

impl fmt::Display for RetryNotice {
    /// `openai: attempt 1/6 failed (connection failed: ...); retrying in 1.2 s`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: attempt {}/{} failed ({}); retrying in {:.1} s",
            self.provider,
            self.attempt,
            self.max_attempts,
            self.cause,
            self.wait.as_secs_f64()
        )
    }
}

/// Called once per retry, before the wait, so a user sees retries as they happen.
#[derive(Clone)]
pub struct RetryObserver(Arc<dyn Fn(&RetryNotice) + Send + Sync>);

impl RetryObserver {
    /// An observer calling `f`.
    pub fn new(f: impl Fn(&RetryNotice) + Send + Sync + 'static) -> RetryObserver {
        RetryObserver(Arc::new(f))
    }
}

impl fmt::Debug for RetryObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryObserver")
    }
}

/// Why one attempt failed, when it may be retried.
enum Failure {
    /// Timeout, connection error, body read error.
    Transport(String),
    /// A retryable HTTP status.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// A 2xx body that is not a valid response.
    Invalid(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Transport(m) => f.write_str(m),
            Failure::Status {
                status, message, ..
            } => write!(f, "HTTP {status}: {message}"),
            Failure::Invalid(m) => write!(f, "invalid response: {m}"),
        }
    }
}

/// The TLS configuration of every HTTPS connection the host makes: rustls with the ring
/// provider, TLS 1.2 and 1.3, and the bundled Mozilla roots (webpki-roots), as reqwest
/// 0.12's `rustls-tls` had it; so no system OpenSSL and no CA store on the machine are
/// needed. HTTP/1.1 only (the workspace's reqwest has no HTTP/2).
fn tls_config() -> rustls::ClientConfig {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        // ring supports every version rustls offers by default: this cannot fail.
        .expect("ring supports rustls' default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// A `reqwest::ClientBuilder` with the host's TLS set-up ([`tls_config`]): the one way the
/// host builds an HTTP client (the providers, the sprint's health probes, MCP servers over
/// streamable HTTP). The workspace's reqwest is built without a crypto provider of its own
/// (`rustls-no-provider`), and a builder that was not given this configuration panics
/// when it builds.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls_config())
        .user_agent(concat!("agentforge/", env!("CARGO_PKG_VERSION")))
}

/// The HTTP side of a provider: client, retry policy and what is needed to
/// write good, key-free errors.
pub(crate) struct HttpClient {
    client: reqwest::Client,
    timeout: Duration,
    retry: RetryPolicy,
    provider: &'static str,
    env_var: String,
    secret: Option<String>,
    observer: Option<RetryObserver>,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("provider", &self.provider)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("env_var", &self.env_var)
            .field("api_key", &self.secret.as_ref().map(|_| "***"))
            .finish()
    }
}

impl HttpClient {
    /// Build the client. `secret` is only kept to redact it from messages.
    pub(crate) fn new(
        provider: &'static str,
        env_var: String,
        secret: Option<String>,
        timeout: Duration,
        retry: RetryPolicy,
    ) -> Result<Self, ProviderError> {
        if timeout.is_zero() {
            return Err(ProviderError::Config(format!(
                "{provider}: the request timeout must be greater than zero"
            )));
        }
        let client = client_builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| {
                ProviderError::Config(format!("{provider}: cannot build HTTP client: {e}"))
            })?;
        Ok(HttpClient {
            client,
            timeout,
            retry,
            provider,
            env_var,
            secret: secret.filter(|s| !s.is_empty()),
            observer: None,
        })
    }

    /// Reports every retry to `observer` from now on.
    pub(crate) fn set_observer(&mut self, observer: RetryObserver) {
        self.observer = Some(observer);
    }

    /// The env variable to name in auth errors.
    pub(crate) fn env_var(&self) -> &str {
        &self.env_var
    }

    /// The retry policy.
    pub(crate) fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// A sensitive header value for the key (never shown by `Debug`).
    pub(crate) fn secret_header(&self, prefix: &str) -> Result<Option<HeaderValue>, ProviderError> {
        let Some(secret) = &self.secret else {
            return Ok(None);
        };
        let mut v = HeaderValue::from_str(&format!("{prefix}{secret}")).map_err(|_| {
            ProviderError::Config(format!(
                "the API key in {} contains characters not allowed in an HTTP header",
                self.env_var
            ))
        })?;
        v.set_sensitive(true);
        Ok(Some(v))
    }

    /// The headers as a trajectory keeps them: lowercase names, the values of
    /// [`SECRET_HEADERS`] as `***` and the key redacted from every other value.
    fn recorded_headers(&self, headers: &HeaderMap) -> BTreeMap<String, String> {
        headers
            .iter()
            .map(|(name, value)| {
                let name = name.as_str().to_ascii_lowercase();
                let value = if SECRET_HEADERS.contains(&name.as_str()) || value.is_sensitive() {
                    "***".to_string()
                } else {
                    self.redact(&String::from_utf8_lossy(value.as_bytes()))
                };
                (name, value)
            })
            .collect()
    }

    /// Replace the key (if any) by `***`.
    pub(crate) fn redact(&self, text: &str) -> String {
        match &self.secret {
            Some(s) if s.len() >= 4 => text.replace(s.as_str(), "***"),
            _ => text.to_string(),
        }
    }

    /// POST `body` as JSON to `url` with retries; `parse` turns a 2xx JSON
    /// body into the result or says why the body is not a valid response
    /// (which is retried like garbage). Returns the result with the exchange
    /// that gave it (the request as sent, key headers `***`, and the raw reply).
    pub(crate) async fn post_json<T>(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &serde_json::Value,
        parse: impl Fn(&serde_json::Value) -> Result<T, MissingField>,
    ) -> Result<(T, WireExchange), ProviderError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ProviderError::Config(format!("cannot serialize request: {e}")))?;
        let attempts = self.retry.max_attempts();
        let mut last = Failure::Transport("no attempt made".to_string());
        for attempt in 1..=attempts {
            let failure = match self.attempt(url, &headers, &bytes, &parse).await {
                Ok((v, status, reply)) => {
                    let exchange = WireExchange {
                        request: WireRequest {
                            method: "POST".to_string(),
                            url: url.to_string(),
                            headers: self.recorded_headers(&headers),
                            body: self.redact(&String::from_utf8_lossy(&bytes)),
                        },
                        reply: WireReply {
                            status,
                            body: self.redact(&String::from_utf8_lossy(&reply)),
                        },
                        attempts: attempt,
                    };
                    return Ok((v, exchange));
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(f)) => f,
            };
            if attempt < attempts {
                let wait = match &failure {
                    Failure::Status {
                        retry_after: Some(ra),
                        ..
                    } => self.retry.retry_after_wait(*ra),
                    _ => self.retry.backoff(attempt),
                };
                if let Some(o) = &self.observer {
                    (o.0)(&RetryNotice {
                        provider: self.provider,
                        attempt,
                        max_attempts: attempts,
                        cause: self.redact(&failure.to_string()),
                        wait,
                    });
                }
                tokio::time::sleep(wait).await;
            }
            last = failure;
        }
        Err(match last {
            Failure::Invalid(m) => ProviderError::InvalidResponse(format!(
                "{m} (after {attempts} attempt{})",
                if attempts == 1 { "" } else { "s" }
            )),
            other => ProviderError::RetriesExhausted {
                attempts,
                last: self.redact(&other.to_string()),
            },
        })
    }

    /// One attempt.
    async fn attempt<T>(
        &self,
        url: &str,
        headers: &HeaderMap,
        bytes: &[u8],
        parse: &impl Fn(&serde_json::Value) -> Result<T, MissingField>,
    ) -> Result<(T, u16, Vec<u8>), Attempt> {
        let resp = self
            .client
            .post(url)
            .headers(headers.clone())
            .body(bytes.to_vec())
            .send()
            .await
            .map_err(|e| Attempt::Retry(Failure::Transport(self.describe(&e))))?;
        let status = resp.status();
        let retry_after = parse_retry_after(resp.headers());
        let body = resp
            .bytes()
            .await
            .map_err(|e| Attempt::Retry(Failure::Transport(self.describe(&e))))?;
        if status.is_success() {
            let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                Attempt::Retry(Failure::Invalid(format!(
                    "HTTP {} body is not JSON ({e}): {}",
                    status.as_u16(),
                    self.redact(&snippet(&body))
                )))
            })?;
            return parse(&json)
                .map(|v| (v, status.as_u16(), body.to_vec()))
                .map_err(|m| Attempt::Retry(Failure::Invalid(self.redact(&m.to_string()))));
        }
        let message = self.redact(&error_message(status, &body));
        let code = status.as_u16();
        match code {
            401 | 403 => Err(Attempt::Fatal(ProviderError::Auth {
                provider: self.provider,
                env_var: self.env_var.clone(),
                status: code,
                message,
            })),
            429 | 500..=599 => Err(Attempt::Retry(Failure::Status {
                status: code,
                message,
                retry_after,
            })),
            _ => Err(Attempt::Fatal(ProviderError::Rejected {
                status: code,
                message,
            })),
        }
    }

    /// Describe a transport error (with its sources), key-free.
    fn describe(&self, e: &reqwest::Error) -> String {
        let mut text = if e.is_timeout() {
            format!("timed out after {} s", self.timeout.as_secs_f64())
        } else if e.is_connect() {
            "connection failed".to_string()
        } else {
            "request failed".to_string()
        };
        let mut source: Option<&dyn std::error::Error> = Some(e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        self.redact(&text)
    }
}

/// Result of one attempt that did not succeed.
enum Attempt {
    Retry(Failure),
    Fatal(ProviderError),
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds or HTTP date).
pub(crate) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (0.0..1e9)
            .contains(&secs)
            .then(|| Duration::from_secs_f64(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let delta = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

/// The API's error message from an error body (`error.message` in both
/// protocols), else the body text, else the status reason.
fn error_message(status: StatusCode, body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        for ptr in ["/error/message", "/message", "/error"] {
            if let Some(m) = json.pointer(ptr).and_then(|v| v.as_str()) {
                if !m.trim().is_empty() {
                    return cut(m.trim(), 500).into_owned();
                }
            }
        }
    }
    let text = snippet(body);
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no error message")
            .to_string()
    } else {
        text
    }
}

/// The start of a body, as text on one line.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut(&one_line, 300).into_owned()
}

/// `base` without trailing slashes, validated as an http(s) URL.
pub(crate) fn normalize_base_url(provider: &str, base: &str) -> Result<String, ProviderError> {
    let trimmed = base.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed).map_err(|e| {
        ProviderError::Config(format!("{provider}: invalid base URL {trimmed:?}: {e}"))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ProviderError::Config(format!(
            "{provider}: base URL {trimmed:?} must start with http:// or https://"
        )));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_client_builds_with_its_own_tls_set_up() {
        // reqwest is built without a crypto provider: a builder without ours would panic.
        let config = tls_config();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(client_builder().build().is_ok());
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(250),
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = policy();
        assert_eq!(p.base_backoff(1), Duration::from_millis(100));
        assert_eq!(p.base_backoff(2), Duration::from_millis(200));
        assert_eq!(p.base_backoff(3), Duration::from_millis(250));
        assert_eq!(p.base_backoff(40), Duration::from_millis(250));
        for n in 1..5 {
            let b = p.backoff(n);
            assert!(
                b >= p.base_backoff(n) / 2 && b <= p.base_backoff(n),
                "{b:?}"
            );
        }
        assert_eq!(p.max_attempts(), 4);
    }

    #[test]
    fn retry_after_parsing_and_cap() {
        let mut h = HeaderMap::new();
        assert_eq!(parse_retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(1500)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(parse_retry_after(&h), None);
        let p = policy();
        assert_eq!(
            p.retry_after_wait(Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.retry_after_wait(Duration::from_secs(3600)),
            RETRY_AFTER_CAP
        );
    }

    #[test]
    fn error_messages() {
        let m = error_message(
            StatusCode::BAD_REQUEST,
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"bad thing"}}"#,
        );
        assert_eq!(m, "bad thing");
        assert_eq!(error_message(StatusCode::BAD_GATEWAY, b""), "Bad Gateway");
        assert_eq!(error_message(StatusCode::BAD_GATEWAY, b"oops\n"), "oops");
    }

    #[test]
    fn redaction_and_debug() {
        let c = HttpClient::new(
            "anthropic",
            "ANTHROPIC_API_KEY".into(),
            Some("sk-secret-value".into()),
            Duration::from_secs(1),
            policy(),
        )
        .unwrap();
        assert_eq!(c.redact("key sk-secret-value here"), "key *** here");
        let dbg = format!("{c:?}");
        assert!(
            !dbg.contains("sk-secret-value") && dbg.contains("***"),
            "{dbg}"
        );
        let h = c.secret_header("Bearer ").unwrap().unwrap();
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("sk-secret"));
    }

    #[test]
    fn base_url_normalization() {
        assert_eq!(
            normalize_base_url("x", "http://127.0.0.1:1/v1/").unwrap(),
            "http://127.0.0.1:1/v1"
        );
        assert!(normalize_base_url("x", "ftp://h").is_err());
        assert!(normalize_base_url("x", "not a url").is_err());
    }
}
