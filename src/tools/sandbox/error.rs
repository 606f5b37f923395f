//! [`SandboxError`]: why a command was not started under its sandbox.

use std::path::PathBuf;

/// Why a sandboxed command could not be started. Nothing runs unsandboxed instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel cannot enforce the policy.
    #[error(
        "the sandbox ({policy}) cannot be enforced on this system: missing {}; nothing was run. \
         To run commands without a sandbox, choose it knowingly: `[tools.sandbox] mode = \"full\"` \
         in agcore.toml (or `--sandbox full`)",
        missing.join("; ")
    )]
    Unsupported {
        /// The policy, described.
        policy: String,
        /// What the kernel lacks.
        missing: Vec<String>,
    },
    /// No sandbox helper program was found.
    #[error(
        "no sandbox helper found ({searched}); nothing was run. Build the `agcore-sandbox-exec` \
         binary next to this program, set AGCORE_SANDBOX_EXEC, or choose `mode = \"full\"` knowingly"
    )]
    NoHelper {
        /// Where it was looked for.
        searched: String,
    },
    /// The workspace directory could not be resolved.
    #[error("the sandbox's workspace {path} cannot be used: {source}")]
    Workspace {
        /// The workspace.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The private temporary directory could not be created.
    #[error("the sandbox's private temporary directory could not be created: {0}")]
    TempDir(std::io::Error),
    /// The egress proxy of the allowed hosts could not be started (it needs a tokio runtime).
    #[error("the sandbox's proxy for its allowed hosts could not be started, nothing was run: {0}")]
    Proxy(std::io::Error),
    /// The helper could not apply the sandbox in the child (its message).
    #[error("the sandbox could not be applied, nothing was run: {0}")]
    Apply(String),
}
