//! SSRF guard for `fetch_url`: which addresses are private, a DNS resolver that never hands a
//! private address to the connector, and the check for IP literals in URLs (which never reach
//! a resolver), applied to the first URL and to every redirect hop.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::tools::builtin::fetch_url::dial::{DialCheck, DialRefused, HostLookup};

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

/// An IPv6 form that carries an IPv4 address, which a gateway or the host's own stack may
/// deliver to that IPv4 address — so it is judged as the IPv4 address it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Embedding {
    /// `::ffff:a.b.c.d` (`::ffff:0:0/96`): the host's own stack speaks IPv4 to it.
    Mapped,
    /// `::a.b.c.d` (`::/96`, deprecated), which some stacks still route to IPv4.
    Compatible,
    /// `64:ff9b::a.b.c.d` (RFC 6052 well-known NAT64 prefix): the NAT64 gateway forwards it.
    Nat64,
    /// `64:ff9b:1::/48` (RFC 8215 local-use NAT64), IPv4 in the last 32 bits.
    LocalNat64,
    /// `2002:AABB:CCDD::/48` (6to4, RFC 3056): the IPv4 is bits 16–48.
    SixToFour,
    /// `2001:0:SSSS:SSSS:…:CCCC:CCCC` (Teredo, RFC 4380): the server's IPv4 in bits 32–64, the
    /// client's (inverted) in the last 32 bits; either non-public refuses.
    Teredo,
}

impl fmt::Display for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Embedding::Mapped => "IPv4-mapped (::ffff:0:0/96)",
            Embedding::Compatible => "IPv4-compatible (::/96)",
            Embedding::Nat64 => "NAT64 (64:ff9b::/96)",
            Embedding::LocalNat64 => "local-use NAT64 (64:ff9b:1::/48)",
            Embedding::SixToFour => "6to4 (2002::/16)",
            Embedding::Teredo => "Teredo (2001::/32)",
        })
    }
}

/// Why an address is not public: its class and, for an IPv6 form carrying an IPv4 address,
/// which form and which IPv4 address decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub class: AddressClass,
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

/// The class of `ip` when it is not a public unicast address; IPv6 forms that carry an IPv4
/// address ([`Embedding`]) are judged as the IPv4 address they carry.
pub(crate) fn non_public(ip: IpAddr) -> Option<AddressClass> {
    verdict(ip).map(|verdict| verdict.class)
}

/// [`non_public`] with the reason.
pub(crate) fn verdict(ip: IpAddr) -> Option<Verdict> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4).map(|class| Verdict {
            class,
            embedded: None,
        }),
        IpAddr::V6(v6) => {
            if let Some(class) = non_public_v6(v6) {
                return Some(Verdict {
                    class,
                    embedded: None,
                });
            }
            embedded_v4(v6).into_iter().find_map(|(embedding, v4)| {
                non_public_v4(v4).map(|class| Verdict {
                    class,
                    embedded: Some((embedding, v4)),
                })
            })
        }
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

/// The class of an IPv6 address by its own prefix (embedded IPv4 addresses aside).
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
    } else {
        return None;
    })
}

/// The IPv4 addresses `ip` carries, by form (none for an ordinary IPv6 address).
fn embedded_v4(ip: Ipv6Addr) -> Vec<(Embedding, Ipv4Addr)> {
    let s = ip.segments();
    let o = ip.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => vec![(Embedding::Mapped, last)],
        [0, 0, 0, 0, 0, 0, _, _] => vec![(Embedding::Compatible, last)],
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => vec![(Embedding::Nat64, last)],
        [0x64, 0xff9b, 1, ..] => vec![(Embedding::LocalNat64, last)],
        [0x2002, ..] => vec![(Embedding::SixToFour, Ipv4Addr::new(o[2], o[3], o[4], o[5]))],
        [0x2001, 0, ..] => vec![
            (Embedding::Teredo, Ipv4Addr::new(o[4], o[5], o[6], o[7])),
            (Embedding::Teredo, Ipv4Addr::from(!u32::from(last))),
        ],
        _ => Vec::new(),
    }
}

