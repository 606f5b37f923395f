//! Registering an endpoint with Restate through its admin API (`POST /deployments`): Restate
//! dials the endpoint, discovers its services and starts routing their invocations to it.
//! The endpoint itself never dials Restate, so it can start before Restate does; this is the
//! step that needs both up.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

/// How much of an error text from Restate an error keeps (head and tail, in characters).
const ERROR_HEAD: usize = 1_500;
const ERROR_TAIL: usize = 500;

/// The largest admin API answer read (a deployment lists its services and handlers).
const MAX_ANSWER: usize = 1024 * 1024;

/// Why an endpoint was not registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The admin URL is not an `http`/`https` URL.
    #[error("{url:?} is not an http(s) URL of Restate's admin API")]
    BadAdminUrl {
        /// The URL given.
        url: String,
    },
    /// The admin API could not be reached (refused, unresolvable, timed out).
    #[error("could not reach Restate's admin API at {url}: {reason}")]
    Unreachable {
        /// The admin URL.
        url: String,
        /// Why, as the HTTP client says it.
        reason: String,
    },
    /// No answer within the timeout.
    #[error("Restate's admin API at {url} did not answer within {timeout:?}")]
    TimedOut {
        /// The admin URL.
        url: String,
        /// The timeout.
        timeout: Duration,
    },
    /// Restate refused the registration (it could not reach the endpoint, the endpoint is not
    /// a Restate endpoint, a conflicting deployment exists…): its own error text, cut and with
    /// control characters escaped.
    #[error("Restate did not register {endpoint} (HTTP {status}): {message}")]
    Refused {
        /// The endpoint URL.
        endpoint: String,
        /// The admin API's status code.
        status: u16,
        /// Restate's error text.
        message: String,
    },
    /// The admin API answered success with something that is not a deployment.
    #[error(
        "Restate's admin API at {url} answered with something that is not a deployment: {detail}"
    )]
    BadAnswer {
        /// The admin URL.
        url: String,
        /// What was wrong.
        detail: String,
    },
}

/// A registered deployment: its id and the services Restate discovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The deployment id (`dp_…`).
    pub id: String,
    /// The services, each with its type and handlers.
    pub services: Vec<RegisteredService>,
}

/// One service of a [`Registered`] deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredService {
    /// The service name (`AgentSession`).
    pub name: String,
    /// Its type (`VirtualObject`, `Service`, `Workflow`).
    pub kind: String,
    /// Its handlers' names.
    pub handlers: Vec<String>,
}

/// Register the endpoint at `endpoint` with the Restate whose admin API is at `admin`;
/// `force` replaces an existing deployment at the same URL. Every wait is bounded by
/// `timeout` (connecting to the admin API by the smaller of `timeout` and 5 s).
pub async fn register(
    admin: &str,
    endpoint: &str,
    force: bool,
    timeout: Duration,
) -> Result<Registered, RegisterError> {
    let admin = admin.trim_end_matches('/');
    if !(admin.starts_with("http://") || admin.starts_with("https://")) {
        return Err(RegisterError::BadAdminUrl {
            url: admin.to_owned(),
        });
    }
    let client = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .build()
        .map_err(|error| RegisterError::Unreachable {
            url: admin.to_owned(),
            reason: error.to_string(),
        })?;
    let mut body = json!({ "uri": endpoint });
    if force {
        body["force"] = Value::Bool(true);
    }
    let failed = |error: reqwest::Error| {
        if error.is_timeout() {
            RegisterError::TimedOut {
                url: admin.to_owned(),
                timeout,
            }
        } else {
            RegisterError::Unreachable {
                url: admin.to_owned(),
                reason: reason(&error),
            }
        }
    };
    let mut response = client
        .post(format!("{admin}/deployments"))
        .json(&body)
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    let mut text = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        let room = MAX_ANSWER.saturating_sub(text.len());
        text.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if text.len() >= MAX_ANSWER {
            break;
        }
    }
    let text = String::from_utf8_lossy(&text);
    if !status.is_success() {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|value| value["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| text.trim().to_owned());
        return Err(RegisterError::Refused {
            endpoint: endpoint.to_owned(),
            status: status.as_u16(),
            message: shown(&message),
        });
    }
    let answer: Answer = serde_json::from_str(&text).map_err(|error| RegisterError::BadAnswer {
        url: admin.to_owned(),
        detail: shown(&error.to_string()),
    })?;
    Ok(Registered {
        id: shown(&answer.id),
        services: answer
            .services
            .into_iter()
            .map(|service| RegisteredService {
                name: shown(&service.name),
                kind: shown(&service.ty),
                handlers: service
                    .handlers
                    .into_iter()
                    .map(|handler| shown(&handler.name))
                    .collect(),
            })
            .collect(),
    })
}

