//! Which addresses cronbox may call on a tenant's behalf.
//!
//! A tenant controls URLs the admin or an executor will call (an alarm
//! webhook today, a job's outbound HTTP later). Without a policy that is a
//! server-side request forgery: `http://169.254.169.254/` reads the cloud
//! metadata service, `http://127.0.0.1:8080/` the admin's own API. A
//! [`NetPolicy`] refuses every address that is not on the public internet
//! — loopback, private (RFC 1918), shared (CGNAT), link-local (with the
//! metadata addresses), unique-local, multicast, unspecified, broadcast,
//! documentation and benchmarking ranges, and the IPv6 forms that embed an
//! IPv4 address (mapped, compatible, NAT64, 6to4) judged by that address —
//! unless the operator allows a network explicitly (`127.0.0.1/32`).
//!
//! [`NetPolicy::resolve`] resolves a host name once and returns an address
//! that passed the check — an IPv6 form that embeds an IPv4 address given
//! as that IPv4 address, so that what is connected to is what was judged;
//! the caller connects to that address (never
//! looking the name up again), so a name that answers differently the
//! second time (DNS rebinding) gains nothing. Redirects are the caller's to
//! refuse, or to check hop by hop.

mod origin;

pub use origin::{BadOrigin, OriginPattern, Scheme, first_outside, parse_origins};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;

/// The networks an operator allows beyond the public internet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPolicy {
    allowed: Vec<IpNet>,
}

/// Why an address may not be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("{address} is a {range} address, which the operator has not allowed")]
    Special {
        address: IpAddr,
        range: &'static str,
    },
    #[error("{host} has no address")]
    NoAddress { host: String },
    #[error("{host} cannot be resolved: {reason}")]
    Unresolved { host: String, reason: String },
}

/// An allowed-network list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a network: use an address with its prefix length, such as 10.0.0.0/8 or fd00::/8"
)]
pub struct BadNetwork(pub String);

impl NetPolicy {
    /// The public internet only.
    pub fn public_only() -> NetPolicy {
        NetPolicy::default()
    }

    /// The public internet and `allowed`.
    pub fn allowing(allowed: Vec<IpNet>) -> NetPolicy {
        NetPolicy { allowed }
    }

    /// The networks allowed beyond the public internet.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allowed
    }

    /// Whether `address` may be called.
    pub fn check(&self, address: IpAddr) -> Result<(), Denied> {
        let Some(range) = special_range(address) else {
            return Ok(());
        };
        if self.allowed.iter().any(|net| net.contains(&address)) {
            return Ok(());
        }
        // An allowed IPv4 network also allows its IPv6-embedded forms.
        if let Some(inner) = embedded_v4(address)
            && self
                .allowed
                .iter()
                .any(|net| net.contains(&IpAddr::V4(inner)))
        {
            return Ok(());
        }
        Err(Denied::Special { address, range })
    }

    /// Resolves `host` (a name or an address literal) once and returns the
    /// first of its addresses that may be called, with `port`. Connect to
    /// that address, not to the name.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, Denied> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(address) = literal.parse::<IpAddr>() {
            self.check(address)?;
            return Ok(SocketAddr::new(connect_to(address), port));
        }
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|error| Denied::Unresolved {
                host: host.to_owned(),
                reason: error.to_string(),
            })?
            .collect();
        let mut first_denial = None;
        for address in found {
            match self.check(address.ip()) {
                Ok(()) => return Ok(SocketAddr::new(connect_to(address.ip()), port)),
                Err(denied) => {
                    first_denial.get_or_insert(denied);
                }
            }
        }
        Err(first_denial.unwrap_or_else(|| Denied::NoAddress {
            host: host.to_owned(),
        }))
    }
}

impl FromStr for NetPolicy {
    type Err = BadNetwork;

    /// A comma-separated list of networks (`127.0.0.1/32,10.0.0.0/8`); a
    /// bare address is a network of one. Empty: the public internet only.
    fn from_str(text: &str) -> Result<NetPolicy, BadNetwork> {
        let mut allowed = Vec::new();
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| BadNetwork(item.to_owned()))?;
            allowed.push(net);
        }
        Ok(NetPolicy { allowed })
    }
}

impl std::fmt::Display for NetPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nets: Vec<String> = self.allowed.iter().map(IpNet::to_string).collect();
        f.write_str(&nets.join(","))
    }
}

/// The address to connect to for `address`, which passed the check: the
/// IPv4 address an IPv6 form embeds (it was judged as that address; a
/// NAT64 prefix or 6to4 relay would otherwise decide where it goes),
/// else `address` itself.
fn connect_to(address: IpAddr) -> IpAddr {
    embedded_v4(address).map_or(address, IpAddr::V4)
}

/// The IPv4 address an IPv6 address stands for: mapped (`::ffff:a.b.c.d`),
/// compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) or 6to4 (`2002::/16`).
fn embedded_v4(address: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = address else {
        return None;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let segments = v6.segments();
    let octets = v6.octets();
    let last_four = Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]);
    if segments[..6] == [0; 6] && !matches!(segments[6..], [0, 0] | [0, 1]) {
        return Some(last_four); // ::a.b.c.d (deprecated), not :: or ::1
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(last_four);
    }
    if segments[0] == 0x2002 {
        return Some(Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5]));
    }
    None
}

