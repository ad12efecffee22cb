//! Text to [`Quantity`], following apimachinery's `ParseQuantity`.
//!
//! Kept apart from the value type because the grammar has many upstream
//! quirks ("1." and ".5" are numbers, "-" is zero) that must be reproduced
//! exactly for the webhook to agree with the apiserver.

use super::{pow10, Format, Quantity, QuantityError, MAX_DIGITS, NANO_EXP};

struct Parts<'s> {
    positive: bool,
    num: &'s str,
    denom: &'s str,
    suffix: &'s str,
}

/// Splits `<sign><digits>.<digits><suffix>` the way apimachinery's
/// `parseQuantityString` does (including its leniency for "1." and ".5").
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == start { "0" } else { &s[start..pos] };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let ds = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[ds..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong(s.to_owned()));
    }
    Ok(Parts {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Returns (base, exponent, format) for a suffix.
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "" => dec(0),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ if suffix.len() > 1 && (suffix.starts_with('e') || suffix.starts_with('E')) => {
            let e: i64 = suffix[1..].parse().ok()?;
            Some((10, e, Format::DecimalExponent))
        }
        _ => None,
    }
}

pub(super) fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let p = split(s)?;
    let (base, exp, mut format) = interpret(p.suffix).ok_or_else(|| QuantityError::Suffix {
        text: s.to_owned(),
        suffix: p.suffix.to_owned(),
    })?;
    let too_precise = || QuantityError::TooPrecise(s.to_owned());
    let out_of_range = || QuantityError::ExponentOutOfRange(s.to_owned());

    // Significant digits of num.denom, and the decimal exponent of the last one.
    let joined = format!("{}{}", p.num, p.denom);
    let trimmed = joined.trim_start_matches('0');
    let sig = trimmed.trim_end_matches('0');
    let mut scale = (trimmed.len() - sig.len()) as i64 - p.denom.len() as i64;
    if base == 10 {
        scale = scale.checked_add(exp).ok_or_else(out_of_range)?;
    }
    let mut mantissa: i128;
    if sig.is_empty() {
        mantissa = 0;
        scale = 0;
    } else if base == 10 {
        // Round up to nano on the digit string so huge inputs never overflow.
        let mut digits = sig;
        let mut round_up = false;
        if scale < NANO_EXP {
            let drop = NANO_EXP - scale;
            if drop >= digits.len() as i64 {
                digits = "";
            } else {
                digits = &digits[..digits.len() - drop as usize];
            }
            round_up = true; // dropped digits include the last, non-zero one
            scale = NANO_EXP;
        }
        if digits.len() > MAX_DIGITS {
            return Err(too_precise());
        }
        mantissa = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| too_precise())?
        };
        if round_up {
            mantissa += 1;
        }
    } else {
        if sig.len() > MAX_DIGITS {
            return Err(too_precise());
        }
        let d: i128 = sig.parse().map_err(|_| too_precise())?;
        let cap = i128::from(i64::MAX);
        if scale >= 0 {
            let v = u32::try_from(scale)
                .ok()
                .and_then(pow10)
                .and_then(|p| d.checked_mul(p))
                .and_then(|v| v.checked_mul(1i128 << exp));
            mantissa = v.map_or(cap, |v| v.min(cap));
            scale = 0;
        } else {
            let n = d.checked_mul(1i128 << exp).ok_or_else(too_precise)?;
            let k = -scale;
            if k > -NANO_EXP {
                let drop = k + NANO_EXP;
                match u32::try_from(drop).ok().and_then(pow10) {
                    Some(p) => mantissa = n / p + i128::from(n % p != 0),
                    None => mantissa = 1,
                }
                scale = NANO_EXP;
            } else {
                mantissa = n;
            }
            let p = pow10(u32::try_from(-scale).unwrap_or(0)).unwrap_or(1);
            let (ip, frac) = (mantissa / p, mantissa % p);
            if ip > cap || (ip == cap && frac != 0) {
                mantissa = cap;
                scale = 0;
            } else if ip == 0 {
                // Below one byte nothing is binary: show it as DecimalSI.
                format = Format::DecimalSI;
            }
        }
    }
    if !p.positive {
        mantissa = -mantissa;
    }
    if i32::try_from(scale).is_err() {
        return Err(out_of_range());
    }
    Quantity::normalized(mantissa, scale, format).ok_or_else(too_precise)
}
