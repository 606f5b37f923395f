//! One editor session: a stored agcore session (SQLite by default, PostgreSQL when configured)
//! with its conversation, its tools (built-in tools confined to `cwd`, the config's and the
//! editor's MCP servers), its mode, and the cancellation of its running turn.

use std::path::PathBuf;
use std::sync::Arc;

use agcore::llm::{LlmCycle, OpenaiChatMessage};
use agcore::run::RunRequest;
use agcore::session::StoredCallUpdate;
use agcore::team::Team;
use agcore::tools::mcp::{McpHandle, McpServerConfig};
use agcore::tools::{ToolRegistry, ToolsConfig};
use agcore::vocab::{ContentPart, ImageUrl};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use anyhow::Context;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::permission::EditorApprover;
use super::turn_updates::{TurnEnd, TurnUpdates};
use super::{modes, workspace};
use crate::cli::{AcpArgs, SessionArgs};
use crate::secrets::Secrets;
use crate::setup::{build_registry_with_mcp, build_session_cycle};
use crate::store::{OpenSession, open_session};

/// A session and the token that cancels its running turn.
pub struct AcpSession {
    id: acp::SessionId,
    state: tokio::sync::Mutex<SessionState>,
    cancel: std::sync::Mutex<CancellationToken>,
}

struct SessionState {
    cycle: LlmCycle,
    registry: ToolRegistry,
    stored: OpenSession,
    team: Option<(Team, String)>,
    mcp: Vec<McpHandle>,
    tools: ToolsConfig,
    mode: String,
    workspace: PathBuf,
    /// What the stored calls' tools reported, for `session/load`'s replay.
    stored_updates: Vec<StoredCallUpdate>,
}

/// What `session/new` and `session/load` are given.
pub struct Opening<'a> {
    /// The session's id (its name in the store).
    pub id: String,
    /// The workspace.
    pub cwd: PathBuf,
    /// The editor's MCP servers.
    pub mcp_servers: Vec<acp::McpServer>,
    /// The command's arguments.
    pub args: &'a AcpArgs,
    /// The API keys.
    pub secrets: &'a Secrets,
    /// The connection to the editor (permissions go there).
    pub connection: ConnectionTo<Client>,
    /// What the editor offered to do for agcore (files, terminals).
    pub editor: EditorOffers,
}

/// The editor's offers at `initialize` that change how the built-in tools work.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditorOffers {
    /// `fs/read_text_file`: `read_file` reads the editor's buffers.
    pub reads: bool,
    /// `fs/write_text_file` (with reads): `write_file` and `edit_file` change its buffers.
    pub writes: bool,
    /// `terminal/*`: `run_command` runs in its terminals.
    pub terminals: bool,
}

impl EditorOffers {
    /// What `capabilities` offer.
    pub fn of(capabilities: &acp::ClientCapabilities) -> Self {
        Self {
            reads: capabilities.fs.read_text_file,
            writes: capabilities.fs.read_text_file && capabilities.fs.write_text_file,
            terminals: capabilities.terminal,
        }
    }
}

/// An editor MCP server as an `mcpServers` entry (stdio or HTTP; SSE is not offered).
fn server_entry(server: &acp::McpServer) -> Option<(String, McpServerConfig)> {
    match server {
        acp::McpServer::Stdio(stdio) => Some((
            stdio.name.clone(),
            McpServerConfig {
                command: Some(stdio.command.display().to_string()),
                args: stdio.args.clone(),
                env: stdio
                    .env
                    .iter()
                    .map(|variable| (variable.name.clone(), variable.value.clone()))
                    .collect(),
                ..McpServerConfig::default()
            },
        )),
        acp::McpServer::Http(http) => Some((
            http.name.clone(),
            McpServerConfig {
                kind: Some("http".to_owned()),
                url: Some(http.url.clone()),
                headers: http
                    .headers
                    .iter()
                    .map(|header| (header.name.clone(), header.value.clone()))
                    .collect(),
                ..McpServerConfig::default()
            },
        )),
        _ => None,
    }
}

