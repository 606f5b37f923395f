//! [`SandboxSpec`]: the concrete plan the parent hands the sandbox helper — absolute paths
//! resolved in the parent, so the helper only applies them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::tools::sandbox::limits::SandboxLimits;
use crate::tools::sandbox::policy::NetworkAccess;

/// What the helper enforces on itself before it runs the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SandboxSpec {
    /// Directories writable with everything under them (canonical paths).
    pub(crate) writable: Vec<PathBuf>,
    /// Existing paths inside `writable` kept read-only (`.git`, agcore's config): bind-mounted
    /// read-only over themselves.
    pub(crate) read_only: Vec<PathBuf>,
    /// Existing paths never readable: an empty read-only directory (or an empty file) is
    /// mounted over each.
    pub(crate) hidden: Vec<PathBuf>,
    /// Network off: a new network namespace (no interfaces but a down loopback) and seccomp
    /// refusing sockets other than IPv4/IPv6/netlink ones (Unix sockets outside).
    pub(crate) network: NetworkAccess,
    /// The egress proxy's port on 127.0.0.1 when the network is off but for an allow-list:
    /// no network namespace then; Landlock allows TCP connections to this port only and
    /// seccomp only TCP sockets (no UDP, no Unix sockets).
    pub(crate) proxy_port: Option<u16>,
    /// Resource limits, set after the namespaces are entered.
    pub(crate) limits: SandboxLimits,
}

/// The first argument of the helper's command line after its program (and leading arguments),
/// followed by the spec as JSON, `--`, and the command.
pub(crate) const SPEC_FLAG: &str = "--spec";

/// What the helper prints before its own error on stderr, and exits with
/// [`HELPER_FAILURE_STATUS`]: the parent tells a refused sandbox from the command's failure.
pub const HELPER_FAILURE_PREFIX: &str = "agcore-sandbox: ";

/// The helper's exit status when it could not apply the sandbox (as `env` and `timeout` use
/// 125 for their own failures).
pub const HELPER_FAILURE_STATUS: i32 = 125;
