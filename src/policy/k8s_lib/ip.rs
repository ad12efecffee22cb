//! The Kubernetes IP library: `ip(string)`, `isIP(string)`,
//! `ip.isCanonical(string)`, `string(ip)` and the `family`, `isUnspecified`,
//! `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast` and
//! `isGlobalUnicast` methods.
//!
//! Parsing is as strict as Kubernetes' (Go's `netip.ParseAddr` plus its
//! extra rules): no zones, no IPv4-mapped IPv6 and no leading zeros in IPv4
//! octets, so an address a policy accepts is one the API server accepts.
//! The classifications are Go's, which differ from Rust's `std::net`
//! helpers (e.g. private IPv4 addresses are global unicast in Go).

use super::{add_named_type, opaque_val};
use cel::common::types::{CelBool, CelInt, CelString, Type};
use cel::{DeclarationError, Env, ExecutionError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The CEL type of IP addresses, named as in Kubernetes so that
/// `type(ip('::1')) == net.IP` holds.
pub static IP_TYPE: Type = Type::new_unspecified_type("net.IP");

/// Why a string is not an IP address Kubernetes accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpError {
    /// Not an IPv4 or IPv6 address at all (including IPv4 octets with
    /// leading zeros, which Go rejects as ambiguous octal).
    #[error("IP Address {0:?} parse error during conversion from string")]
    Invalid(String),
    /// A scoped address such as `fe80::1%eth0`.
    #[error("IP address {0:?} with zone value is not allowed")]
    Zone(String),
    /// `::ffff:a.b.c.d`, which has two spellings and is refused to keep
    /// comparisons between addresses meaningful.
    #[error("IPv4-mapped IPv6 address {0:?} is not allowed")]
    Ipv4Mapped(String),
}

/// An IP address value in CEL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ip(pub IpAddr);

opaque_val!(Ip, &IP_TYPE);

/// Parses `raw` with Kubernetes' rules; shared with the CIDR library.
pub fn parse_ip(raw: &str) -> Result<IpAddr, IpError> {
    if raw.contains('%') {
        return Err(IpError::Zone(raw.to_owned()));
    }
    let addr: IpAddr = raw.parse().map_err(|_| IpError::Invalid(raw.to_owned()))?;
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err(IpError::Ipv4Mapped(raw.to_owned()));
        }
    }
    Ok(addr)
}

/// Registers the IP type and functions on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    add_named_type(env, &IP_TYPE)?;
    cel::add_overload!(env, fn ip_from_string: (CelString) -> Result<Ip>,
        name = "ip", id = "string_to_ip")?;
    cel::add_overload!(env, fn is_ip: (CelString) -> CelBool, name = "isIP", id = "is_ip")?;
    cel::add_overload!(env, fn is_canonical: (CelString) -> Result<CelBool>,
        name = "ip.isCanonical", id = "ip_is_canonical")?;
    cel::add_overload!(env, fn ip_to_string: (Ip) -> CelString,
        name = "string", id = "ip_to_string")?;
    cel::add_member_overload!(env, fn family: (Ip) -> CelInt, id = "ip_family")?;
    cel::add_member_overload!(env, fn is_unspecified: (Ip) -> CelBool,
        id = "ip_is_unspecified")?;
    cel::add_member_overload!(env, fn is_loopback: (Ip) -> CelBool, id = "ip_is_loopback")?;
    cel::add_member_overload!(env, fn is_link_local_multicast: (Ip) -> CelBool,
        id = "ip_is_link_local_multicast")?;
    cel::add_member_overload!(env, fn is_link_local_unicast: (Ip) -> CelBool,
        id = "ip_is_link_local_unicast")?;
    cel::add_member_overload!(env, fn is_global_unicast: (Ip) -> CelBool,
        id = "ip_is_global_unicast")?;
    Ok(())
}

fn ip_from_string(raw: &CelString<'_>) -> Result<Ip, ExecutionError> {
    parse_ip(raw.inner())
        .map(Ip)
        .map_err(|e| ExecutionError::function_error("ip", e))
}

fn is_ip(raw: &CelString<'_>) -> CelBool {
    CelBool::from(parse_ip(raw.inner()).is_ok())
}

/// Canonical means exactly the RFC 5952 text Go prints, so canonical
/// addresses can be compared as strings.
fn is_canonical(raw: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let addr =
        parse_ip(raw.inner()).map_err(|e| ExecutionError::function_error("ip.isCanonical", e))?;
    Ok(CelBool::from(addr.to_string() == raw.inner()))
}

fn ip_to_string(ip: &Ip) -> CelString<'static> {
    CelString::from(ip.0.to_string())
}

