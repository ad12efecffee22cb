//! Exact Kubernetes `resource.Quantity` (apimachinery `pkg/api/resource`).
//!
//! The webhook must emit quantities that the apiserver stores unchanged and must
//! compare them exactly as Kubernetes does, so this is a faithful port of the
//! parse / round / canonicalize rules rather than an `f64` approximation.
//!
//! A value is held as `mantissa * 10^exponent` with an `i128` mantissa that is
//! kept normalized (no trailing decimal zeros), which makes equality, hashing
//! and ordering purely numeric. Parsing rounds up to nano units (10^-9) like
//! apimachinery, and caps binary-suffixed values at `i64::MAX`.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Mantissas are kept below 10^38 so that aligning two values for comparison
/// can never overflow an `i128`.
pub(crate) const MAX_DIGITS: usize = 38;
/// Smallest exponent a parsed quantity can have: Kubernetes rounds up to nano.
pub(crate) const NANO_EXP: i64 = -9;

/// How a quantity prefers to be printed; kept across arithmetic like upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of ten with SI suffixes (`m`, `k`, `M`, ...): CPU and most inputs.
    DecimalSI,
    /// Powers of two (`Ki`, `Mi`, ...): how memory recommendations are written.
    BinarySI,
    /// Scientific notation (`12e6`), kept when the user wrote it that way.
    DecimalExponent,
}

/// Why a quantity string was rejected; the message quotes the offending text
/// so an admission response can be acted on without reading code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Kubernetes rejects the empty string as a quantity.
    #[error("quantity is empty; expected a number such as \"100m\" or \"1Gi\"")]
    Empty,
    /// The number part is malformed (stray characters, whitespace, two dots).
    #[error("quantity {0:?} is not a number followed by an optional suffix (e.g. \"1.5\", \"250m\", \"12e6\")")]
    FormatWrong(String),
    /// The text after the number is not a known suffix.
    #[error("quantity {text:?} has unknown suffix {suffix:?}; expected one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an e<exponent>")]
    Suffix {
        /// The whole input.
        text: String,
        /// The suffix that was not understood.
        suffix: String,
    },
    /// The value has more significant digits than can be held exactly.
    #[error("quantity {0:?} has more than {MAX_DIGITS} significant digits and cannot be represented exactly")]
    TooPrecise(String),
    /// The decimal exponent is beyond what can be represented.
    #[error("quantity {0:?} has an exponent out of range")]
    ExponentOutOfRange(String),
}

/// A Kubernetes resource quantity, exact.
///
/// Equality, hashing and ordering are numeric (`1Gi == 1073741824`); the
/// [`Format`] only affects how the value is printed. Compare `to_string()`
/// when the spelling matters (e.g. to decide whether a patch changes a pod).
#[derive(Clone, Debug)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: Format,
}

pub(crate) fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

