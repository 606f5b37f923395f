//! [`Sandbox`]: a policy, the helper program that applies it, and the kernel probe — turns a
//! program and its arguments into a command that runs confined, or refuses.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::tools::sandbox::allow_list::HostAllowList;
use crate::tools::sandbox::error::SandboxError;
use crate::tools::sandbox::policy::{SandboxMode, SandboxPolicy};
use crate::tools::sandbox::probe::{KernelProbe, SandboxProbe};
use crate::tools::sandbox::proxy::{EgressProxy, HostResolver, SystemResolver};
use crate::tools::sandbox::spec::{SPEC_FLAG, SandboxSpec};

/// The name of the helper binary (`src/bin/agcore-sandbox-exec.rs`).
pub const HELPER_BINARY: &str = "agcore-sandbox-exec";
/// An environment variable naming the helper program, when it is not next to this program.
pub const HELPER_ENV: &str = "AGCORE_SANDBOX_EXEC";

/// The program that confines itself and then runs the command: `agcore-sandbox-exec`, or a
/// host program that dispatches to [`crate::tools::sandbox::exec_main`] on a leading argument
/// (the `agcore` CLI does, on `__sandbox-exec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxHelper {
    program: PathBuf,
    leading_args: Vec<OsString>,
}

impl SandboxHelper {
    /// `program`, run as `program [leading_args] --spec JSON -- COMMAND ARGS`.
    pub fn new(program: impl Into<PathBuf>, leading_args: Vec<OsString>) -> Self {
        SandboxHelper {
            program: program.into(),
            leading_args,
        }
    }

    /// [`HELPER_ENV`] if set, else `agcore-sandbox-exec` next to the running program or one
    /// directory up (a test binary lives in `target/debug/deps`, the helper in `target/debug`).
    pub fn discover() -> Result<Self, SandboxError> {
        if let Some(program) = std::env::var_os(HELPER_ENV) {
            return Ok(SandboxHelper::new(program, Vec::new()));
        }
        let exe = std::env::current_exe().map_err(|error| SandboxError::NoHelper {
            searched: format!("the running program's path is unknown: {error}"),
        })?;
        let name = format!("{HELPER_BINARY}{}", std::env::consts::EXE_SUFFIX);
        let candidates: Vec<PathBuf> = exe
            .ancestors()
            .skip(1)
            .take(2)
            .map(|dir| dir.join(&name))
            .collect();
        candidates
            .iter()
            .find(|path| path.is_file())
            .map(|path| SandboxHelper::new(path, Vec::new()))
            .ok_or_else(|| SandboxError::NoHelper {
                searched: format!(
                    "{HELPER_ENV} unset; not at {}",
                    candidates
                        .iter()
                        .map(|path| path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            })
    }
}

/// A command prepared under a sandbox, with the private temporary directory it writes to
/// (removed when this is dropped: keep it until the process has ended).
#[derive(Debug)]
pub struct SandboxedCommand {
    /// The command to spawn; add stdio, environment and process group as usual.
    pub command: std::process::Command,
    /// The private temporary directory (`TMPDIR`), if the sandbox made one.
    pub temp_dir: Option<tempfile::TempDir>,
    /// The egress proxy the command reaches its allowed hosts through, if it has any (kept
    /// running while this is held; the sandbox shares it between its commands).
    pub proxy: Option<Arc<EgressProxy>>,
}

/// A sandbox policy with the means to enforce it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: SandboxPolicy,
    helper: Option<SandboxHelper>,
    probe: Arc<dyn SandboxProbe>,
    home: Option<PathBuf>,
    resolver: Arc<dyn HostResolver>,
    /// The egress proxy of an allow-list, started with the first command that needs it.
    proxy: Arc<std::sync::Mutex<Option<Arc<EgressProxy>>>>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new(SandboxPolicy::default())
    }
}

impl Sandbox {
    /// `policy`, applied by the discovered helper ([`SandboxHelper::discover`]) on the kernel
    /// as probed ([`KernelProbe`]); `~/` is `$HOME`.
    pub fn new(policy: SandboxPolicy) -> Self {
        Sandbox {
            policy,
            helper: None,
            probe: Arc::new(KernelProbe),
            home: std::env::var_os("HOME").map(PathBuf::from),
            resolver: Arc::new(SystemResolver),
            proxy: Arc::default(),
        }
    }

    /// This sandbox with another policy (same helper, probe and home).
    pub fn with_policy(mut self, policy: SandboxPolicy) -> Self {
        self.policy = policy;
        self.proxy = Arc::default();
        self
    }

    /// Resolve the allowed hosts' names with `resolver` instead of the system's (a test points
    /// a name at a loopback server).
    pub fn with_resolver(mut self, resolver: Arc<dyn HostResolver>) -> Self {
        self.resolver = resolver;
        self.proxy = Arc::default();
        self
    }

