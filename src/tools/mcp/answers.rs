//! [`Answers`]: how agcore answers what a server asks of the client — elicitation (the
//! application's [`Elicitor`]), sampling (its [`Sampler`]), roots — whether the server asks
//! with a request of its own (a session) or inside the result of a `tools/call` (a
//! multi-round-trip request, see [`crate::tools::mcp`]'s `mrtr`). One place, so the gates are
//! the same either way.

// Roots and sampling are deprecated by SEP-2577 for the 2026 protocol; released servers use them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, InputRequest, InputRequests, InputResponses, ListRootsResult, Root,
    SamplingMessage,
};
use serde_json::Value;

use crate::tools::error::ToolError;

use crate::tools::mcp::elicitation::{
    ElicitationMode, ElicitationRequest, ElicitationResponse, Elicitor, apply_schema_defaults,
    validate_elicited,
};
use crate::tools::mcp::progress::ProgressCallback;
use crate::tools::mcp::roots::Roots;
use crate::tools::mcp::sampling::{Sampler, request_of};

/// The answerers of one client.
pub(crate) struct Answers {
    pub(crate) server: Arc<str>,
    pub(crate) elicitor: Option<Arc<dyn Elicitor>>,
    pub(crate) sampler: Option<Arc<dyn Sampler>>,
    pub(crate) roots: Arc<Roots>,
    /// Where progress goes (a task's status messages too).
    pub(crate) progress: Option<ProgressCallback>,
    /// The session's requests in flight: a progress notification reaches the card of the one
    /// run call it can only be about.
    pub(crate) in_flight: crate::tools::mcp::call_progress::InFlight,
}

impl Answers {
    /// Ask the elicitor (decline, logged, without one); complete and check an accepted form.
    pub(crate) async fn elicit(&self, params: ElicitRequestParams) -> ElicitResult {
        let server = &*self.server;
        let (message, mode) = match params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
                (message, ElicitationMode::Form { schema })
            }
            ElicitRequestParams::UrlElicitationParams {
                message,
                url,
                elicitation_id,
                ..
            } => (
                message,
                ElicitationMode::Url {
                    url,
                    elicitation_id,
                },
            ),
            #[allow(unreachable_patterns)] // the enum is non-exhaustive
            _ => {
                tracing::warn!(target: "agcore::mcp", server, "declined an elicitation of an unknown mode");
                return ElicitResult::new(ElicitationAction::Decline);
            }
        };
        let Some(elicitor) = &self.elicitor else {
            tracing::warn!(target: "agcore::mcp", server, "declined an elicitation: no elicitor is configured (McpClient::with_elicitor)");
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let request = ElicitationRequest {
            server: server.to_owned(),
            message,
            mode,
        };
        match elicitor.elicit(&request).await {
            ElicitationResponse::Accept { mut content } => match &request.mode {
                ElicitationMode::Form { schema } => {
                    apply_schema_defaults(schema, &mut content);
                    if let Err(problem) = validate_elicited(schema, &content) {
                        tracing::warn!(target: "agcore::mcp", server, %problem, "declined an elicitation: the answer does not fit the requested schema");
                        return ElicitResult::new(ElicitationAction::Decline);
                    }
                    ElicitResult::new(ElicitationAction::Accept)
                        .with_content(serde_json::Value::Object(content))
                }
                ElicitationMode::Url { .. } => ElicitResult::new(ElicitationAction::Accept),
            },
            ElicitationResponse::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationResponse::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        }
    }

    /// Ask the sampler; refuse (logged) without one.
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let server = &*self.server;
        let Some(sampler) = &self.sampler else {
            tracing::warn!(target: "agcore::mcp", server, "refused a sampling request: no sampler is configured (McpClient::with_sampler)");
            return Err(ErrorData::invalid_request(
                "sampling is not enabled for this server",
                None,
            ));
        };
        let request = request_of(server, params);
        match sampler.sample(&request).await {
            Ok(reply) => {
                let result = CreateMessageResult::new(
                    SamplingMessage::assistant_text(reply.text),
                    reply.model,
                );
                Ok(match reply.stop_reason {
                    Some(reason) => result.with_stop_reason(reason),
                    None => result,
                })
            }
            Err(reason) => {
                tracing::info!(target: "agcore::mcp", server, %reason, "refused a sampling request");
                Err(ErrorData::invalid_request(reason, None))
            }
        }
    }

    /// The configured roots.
    pub(crate) fn roots(&self) -> ListRootsResult {
        let roots = self
            .roots
            .listed()
            .into_iter()
            .map(|(uri, name)| {
                let root = Root::new(uri);
                match name {
                    Some(name) => root.with_name(name),
                    None => root,
                }
            })
            .collect();
        ListRootsResult::new(roots)
    }

    /// Answer every request, one at a time (a person may be asked), as above. With
    /// `can_defer`, a question for an elicitor that [defers](crate::tools::mcp::Elicitor::defers)
    /// is not asked: [`ToolError::InputDeferred`] names it.
    pub(crate) async fn answer_all(
        &self,
        tool: &str,
        requests: InputRequests,
        can_defer: bool,
    ) -> Result<Option<InputResponses>, ToolError> {
        if requests.is_empty() {
            return Ok(None);
        }
        let defers = self.elicitor.as_ref().is_some_and(|e| e.defers());
        if can_defer && defers {
            let questions: Vec<String> = requests
                .values()
                .filter_map(|request| match request {
                    InputRequest::Elicitation(request) => Some(question(&request.params)),
                    _ => None,
                })
                .collect();
            if !questions.is_empty() {
                return Err(ToolError::InputDeferred {
                    tool: tool.to_owned(),
                    server: self.server.to_string(),
                    questions,
                });
            }
        }
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let response = match request {
                InputRequest::Elicitation(request) => {
                    serde_json::to_value(self.elicit(request.params).await)
                }
                InputRequest::CreateMessage(request) => match self.sample(request.params).await {
                    Ok(result) => serde_json::to_value(result),
                    Err(error) => {
                        return Err(ToolError::ExecutionFailed(
                            tool.to_owned(),
                            format!(
                                "MCP server '{}' needs a model completion to go on, which was refused: {}",
                                self.server, error.message
                            ),
                        ));
                    }
                },
                InputRequest::ListRoots(_) => serde_json::to_value(self.roots()),
                _ => {
                    return Err(ToolError::McpError(format!(
                        "MCP server '{}' asked for an input of a kind agcore does not know",
                        self.server
                    )));
                }
            };
            let response = response.unwrap_or(Value::Null);
            responses.insert(key, response);
        }
        Ok(Some(responses))
    }
}

/// The longest question kept for display (characters).
const MAX_QUESTION_CHARS: usize = 500;

/// What an elicitation asks, for a person to read later: the server's text — and for a URL
/// question the URL to open by hand — cut and escaped.
fn question(params: &rmcp::model::ElicitRequestParams) -> String {
    let shown = |text: &str| {
        let cut: String = text.chars().take(MAX_QUESTION_CHARS).collect();
        crate::display::escape_for_terminal(&cut).into_owned()
    };
    match params {
        rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } => shown(message),
        rmcp::model::ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            format!("{} (URL to open: {})", shown(message), shown(url))
        }
        #[allow(unreachable_patterns)] // the enum is non-exhaustive
        _ => "(a question of an unknown kind)".to_owned(),
    }
}