/// The name of the non-public range `address` is in, if any.
pub fn special_range(address: IpAddr) -> Option<&'static str> {
    if let Some(v4) = embedded_v4(address) {
        return special_v4(v4);
    }
    match address {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = v4.octets();
    Some(match (a, b, c) {
        _ if v4.is_unspecified() => "unspecified",
        (0, _, _) => "\"this network\"",
        (127, _, _) => "loopback",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "private",
        (100, 64..=127, _) => "shared (CGNAT)",
        (169, 254, _) => "link-local (cloud metadata)",
        (192, 0, 0) => "IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, _, _) => "multicast",
        _ if v4.is_broadcast() => "broadcast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    })
}

fn special_v6(v6: Ipv6Addr) -> Option<&'static str> {
    let first = v6.segments()[0];
    Some(match first {
        _ if v6.is_unspecified() => "unspecified",
        _ if v6.is_loopback() => "loopback",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local",
        0xfc00..=0xfdff => "unique local (includes fd00:ec2::254, cloud metadata)",
        0xff00..=0xffff => "multicast",
        0x2001 if v6.segments()[1] == 0x0db8 => "documentation",
        0x0100 if v6.segments()[1..4] == [0, 0, 0] => "discard",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(policy: &NetPolicy, text: &str) -> bool {
        policy.check(text.parse().unwrap()).is_err()
    }

    #[test]
    fn only_the_public_internet_by_default() {
        let policy = NetPolicy::public_only();
        for address in [
            "127.0.0.1",
            "127.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.2.1",
            "::",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert!(denied(&policy, address), "{address} must be refused");
        }
        for address in [
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(!denied(&policy, address), "{address} is public");
        }
        let error = policy
            .check("169.254.169.254".parse().unwrap())
            .unwrap_err();
        assert!(error.to_string().contains("link-local"), "{error}");
    }

    #[test]
    fn an_operator_allows_networks_by_name() {
        let policy: NetPolicy = "127.0.0.1/32, 10.0.0.0/8,fd00::1".parse().unwrap();
        assert!(!denied(&policy, "127.0.0.1"));
        assert!(!denied(&policy, "::ffff:127.0.0.1"), "the mapped form too");
        assert!(denied(&policy, "127.0.0.2"));
        assert!(!denied(&policy, "10.200.0.1"));
        assert!(!denied(&policy, "fd00::1"));
        assert!(denied(&policy, "fd00::2"));
        assert!(denied(&policy, "169.254.169.254"));
        assert_eq!(policy.to_string(), "127.0.0.1/32,10.0.0.0/8,fd00::1/128");
        assert_eq!("".parse::<NetPolicy>().unwrap(), NetPolicy::public_only());
        let error = "10.0.0.0/8,localhost".parse::<NetPolicy>().unwrap_err();
        assert!(error.to_string().contains("\"localhost\""), "{error}");
    }

    #[tokio::test]
    async fn an_embedded_ipv4_address_is_judged_and_connected_to_as_ipv4() {
        let policy: NetPolicy = "127.0.0.1/32".parse().unwrap();
        for form in [
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
        ] {
            let address = policy.resolve(&format!("[{form}]"), 8080).await.unwrap();
            assert_eq!(address, "127.0.0.1:8080".parse().unwrap(), "{form}");
        }
        // Denied ones stay denied, whatever their form.
        for form in ["::ffff:127.0.0.2", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::"] {
            assert!(
                policy.resolve(&format!("[{form}]"), 80).await.is_err(),
                "{form}"
            );
        }
        // An address that embeds nothing is connected to as given.
        let loopback: NetPolicy = "::1/128".parse().unwrap();
        assert_eq!(
            loopback.resolve("[::1]", 80).await.unwrap(),
            "[::1]:80".parse().unwrap()
        );
    }

    /// The spellings of loopback and metadata addresses an attacker tried
    /// in a job's URLs (the host part as the guest's request carries it):
    /// each resolves to an address the policy refuses.
    #[tokio::test]
    async fn every_spelling_of_a_private_address_is_refused() {
        let policy = NetPolicy::public_only();
        for host in [
            "127.0.0.1",
            "127.1",
            "127.0.1",
            "2130706433",
            "0x7f000001",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "0177.1",
            "017700000001",
            "localhost",
            "localhost.",
            "LOCALHOST",
            "LocalHost",
            "0",
            "0.0.0.0",
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "[::1]",
            "[0:0:0:0:0:0:0:1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[::ffff:a9fe:a9fe]",
            "[64:ff9b::7f00:1]",
            "[2002:7f00:1::]",
            "[fd00:ec2::254]",
        ] {
            assert!(
                policy.resolve(host, 80).await.is_err(),
                "{host} must be refused"
            );
        }
    }

    #[tokio::test]
    async fn a_name_is_resolved_once_and_its_checked_address_returned() {
        let policy = NetPolicy::public_only();
        let error = policy.resolve("localhost", 80).await.unwrap_err();
        assert!(
            matches!(
                error,
                Denied::Special {
                    range: "loopback",
                    ..
                }
            ),
            "{error}"
        );
        let error = policy.resolve("[::1]", 80).await.unwrap_err();
        assert!(matches!(error, Denied::Special { .. }), "{error}");
        let allowed: NetPolicy = "127.0.0.0/8,::1".parse().unwrap();
        let address = allowed.resolve("localhost", 8080).await.unwrap();
        assert!(address.ip().is_loopback() && address.port() == 8080);
        let error = policy
            .resolve("no-such-host.invalid", 80)
            .await
            .unwrap_err();
        assert!(matches!(error, Denied::Unresolved { .. }), "{error}");
    }
}
