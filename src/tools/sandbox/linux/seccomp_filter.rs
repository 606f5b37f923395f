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
    if spec.network == NetworkAccess::Off && spec.proxy_port.is_some() {
        rules.insert(libc::SYS_socket, proxied_socket_rules().map_err(backend)?);
    } else if spec.network == NetworkAccess::Off {
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

/// With an allow-list (the host's network namespace, Landlock allowing TCP to the proxy's
/// port only): every socket but IPv4/IPv6 TCP and netlink ones is refused — no UDP (DNS,
/// QUIC), no raw or ping sockets, no Unix sockets. The rules list what is refused.
fn proxied_socket_rules() -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let condition = |argument: u8, operator: SeccompCmpOp, value: i32| {
        SeccompCondition::new(
            argument,
            SeccompCmpArgLen::Dword,
            operator,
            u64::from(value.unsigned_abs()),
        )
    };
    // Any other family.
    let mut rules = vec![SeccompRule::new(
        [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]
            .into_iter()
            .map(|domain| condition(0, SeccompCmpOp::Ne, domain))
            .collect::<Result<Vec<_>, _>>()?,
    )?];
    // IPv4/IPv6 of any type but a stream (the type's low bits; the rest are flags). The
    // obsolete SOCK_PACKET needs CAP_NET_RAW in the host's namespace, which it has not.
    for domain in [libc::AF_INET, libc::AF_INET6] {
        for kind in [
            libc::SOCK_DGRAM,
            libc::SOCK_RAW,
            libc::SOCK_RDM,
            libc::SOCK_SEQPACKET,
            libc::SOCK_DCCP,
        ] {
            rules.push(SeccompRule::new(vec![
                condition(0, SeccompCmpOp::Eq, domain)?,
                condition(1, SeccompCmpOp::MaskedEq(0xf), kind)?,
            ])?);
        }
    }
    Ok(rules)
}