/// An HTTP client error with its causes (reqwest's own text omits them: "error sending
/// request" says nothing of the refused connection).
fn reason(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Text from Restate as shown to a user: cut, control characters escaped.
fn shown(text: &str) -> String {
    let cut = agcore::display::head_and_tail(text, ERROR_HEAD, ERROR_TAIL);
    agcore::display::escape_keeping_lines(&cut).into_owned()
}

/// The part of the admin API's deployment answer used here.
#[derive(Deserialize)]
struct Answer {
    id: String,
    #[serde(default)]
    services: Vec<AnswerService>,
}

#[derive(Deserialize)]
struct AnswerService {
    name: String,
    #[serde(default)]
    ty: String,
    #[serde(default)]
    handlers: Vec<AnswerHandler>,
}

#[derive(Deserialize)]
struct AnswerHandler {
    name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restate_text_is_cut_and_escaped() {
        let long = format!("\u{1b}[2Kfake{}", "x".repeat(5_000));
        let shown = shown(&long);
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(shown.starts_with("\\x1b[2Kfake"), "{shown}");
        assert!(shown.chars().count() < 2_100, "{}", shown.len());
    }

    use wiremock::matchers::{body_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A fake admin API on 127.0.0.1 answering `POST /deployments` for `endpoint` with
    /// `status` and `body` (Restate's shapes).
    async fn admin(endpoint: &str, status: u16, body: Value) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/deployments"))
            .and(body_json(json!({ "uri": endpoint })))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .mount(&server)
            .await;
        server
    }

    #[tokio::test]
    async fn a_registration_lists_the_services_and_their_handlers() {
        let server = admin(
            "http://e:9080",
            201,
            json!({"id": "dp_1", "services": [{"name": "AgentSession", "ty": "VirtualObject",
                "handlers": [{"name": "run"}, {"name": "approve"}, {"name": "state"}],
                "revision": 1}]}),
        )
        .await;
        let registered = register(
            &server.uri(),
            "http://e:9080",
            false,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(
            registered,
            Registered {
                id: "dp_1".to_owned(),
                services: vec![RegisteredService {
                    name: "AgentSession".to_owned(),
                    kind: "VirtualObject".to_owned(),
                    handlers: vec!["run".to_owned(), "approve".to_owned(), "state".to_owned()],
                }],
            }
        );
    }

    #[tokio::test]
    async fn a_refusal_shows_restates_message_cut_and_escaped() {
        let message = format!("[META0003] cannot reach\u{1b}[2K{}", "y".repeat(10_000));
        let server = admin("http://e:9080", 500, json!({ "message": message })).await;
        let error = register(
            &server.uri(),
            "http://e:9080",
            false,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        let RegisterError::Refused {
            endpoint,
            status,
            message,
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!((endpoint.as_str(), *status), ("http://e:9080", 500));
        assert!(
            message.starts_with("[META0003] cannot reach\\x1b[2K"),
            "{message}"
        );
        assert!(message.contains("more chars"), "{message}");
        assert!(message.chars().count() < 2_100);
        assert!(!error.to_string().contains('\u{1b}'));
    }

    #[tokio::test]
    async fn a_url_that_is_not_http_is_refused_before_any_request() {
        let error = register("127.0.0.1:9070", "http://e", false, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(
            matches!(error, RegisterError::BadAdminUrl { .. }),
            "{error}"
        );
    }
}
