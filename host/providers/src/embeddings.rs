//! An OpenAI-compatible embeddings client: `POST <url>` with
//! `{"model": ..., "input": [...]}` (and `dimensions` when configured), answered by
//! `{"data": [{"embedding": [...], "index": i}, ...]}`.
//!
//! Built with [`crate::client_builder`] like every HTTP client of the host, on the
//! providers' retry machinery with a fixed bound ([`EMBEDDINGS_RETRY`]: no setting
//! raises it), and a deadline over the whole call (attempts and waits): one call never
//! takes longer than its timeout. The key is read from the environment variable the
//! settings name, sent as a bearer token, and redacted from every error.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};

use crate::http::{normalize_base_url, HttpClient, MissingField, RetryPolicy};
use crate::ProviderError;

/// The retry policy of every embeddings call: two retries (three attempts), 250 ms then
/// 500 ms (with jitter). A constant, not a setting: the deadline of a call
/// ([`EmbeddingsSettings::timeout`]) bounds it further.
pub const EMBEDDINGS_RETRY: RetryPolicy = RetryPolicy {
    max_retries: 2,
    initial_backoff: Duration::from_millis(250),
    max_backoff: Duration::from_secs(2),
};

/// Where and how to embed.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsSettings {
    /// The endpoint (e.g. `https://api.openai.com/v1/embeddings`).
    pub url: String,
    /// The model sent with each request (and stored with the vectors).
    pub model: String,
    /// The environment variable holding the key; `None`: no key is sent (a local server).
    pub api_key_env: Option<String>,
    /// The dimension asked for (sent as `dimensions`) and required of every vector.
    pub dimensions: Option<usize>,
    /// The deadline of one call, attempts and waits included.
    pub timeout: Duration,
}

/// What went wrong embedding; each names the endpoint and what to do.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddingsError {
    /// The settings cannot be used (a bad URL, a zero timeout...).
    #[error("embeddings endpoint {url}: {message}")]
    Config {
        /// The endpoint.
        url: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The key's environment variable is not set.
    #[error(
        "embeddings endpoint {url}: the key is read from the environment variable {var}, \
         which is not set; set it, or remove api_key_env for an endpoint that needs no key"
    )]
    MissingKey {
        /// The endpoint.
        url: String,
        /// The variable.
        var: String,
    },
    /// The request failed (after the bounded retries), or was refused.
    #[error("embeddings endpoint {url}: {source}; check that the endpoint is up and url, model and the key are right")]
    Request {
        /// The endpoint.
        url: String,
        /// The HTTP layer's error (key-free).
        source: ProviderError,
    },
    /// The call did not finish within its deadline.
    #[error("embeddings endpoint {url}: no answer within {secs} s (timeout_secs); check that it is up, or raise timeout_secs")]
    TimedOut {
        /// The endpoint.
        url: String,
        /// The deadline, in seconds.
        secs: f64,
    },
    /// A 2xx answer that does not fit the request (count, dimension, index).
    #[error("embeddings endpoint {url}: invalid answer: {message}; is it an OpenAI-compatible /embeddings endpoint?")]
    Invalid {
        /// The endpoint.
        url: String,
        /// What does not fit.
        message: String,
    },
}

/// An embeddings client (the key only in its sensitive header, never in `Debug`).
pub struct EmbeddingsClient {
    http: HttpClient,
    url: String,
    model: String,
    dimensions: Option<usize>,
    timeout: Duration,
}

impl fmt::Debug for EmbeddingsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingsClient")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("http", &self.http)
            .finish()
    }
}

impl EmbeddingsClient {
    /// A client for `settings`, the key read from the process environment.
    pub fn new(settings: &EmbeddingsSettings) -> Result<EmbeddingsClient, EmbeddingsError> {
        Self::with_env(settings, &|name| std::env::var(name).ok())
    }

