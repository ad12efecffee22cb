//! A Node as the balloon decision reads it: its allocatable and the usable
//! size asked for in its annotations.

use super::{
    CpuMemory, Resource, USABLE_CPU_ANNOTATION, USABLE_FRACTION_ANNOTATION,
    USABLE_MEMORY_ANNOTATION,
};
use crate::quantity::Quantity;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

/// Why a Node could not be read; the message names the node and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Node {node}: {reason}")]
pub struct NodeError {
    /// The node's name, or `<no name>`.
    pub node: String,
    /// What is wrong, naming the field and quoting the value.
    pub reason: String,
}

/// A fraction in (0, 1], exact to 10^-9: `0.25` is a quarter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fraction {
    nanos: u64,
}

const NANOS: u64 = 1_000_000_000;

impl Fraction {
    /// Parses `0.25`, `1`, `.5`, `1.0`.
    ///
    /// # Errors
    /// Anything but a plain decimal above 0 and at most 1 with at most nine
    /// decimals, quoting the text and saying which of the two it is not.
    pub fn parse(text: &str) -> Result<Fraction, String> {
        let wrong = || {
            format!(
                "{text:?} is not a fraction written as a plain decimal with at most nine decimals \
                 in (0, 1], such as 0.25"
            )
        };
        let (whole, decimals) = text.split_once('.').unwrap_or((text, ""));
        let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
        if !digits(whole) || !digits(decimals) || decimals.len() > 9 {
            return Err(wrong());
        }
        if whole.is_empty() && decimals.is_empty() {
            return Err(wrong());
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| wrong())?
        };
        let padded = format!("{decimals:0<9}");
        let part: u64 = padded.parse().map_err(|_| wrong())?;
        let nanos = whole
            .checked_mul(NANOS)
            .and_then(|w| w.checked_add(part))
            .ok_or_else(wrong)?;
        if nanos == 0 || nanos > NANOS {
            return Err(format!(
                "{text:?} is not in (0, 1]: a usable fraction is above 0 and at most 1"
            ));
        }
        Ok(Fraction { nanos })
    }

    /// `q * self`, rounded down to a millicore (cpu) or a byte (memory).
    #[must_use]
    pub fn of(self, q: &Quantity, r: Resource) -> Quantity {
        let scale = |v: i64| -> i64 {
            let scaled = i128::from(v) * i128::from(self.nanos) / i128::from(NANOS);
            i64::try_from(scaled).unwrap_or(i64::MAX)
        };
        match r {
            Resource::Cpu => Quantity::from_milli(scale(q.milli_value()), r.format()),
            Resource::Memory => Quantity::from_i64(scale(q.value()), r.format()),
        }
    }
}

impl std::fmt::Display for Fraction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos == NANOS {
            return f.write_str("1");
        }
        let decimals = format!("{:09}", self.nanos);
        write!(f, "0.{}", decimals.trim_end_matches('0'))
    }
}

/// The usable size asked for a node. An absolute size wins over the
/// fraction for its resource; a resource with neither keeps its balloon.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredSize {
    /// `nodescope.dev/usable-cpu`.
    pub cpu: Option<Quantity>,
    /// `nodescope.dev/usable-memory`.
    pub memory: Option<Quantity>,
    /// `nodescope.dev/usable-fraction`.
    pub fraction: Option<Fraction>,
}

impl DesiredSize {
    /// Whether nothing is asked.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none() && self.memory.is_none() && self.fraction.is_none()
    }

    /// The usable amount of `r` out of `allocatable`, if one is asked.
    #[must_use]
    pub fn usable(&self, r: Resource, allocatable: &Quantity) -> Option<Quantity> {
        let absolute = match r {
            Resource::Cpu => self.cpu.clone(),
            Resource::Memory => self.memory.clone(),
        };
        absolute.or_else(|| self.fraction.map(|f| f.of(allocatable, r)))
    }
}

/// One Node: its name, allocatable cpu and memory, and its desired size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BalloonNode {
    /// `metadata.name`.
    pub name: String,
    /// `status.allocatable` cpu and memory (zero when absent).
    pub allocatable: CpuMemory,
    /// From the annotations; `Err` names the annotation that is wrong.
    pub desired: Result<DesiredSize, String>,
}

impl BalloonNode {
    /// Reads a Node object (listed, watched or loaded from a file).
    ///
    /// # Errors
    /// No name, or an allocatable that is not a quantity. A wrong
    /// annotation is not an error here: the node is kept and its plan says
    /// what is wrong.
    pub fn from_value(node: &Value) -> Result<BalloonNode, NodeError> {
        let meta = node.get("metadata");
        let listed = node.pointer("/status/allocatable");
        BalloonNode::from_parts(
            meta.and_then(|m| m.get("name")).and_then(Value::as_str),
            |r| listed.and_then(|a| a.get(r)).and_then(Value::as_str),
            |key| {
                meta.and_then(|m| m.get("annotations"))
                    .and_then(|a| a.get(key))
                    .and_then(Value::as_str)
            },
        )
    }

    /// Reads a watched Node: the same reading as [`BalloonNode::from_value`]
    /// without turning the whole object into JSON first.
    ///
    /// # Errors
    /// As [`BalloonNode::from_value`].
    pub fn from_node(node: &Node) -> Result<BalloonNode, NodeError> {
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let annotations = node.metadata.annotations.as_ref();
        BalloonNode::from_parts(
            node.metadata.name.as_deref(),
            |r| allocatable.and_then(|a| a.get(r)).map(|q| q.0.as_str()),
            |key| annotations.and_then(|a| a.get(key)).map(String::as_str),
        )
    }