fn digit_count(mut v: u128) -> u32 {
    if let Ok(small) = u64::try_from(v) {
        // Without 128-bit division: comparisons and every normalization call this.
        return small.checked_ilog10().unwrap_or(0) + 1;
    }
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

impl Quantity {
    pub(crate) fn normalized(
        mut mantissa: i128,
        mut exponent: i64,
        format: Format,
    ) -> Option<Self> {
        if mantissa == 0 {
            return Some(Self {
                mantissa: 0,
                exponent: 0,
                format,
            });
        }
        if let Ok(mut small) = i64::try_from(mantissa) {
            // The common case, without 128-bit division; 19 digits at most.
            while small % 10 == 0 {
                small /= 10;
                exponent += 1;
            }
            mantissa = i128::from(small);
        } else {
            while mantissa % 10 == 0 {
                mantissa /= 10;
                exponent += 1;
            }
            if digit_count(mantissa.unsigned_abs()) as usize > MAX_DIGITS {
                return None;
            }
        }
        let exponent = i32::try_from(exponent).ok()?;
        Some(Self {
            mantissa,
            exponent,
            format,
        })
    }

    /// Parses a Kubernetes quantity string with apimachinery's rules.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        match fast::parse(s) {
            Some(q) => Ok(q),
            None => parse::parse_quantity(s),
        }
    }

    /// Builds a quantity from milli-units: how CPU values are computed
    /// (`resource.NewMilliQuantity`).
    pub fn from_milli(milli: i64, format: Format) -> Self {
        Self::normalized(i128::from(milli), -3, format).unwrap_or(Self {
            mantissa: i128::from(milli),
            exponent: -3,
            format,
        })
    }

    /// Builds a quantity from whole units: how memory bytes are computed
    /// (`resource.NewQuantity`).
    pub fn from_i64(v: i64, format: Format) -> Self {
        Self::normalized(i128::from(v), 0, format).unwrap_or(Self {
            mantissa: i128::from(v),
            exponent: 0,
            format,
        })
    }

    /// The preferred print format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The value in milli-units, rounded away from zero and saturated, like
    /// `MilliValue()` (CPU arithmetic is done in these units upstream).
    pub fn milli_value(&self) -> i64 {
        self.scaled_value(3)
    }

    /// The value in whole units, rounded away from zero and saturated, like
    /// `Value()` (memory arithmetic is done in these units upstream).
    pub fn value(&self) -> i64 {
        self.scaled_value(0)
    }

    fn scaled_value(&self, shift: i64) -> i64 {
        // The common case in 64-bit arithmetic: an i64 mantissa and a scale
        // within 10^18 (CPU in milli-units, memory in bytes).
        if let Ok(m) = i64::try_from(self.mantissa) {
            let e = i64::from(self.exponent) + shift;
            if (0..=18).contains(&e) {
                if let Some(v) = m.checked_mul(10i64.pow(e as u32)) {
                    return v;
                }
            } else if (-18..0).contains(&e) {
                let p = 10i64.pow((-e) as u32);
                let (q, r) = (m / p, m % p);
                return if r == 0 { q } else { q + m.signum() };
            }
        }
        let saturate = |neg: bool| if neg { i64::MIN } else { i64::MAX };
        let neg = self.mantissa < 0;
        let e = i64::from(self.exponent) + shift;
        let v: Option<i128> = if e >= 0 {
            u32::try_from(e)
                .ok()
                .and_then(pow10)
                .and_then(|p| self.mantissa.checked_mul(p))
        } else {
            match u32::try_from(-e).ok().and_then(pow10) {
                Some(p) => {
                    let q = self.mantissa / p;
                    let r = self.mantissa % p;
                    Some(if r == 0 {
                        q
                    } else {
                        q + self.mantissa.signum()
                    })
                }
                // Divisor beyond i128: |value| < 1, rounded away from zero.
                None => Some(self.mantissa.signum()),
            }
        };
        v.and_then(|v| i64::try_from(v).ok())
            .unwrap_or_else(|| saturate(neg))
    }

    /// The exact integer value, or `None` when fractional or beyond `i64`
    /// (like `AsInt64()`).
    pub fn as_i64(&self) -> Option<i64> {
        if self.exponent < 0 {
            return None;
        }
        let p = pow10(u32::try_from(self.exponent).ok()?)?;
        i64::try_from(self.mantissa.checked_mul(p)?).ok()
    }

    /// The nearest `f64`, for metrics and logs only.
    pub fn as_approximate_f64(&self) -> f64 {
        format!("{}e{}", self.mantissa, self.exponent)
            .parse()
            .unwrap_or(f64::NAN)
    }

    fn aligned(&self, o: &Self) -> Option<(i128, i128, i64)> {
        let e = self.exponent.min(o.exponent);
        let a = self
            .mantissa
            .checked_mul(pow10(u32::try_from(self.exponent - e).ok()?)?)?;
        let b = o
            .mantissa
            .checked_mul(pow10(u32::try_from(o.exponent - e).ok()?)?)?;
        Some((a, b, i64::from(e)))
    }

    /// Exact sum, or `None` if it cannot be represented. The result keeps
    /// this value's format unless this value is zero (upstream `Add`).
    pub fn checked_add(&self, o: &Self) -> Option<Self> {
        let (a, b, e) = self.aligned(o)?;
        let format = if self.mantissa == 0 {
            o.format
        } else {
            self.format
        };
        Self::normalized(a.checked_add(b)?, e, format)
    }

    /// Exact difference, or `None` if it cannot be represented (upstream `Sub`).
    pub fn checked_sub(&self, o: &Self) -> Option<Self> {
        let (a, b, e) = self.aligned(o)?;
        let format = if self.mantissa == 0 {
            o.format
        } else {
            self.format
        };
        Self::normalized(a.checked_sub(b)?, e, format)
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        self.mantissa.signum() as i32
    }

    /// Whether the value has no fractional part.
    pub fn is_integer(&self) -> bool {
        self.exponent >= 0
    }

    /// Whether the value is zero (a zero limit means "unset" upstream).
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    fn canonical(&self) -> String {
        let mut text = String::new();
        self.write_canonical(&mut text);
        text
    }

    /// Appends the quantity's canonical text (what `to_string` gives) to
    /// `out`, so that a caller building many texts reuses one buffer.
    pub fn write_canonical(&self, out: &mut String) {
        if self.mantissa == 0 {
            out.push('0');
            return;
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            // Below 1Ki, fractional, or beyond i64: binary would round or mislead.
            match self.as_i64() {
                Some(v) if v.unsigned_abs() >= 1024 => {}
                _ => format = Format::DecimalSI,
            }
        }
        if format == Format::BinarySI {
            let mut v = self.as_i64().unwrap_or(0);
            let mut exp = 0usize;
            while exp < 6 && v % 1024 == 0 {
                v /= 1024;
                exp += 1;
            }
            const BIN: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
            out.push_str(itoa::Buffer::new().format(v));
            out.push_str(BIN[exp]);
            return;
        }
        // Lower the exponent to a multiple of three by appending zeros.
        match i64::try_from(self.mantissa) {
            Ok(small) => out.push_str(itoa::Buffer::new().format(small)),
            Err(_) => {
                use std::fmt::Write;
                let _ = write!(out, "{}", self.mantissa);
            }
        }
        let mut exp = i64::from(self.exponent);
        let pad = exp.rem_euclid(3);
        for _ in 0..pad {
            out.push('0');
        }
        exp -= pad;
        let suffix = match (format, exp) {
            (Format::DecimalSI, -9) => Some("n"),
            (Format::DecimalSI, -6) => Some("u"),
            (Format::DecimalSI, -3) => Some("m"),
            (Format::DecimalSI, 0) => Some(""),
            (Format::DecimalSI, 3) => Some("k"),
            (Format::DecimalSI, 6) => Some("M"),
            (Format::DecimalSI, 9) => Some("G"),
            (Format::DecimalSI, 12) => Some("T"),
            (Format::DecimalSI, 15) => Some("P"),
            (Format::DecimalSI, 18) => Some("E"),
            (_, 0) => Some(""),
            _ => None,
        };
        match suffix {
            Some(s) => out.push_str(s),
            // No SI suffix this large/small: exponent notation keeps the magnitude.
            None => {
                out.push('e');
                out.push_str(itoa::Buffer::new().format(exp));
            }
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl PartialEq for Quantity {
    fn eq(&self, o: &Self) -> bool {
        self.mantissa == o.mantissa && self.exponent == o.exponent
    }
}
impl Eq for Quantity {}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.mantissa.hash(h);
        self.exponent.hash(h);
    }
}

impl Ord for Quantity {
    fn cmp(&self, o: &Self) -> Ordering {
        let (sa, sb) = (self.mantissa.signum(), o.mantissa.signum());
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        // Same non-zero sign: compare magnitudes by order of magnitude first.
        let mag =
            |q: &Self| i64::from(digit_count(q.mantissa.unsigned_abs())) + i64::from(q.exponent);
        let by_mag = match mag(self).cmp(&mag(o)) {
            Ordering::Equal => match self.aligned(o) {
                Some((a, b, _)) => a.unsigned_abs().cmp(&b.unsigned_abs()),
                None => Ordering::Equal,
            },
            other => other,
        };
        if sa < 0 {
            by_mag.reverse()
        } else {
            by_mag
        }
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.canonical())
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes quantity string or number")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        // The apiserver trims surrounding whitespace before parsing.
        Quantity::parse(v.trim()).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        Ok(Quantity::from_i64(v, Format::DecimalSI))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        if !v.is_finite() {
            return Err(E::custom(format!("quantity {v} is not finite")));
        }
        // Rust prints the shortest decimal that round-trips, without exponent.
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor)
    }
}

mod fast;
mod parse;

#[cfg(test)]
mod tests;
