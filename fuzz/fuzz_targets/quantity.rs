//! The quantity parser and formatter: any text either fails to parse or
//! gives a quantity whose canonical text parses back to an equal quantity.
//! The text is a fixed point from the second print on: like apimachinery,
//! a BinarySI value that is not a whole multiple of 1024 prints as plain
//! digits ("812.5Ki" -> "832000"), which then parse as DecimalSI ("832k").
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::quantity::Quantity;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = Quantity::parse(text) else {
        return;
    };
    let printed = parsed.to_string();
    let reparsed = Quantity::parse(&printed)
        .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which does not parse: {e}"));
    assert_eq!(reparsed, parsed, "{text:?} -> {printed:?} changed value");
    let second = reparsed.to_string();
    let third = Quantity::parse(&second).expect("a canonical form parses");
    assert_eq!(third, parsed, "{text:?} -> {second:?} changed value");
    assert_eq!(
        third.to_string(),
        second,
        "{text:?}: {second:?} is not a fixed point"
    );
    // The JSON forms agree with the text form.
    let json = serde_json::to_string(&parsed).expect("serializes");
    let back: Quantity = serde_json::from_str(&json).expect("deserializes its own output");
    assert_eq!(back, parsed);
    // Accessors and arithmetic saturate or refuse, never panic.
    let _ = (parsed.milli_value(), parsed.value(), parsed.as_i64());
    let _ = parsed.as_approximate_f64();
    if let Some(sum) = parsed.checked_add(&reparsed) {
        let diff = sum.checked_sub(&parsed).expect("(a + a) - a fits");
        assert_eq!(diff, parsed, "(a + a) - a != a for {text:?}");
    }
    assert_eq!(parsed.cmp(&reparsed), std::cmp::Ordering::Equal);
});
