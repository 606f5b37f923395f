//! `agcore mcp login SERVER` / `logout SERVER`: OAuth tokens of streamable-HTTP servers, kept
//! in `$XDG_DATA_HOME/agcore/mcp-auth/SERVER.json` (mode 0600; the built-in file tools
//! never reach the data dir), used and refreshed by every command that connects the server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agcore::display::escape_for_terminal;
use agcore::tools::mcp::auth::{
    Authorizer, CredentialStore, FileCredentialStore, LoopbackAuthorizer, McpAuth,
};
use agcore::tools::mcp::{McpClient, McpTransport};
use anyhow::{Context, bail};
use async_trait::async_trait;

use crate::cli::{McpLoginArgs, McpLogoutArgs};
use crate::layers::{Loaded, base_dir};
use crate::settings::mcp_servers;

/// How long `login` waits for the browser's redirect.
const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// The token file of `server` (its name with anything but `[A-Za-z0-9._-]` as `_`).
pub fn token_path(server: &str) -> Option<PathBuf> {
    let file: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    base_dir("XDG_DATA_HOME", ".local/share").map(|dir| {
        dir.join("agcore")
            .join("mcp-auth")
            .join(format!("{file}.json"))
    })
}

/// `client` using the stored tokens of `server`, when it is an HTTP server that has some.
/// A server that asks for a new authorization gets an error naming `agcore mcp login`, never
/// a browser in the middle of a run.
pub fn with_stored_auth(client: McpClient, server: &str) -> McpClient {
    if !matches!(client.transport(), McpTransport::Http { .. }) {
        return client;
    }
    let Some(path) = token_path(server).filter(|path| path.exists()) else {
        return client;
    };
    let auth = McpAuth::authorization_code("http://127.0.0.1/callback")
        .with_store(Arc::new(FileCredentialStore::new(path)))
        .with_authorizer(Arc::new(LoginRequired {
            server: server.to_owned(),
        }));
    client.with_auth(auth)
}

/// Declines new authorizations outside `agcore mcp login`.
#[derive(Debug)]
struct LoginRequired {
    server: String,
}

#[async_trait]
impl Authorizer for LoginRequired {
    async fn authorize(&self, _authorization_url: &str) -> Result<String, String> {
        Err(self.reason())
    }

    fn declines(&self) -> Option<String> {
        Some(self.reason())
    }
}

impl LoginRequired {
    fn reason(&self) -> String {
        format!(
            "the server asks for a new authorization: run `agcore mcp login {}`",
            self.server
        )
    }
}

/// Show the authorization URL and try to open a browser on it.
fn show(url: &str) {
    eprintln!(
        "Open this URL to authorize agcore:\n  {}",
        escape_for_terminal(url)
    );
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    // The URL is one argument (no shell); a missing opener only means the user copies it.
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// `agcore mcp login SERVER`.
pub async fn login(args: McpLoginArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let servers = mcp_servers(loaded, args.source.mcp_config.as_deref())?;
    let client = servers.client(&args.server)?;
    if !matches!(client.transport(), McpTransport::Http { .. }) {
        bail!(
            "MCP server '{}' is a stdio server; OAuth is for streamable-HTTP servers",
            args.server
        );
    }
    let path = token_path(&args.server).context("neither XDG_DATA_HOME nor HOME is set")?;
    let store = FileCredentialStore::new(&path);
    // A login starts over: old tokens would be used instead of asking.
    store.clear().await?;
    let authorizer = LoopbackAuthorizer::bind(args.port, LOGIN_WAIT, Arc::new(show))
        .await
        .context("cannot listen on 127.0.0.1 for the authorization redirect")?;
    let auth = McpAuth::authorization_code(authorizer.redirect_uri())
        .with_store(Arc::new(store.clone()))
        .with_authorizer(Arc::new(authorizer));
    let mut client = client
        .with_auth(auth)
        .with_connect_timeout(LOGIN_WAIT + Duration::from_secs(30));
    client.connect().await?;
    let tools = client.list_tools().await;
    let _ = client.close().await;
    let tools = tools?;
    if store.load().await?.is_none() {
        println!(
            "MCP server '{}' did not ask for authorization; nothing stored ({} tools)",
            args.server,
            tools.len()
        );
    } else {
        println!(
            "Logged in to MCP server '{}' ({} tools); tokens in {}",
            args.server,
            tools.len(),
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `agcore mcp logout SERVER`.
pub async fn logout(args: McpLogoutArgs) -> anyhow::Result<ExitCode> {
    let path = token_path(&args.server).context("neither XDG_DATA_HOME nor HOME is set")?;
    if path.exists() {
        FileCredentialStore::new(&path).clear().await?;
        println!("Logged out of MCP server '{}'", args.server);
    } else {
        println!("No stored tokens for MCP server '{}'", args.server);
    }
    Ok(ExitCode::SUCCESS)
}
