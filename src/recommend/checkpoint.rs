//! The exact (lossless) checkpoint of a [`super::DecayingHistogram`].
//!
//! Upstream's checkpoint (`histogram.go` `SaveToChekpoint`) rounds every
//! bucket to an integer out of `MaxCheckpointWeight` = 10000, so a restarted
//! upstream recommender does not continue with the numbers an uninterrupted
//! one would have. This one keeps the `f64` weights bit for bit (that
//! format is still available as [`super::vpa::VpaHistogramCheckpoint`]).
//!
//! JSON encoding (field names are short because there is one per key):
//!
//! ```json
//! {"ref":"2026-01-05T00:00:00Z","total":"AAAAAAAA8D8=","lo":14,"w":"mpmZmZmZuT8AAAAAAAAAAA=="}
//! ```
//!
//! - `ref`: the reference timestamp, RFC 3339 (fractional seconds when not
//!   whole; Go's zero time `0001-01-01T00:00:00Z` before the first sample).
//! - `total`: the total weight, the 8 little-endian bytes of the IEEE 754
//!   `f64`, base64 (standard alphabet, padded).
//! - `lo`: the bucket index of the first weight.
//! - `w`: the weights of buckets `lo, lo+1, ...`, each 8 little-endian
//!   bytes of its `f64`, concatenated, base64.
//!
//! The floats are bytes, not JSON numbers, so that no JSON parser (serde
//! JSON's default float parsing is not always correctly rounded) can change
//! their last bit; base64 is also shorter (10.7 characters a weight).

use base64::engine::general_purpose::STANDARD;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// See the module docs for the encoding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramCheckpoint {
    /// The reference timestamp.
    #[serde(rename = "ref", with = "rfc3339")]
    pub reference: Timestamp,
    /// The total weight.
    #[serde(rename = "total", with = "f64_base64")]
    pub total_weight: f64,
    /// The bucket of `weights[0]`.
    #[serde(rename = "lo")]
    pub first_bucket: u32,
    /// Consecutive bucket weights from `first_bucket`.
    #[serde(rename = "w", with = "f64s_base64")]
    pub weights: Vec<f64>,
}

/// A timestamp as an RFC 3339 string.
pub(crate) mod rfc3339 {
    use super::{Deserialize, Deserializer, Serializer, Timestamp};

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(t)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|e| serde::de::Error::custom(format!("timestamp {text:?}: {e}")))
    }
}

/// An optional timestamp as an RFC 3339 string or null.
pub(crate) mod rfc3339_option {
    use super::{Deserialize, Deserializer, Serializer, Timestamp};

    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.collect_str(t),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        text.parse()
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("timestamp {text:?}: {e}")))
    }
}

mod f64_base64 {
    use super::{Deserialize, Deserializer, Serializer, STANDARD};
    use base64::Engine as _;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v.to_le_bytes()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = STANDARD.decode(&text).map_err(serde::de::Error::custom)?;
        let bytes: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
            serde::de::Error::custom(format!("{} bytes, not the 8 of an f64", bytes.len()))
        })?;
        Ok(f64::from_le_bytes(bytes))
    }
}

mod f64s_base64 {
    use super::{Deserialize, Deserializer, Serializer, STANDARD};
    use base64::Engine as _;

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_le_bytes()).collect();
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = STANDARD.decode(&text).map_err(serde::de::Error::custom)?;
        if bytes.len() % 8 != 0 {
            return Err(serde::de::Error::custom(format!(
                "{} bytes, not a whole number of 8-byte f64s",
                bytes.len()
            )));
        }
        Ok(bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                f64::from_le_bytes(b)
            })
            .collect())
    }
}