impl AcpSession {
    /// Open (create, or load with `must_exist`) the stored session `opening.id`.
    pub async fn open(opening: Opening<'_>, must_exist: bool) -> anyhow::Result<Arc<Self>> {
        let Opening {
            id,
            cwd,
            mcp_servers,
            args,
            secrets,
            connection,
            editor,
        } = opening;
        let mut workspace = workspace::open(&args.tools, &cwd)?;
        if !args.tools.yes {
            // The editor answers: writes and commands are asked, not refused.
            crate::interactive_default::apply(&mut workspace.loaded.config.tools);
        }
        for (name, entry) in mcp_servers.iter().filter_map(server_entry) {
            workspace.loaded.config.mcp.servers.insert(name, entry);
        }
        let config = &workspace.loaded.config;
        let session_args = SessionArgs {
            session: Some(id.clone()),
            store: args.store.clone(),
            wait_session: None,
        };
        let stored = open_session(&session_args, config)
            .await?
            .context("no session")?;
        if must_exist && stored.history.is_empty() {
            anyhow::bail!("no stored session {id}");
        }
        let stored_updates = if must_exist {
            call_updates(&session_args, config, &id).await?
        } else {
            Vec::new()
        };
        let mut cycle = build_session_cycle(&args.model, config, secrets, stored.history.clone())?;
        crate::context_cli::discover(&mut cycle, &args.model, config, secrets).await;
        let mut tool_args = args.tools.clone();
        tool_args.workspace = Some(workspace.root.clone());
        tool_args.restricted = workspace.restricted;
        let (mut registry, _, mcp) =
            build_registry_with_mcp(&tool_args, Some(&args.model), &workspace.loaded, true).await?;
        crate::context_cli::read_outputs_from_session(&mut registry, config, &stored.journal);
        let session_id = acp::SessionId::new(id.as_str());
        super::editor_tools::hand_over(
            &mut registry,
            editor,
            super::editor_tools::Session {
                connection: &connection,
                id: &session_id,
                root: &workspace.root,
                config,
                model: &args.model,
                tool_args: &tool_args,
            },
        )?;
        // The editor shows each call live: its title and input as the model streams them.
        let registry = stored
            .keep_grants(registry)
            .with_input_updates(true)
            .with_approver(Arc::new(EditorApprover::new(
                connection,
                session_id.clone(),
            )));
        let team = match &args.agent {
            Some(name) => Some((
                crate::team_run::team_for(name, &args.model, config, secrets, &cycle, &registry)?,
                name.clone(),
            )),
            None => None,
        };
        let tools = config.tools.clone();
        let mode = tools
            .profile
            .clone()
            .filter(|profile| modes::exists(&tools, profile))
            .unwrap_or_else(|| modes::DEFAULT_MODE.to_owned());
        Ok(Arc::new(Self {
            id: session_id,
            state: tokio::sync::Mutex::new(SessionState {
                cycle,
                registry,
                stored,
                team,
                mcp,
                tools,
                mode,
                workspace: workspace.root,
                stored_updates,
            }),
            cancel: std::sync::Mutex::new(CancellationToken::new()),
        }))
    }

    /// The session's id.
    pub fn id(&self) -> &acp::SessionId {
        &self.id
    }

    /// The modes, the current one marked.
    pub async fn modes(&self) -> acp::SessionModeState {
        let state = self.state.lock().await;
        modes::state(&state.tools, &state.mode)
    }

    /// Switch to `mode`; false when there is no such mode.
    pub async fn set_mode(&self, mode: &str) -> anyhow::Result<bool> {
        let mut state = self.state.lock().await;
        if !modes::exists(&state.tools, mode) {
            return Ok(false);
        }
        let registry = std::mem::take(&mut state.registry);
        state.registry = modes::apply(&state.tools, registry, mode)?;
        state.mode = mode.to_owned();
        Ok(true)
    }

    /// Send the updates that replay the stored conversation.
    pub async fn replay(&self, connection: &ConnectionTo<Client>) {
        let state = self.state.lock().await;
        let mut updates = TurnUpdates::new(
            connection,
            self.id.clone(),
            &state.registry,
            &state.workspace,
        )
        .replaying();
        super::replay::send(state.cycle.messages(), &state.stored_updates, &mut updates);
    }