    /// [`EmbeddingsClient::new`] with the environment given as a lookup (for tests).
    /// An empty value counts as unset.
    pub fn with_env(
        settings: &EmbeddingsSettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<EmbeddingsClient, EmbeddingsError> {
        let config = |e: ProviderError| EmbeddingsError::Config {
            url: settings.url.clone(),
            message: match e {
                ProviderError::Config(m) => m,
                other => other.to_string(),
            },
        };
        let url = normalize_base_url("embeddings", &settings.url).map_err(config)?;
        let key = match &settings.api_key_env {
            Some(var) => Some(env(var).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                EmbeddingsError::MissingKey {
                    url: url.clone(),
                    var: var.clone(),
                }
            })?),
            None => None,
        };
        let http = HttpClient::new(
            "embeddings",
            settings.api_key_env.clone().unwrap_or_default(),
            key,
            settings.timeout,
            EMBEDDINGS_RETRY,
        )
        .map_err(config)?;
        Ok(EmbeddingsClient {
            http,
            url,
            model: settings.model.clone(),
            dimensions: settings.dimensions,
            timeout: settings.timeout,
        })
    }

    /// The endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The vectors of `inputs`, in their order, all of one dimension (the configured
    /// one, when set). One call: retried within [`EMBEDDINGS_RETRY`], and never longer
    /// than the timeout.
    pub async fn embed(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let mut body = serde_json::json!({"model": self.model, "input": inputs});
        if let Some(d) = self.dimensions {
            body["dimensions"] = d.into();
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let auth = self
            .http
            .secret_header("Bearer ")
            .map_err(|e| EmbeddingsError::Config {
                url: self.url.clone(),
                message: e.to_string(),
            })?;
        if let Some(v) = auth {
            headers.insert(AUTHORIZATION, v);
        }
        let call = self.http.post_json(&self.url, headers, &body, parse_data);
        let (data, _exchange) = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| EmbeddingsError::TimedOut {
                url: self.url.clone(),
                secs: self.timeout.as_secs_f64(),
            })?
            .map_err(|source| EmbeddingsError::Request {
                url: self.url.clone(),
                source,
            })?;
        self.ordered(data, inputs.len())
    }

    /// The vectors by their `index`, checked against the request.
    fn ordered(
        &self,
        data: Vec<(usize, Vec<f32>)>,
        n: usize,
    ) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let invalid = |message: String| EmbeddingsError::Invalid {
            url: self.url.clone(),
            message,
        };
        if data.len() != n {
            return Err(invalid(format!("{} vectors for {n} inputs", data.len())));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        for (i, v) in data {
            let slot = out
                .get_mut(i)
                .ok_or_else(|| invalid(format!("index {i} for {n} inputs")))?;
            if slot.replace(v).is_some() {
                return Err(invalid(format!("index {i} twice")));
            }
        }
        let out: Vec<Vec<f32>> = out.into_iter().flatten().collect();
        let dims = self.dimensions.unwrap_or(out[0].len());
        if dims == 0 {
            return Err(invalid("empty vectors".into()));
        }
        if let Some(v) = out.iter().find(|v| v.len() != dims) {
            return Err(invalid(format!(
                "a vector of {} dimensions where {dims} were {}",
                v.len(),
                if self.dimensions.is_some() {
                    "configured (dimensions)"
                } else {
                    "in the same answer"
                }
            )));
        }
        Ok(out)
    }
}

