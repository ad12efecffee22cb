//! The Kubernetes CIDR library: `cidr(string)`, `isCIDR(string)`,
//! `string(cidr)` and the `containsIP`, `containsCIDR`, `ip`, `masked` and
//! `prefixLength` methods.
//!
//! A CIDR keeps the address it was written with (`cidr('10.0.0.1/8').ip()`
//! is `10.0.0.1`), as Go's `netip.Prefix` does; `masked()` gives the
//! network. Equality compares both address and length, so
//! `cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()`.

use super::ip::{parse_ip, Ip, IpError};
use super::{add_named_type, opaque_val};
use cel::common::types::{CelBool, CelInt, CelString, Type};
use cel::{DeclarationError, Env, ExecutionError};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The CEL type of CIDRs, named as in Kubernetes: `net.CIDR`.
pub static CIDR_TYPE: Type = Type::new_unspecified_type("net.CIDR");

/// Why a string is not a CIDR Kubernetes accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// No `/` separating address and prefix length.
    #[error("network address parse error: {0:?} has no '/'")]
    NoSlash(String),
    /// The address part is not an acceptable IP address.
    #[error("network address parse error: {0}")]
    Address(#[from] IpError),
    /// The prefix length is not a plain decimal within the family's width.
    #[error("network address parse error: bad bits after slash in {0:?}")]
    Bits(String),
}

/// A CIDR value in CEL: an address and a prefix length.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

opaque_val!(Cidr, &CIDR_TYPE);

impl Cidr {
    /// Parses `raw` with Kubernetes' rules (Go's `netip.ParsePrefix`, minus
    /// IPv4-mapped addresses).
    pub fn parse(raw: &str) -> Result<Self, CidrError> {
        let (addr, bits) = raw
            .rsplit_once('/')
            .ok_or_else(|| CidrError::NoSlash(raw.to_owned()))?;
        let addr = parse_ip(addr)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let well_formed = !bits.is_empty()
            && bits.bytes().all(|b| b.is_ascii_digit())
            && (bits == "0" || !bits.starts_with('0'));
        let bits = well_formed
            .then(|| bits.parse::<u8>().ok())
            .flatten()
            .filter(|b| *b <= max)
            .ok_or_else(|| CidrError::Bits(raw.to_owned()))?;
        Ok(Self { addr, bits })
    }

    /// The same prefix with the host bits cleared.
    pub fn masked(&self) -> Self {
        Self {
            addr: mask(self.addr, self.bits),
            bits: self.bits,
        }
    }

    /// Whether `ip` is inside this network; never across families.
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.bits) == mask(self.addr, self.bits)
    }

    /// Whether every address of `other` is inside this network.
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        other.bits >= self.bits && self.contains_ip(other.addr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

/// `addr` with all but the first `bits` bits cleared.
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

/// Registers the CIDR type and functions on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    add_named_type(env, &CIDR_TYPE)?;
    cel::add_overload!(env, fn cidr_from_string: (CelString) -> Result<Cidr>,
        name = "cidr", id = "string_to_cidr")?;
    cel::add_overload!(env, fn is_cidr: (CelString) -> CelBool, name = "isCIDR", id = "is_cidr")?;
    cel::add_overload!(env, fn cidr_to_string: (Cidr) -> CelString,
        name = "string", id = "cidr_to_string")?;
    cel::add_member_overload!(env, fn contains_ip: (Cidr, Ip) -> CelBool,
        name = "containsIP", id = "cidr_contains_ip_ip")?;
    cel::add_member_overload!(env, fn contains_ip_string: (Cidr, CelString) -> Result<CelBool>,
        name = "containsIP", id = "cidr_contains_ip_string")?;
    cel::add_member_overload!(env, fn contains_cidr: (Cidr, Cidr) -> CelBool,
        name = "containsCIDR", id = "cidr_contains_cidr")?;
    cel::add_member_overload!(env, fn contains_cidr_string: (Cidr, CelString) -> Result<CelBool>,
        name = "containsCIDR", id = "cidr_contains_cidr_string")?;
    cel::add_member_overload!(env, fn cidr_ip: (Cidr) -> Ip, name = "ip", id = "cidr_ip")?;
    cel::add_member_overload!(env, fn masked: (Cidr) -> Cidr, id = "cidr_masked")?;
    cel::add_member_overload!(env, fn prefix_length: (Cidr) -> CelInt,
        id = "cidr_prefix_length")?;
    Ok(())
}

fn cidr_from_string(raw: &CelString<'_>) -> Result<Cidr, ExecutionError> {
    Cidr::parse(raw.inner()).map_err(|e| ExecutionError::function_error("cidr", e))
}

