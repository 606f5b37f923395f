//! SSRF guard for `fetch_url`: which addresses are private, a DNS resolver that never hands a
//! private address to the connector, and the check for IP literals in URLs (which never reach
//! a resolver), applied to the first URL and to every redirect hop.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The kind of non-public address `fetch_url` refuses by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressClass {
    Loopback,
    Unspecified,
    /// RFC 1918 (10/8, 172.16/12, 192.168/16).
    Private,
    /// RFC 6598 shared address space (100.64/10; some clouds' metadata lives there).
    Shared,
    /// 169.254/16 and fe80::/10 — where cloud metadata services (169.254.169.254) live.
    LinkLocal,
    /// fc00::/7 (and the deprecated site-local fec0::/10).
    UniqueLocal,
    Multicast,
    Broadcast,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Loopback => "a loopback address",
            AddressClass::Unspecified => "the unspecified address",
            AddressClass::Private => "a private (RFC 1918) address",
            AddressClass::Shared => "a shared (RFC 6598, carrier-grade NAT) address",
            AddressClass::LinkLocal => "a link-local address (e.g. cloud metadata)",
            AddressClass::UniqueLocal => "a unique-local (ULA) address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Broadcast => "the broadcast address",
        })
    }
}

/// The class of `ip` when it is not a public unicast address; IPv4-mapped and IPv4-compatible
/// IPv6 addresses are judged as the IPv4 address they carry.
pub(crate) fn non_public(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => non_public_v4(v4),
            None => non_public_v6(v6),
        },
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, ..] = ip.octets();
    Some(if ip.is_loopback() {
        AddressClass::Loopback
    } else if a == 0 {
        // 0.0.0.0/8: "this network"; 0.0.0.0 reaches the local host on Linux.
        AddressClass::Unspecified
    } else if ip.is_private() {
        AddressClass::Private
    } else if a == 100 && (64..128).contains(&b) {
        AddressClass::Shared
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if ip.is_broadcast() {
        AddressClass::Broadcast
    } else {
        return None;
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let first = ip.segments()[0];
    Some(if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        AddressClass::UniqueLocal
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if let Some(v4) = ipv4_compatible(ip) {
        return non_public_v4(v4);
    } else {
        return None;
    })
}

/// `::a.b.c.d` (deprecated IPv4-compatible form), which some stacks still route to IPv4.
fn ipv4_compatible(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    match ip.octets() {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d] => Some(Ipv4Addr::new(a, b, c, d)),
        _ => None,
    }
}

/// `fetch_url` refused a host because it is, or resolves to, a non-public address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{host}' is {class} ({ip})")]
pub(crate) struct PrivateAddress {
    pub host: String,
    pub ip: IpAddr,
    pub class: AddressClass,
}

/// The refusal for `url` when its host is an IP literal of a non-public address. Host names are
/// left to [`PublicOnlyResolver`], which sees every address they resolve to.
pub(crate) fn check_literal(url: &reqwest::Url) -> Result<(), PrivateAddress> {
    let host = url.host_str().unwrap_or_default();
    // The URL parser has already normalised IPv4 spellings; IPv6 literals keep their brackets.
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(ip) = literal.parse::<IpAddr>() else {
        return Ok(());
    };
    match non_public(ip) {
        Some(class) => Err(PrivateAddress {
            host: host.to_owned(),
            ip,
            class,
        }),
        None => Ok(()),
    }
}

/// A DNS resolver (the system's, through `getaddrinfo`) that drops non-public addresses and
/// fails with [`PrivateAddress`] when none is left. The connector only ever sees what this
/// returns, so there is no gap between the check and the connection (no DNS rebinding).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let lookup = host.clone();
            let addrs: Vec<SocketAddr> =
                tokio::task::spawn_blocking(move || (lookup.as_str(), 0).to_socket_addrs())
                    .await??
                    .collect();
            public_only(&host, addrs)
                .map(|addrs| Box::new(addrs.into_iter()) as Addrs)
                .map_err(Into::into)
        })
    }
}

