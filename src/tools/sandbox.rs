//! An OS sandbox for the processes agcore starts: `run_command`'s commands, stdio MCP servers
//! and hook commands. Permissions decide *whether* a command runs; the sandbox decides what it
//! can touch once it runs — enforced by the kernel, inherited by every process it starts.
//!
//! - [`SandboxPolicy`]: `read-only`, `workspace-write` (the default) or `full` (no sandbox),
//!   network `off` (the default) or `on`, extra writable roots, never-readable paths
//!   ([`DEFAULT_HIDDEN`]: keys, cloud credentials, agcore's stores), resource limits
//!   ([`SandboxLimits`]). Restricted mode forces `read-only` with the network off.
//! - Network `off`, `on`, or off but for an allow-list of hosts reached through an
//!   [`EgressProxy`] on loopback (the command's only allowed TCP port).
//! - [`Sandbox`]: a policy with the helper program that applies it and the kernel probe.
//!   [`Sandbox::command`] fails closed ([`SandboxError::Unsupported`]) where the kernel cannot
//!   enforce the policy.
//! - The helper ([`exec_main`], the `agcore-sandbox-exec` binary or `agcore __sandbox-exec`)
//!   confines itself and then executes the command. On Linux: a user namespace with a mount
//!   namespace (hidden paths covered, `.git` and agcore's config read-only) and, with the
//!   network off, a network namespace; Landlock (ABI 3+) for writes; seccomp for Unix sockets
//!   and `io_uring`. The library itself stays free of `unsafe`: the helper is a separate
//!   process, so no `pre_exec` is needed.
//!
//! See `docs/security.md` for the threat model and its limits.

mod allow_list;
mod error;
mod exec;
mod launcher;
mod limits;
#[cfg(target_os = "linux")]
mod linux;
mod policy;
mod probe;
mod proxy;
mod spec;

pub use allow_list::HostAllowList;
pub use error::SandboxError;
pub use exec::exec_main;
pub use launcher::{HELPER_BINARY, HELPER_ENV, Sandbox, SandboxHelper, SandboxedCommand};
pub use limits::{DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_PROCESSES, SandboxLimits};
pub use policy::{DEFAULT_HIDDEN, NetworkAccess, SandboxMode, SandboxPolicy, UnknownSandboxMode};
pub use probe::{
    FixedProbe, KernelProbe, MIN_LANDLOCK_ABI, MIN_LANDLOCK_NET_ABI, SandboxProbe, SandboxSupport,
};
pub use proxy::{EgressProxy, HostResolver, SystemResolver};
pub use spec::{HELPER_FAILURE_PREFIX, HELPER_FAILURE_STATUS};
