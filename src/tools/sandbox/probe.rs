//! What the running kernel can enforce: [`SandboxSupport`], found by a [`SandboxProbe`]. The
//! probe is injectable so a test can play a kernel without Landlock and see the refusal.

use std::sync::OnceLock;

use crate::tools::sandbox::policy::{NetworkAccess, SandboxPolicy};

/// The Landlock ABI the sandbox needs at least: 3 (Linux 6.2) handles `truncate`, without
/// which a file outside the writable roots could still be emptied.
pub const MIN_LANDLOCK_ABI: u32 = 3;

/// The Landlock ABI a network allow-list needs (Linux 6.7): TCP connect rules by port, so
/// the command reaches the egress proxy and nothing else.
pub const MIN_LANDLOCK_NET_ABI: u32 = 4;

/// The kernel features the sandbox is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The Landlock ABI version (`None`: no Landlock).
    pub landlock_abi: Option<u32>,
    /// Whether an unprivileged process can create user namespaces (and in them mount and
    /// network namespaces).
    pub user_namespaces: bool,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

impl SandboxSupport {
    /// What `policy` needs that this kernel lacks, in words (empty: it can be enforced).
    pub fn missing_for(&self, policy: &SandboxPolicy) -> Vec<String> {
        if policy.is_full() {
            return Vec::new();
        }
        let mut missing = Vec::new();
        if !cfg!(target_os = "linux") {
            missing.push(
                "a sandbox for this operating system (agcore enforces one on Linux only)"
                    .to_owned(),
            );
            return missing;
        }
        match self.landlock_abi {
            None => missing.push(
                "Landlock (Linux 6.2 or later with `landlock` in the kernel's `lsm=` list)"
                    .to_owned(),
            ),
            Some(abi) if abi < MIN_LANDLOCK_ABI => missing.push(format!(
                "Landlock ABI {MIN_LANDLOCK_ABI} or later (this kernel has ABI {abi}; Linux 6.2 \
                 or later)"
            )),
            Some(abi) if abi < MIN_LANDLOCK_NET_ABI && !policy.proxied_hosts().is_empty() => {
                missing.push(format!(
                    "Landlock ABI {MIN_LANDLOCK_NET_ABI} or later for the network allow-list (this \
                     kernel has ABI {abi}; Linux 6.7 or later)"
                ));
            }
            Some(_) => {}
        }
        if !self.user_namespaces {
            missing.push(
                "unprivileged user namespaces (for the network and mount namespaces; see \
                 `sysctl user.max_user_namespaces` and `kernel.unprivileged_userns_clone`)"
                    .to_owned(),
            );
        }
        if !self.seccomp && policy.effective_network() == NetworkAccess::Off {
            missing.push("seccomp (to refuse Unix sockets with the network off)".to_owned());
        }
        missing
    }
}

/// Finds what the kernel supports.
pub trait SandboxProbe: Send + Sync + std::fmt::Debug {
    /// The kernel's sandbox features.
    fn support(&self) -> SandboxSupport;
}

/// The real probe: asks the running kernel, once per process.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelProbe;

impl SandboxProbe for KernelProbe {
    fn support(&self) -> SandboxSupport {
        static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
        *SUPPORT.get_or_init(probe_kernel)
    }
}

/// A fixed answer, for tests and for hosts that know better.
#[derive(Debug, Clone, Copy)]
pub struct FixedProbe(pub SandboxSupport);

impl SandboxProbe for FixedProbe {
    fn support(&self) -> SandboxSupport {
        self.0
    }
}

#[cfg(target_os = "linux")]
fn probe_kernel() -> SandboxSupport {
    SandboxSupport {
        landlock_abi: crate::tools::sandbox::linux::landlock_abi(),
        user_namespaces: user_namespaces_allowed(),
        seccomp: std::fs::read_to_string("/proc/self/status")
            .is_ok_and(|status| status.lines().any(|line| line.starts_with("Seccomp:"))),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe_kernel() -> SandboxSupport {
    SandboxSupport {
        landlock_abi: None,
        user_namespaces: false,
        seccomp: false,
    }
}

/// Whether the sysctls allow unprivileged user namespaces (a kernel without the Debian/Ubuntu
/// knobs allows them when `max_user_namespaces` is above 0). The sandbox helper still fails
/// closed if `unshare` is refused for another reason (e.g. an AppArmor rule).
#[cfg(target_os = "linux")]
fn user_namespaces_allowed() -> bool {
    let number = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
    };
    number("/proc/sys/user/max_user_namespaces").is_some_and(|max| max > 0)
        && number("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|on| on == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_needs_landlock_network_rules() {
        let abi3 = SandboxSupport {
            landlock_abi: Some(3),
            user_namespaces: true,
            seccomp: true,
        };
        assert!(abi3.missing_for(&SandboxPolicy::default()).is_empty());
        let listed = SandboxPolicy::default().with_allowed_hosts(["crates.io"]);
        let missing = abi3.missing_for(&listed);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].contains("Landlock ABI 4"), "{missing:?}");
        let abi4 = SandboxSupport {
            landlock_abi: Some(4),
            ..abi3
        };
        assert!(abi4.missing_for(&listed).is_empty());
        // Restricted mode drops the list: nothing more is needed.
        assert!(abi3.missing_for(&listed.restricted(true)).is_empty());
    }
}
