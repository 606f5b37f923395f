//! [`SandboxPolicy`]: what a sandboxed command may write and reach — the `[tools.sandbox]`
//! section of `agcore.toml`, and the per-server `"sandbox"` of an MCP config.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::tools::sandbox::limits::SandboxLimits;

/// How much of the file system a sandboxed command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere (but the hidden paths), write nowhere but a private temporary directory.
    ReadOnly,
    /// Write only in the workspace, the extra writable roots and a private temporary
    /// directory; the workspace's `.git` and agcore's own config files stay read-only.
    #[default]
    WorkspaceWrite,
    /// No sandbox: the command runs with the user's full rights. Only by explicit choice.
    Full,
}

impl SandboxMode {
    /// The name used in config files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Full => "full",
        }
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = UnknownSandboxMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "full" => Ok(SandboxMode::Full),
            _ => Err(UnknownSandboxMode(text.to_owned())),
        }
    }
}

/// A sandbox mode name that is none of `read-only`, `workspace-write`, `full`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode `{0}`: expected read-only, workspace-write or full")]
pub struct UnknownSandboxMode(pub String);

/// Whether a sandboxed command may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkAccess {
    /// No network at all: not the internet, not loopback (IPv4 or IPv6), not Unix sockets
    /// (only connected pairs, `socketpair`).
    #[default]
    Off,
    /// The network as the user has it.
    On,
}

/// A sandbox policy. The default is `workspace-write` with the network off.
///
/// ```toml
/// [tools.sandbox]
/// mode = "workspace-write"     # read-only | workspace-write | full
/// network = "off"              # off | on
/// writable_roots = ["/srv/cache"]
/// hidden = ["~/.password-store"]   # never readable, besides the defaults
/// readable = ["~/.aws"]        # default-hidden paths to show anyway
/// limits = { max_file_size = 1073741824 }   # rlimits, see SandboxLimits
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// What may be written.
    #[serde(default)]
    pub mode: SandboxMode,
    /// Whether the network is reachable.
    #[serde(default)]
    pub network: NetworkAccess,
    /// Directories writable besides the workspace (`workspace-write` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// Paths never readable, besides [`DEFAULT_HIDDEN`] (`~/` is the home directory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
    /// Paths of [`DEFAULT_HIDDEN`] to leave readable, named knowingly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readable: Vec<PathBuf>,
    /// With the network `off`: hosts it may still reach, through agcore's HTTPS proxy on
    /// loopback (`HTTPS_PROXY`), e.g. `["crates.io", "*.github.com"]` — see
    /// [`crate::tools::sandbox::HostAllowList`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Resource limits (processes, file size, memory, CPU) of the command and its children.
    #[serde(default, skip_serializing_if = "SandboxLimits::is_default")]
    pub limits: SandboxLimits,
    /// Restricted mode: `read-only` and the network off, whatever the fields above say.
    #[serde(skip)]
    pub restricted: bool,
}

/// Paths under the home directory that a sandboxed command never reads unless the policy names
/// them in [`SandboxPolicy::readable`]: keys, cloud credentials, and agcore's own stores.
pub const DEFAULT_HIDDEN: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.config/gh",
    "~/.config/agcore",
    "~/.local/share/agcore",
    "~/.agcore",
];