/// `fetch_url` refused a host because it is, or resolves to, a non-public address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{host}' is {class} ({ip}{})", describe_embedding(*embedded))]
pub(crate) struct PrivateAddress {
    pub host: String,
    pub ip: IpAddr,
    pub class: AddressClass,
    /// The IPv6 form and the IPv4 address it carries, when that decided it.
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

impl PrivateAddress {
    fn new(host: &str, ip: IpAddr, verdict: Verdict) -> Self {
        PrivateAddress {
            host: host.to_owned(),
            ip,
            class: verdict.class,
            embedded: verdict.embedded,
        }
    }
}

fn describe_embedding(embedded: Option<(Embedding, Ipv4Addr)>) -> String {
    match embedded {
        Some((embedding, v4)) => format!(", the {embedding} form of {v4}"),
        None => String::new(),
    }
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
    match verdict(ip) {
        Some(verdict) => Err(PrivateAddress::new(host, ip, verdict)),
        None => Ok(()),
    }
}

/// A DNS resolver (the system's, through `getaddrinfo`). With `public_only` it drops
/// non-public addresses and fails with [`PrivateAddress`] when none is left; the connector only
/// ever sees what this returns, so there is no gap between the check and the connection (no
/// DNS rebinding). Either way a failed lookup is a [`DnsFailure`] naming the host, which the
/// error text can then name (reqwest's own resolver says only "dns error").
#[derive(Debug, Clone, Default)]
pub(crate) struct GuardedResolver {
    pub public_only: bool,
    /// Resolves names instead of the system (a test's or a deployment's own).
    pub lookup: Option<Arc<dyn HostLookup>>,
    /// Sees the addresses that are left before the connector gets them.
    pub dial_check: Option<Arc<dyn DialCheck>>,
}

/// A host name did not resolve.
#[derive(Debug, thiserror::Error)]
#[error("could not resolve '{host}': {source}")]
pub(crate) struct DnsFailure {
    pub host: String,
    #[source]
    pub source: std::io::Error,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let public_only = self.public_only;
        let lookup = self.lookup.clone();
        let dial_check = self.dial_check.clone();
        Box::pin(async move {
            let name = host.clone();
            let resolved = tokio::task::spawn_blocking(move || match lookup {
                Some(lookup) => lookup.lookup(&name),
                None => (name.as_str(), 0)
                    .to_socket_addrs()
                    .map(|addrs| addrs.collect()),
            })
            .await?;
            let addrs: Vec<SocketAddr> = match resolved {
                Ok(addrs) => addrs,
                Err(source) => return Err(DnsFailure { host, source }.into()),
            };
            let addrs = if public_only {
                public_only_addrs(&host, addrs)?
            } else {
                addrs
            };
            if let Some(check) = &dial_check {
                check.check(&host, &addrs).map_err(|reason| DialRefused {
                    host: host.clone(),
                    reason,
                })?;
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The public addresses among `addrs`, or the refusal naming the first non-public one.
fn public_only_addrs(
    host: &str,
    addrs: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, PrivateAddress> {
    let first = addrs.first().map(SocketAddr::ip);
    let (public, refused): (Vec<_>, Vec<_>) = addrs
        .into_iter()
        .partition(|addr| non_public(addr.ip()).is_none());
    match (public.is_empty(), refused.first()) {
        (true, Some(addr)) => Err(PrivateAddress::new(
            host,
            addr.ip(),
            verdict(addr.ip()).unwrap_or(Verdict {
                class: AddressClass::Private,
                embedded: None,
            }),
        )),
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
    find_in_chain::<PrivateAddress>(error).cloned()
}

/// The first `T` in `error`'s source chain, `error` itself included.
pub(crate) fn find_in_chain<'e, T: std::error::Error + 'static>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e T> {
    causes(error).find_map(|error| error.downcast_ref::<T>())
}

/// `error` and its causes, outermost first. An [`std::io::Error`] is entered through
/// `get_ref`: its `source()` skips the error it wraps (where hyper and the TLS stream put
/// theirs).
pub(crate) fn causes<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    let next = |error: &&'e (dyn std::error::Error + 'static)| match error
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
    {
        Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
        None => error.source(),
    };
    // A cycle is not possible in owned chains, but bound the walk anyway.
    std::iter::successors(Some(error), next).take(64)
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
    fn ipv6_forms_carrying_a_non_public_ipv4_are_judged_by_it() {
        let cases = [
            ("64:ff9b::7f00:1", AddressClass::Loopback, Embedding::Nat64),
            (
                "64:ff9b::a9fe:a9fe",
                AddressClass::LinkLocal,
                Embedding::Nat64,
            ),
            (
                "64:ff9b:1::a00:1",
                AddressClass::Private,
                Embedding::LocalNat64,
            ),
            (
                "2002:7f00:1::",
                AddressClass::Loopback,
                Embedding::SixToFour,
            ),
            (
                "2002:a9fe:a9fe::1",
                AddressClass::LinkLocal,
                Embedding::SixToFour,
            ),
            (
                "::ffff:169.254.169.254",
                AddressClass::LinkLocal,
                Embedding::Mapped,
            ),
            ("::ffff:10.0.0.1", AddressClass::Private, Embedding::Mapped),
            ("::10.0.0.1", AddressClass::Private, Embedding::Compatible),
            // Teredo: server 10.0.0.1; then a client 127.0.0.1 (stored inverted: 80ff:fffe).
            ("2001:0:a00:1::1", AddressClass::Private, Embedding::Teredo),
            (
                "2001:0:808:808::80ff:fffe",
                AddressClass::Loopback,
                Embedding::Teredo,
            ),
        ];
        for (ip, class, embedding) in cases {
            let found = verdict(ip.parse().unwrap()).unwrap_or_else(|| panic!("{ip} passed"));
            assert_eq!(found.class, class, "{ip}");
            assert_eq!(found.embedded.map(|(e, _)| e), Some(embedding), "{ip}");
        }
        let refusal =
            check_literal(&reqwest::Url::parse("http://[64:ff9b::7f00:1]/").unwrap()).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "'[64:ff9b::7f00:1]' is a loopback address (64:ff9b::7f00:1, the NAT64 \
             (64:ff9b::/96) form of 127.0.0.1)"
        );
    }

    #[test]
    fn ipv6_forms_carrying_a_public_ipv4_pass() {
        for ip in [
            "64:ff9b::808:808",
            "64:ff9b::5db8:d822",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
            "2001:0:808:808::f7f7:f7f7",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
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
            public_only_addrs("mixed", vec![private, public]),
            Ok(vec![public])
        );
        let refusal = public_only_addrs("internal", vec![private]).unwrap_err();
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
