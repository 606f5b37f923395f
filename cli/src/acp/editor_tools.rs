//! Which built-in tools a session hands to the editor, by what the editor offered at
//! `initialize`: `read_file` to its buffers (`fs/read_text_file`), `write_file` and `edit_file`
//! too when it also writes them (`fs/write_text_file`), `run_command` to its terminals
//! (`terminal`). Without an offer, the local built-in stays. A tool the registry does not have
//! (`--tools` without builtin, a profile) is not added.

use std::path::Path;
use std::sync::Arc;

use agcore::tools::ToolRegistry;
use agcore::tools::builtin::Workspace;
use agcore::tools::sandbox::Sandbox;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;

use super::editor_files::{EditorEditFile, EditorFs, EditorReadFile, EditorWriteFile};
use super::session::EditorOffers;
use super::terminal::EditorRunCommand;
use crate::cli::{ModelArgs, ToolArgs};
use crate::config::AgcoreConfig;

/// What the editor's tools need of their session.
pub struct Session<'a> {
    /// The connection to the editor.
    pub connection: &'a ConnectionTo<Client>,
    /// The session's id.
    pub id: &'a acp::SessionId,
    /// The workspace (canonical).
    pub root: &'a Path,
    /// The session's config.
    pub config: &'a AgcoreConfig,
    /// The model (its key variables are withheld from commands).
    pub model: &'a ModelArgs,
    /// The session's tool arguments (sandbox, restricted mode).
    pub tool_args: &'a ToolArgs,
}

/// Replace in `registry` the built-ins the editor does for agcore.
pub fn hand_over(
    registry: &mut ToolRegistry,
    offers: EditorOffers,
    session: Session<'_>,
) -> anyhow::Result<()> {
    if !(offers.reads || offers.terminals) {
        return Ok(());
    }
    let tools = crate::setup::effective_tools(session.config, session.tool_args);
    let options = crate::setup::builtin_options(
        session.config,
        Some(session.model),
        &tools,
        session.tool_args,
    )?;
    let files = EditorFs::new(
        session.connection.clone(),
        session.id.clone(),
        Workspace::new(session.root)?,
        options.clone(),
    );
    if offers.reads
        && let Some(builtin) = registry.unregister("read_file")
    {
        registry.register(Arc::new(EditorReadFile::new(builtin, files.clone())))?;
    }
    if offers.writes {
        if let Some(builtin) = registry.unregister("write_file") {
            registry.register(Arc::new(EditorWriteFile::new(builtin, files.clone())))?;
        }
        if let Some(builtin) = registry.unregister("edit_file") {
            registry.register(Arc::new(EditorEditFile::new(builtin, files)))?;
        }
    }
    if offers.terminals
        && let Some(builtin) = registry.unregister("run_command")
    {
        let mut sandbox = Sandbox::new(options.sandbox.clone());
        if let Some(helper) = &options.sandbox_helper {
            sandbox = sandbox.with_helper(helper.clone());
        }
        registry.register(Arc::new(EditorRunCommand::new(
            builtin,
            session.connection.clone(),
            session.id.clone(),
            session.root.to_owned(),
            sandbox,
            options.withheld_env.clone(),
        )))?;
    }
    Ok(())
}