/// The public addresses among `addrs`, or the refusal naming the first non-public one.
fn public_only(host: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, PrivateAddress> {
    let first = addrs.first().map(SocketAddr::ip);
    let (public, refused): (Vec<_>, Vec<_>) = addrs
        .into_iter()
        .partition(|addr| non_public(addr.ip()).is_none());
    match (public.is_empty(), refused.first()) {
        (true, Some(addr)) => Err(PrivateAddress {
            host: host.to_owned(),
            ip: addr.ip(),
            class: non_public(addr.ip()).unwrap_or(AddressClass::Private),
        }),
        _ => {
            if !refused.is_empty() {
                tracing::debug!(
                    host,
                    ?first,
                    ?refused,
                    "fetch_url dropped non-public addresses"
                );
            }
            Ok(public)
        }
    }
}

/// The [`PrivateAddress`] somewhere in `error`'s source chain (a redirect or resolver refusal
/// wrapped by reqwest and hyper).
pub(crate) fn find_refusal(error: &(dyn std::error::Error + 'static)) -> Option<PrivateAddress> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refusal) = error.downcast_ref::<PrivateAddress>() {
            return Some(refusal.clone());
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(ip: &str) -> Option<AddressClass> {
        non_public(ip.parse().unwrap())
    }

    #[test]
    fn non_public_addresses_are_classified() {
        assert_eq!(class("127.0.0.1"), Some(AddressClass::Loopback));
        assert_eq!(class("127.8.9.10"), Some(AddressClass::Loopback));
        assert_eq!(class("0.0.0.0"), Some(AddressClass::Unspecified));
        assert_eq!(class("10.1.2.3"), Some(AddressClass::Private));
        assert_eq!(class("172.16.0.1"), Some(AddressClass::Private));
        assert_eq!(class("192.168.1.1"), Some(AddressClass::Private));
        assert_eq!(class("100.100.100.200"), Some(AddressClass::Shared));
        assert_eq!(class("169.254.169.254"), Some(AddressClass::LinkLocal));
        assert_eq!(class("224.0.0.1"), Some(AddressClass::Multicast));
        assert_eq!(class("255.255.255.255"), Some(AddressClass::Broadcast));
        assert_eq!(class("::1"), Some(AddressClass::Loopback));
        assert_eq!(class("::"), Some(AddressClass::Unspecified));
        assert_eq!(class("fd00::1"), Some(AddressClass::UniqueLocal));
        assert_eq!(class("fc00::1"), Some(AddressClass::UniqueLocal));
        assert_eq!(class("fe80::1"), Some(AddressClass::LinkLocal));
        assert_eq!(class("::ffff:127.0.0.1"), Some(AddressClass::Loopback));
        assert_eq!(
            class("::ffff:169.254.169.254"),
            Some(AddressClass::LinkLocal)
        );
        assert_eq!(class("::10.0.0.1"), Some(AddressClass::Private));
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_resolver_keeps_public_addresses_and_refuses_only_private_ones() {
        let public: SocketAddr = "93.184.216.34:0".parse().unwrap();
        let private: SocketAddr = "10.0.0.1:0".parse().unwrap();
        assert_eq!(
            public_only("mixed", vec![private, public]),
            Ok(vec![public])
        );
        let refusal = public_only("internal", vec![private]).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "'internal' is a private (RFC 1918) address (10.0.0.1)"
        );
    }

    #[test]
    fn literals_are_checked_hostnames_are_left_to_the_resolver() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert_eq!(
            check_literal(&url("http://[::1]:8080/")).unwrap_err().class,
            AddressClass::Loopback
        );
        assert!(check_literal(&url("http://example.com/")).is_ok());
        assert!(check_literal(&url("http://93.184.216.34/")).is_ok());
        // The URL parser normalises other spellings of an IPv4 address.
        assert_eq!(
            check_literal(&url("http://2130706433/")).unwrap_err().ip,
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
    }
}