fn family(ip: &Ip) -> CelInt {
    CelInt::from(if ip.0.is_ipv4() { 4 } else { 6 })
}

fn is_unspecified(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_unspecified())
}

fn is_loopback(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_loopback())
}

/// 224.0.0.0/24, or IPv6 link-local scope multicast (ff02::/16 and its
/// flag variants), as Go's `netip.Addr.IsLinkLocalMulticast`.
fn is_link_local_multicast(ip: &Ip) -> CelBool {
    CelBool::from(match ip.0 {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    })
}

/// 169.254.0.0/16 or fe80::/10.
fn is_link_local_unicast(ip: &Ip) -> CelBool {
    CelBool::from(link_local_unicast(ip.0))
}

fn link_local_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's definition: anything but unspecified, broadcast, loopback,
/// multicast and link-local unicast; private ranges included.
fn is_global_unicast(ip: &Ip) -> CelBool {
    let addr = ip.0;
    let excluded = match addr {
        IpAddr::V4(v4) => v4 == Ipv4Addr::BROADCAST || v4.is_multicast(),
        IpAddr::V6(v6) => v6 == Ipv6Addr::UNSPECIFIED || v6.is_multicast(),
    };
    CelBool::from(
        !excluded && !addr.is_unspecified() && !addr.is_loopback() && !link_local_unicast(addr),
    )
}

#[cfg(test)]
mod tests {
    use super::{parse_ip, IpError};
    use crate::policy::k8s_lib::test_support::{assert_error, assert_true};

    #[test]
    fn ip_parses_ipv4_and_ipv6_addresses() {
        assert_true("ip('127.0.0.1').family() == 4");
        assert_true("ip('::1').family() == 6");
        assert_true("isIP('127.0.0.1') && isIP('::1')");
    }

    #[test]
    fn ip_rejects_what_kubernetes_rejects() {
        assert_error("ip('127.0.0.256')", "parse error");
        assert_error("ip(':::1')", "parse error");
        assert_true("!isIP('127.0.0.256') && !isIP(':::1')");
        assert_true("!isIP('127.0.0.01')");
        assert_eq!(
            parse_ip("::ffff:1.2.3.4"),
            Err(IpError::Ipv4Mapped("::ffff:1.2.3.4".to_owned()))
        );
        assert_eq!(
            parse_ip("fe80::1%eth0"),
            Err(IpError::Zone("fe80::1%eth0".to_owned()))
        );
    }

    #[test]
    fn is_canonical_compares_with_the_rfc_5952_spelling() {
        assert_true("ip.isCanonical('127.0.0.1')");
        assert_true("ip.isCanonical('2001:db8::abcd')");
        assert_true("!ip.isCanonical('2001:DB8::ABCD')");
        assert_true("!ip.isCanonical('2001:db8::0:0:0:abcd')");
    }

    #[test]
    fn classifications_follow_the_kubernetes_examples() {
        assert_true("ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified()");
        assert_true("!ip('127.0.0.1').isUnspecified() && !ip('::1').isUnspecified()");
        assert_true("ip('127.0.0.1').isLoopback() && ip('::1').isLoopback()");
        assert_true("!ip('192.168.0.1').isLoopback() && !ip('2001:db8::abcd').isLoopback()");
        assert_true("ip('224.0.0.1').isLinkLocalMulticast()");
        assert_true("!ip('224.0.1.1').isLinkLocalMulticast()");
        assert_true("ip('ff02::1').isLinkLocalMulticast()");
        assert_true("!ip('fd00::1').isLinkLocalMulticast()");
        assert_true("ip('169.254.169.254').isLinkLocalUnicast()");
        assert_true("!ip('192.168.0.1').isLinkLocalUnicast()");
        assert_true("ip('fe80::1').isLinkLocalUnicast()");
        assert_true("!ip('fd80::1').isLinkLocalUnicast()");
        assert_true("ip('192.168.0.1').isGlobalUnicast()");
        assert_true("!ip('255.255.255.255').isGlobalUnicast()");
        assert_true("ip('2001:db8::abcd').isGlobalUnicast()");
        assert_true("!ip('ff00::1').isGlobalUnicast()");
    }

    #[test]
    fn ips_convert_to_strings_and_compare_by_value() {
        assert_true("string(ip('2001:DB8::0:0:0:abcd')) == '2001:db8::abcd'");
        assert_true("ip('127.0.0.1') == ip('127.0.0.1')");
        assert_true("ip('127.0.0.1') != ip('127.0.0.2')");
        assert_true("type(ip('::1')) == net.IP");
    }
}
