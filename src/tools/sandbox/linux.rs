//! The Linux enforcement, run by the sandbox helper on itself before it executes the command:
//! namespaces and mounts ([`namespaces`]), Landlock ([`landlock_rules`]), seccomp
//! ([`seccomp_filter`]). Everything is inherited by every process the command starts — also
//! after `setsid` or a double fork — and cannot be undone by them.

pub(crate) mod landlock_rules;
pub(crate) mod namespaces;
pub(crate) mod rlimits;
pub(crate) mod seccomp_filter;

use crate::tools::sandbox::spec::SandboxSpec;

/// The Landlock ABI of the running kernel (`None`: none), found by creating (not applying) a
/// ruleset that needs each ABI in turn.
pub(crate) fn landlock_abi() -> Option<u32> {
    landlock_rules::kernel_abi()
}

/// Confine this (single-threaded) process by `spec`, in the order the kernel allows: the
/// namespaces and mounts first (Landlock forbids mounting afterwards; the process count of
/// the rlimits is the new user namespace's), the rlimits, then Landlock (which also sets
/// `no_new_privs`), then seccomp (which needs it).
pub(crate) fn confine(spec: &SandboxSpec) -> Result<(), String> {
    namespaces::enter(spec)?;
    rlimits::apply(&spec.limits)?;
    landlock_rules::restrict(spec)?;
    seccomp_filter::install(spec)?;
    Ok(())
}
