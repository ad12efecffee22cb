//! JSON at the edges of every decision: values borrowed from the input
//! ([`borrowed`]), objects with path-naming errors ([`object`]) and the
//! one-pass writer for responses and patches ([`write`]).

pub mod borrowed;
pub mod object;
pub mod write;