    /// This sandbox with another writable directory (`workspace-write` only).
    pub fn with_writable_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.policy = self.policy.with_writable_root(root);
        self
    }

    /// Use this helper program instead of discovering one.
    pub fn with_helper(mut self, helper: SandboxHelper) -> Self {
        self.helper = Some(helper);
        self
    }

    /// Ask this probe what the kernel supports (a test plays a kernel without Landlock).
    pub fn with_probe(mut self, probe: Arc<dyn SandboxProbe>) -> Self {
        self.probe = probe;
        self
    }

    /// Expand `~/` in the hidden paths against `home` instead of `$HOME`.
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// This sandbox with restricted mode forced on (`true`) — see [`SandboxPolicy::restricted`].
    pub fn restricted(mut self, restricted: bool) -> Self {
        self.policy = self.policy.restricted(restricted);
        self
    }

    /// The policy.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// `program` to be run with `workspace` as the writable root (for `workspace-write`),
    /// confined by the policy — or the reason it cannot be. Append the program's arguments to
    /// the returned command.
    pub fn command(
        &self,
        workspace: &Path,
        program: impl AsRef<OsStr>,
    ) -> Result<SandboxedCommand, SandboxError> {
        if self.policy.is_full() {
            return Ok(SandboxedCommand {
                command: std::process::Command::new(program),
                temp_dir: None,
                proxy: None,
            });
        }
        let missing = self.probe.support().missing_for(&self.policy);
        if !missing.is_empty() {
            return Err(SandboxError::Unsupported {
                policy: self.policy.describe(),
                missing,
            });
        }
        let helper = match &self.helper {
            Some(helper) => helper.clone(),
            None => SandboxHelper::discover()?,
        };
        let temp_dir = tempfile::Builder::new()
            .prefix("agcore-sandbox-")
            .tempdir()
            .map_err(SandboxError::TempDir)?;
        let proxy = self.proxy()?;
        let mut spec = self.spec(workspace, temp_dir.path())?;
        spec.proxy_port = proxy.as_ref().map(|proxy| proxy.port());
        let json = serde_json::to_string(&spec).map_err(|error| {
            SandboxError::Apply(format!("the sandbox plan could not be encoded: {error}"))
        })?;
        let mut command = std::process::Command::new(&helper.program);
        command
            .args(&helper.leading_args)
            .arg(SPEC_FLAG)
            .arg(json)
            .arg("--")
            .arg(program)
            .env("TMPDIR", temp_dir.path());
        if let Some(proxy) = &proxy {
            let url = proxy.url();
            for name in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
                command.env(name, &url).env(name.to_ascii_lowercase(), &url);
            }
            // Nothing bypasses it (nothing else is reachable anyway).
            command.env_remove("NO_PROXY").env_remove("no_proxy");
        }
        Ok(SandboxedCommand {
            command,
            temp_dir: Some(temp_dir),
            proxy,
        })
    }

    /// The egress proxy of the policy's allowed hosts (started once, shared by the commands
    /// of this sandbox and its clones); none without an allow-list.
    fn proxy(&self) -> Result<Option<Arc<EgressProxy>>, SandboxError> {
        let hosts = self.policy.proxied_hosts();
        if hosts.is_empty() {
            return Ok(None);
        }
        let mut slot = self
            .proxy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(proxy) = slot.as_ref() {
            return Ok(Some(proxy.clone()));
        }
        let proxy = EgressProxy::start(HostAllowList::new(hosts), self.resolver.clone())
            .map(Arc::new)
            .map_err(SandboxError::Proxy)?;
        *slot = Some(proxy.clone());
        Ok(Some(proxy))
    }

    /// The plan for `workspace`: canonical paths, existing ones only where a mount needs them.
    pub(crate) fn spec(&self, workspace: &Path, temp: &Path) -> Result<SandboxSpec, SandboxError> {
        let workspace =
            std::fs::canonicalize(workspace).map_err(|source| SandboxError::Workspace {
                path: workspace.to_path_buf(),
                source,
            })?;
        let mut writable = vec![std::fs::canonicalize(temp).map_err(SandboxError::TempDir)?];
        let mut read_only = Vec::new();
        if self.policy.effective_mode() == SandboxMode::WorkspaceWrite {
            writable.push(workspace.clone());
            writable.extend(
                self.policy
                    .writable_roots
                    .iter()
                    .filter_map(|root| {
                        crate::tools::sandbox::policy::expand_home(root, self.home.as_deref())
                    })
                    .filter_map(|root| std::fs::canonicalize(root).ok()),
            );
            // The repository's history and agcore's own config stay read-only in the workspace.
            for name in [".git", "agcore.toml", ".agcore"] {
                let path = workspace.join(name);
                if path.symlink_metadata().is_ok() {
                    read_only.push(path);
                }
            }
        }
        let hidden = self
            .policy
            .hidden_paths(self.home.as_deref())
            .into_iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            // A hidden directory that holds the workspace would hide the workspace too.
            .filter(|path| !workspace.starts_with(path))
            .collect();
        Ok(SandboxSpec {
            writable,
            read_only,
            hidden,
            network: self.policy.effective_network(),
            proxy_port: None,
            limits: self.policy.limits,
        })
    }
}
