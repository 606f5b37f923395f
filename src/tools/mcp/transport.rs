//! [`McpTransport`]: how to reach an MCP server.

use std::collections::BTreeMap;

/// How to reach an MCP server.
///
/// `Stdio` runs the server as a child process and speaks newline-delimited JSON-RPC over its
/// stdin/stdout; add environment variables and a working directory with
/// [`McpClient::with_env`](crate::tools::mcp::McpClient::with_env) and
/// [`McpClient::with_cwd`](crate::tools::mcp::McpClient::with_cwd). `Http` speaks the
/// streamable HTTP transport to a URL, sending `headers` with every request.
///
/// ```
/// use agcore::tools::mcp::McpTransport;
///
/// let local = McpTransport::Stdio { command: "mcp-server-time".into(), args: vec![] };
/// let remote = McpTransport::http("https://mcp.example.com/mcp").with_bearer_token("s3cret");
/// # let _ = (local, remote);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        /// The program (looked up in `PATH` when it has no slash).
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A server speaking the streamable HTTP transport.
    Http {
        /// The MCP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
        url: String,
        /// Extra HTTP headers sent with every request (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

impl McpTransport {
    /// A stdio transport running `command` with `args`.
    pub fn stdio<I, S>(command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        McpTransport::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// A streamable HTTP transport to `url`, without extra headers.
    pub fn http(url: impl Into<String>) -> Self {
        McpTransport::Http {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }

    /// Add an HTTP header (ignored by `Stdio`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } = &mut self {
            headers.insert(name.into(), value.into());
        }
        self
    }

    /// Send `Authorization: Bearer <token>` (ignored by `Stdio`).
    pub fn with_bearer_token(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.with_header("Authorization", value)
    }

    /// A short description for messages: the command line or the URL.
    pub fn describe(&self) -> String {
        match self {
            McpTransport::Stdio { command, args } if args.is_empty() => command.clone(),
            McpTransport::Stdio { command, args } => format!("{command} {}", args.join(" ")),
            McpTransport::Http { url, .. } => url.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_literal_matches_the_design() {
        let transport = McpTransport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "server".into()],
        };
        assert_eq!(transport, McpTransport::stdio("npx", ["-y", "server"]));
        assert_eq!(transport.describe(), "npx -y server");
    }

    #[test]
    fn bearer_token_becomes_an_authorization_header() {
        let transport = McpTransport::http("http://127.0.0.1:1/mcp").with_bearer_token("abc");
        let McpTransport::Http { headers, .. } = transport else {
            panic!("not http");
        };
        assert_eq!(
            headers.get("Authorization").map(String::as_str),
            Some("Bearer abc")
        );
    }
}
