//! `agcore acp`: agcore as an Agent Client Protocol agent (protocol version 1, JSON-RPC over
//! stdio) on the official `agent-client-protocol` SDK, for Zed, JetBrains and Neovim
//! (CodeCompanion). See docs/15-editors.md.
//!
//! - [`transport`]: bounded stdio lines; stdout carries nothing but protocol messages.
//! - [`session`]: one editor session = one stored agcore session, its tools and its turn.
//! - [`turn_updates`]: a turn's events as `session/update`s, and its stop reason.
//! - [`permission`]: approvals as `session/request_permission`.
//! - [`replay`]: `session/load` replays the stored conversation.
//! - [`modes`]: session modes from agcore's tool profiles.
//! - [`requests`]: requests to the editor sent so that a cancelled turn leaves them to it.
//! - [`editor_tools`]: the built-ins the editor does for agcore when it offers to:
//!   [`editor_files`] (`read_file`, `write_file`, `edit_file` on its buffers) and [`terminal`]
//!   (`run_command` in its terminals), each keeping the built-in's gates ([`delegate`]).
//! - [`workspace`]: a session's `cwd`, its config and trust (an untrusted one is restricted).
//!
//! The SDK answers what agcore does not handle: a line that is not JSON gets a parse error,
//! an unknown method `-32601`, bad params `-32602`; the agent keeps serving. Handlers never
//! wait on the editor inside the SDK's dispatch loop: each request's work is a spawned task.

mod delegate;
mod editor_files;
mod editor_tools;
mod kinds;
mod modes;
mod permission;
mod replay;
mod requests;
mod session;
mod terminal;
mod transport;
mod turn_updates;
mod workspace;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error};

use crate::cli::AcpArgs;
use crate::layers::Loaded;
use crate::secrets::Secrets;
use session::{AcpSession, EditorOffers, Opening};
use turn_updates::TurnEnd;

/// What every handler shares.
struct Server {
    args: AcpArgs,
    secrets: Secrets,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
    /// What the editor offered at `initialize` (files, terminals).
    editor: Mutex<EditorOffers>,
}

/// A new session's id (its name in the store): unique per process and time.
fn new_session_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis())
        .unwrap_or_default();
    format!(
        "acp-{millis}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// An error the editor is shown, with agcore's message.
fn failure(code: i32, error: &anyhow::Error) -> Error {
    Error::new(code, crate::describe_raw(error))
}

const INVALID_PARAMS: i32 = -32602;
const INTERNAL_ERROR: i32 = -32603;

impl Server {
    fn session(&self, id: &acp::SessionId) -> Option<Arc<AcpSession>> {
        self.sessions.lock().ok()?.get(&*id.0).cloned()
    }

    fn keep(&self, session: Arc<AcpSession>) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(session.id().0.to_string(), session);
        }
    }

    fn opening(
        &self,
        id: String,
        cwd: std::path::PathBuf,
        mcp_servers: Vec<acp::McpServer>,
        connection: ConnectionTo<Client>,
    ) -> Opening<'_> {
        Opening {
            id,
            cwd,
            mcp_servers,
            args: &self.args,
            secrets: &self.secrets,
            connection,
            editor: self.editor.lock().map(|offers| *offers).unwrap_or_default(),
        }
    }
}

/// The answer to `initialize`: image prompts are offered when the model reads images (the
/// config's `[model] accepts_images`, the switch that also sends it tools' images).
fn initialize(request: &acp::InitializeRequest, accepts_images: bool) -> acp::InitializeResponse {
    let _ = request;
    acp::InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
        .agent_capabilities(
            acp::AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(
                    acp::PromptCapabilities::new()
                        .image(accepts_images)
                        .embedded_context(true),
                )
                .mcp_capabilities(acp::McpCapabilities::new().http(true)),
        )
        .agent_info(
            acp::Implementation::new("agcore", env!("CARGO_PKG_VERSION"))
                .title("agcore".to_owned()),
        )
}

async fn new_session(
    server: &Server,
    request: acp::NewSessionRequest,
    connection: ConnectionTo<Client>,
) -> Result<acp::NewSessionResponse, Error> {
    let opening = server.opening(
        new_session_id(),
        request.cwd,
        request.mcp_servers,
        connection,
    );
    let session = AcpSession::open(opening, false)
        .await
        .map_err(|error| failure(INVALID_PARAMS, &error))?;
    let response = acp::NewSessionResponse::new(session.id().clone()).modes(session.modes().await);
    server.keep(session);
    Ok(response)
}

async fn load_session(
    server: &Server,
    request: acp::LoadSessionRequest,
    connection: ConnectionTo<Client>,
) -> Result<acp::LoadSessionResponse, Error> {
    let id = request.session_id.0.to_string();
    if server.session(&request.session_id).is_some() {
        return Err(Error::new(
            INVALID_PARAMS,
            format!("session {id} is already open"),
        ));
    }
    let opening = server.opening(id, request.cwd, request.mcp_servers, connection.clone());
    let session = AcpSession::open(opening, true)
        .await
        .map_err(|error| failure(INVALID_PARAMS, &error))?;
    // The conversation is replayed before the answer, as the protocol asks.
    session.replay(&connection).await;
    let response = acp::LoadSessionResponse::new().modes(session.modes().await);
    server.keep(session);
    Ok(response)
}

