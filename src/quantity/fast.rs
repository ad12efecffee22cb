//! The common spellings (`250m`, `128Mi`, `2`, `1Gi`) parsed without the
//! general grammar's string work: a store of 100 VPAs x 5,000 nodes holds two
//! million of them, and the general path costs ten times as much.
//!
//! Anything else (signs, fractions, exponents, leading zeros, sub-milli or
//! huge values) returns `None` and goes through [`super::parse`], so the
//! result is always the one apimachinery's grammar gives.

use super::{Format, Quantity};

/// `<digits><suffix>` with 1 to 18 digits, no leading zero, and a suffix of
/// `""`, `m`, `k`, `M`, `G`, `T`, `Ki`, `Mi`, `Gi` or `Ti`.
pub(super) fn parse(s: &str) -> Option<Quantity> {
    let b = s.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 18 || (b[0] == b'0' && digits > 1) {
        return None;
    }
    let value = b[..digits]
        .iter()
        .fold(0i64, |v, c| v * 10 + i64::from(c - b'0'));
    let (exponent, shift, format) = match &b[digits..] {
        b"" => (0, 0, Format::DecimalSI),
        b"m" => (-3, 0, Format::DecimalSI),
        b"k" => (3, 0, Format::DecimalSI),
        b"M" => (6, 0, Format::DecimalSI),
        b"G" => (9, 0, Format::DecimalSI),
        b"T" => (12, 0, Format::DecimalSI),
        b"Ki" => (0, 10, Format::BinarySI),
        b"Mi" => (0, 20, Format::BinarySI),
        b"Gi" => (0, 30, Format::BinarySI),
        b"Ti" => (0, 40, Format::BinarySI),
        _ => return None,
    };
    // Binary values above i64 are capped by the general path; leave them to it.
    let mantissa = i64::try_from(i128::from(value) << shift).ok()?;
    Quantity::normalized(i128::from(mantissa), exponent, format)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The fast path agrees with apimachinery's grammar on value and
        /// format wherever it answers.
        #[test]
        fn agrees_with_the_general_grammar(
            digits in "[0-9]{1,20}",
            suffix in prop::sample::select(vec!["", "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi", "n", "e3"]),
        ) {
            let text = format!("{digits}{suffix}");
            let general = super::super::parse::parse_quantity(&text);
            if let Some(fast) = super::parse(&text) {
                let general = general.map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&fast, &general);
                prop_assert_eq!(fast.format(), general.format());
                prop_assert_eq!(fast.to_string(), general.to_string());
            }
        }
    }

    #[test]
    fn answers_the_spellings_recommenders_write() {
        for text in [
            "250m",
            "128Mi",
            "2",
            "1Gi",
            "0",
            "0Mi",
            "100k",
            "999999999999999999m",
        ] {
            assert!(super::parse(text).is_some(), "{text}");
        }
        for text in [
            "0.5",
            "-1",
            "01",
            "1e3",
            "1Pi",
            "1n",
            "Mi",
            "",
            "8Ei",
            "9999999999Ti",
        ] {
            assert!(super::parse(text).is_none(), "{text}");
        }
    }
}