/// `data[].embedding` and `data[].index` (the position when absent) of a 2xx body.
fn parse_data(body: &serde_json::Value) -> Result<Vec<(usize, Vec<f32>)>, MissingField> {
    let data = body["data"]
        .as_array()
        .ok_or(MissingField("`data`, an array of embeddings"))?;
    data.iter()
        .enumerate()
        .map(|(pos, item)| {
            let numbers = item["embedding"]
                .as_array()
                .ok_or(MissingField("`data[].embedding`, an array of numbers"))?;
            let v = numbers
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32))
                .collect::<Option<Vec<f32>>>()
                .ok_or(MissingField("`data[].embedding`, an array of numbers"))?;
            let index = match &item["index"] {
                serde_json::Value::Null => pos,
                i => i.as_u64().ok_or(MissingField("`data[].index`, a number"))? as usize,
            };
            Ok((index, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap as AxumHeaders;
    use axum::{routing::post, Json, Router};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn settings(url: &str) -> EmbeddingsSettings {
        EmbeddingsSettings {
            url: url.into(),
            model: "embed-small".into(),
            api_key_env: Some("EMBED_KEY".into()),
            dimensions: None,
            timeout: Duration::from_secs(5),
        }
    }

    fn env(name: &str) -> Option<String> {
        (name == "EMBED_KEY").then(|| "sk-embed-SECRET-42".to_string())
    }

    async fn serve(app: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}/v1/embeddings")
    }

    #[tokio::test]
    async fn vectors_come_back_in_input_order_with_the_key_as_a_bearer_token() {
        let app = Router::new().route(
            "/v1/embeddings",
            post(
                |headers: AxumHeaders, Json(body): Json<serde_json::Value>| async move {
                    assert_eq!(
                        headers["authorization"].to_str().unwrap(),
                        "Bearer sk-embed-SECRET-42"
                    );
                    assert_eq!(body["model"], "embed-small");
                    let n = body["input"].as_array().unwrap().len();
                    // Answered in reverse order: the client sorts by index.
                    let data: Vec<_> = (0..n)
                        .rev()
                        .map(|i| serde_json::json!({"index": i, "embedding": [i as f32, 1.0]}))
                        .collect();
                    Json(serde_json::json!({"data": data}))
                },
            ),
        );
        let url = serve(app).await;
        let c = EmbeddingsClient::with_env(&settings(&url), &env).unwrap();
        let v = c
            .embed(&["a".into(), "b".into(), "c".into()])
            .await
            .unwrap();
        assert_eq!(v, vec![vec![0.0, 1.0], vec![1.0, 1.0], vec![2.0, 1.0]]);
        assert!(!format!("{c:?}").contains("SECRET"));
    }

    #[tokio::test]
    async fn failures_are_retried_within_the_fixed_bound_and_name_the_url() {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = Router::new().route(
            "/v1/embeddings",
            post(move || {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        "down for sk-embed-SECRET-42",
                    )
                }
            }),
        );
        let url = serve(app).await;
        let c = EmbeddingsClient::with_env(&settings(&url), &env).unwrap();
        let e = c.embed(&["a".into()]).await.unwrap_err();
        assert_eq!(
            hits.load(Ordering::SeqCst) as u32,
            EMBEDDINGS_RETRY.max_attempts()
        );
        let msg = e.to_string();
        assert!(msg.contains(&url) && msg.contains("503"), "{msg}");
        assert!(!msg.contains("SECRET"), "{msg}");
    }

    #[tokio::test]
    async fn a_wrong_dimension_or_count_is_an_invalid_answer() {
        let app = Router::new().route(
            "/v1/embeddings",
            post(|Json(body): Json<serde_json::Value>| async move {
                // The configured dimension is asked for (a 400 otherwise).
                if !(body["dimensions"] == 3 || body["dimensions"].is_null()) {
                    return Err(axum::http::StatusCode::BAD_REQUEST);
                }
                Ok(Json(serde_json::json!({
                    "data": [{"index": 0, "embedding": [1.0, 2.0]}],
                })))
            }),
        );
        let url = serve(app).await;
        let mut s = settings(&url);
        s.dimensions = Some(3);
        let c = EmbeddingsClient::with_env(&s, &env).unwrap();
        let e = c.embed(&["a".into()]).await.unwrap_err();
        assert!(matches!(e, EmbeddingsError::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("dimensions"), "{e}");
        s.dimensions = None;
        let c = EmbeddingsClient::with_env(&s, &env).unwrap();
        let e = c.embed(&["a".into(), "b".into()]).await.unwrap_err();
        assert!(e.to_string().contains("1 vectors for 2 inputs"), "{e}");
    }

    #[test]
    fn a_missing_key_and_a_bad_url_name_what_to_fix() {
        let e =
            EmbeddingsClient::with_env(&settings("http://127.0.0.1:9/e"), &|_| None).unwrap_err();
        assert!(matches!(e, EmbeddingsError::MissingKey { .. }));
        assert!(e.to_string().contains("EMBED_KEY"), "{e}");
        let e = EmbeddingsClient::with_env(&settings("ftp://x"), &env).unwrap_err();
        assert!(e.to_string().contains("ftp://x"), "{e}");
    }
}