    /// The one reading of a Node: its name, its allocatable by resource
    /// name, its annotations by key.
    fn from_parts<'a>(
        name: Option<&str>,
        allocatable: impl Fn(&str) -> Option<&'a str>,
        annotation: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<BalloonNode, NodeError> {
        let Some(name) = name else {
            return Err(NodeError {
                node: "<no name>".into(),
                reason: "metadata.name is required".into(),
            });
        };
        let fail = |reason: String| NodeError {
            node: name.to_owned(),
            reason,
        };
        let mut held = CpuMemory::default();
        for r in Resource::ALL {
            if let Some(text) = allocatable(r.as_str()) {
                let q = Quantity::parse(text)
                    .map_err(|e| fail(format!("status.allocatable.{}: {e}", r.as_str())))?;
                held.set(r, q);
            }
        }
        Ok(BalloonNode {
            name: name.to_owned(),
            allocatable: held,
            desired: desired_size(annotation),
        })
    }
}

/// Reads the three annotations through `annotation`.
///
/// # Errors
/// The first annotation that is not what it should be, quoting it.
pub fn desired_size<'a>(
    annotation: impl Fn(&str) -> Option<&'a str>,
) -> Result<DesiredSize, String> {
    let quantity = |key: &str, r: Resource| -> Result<Option<Quantity>, String> {
        annotation(key)
            .map(|text| {
                Quantity::parse(text)
                    .map_err(|e| e.to_string())
                    .and_then(|q| check_usable_quantity(r, &q).map(|()| q))
                    .map_err(|e| format!("annotation {key}: {e}"))
            })
            .transpose()
    };
    let fraction = annotation(USABLE_FRACTION_ANNOTATION)
        .map(|text| {
            Fraction::parse(text)
                .map_err(|e| format!("annotation {USABLE_FRACTION_ANNOTATION}: {e}"))
        })
        .transpose()?;
    Ok(DesiredSize {
        cpu: quantity(USABLE_CPU_ANNOTATION, Resource::Cpu)?,
        memory: quantity(USABLE_MEMORY_ANNOTATION, Resource::Memory)?,
        fraction,
    })
}

/// A usable size on its own: above zero (a node whose workloads may use
/// nothing is a drained node, not a balloon's job) and within what the
/// controller's arithmetic holds (millicores and bytes in 64 bits).
///
/// # Errors
/// A negative, zero or overflowing quantity, in words naming the resource.
pub fn check_usable_quantity(r: Resource, q: &Quantity) -> Result<(), String> {
    let name = r.as_str();
    if q.sign() < 0 {
        return Err(format!("usable {name} {q} is negative"));
    }
    if q.is_zero() {
        return Err(format!(
            "usable {name} 0 leaves workloads nothing: a usable size is above 0"
        ));
    }
    let largest = match r {
        Resource::Cpu => Quantity::from_milli(i64::MAX, r.format()),
        Resource::Memory => Quantity::from_i64(i64::MAX, r.format()),
    };
    if q > &largest {
        return Err(format!(
            "usable {name} {q} is too large: at most {largest} can be held"
        ));
    }
    Ok(())
}

/// Why a usable size is wrong for a node: the resource, whether the size
/// was a fraction, and the words, so that each caller can name where the
/// size came from (an annotation, a flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct UsableError {
    /// The resource whose size is wrong.
    pub resource: Resource,
    /// Whether it came from the fraction rather than an absolute size.
    pub fraction: bool,
    /// What is wrong, with both numbers.
    pub reason: String,
}

impl UsableError {
    /// The Node annotation that asked for the size.
    #[must_use]
    pub fn annotation(&self) -> &'static str {
        match (self.fraction, self.resource) {
            (true, _) => USABLE_FRACTION_ANNOTATION,
            (false, Resource::Cpu) => USABLE_CPU_ANNOTATION,
            (false, Resource::Memory) => USABLE_MEMORY_ANNOTATION,
        }
    }
}

/// The one check of a node's usable size, used by `balloon set` before it
/// writes, by `balloon status` and by the controller: each absolute size
/// as [`check_usable_quantity`] and at most the node's allocatable, and a
/// fraction that leaves some of a non-empty allocatable usable.
///
/// # Errors
/// The first resource whose size is wrong, with both numbers.
pub fn check_usable(desired: &DesiredSize, allocatable: &CpuMemory) -> Result<(), UsableError> {
    for r in Resource::ALL {
        let name = r.as_str();
        let held = allocatable.get(r);
        let absolute = match r {
            Resource::Cpu => desired.cpu.as_ref(),
            Resource::Memory => desired.memory.as_ref(),
        };
        let wrong = |fraction: bool, reason: String| UsableError {
            resource: r,
            fraction,
            reason,
        };
        if let Some(q) = absolute {
            check_usable_quantity(r, q).map_err(|e| wrong(false, e))?;
            if q > held {
                return Err(wrong(
                    false,
                    format!("usable {name} {q} is more than the node's allocatable {name} {held}"),
                ));
            }
        } else if let Some(f) = desired.fraction {
            if held.sign() > 0 && f.of(held, r).sign() <= 0 {
                return Err(wrong(
                    true,
                    format!(
                        "usable fraction {f} of allocatable {name} {held} rounds to 0: \
                         workloads would have nothing"
                    ),
                ));
            }
        }
    }
    Ok(())
}
