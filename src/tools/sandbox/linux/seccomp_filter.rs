//! seccomp (with the `seccompiler` crate's syscall table): `io_uring` is refused (its
//! operations would bypass the socket filter), and with the network off so is every socket
//! but IPv4/IPv6/netlink ones — those live in the empty network namespace — which leaves out
//! Unix sockets: a pathname socket outside the workspace (a Docker or SSH agent socket) is
//! unreachable. `socketpair` stays allowed (an already connected pair reaches nothing).

use std::collections::BTreeMap;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

use crate::tools::sandbox::policy::NetworkAccess;
use crate::tools::sandbox::spec::SandboxSpec;

pub(crate) fn install(spec: &SandboxSpec) -> Result<(), String> {
    let failed = |error: seccompiler::Error| format!("the seccomp filter failed: {error}");
    let backend = |error: seccompiler::BackendError| format!("the seccomp filter failed: {error}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    if spec.network == NetworkAccess::Off {
        let not_domain = |domain: i32| {
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                u64::from(domain.unsigned_abs()),
            )
        };
        let conditions = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]
            .into_iter()
            .map(not_domain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend)?;
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(conditions).map_err(backend)?],
        );
    }
    let arch = std::env::consts::ARCH.try_into().map_err(backend)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(backend)?;
    let program: seccompiler::BpfProgram = filter.try_into().map_err(backend)?;
    seccompiler::apply_filter(&program).map_err(failed)
}
