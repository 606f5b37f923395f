//! [`HostAllowList`]: the hosts a sandboxed command may reach through the egress proxy, and
//! the rule that no private, loopback or link-local address is reached unless it is listed
//! itself (a listed name whose DNS answer points inside the network is refused).

use std::net::IpAddr;

/// Host names (`example.com`), subdomain wildcards (`*.example.com`: any subdomain, not the
/// name itself) and IP addresses (`127.0.0.1`, `::1`) a sandboxed command may connect to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostAllowList {
    names: Vec<String>,
    suffixes: Vec<String>,
    addresses: Vec<IpAddr>,
}

impl HostAllowList {
    /// The list of `entries` (case-insensitive; a trailing dot is ignored).
    pub fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Self {
        let mut list = HostAllowList::default();
        for entry in entries {
            let entry = normalize(entry.as_ref());
            if let Ok(address) = entry.parse::<IpAddr>() {
                list.addresses.push(address);
            } else if let Some(suffix) = entry.strip_prefix("*.") {
                list.suffixes.push(format!(".{suffix}"));
            } else if !entry.is_empty() {
                list.names.push(entry);
            }
        }
        list
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.suffixes.is_empty() && self.addresses.is_empty()
    }

    /// Whether `host` (a name or an IP literal, as a client asked for it) is listed.
    pub fn allows_host(&self, host: &str) -> bool {
        let host = normalize(host);
        match host.parse::<IpAddr>() {
            Ok(address) => self.addresses.contains(&address),
            Err(_) => {
                self.names.contains(&host)
                    || self
                        .suffixes
                        .iter()
                        .any(|suffix| host.ends_with(suffix.as_str()))
            }
        }
    }

    /// Whether `address`, one a listed host resolved to, may be connected to: any public
    /// address, and a private, loopback or link-local one only when listed itself.
    pub fn allows_address(&self, address: IpAddr) -> bool {
        is_public(address) || self.addresses.contains(&address)
    }
}

fn normalize(host: &str) -> String {
    host.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Whether `address` is on the public internet: not loopback, private, link-local, shared
/// (CGNAT), unspecified, broadcast, multicast or documentation space.
pub(crate) fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => {
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || v6.is_unique_local()
                    || v6.is_unicast_link_local())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_wildcards_and_addresses_match_as_documented() {
        let list = HostAllowList::new(["Crates.io.", "*.github.com", "127.0.0.1"]);
        assert!(list.allows_host("crates.io"));
        assert!(list.allows_host("CRATES.IO"));
        assert!(!list.allows_host("static.crates.io"));
        assert!(list.allows_host("api.github.com"));
        assert!(!list.allows_host("github.com"));
        assert!(!list.allows_host("evilgithub.com"));
        assert!(list.allows_host("127.0.0.1"));
        assert!(!list.allows_host("127.0.0.2"));
    }

    #[test]
    fn private_addresses_only_when_listed() {
        let list = HostAllowList::new(["example.com", "10.0.0.5"]);
        assert!(list.allows_address("93.184.216.34".parse().unwrap()));
        assert!(list.allows_address("10.0.0.5".parse().unwrap()));
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!list.allows_address(private.parse().unwrap()), "{private}");
        }
    }
}