impl SandboxPolicy {
    /// `read-only`, network off.
    pub fn read_only() -> Self {
        SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            ..SandboxPolicy::default()
        }
    }

    /// `workspace-write`, network off (the default).
    pub fn workspace_write() -> Self {
        SandboxPolicy::default()
    }

    /// The default of a stdio MCP server: `workspace-write` with the network on — many servers
    /// exist to reach an API, and a server's own process is no more trusted than its tools'
    /// permissions say; writes stay in its directory.
    pub fn for_mcp_servers() -> Self {
        SandboxPolicy::workspace_write().with_network(NetworkAccess::On)
    }

    /// No sandbox at all.
    pub fn full() -> Self {
        SandboxPolicy {
            mode: SandboxMode::Full,
            network: NetworkAccess::On,
            ..SandboxPolicy::default()
        }
    }

    /// This policy with the network `off` or `on`.
    pub fn with_network(mut self, network: NetworkAccess) -> Self {
        self.network = network;
        self
    }

    /// This policy with another writable directory.
    pub fn with_writable_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.writable_roots.push(root.into());
        self
    }

    /// This policy with the network off but for `hosts`, reached through the egress proxy.
    pub fn with_allowed_hosts<S: Into<String>>(
        mut self,
        hosts: impl IntoIterator<Item = S>,
    ) -> Self {
        self.network = NetworkAccess::Off;
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// The hosts reached through the egress proxy: [`SandboxPolicy::allowed_hosts`] when the
    /// network in force is off (restricted mode lists none).
    pub fn proxied_hosts(&self) -> &[String] {
        if self.restricted || self.is_full() || self.effective_network() == NetworkAccess::On {
            &[]
        } else {
            &self.allowed_hosts
        }
    }

    /// This policy with these resource limits.
    pub fn with_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = limits;
        self
    }

    /// This policy with another never-readable path.
    pub fn with_hidden(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(path.into());
        self
    }

    /// This policy in restricted mode (`true`): `read-only`, network off, whatever else it says.
    pub fn restricted(mut self, restricted: bool) -> Self {
        self.restricted |= restricted;
        self
    }

    /// The mode in force (restricted mode makes it `read-only`).
    pub fn effective_mode(&self) -> SandboxMode {
        if self.restricted {
            SandboxMode::ReadOnly
        } else {
            self.mode
        }
    }

    /// The network in force (restricted mode turns it off).
    pub fn effective_network(&self) -> NetworkAccess {
        match (self.restricted, self.effective_mode()) {
            (true, _) => NetworkAccess::Off,
            (false, SandboxMode::Full) => NetworkAccess::On,
            (false, _) => self.network,
        }
    }

    /// Whether commands run unsandboxed.
    pub fn is_full(&self) -> bool {
        self.effective_mode() == SandboxMode::Full
    }

    /// One line for banners and listings, e.g. `workspace-write, network off`.
    pub fn describe(&self) -> String {
        let mode = self.effective_mode();
        let mut text = match mode {
            SandboxMode::Full => "full (no sandbox)".to_owned(),
            _ if !self.proxied_hosts().is_empty() => format!(
                "{}, network only to {} (through a proxy)",
                mode.as_str(),
                self.proxied_hosts().join(", ")
            ),
            _ => format!(
                "{}, network {}",
                mode.as_str(),
                match self.effective_network() {
                    NetworkAccess::Off => "off",
                    NetworkAccess::On => "on",
                }
            ),
        };
        if self.restricted {
            text.push_str(" (restricted mode)");
        }
        text
    }

    /// The never-readable paths, `~/` expanded against `home`: the defaults but those named in
    /// [`SandboxPolicy::readable`], and [`SandboxPolicy::hidden`].
    pub fn hidden_paths(&self, home: Option<&Path>) -> Vec<PathBuf> {
        let readable: Vec<PathBuf> = self
            .readable
            .iter()
            .filter_map(|path| expand_home(path, home))
            .collect();
        DEFAULT_HIDDEN
            .iter()
            .map(PathBuf::from)
            .chain(self.hidden.iter().cloned())
            .filter_map(|path| expand_home(&path, home))
            .filter(|path| !readable.contains(path))
            .collect()
    }
}

/// `~/x` against `home` (`None` when there is no home), other paths as they are.
pub(crate) fn expand_home(path: &Path, home: Option<&Path>) -> Option<PathBuf> {
    match path.strip_prefix("~") {
        Ok(rest) => home.map(|home| home.join(rest)),
        Err(_) => Some(path.to_path_buf()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_mode_forces_read_only_and_no_network() {
        let policy = SandboxPolicy::full().restricted(true);
        assert_eq!(policy.effective_mode(), SandboxMode::ReadOnly);
        assert_eq!(policy.effective_network(), NetworkAccess::Off);
        assert!(!policy.is_full());
        let policy = SandboxPolicy::workspace_write()
            .with_network(NetworkAccess::On)
            .restricted(true);
        assert_eq!(policy.effective_network(), NetworkAccess::Off);
    }

    #[test]
    fn hidden_paths_expand_home_and_honour_readable() {
        let mut policy = SandboxPolicy::default().with_hidden("/srv/secret");
        policy.readable.push("~/.aws".into());
        let hidden = policy.hidden_paths(Some(Path::new("/home/u")));
        assert!(hidden.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(hidden.contains(&PathBuf::from("/srv/secret")));
        assert!(!hidden.contains(&PathBuf::from("/home/u/.aws")));
    }

    #[test]
    fn modes_parse_from_config_names() {
        assert_eq!("read-only".parse(), Ok(SandboxMode::ReadOnly));
        assert!("none".parse::<SandboxMode>().is_err());
    }
}