async fn prompt(
    server: &Server,
    request: acp::PromptRequest,
    connection: ConnectionTo<Client>,
) -> Result<acp::PromptResponse, Error> {
    let session = server
        .session(&request.session_id)
        .ok_or_else(|| Error::new(INVALID_PARAMS, "no such session"))?;
    match session.prompt(&connection, request.prompt).await {
        TurnEnd::Stopped(reason) => Ok(acp::PromptResponse::new(reason)),
        TurnEnd::Failed(message) => Err(Error::new(INTERNAL_ERROR, message)),
    }
}

async fn set_mode(
    server: &Server,
    request: acp::SetSessionModeRequest,
    connection: ConnectionTo<Client>,
) -> Result<acp::SetSessionModeResponse, Error> {
    let session = server
        .session(&request.session_id)
        .ok_or_else(|| Error::new(INVALID_PARAMS, "no such session"))?;
    let mode = request.mode_id.0.to_string();
    match session.set_mode(&mode).await {
        Ok(true) => {
            connection.send_notification(acp::SessionNotification::new(
                session.id().clone(),
                acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(request.mode_id)),
            ))?;
            Ok(acp::SetSessionModeResponse::new())
        }
        Ok(false) => Err(Error::new(INVALID_PARAMS, format!("no mode {mode}"))),
        Err(error) => Err(failure(INTERNAL_ERROR, &error)),
    }
}

/// Answer `responder` with what `work` gives, from a task of its own (never inside the SDK's
/// dispatch loop: a turn waits on the editor's answers).
fn answer_later<T, F>(
    connection: &ConnectionTo<Client>,
    responder: Responder<T>,
    work: F,
) -> Result<(), Error>
where
    T: agent_client_protocol::JsonRpcResponse + Send + 'static,
    F: Future<Output = Result<T, Error>> + Send + 'static,
{
    connection.spawn(async move {
        let _ = responder.respond_with_result(work.await);
        Ok(())
    })
}

/// Run `agcore acp` until the editor closes stdin.
pub async fn serve(args: AcpArgs, loaded: Loaded, secrets: Secrets) -> anyhow::Result<ExitCode> {
    let accepts_images = loaded.config.model.accepts_images.unwrap_or(false);
    // Servers' progress lines go to stderr (stdout is the protocol's).
    crate::mcp_progress::show(crate::mcp_progress::Shown::Human);
    let server = Arc::new(Server {
        args,
        secrets,
        sessions: Mutex::new(HashMap::new()),
        editor: Mutex::new(EditorOffers::default()),
    });
    let transport = transport::stdio()?;
    let (on_initialize, on_new, on_load, on_prompt, on_mode, on_cancel) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
    );
    let agent = Agent
        .v1()
        .name("agcore")
        .on_receive_request(
            async move |request: acp::InitializeRequest,
                        responder: Responder<acp::InitializeResponse>,
                        _connection: ConnectionTo<Client>| {
                if let Ok(mut offers) = on_initialize.editor.lock() {
                    *offers = EditorOffers::of(&request.client_capabilities);
                }
                responder.respond(initialize(&request, accepts_images))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: acp::AuthenticateRequest,
                        responder: Responder<acp::AuthenticateResponse>,
                        _connection: ConnectionTo<Client>| {
                // No authentication methods are offered: the model's key is agcore's config.
                responder.respond(acp::AuthenticateResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::NewSessionRequest,
                        responder: Responder<acp::NewSessionResponse>,
                        connection: ConnectionTo<Client>| {
                let server = on_new.clone();
                let to = connection.clone();
                answer_later(&connection, responder, async move {
                    new_session(&server, request, to).await
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::LoadSessionRequest,
                        responder: Responder<acp::LoadSessionResponse>,
                        connection: ConnectionTo<Client>| {
                let server = on_load.clone();
                let to = connection.clone();
                answer_later(&connection, responder, async move {
                    load_session(&server, request, to).await
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::PromptRequest,
                        responder: Responder<acp::PromptResponse>,
                        connection: ConnectionTo<Client>| {
                let server = on_prompt.clone();
                let to = connection.clone();
                answer_later(&connection, responder, async move {
                    prompt(&server, request, to).await
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: acp::SetSessionModeRequest,
                        responder: Responder<acp::SetSessionModeResponse>,
                        connection: ConnectionTo<Client>| {
                let server = on_mode.clone();
                let to = connection.clone();
                answer_later(&connection, responder, async move {
                    set_mode(&server, request, to).await
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: acp::CancelNotification,
                        _connection: ConnectionTo<Client>| {
                if let Some(session) = on_cancel.session(&notification.session_id) {
                    session.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        );
    let served = agent.connect_to(transport).await;
    let sessions: Vec<Arc<AcpSession>> = server
        .sessions
        .lock()
        .map(|sessions| sessions.values().cloned().collect())
        .unwrap_or_default();
    for session in sessions {
        session.cancel();
        session.close().await;
    }
    served.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))?;
    Ok(ExitCode::SUCCESS)
}