    /// Cancel the running turn (nothing when none runs).
    pub fn cancel(&self) {
        if let Ok(token) = self.cancel.lock() {
            token.cancel();
        }
    }

    /// Close the session's MCP servers.
    pub async fn close(&self) {
        let state = self.state.lock().await;
        crate::mcp_close::close_servers(&state.mcp).await;
    }

    /// Run one prompt to its end, sending its updates to `connection`.
    pub async fn prompt(
        &self,
        connection: &ConnectionTo<Client>,
        prompt: Vec<acp::ContentBlock>,
    ) -> TurnEnd {
        let mut state = self.state.lock().await;
        // A fresh token per turn, taken after the lock: a cancel sent while an earlier turn
        // ran does not cancel this one.
        let token = CancellationToken::new();
        if let Ok(mut current) = self.cancel.lock() {
            *current = token.clone();
        }
        let state = &mut *state;
        let (text, images) = prompt_parts(&prompt);
        let mut request = if images.is_empty() {
            RunRequest::prompt(text)
        } else {
            // A prompt with images: the user message with its parts goes into the history,
            // and the run continues from it.
            let mut parts = vec![ContentPart::Text { text }];
            parts.extend(images);
            let mut history = state.cycle.messages().to_vec();
            history.push(OpenaiChatMessage::user_parts(parts));
            let model = state.cycle.model().clone();
            let config = state.cycle.config().clone();
            state.cycle = LlmCycle::from_history(model, config, history);
            RunRequest::resume()
        };
        if !state.registry.is_empty() {
            request = request.with_tools(&state.registry);
        }
        request = request.with_journal(&*state.stored.journal);
        if let Some((team, name)) = &state.team {
            request = request
                .with_tools(&state.registry)
                .with_team(team, name.clone());
        }
        let mut updates = TurnUpdates::new(
            connection,
            self.id.clone(),
            &state.registry,
            &state.workspace,
        );
        let cancelled = {
            let work = async {
                let mut items = state.cycle.run_with_stream(request);
                while let Some(item) = items.next().await {
                    updates.item(item);
                }
            };
            tokio::select! {
                biased;
                () = token.cancelled() => true,
                () = work => false,
            }
            // `work` is dropped here: the request, any running tool and any pending
            // permission question with it.
        };
        if cancelled {
            updates.close_unfinished("cancelled");
        }
        let end = if cancelled {
            TurnEnd::Stopped(acp::StopReason::Cancelled)
        } else {
            updates.end()
        };
        // The store follows what the library kept (a cancelled turn: the completed part,
        // unfinished calls answered as cancelled, so the history stays wire-valid).
        if let Err(error) = state.stored.sync(state.cycle.messages()).await {
            tracing::error!(error = %crate::describe(&error), "could not store the session");
        }
        end
    }
}

/// The updates the stored session's calls reported (journaled by the run).
async fn call_updates(
    args: &SessionArgs,
    config: &crate::config::AgcoreConfig,
    name: &str,
) -> anyhow::Result<Vec<StoredCallUpdate>> {
    let url = crate::store::store_url(args.store.url.as_deref(), config.session.store.as_deref())?;
    let store = crate::store::open(&url, &config.session).await?;
    Ok(store
        .load(name)
        .await?
        .map(|session| agcore::session::call_updates(&session))
        .unwrap_or_default())
}

/// The prompt's text (text blocks, embedded resources as tagged context, links named) and its
/// images (as data URLs).
fn prompt_parts(prompt: &[acp::ContentBlock]) -> (String, Vec<ContentPart>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in prompt {
        match block {
            acp::ContentBlock::Text(block) => text.push_str(&block.text),
            acp::ContentBlock::Image(image) => images.push(ContentPart::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{};base64,{}", image.mime_type, image.data),
                    detail: None,
                },
            }),
            acp::ContentBlock::Resource(resource) => {
                if let acp::EmbeddedResourceResource::TextResourceContents(contents) =
                    &resource.resource
                {
                    text.push_str(&format!(
                        "\n<context uri=\"{}\">\n{}\n</context>\n",
                        contents.uri, contents.text
                    ));
                }
            }
            acp::ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("\n[{}]({})\n", link.name, link.uri));
            }
            _ => {}
        }
    }
    (text, images)
}