fn is_cidr(raw: &CelString<'_>) -> CelBool {
    CelBool::from(Cidr::parse(raw.inner()).is_ok())
}

fn cidr_to_string(cidr: &Cidr) -> CelString<'static> {
    CelString::from(cidr.to_string())
}

fn contains_ip(cidr: &Cidr, ip: &Ip) -> CelBool {
    CelBool::from(cidr.contains_ip(ip.0))
}

fn contains_ip_string(cidr: &Cidr, raw: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let ip = parse_ip(raw.inner()).map_err(|e| ExecutionError::function_error("containsIP", e))?;
    Ok(CelBool::from(cidr.contains_ip(ip)))
}

fn contains_cidr(cidr: &Cidr, other: &Cidr) -> CelBool {
    CelBool::from(cidr.contains_cidr(other))
}

fn contains_cidr_string(cidr: &Cidr, raw: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let other =
        Cidr::parse(raw.inner()).map_err(|e| ExecutionError::function_error("containsCIDR", e))?;
    Ok(CelBool::from(cidr.contains_cidr(&other)))
}

fn cidr_ip(cidr: &Cidr) -> Ip {
    Ip(cidr.addr)
}

fn masked(cidr: &Cidr) -> Cidr {
    cidr.masked()
}

fn prefix_length(cidr: &Cidr) -> CelInt {
    CelInt::from(i64::from(cidr.bits))
}

#[cfg(test)]
mod tests {
    use super::{Cidr, CidrError};
    use crate::policy::k8s_lib::test_support::{assert_error, assert_true};

    #[test]
    fn cidr_parses_ipv4_and_ipv6_networks() {
        assert_true("isCIDR('192.168.0.0/16') && isCIDR('::1/128')");
        assert_true("!isCIDR('192.168.0.0/33') && !isCIDR('::1/129')");
        assert_true("!isCIDR('192.168.0.0') && !isCIDR('2001:db8::/')");
        assert_true("!isCIDR('10.0.0.0/08') && !isCIDR('::ffff:1.2.3.4/120')");
        assert_error("cidr('192.168.0.0/33')", "bad bits");
    }

    #[test]
    fn contains_ip_accepts_an_ip_or_a_string() {
        assert_true("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))");
        assert_true("!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))");
        assert_true("cidr('192.168.0.0/24').containsIP('192.168.0.1')");
        assert_true("!cidr('192.168.0.0/24').containsIP('192.168.1.1')");
        assert_true("cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))");
        assert_true("!cidr('2001:db8::/32').containsIP('2001:dc8::1')");
        assert_true("!cidr('0.0.0.0/0').containsIP('::1')");
        assert_error("cidr('10.0.0.0/8').containsIP('nope')", "parse error");
    }

    #[test]
    fn contains_cidr_is_true_for_subnets_only() {
        assert_true("cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))");
        assert_true("!cidr('192.168.1.0/24').containsCIDR(cidr('192.168.2.0/24'))");
        assert_true("cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24')");
        assert_true("!cidr('192.168.1.0/24').containsCIDR('192.168.2.0/24')");
        assert_true("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))");
        assert_true("!cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))");
        assert_true("cidr('2001:db8::/32').containsCIDR('2001:db8::/33')");
        assert_true("!cidr('2001:db8::/32').containsCIDR('2001:db8::/31')");
    }

    #[test]
    fn ip_masked_and_prefix_length_expose_the_parts() {
        assert_true("cidr('192.168.0.1/24').ip() == ip('192.168.0.1')");
        assert_true("cidr('192.168.0.1/24').ip().family() == 4");
        assert_true("cidr('::1/128').ip().family() == 6");
        assert_true("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')");
        assert_true("cidr('192.168.0.0/24') == cidr('192.168.0.0/24').masked()");
        assert_true("cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()");
        assert_true("cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')");
        assert_true("cidr('192.168.0.0/16').prefixLength() == 16");
        assert_true("cidr('::1/128').prefixLength() == 128");
        assert_true("cidr('0.0.0.0/0').masked() == cidr('0.0.0.0/0')");
    }

    #[test]
    fn cidrs_convert_to_strings_and_name_their_type() {
        assert_true("string(cidr('192.168.0.0/24')) == '192.168.0.0/24'");
        assert_true("type(cidr('192.168.0.0/24')) == net.CIDR");
    }

    #[test]
    fn a_missing_slash_is_reported_as_such() {
        assert_eq!(
            Cidr::parse("10.0.0.0"),
            Err(CidrError::NoSlash("10.0.0.0".to_owned()))
        );
    }
}
