//! The operator's inputs, read offline: files, directories, kustomizations
//! and standard input ([`sources`]), parsed into documents that know where
//! they came from ([`parse`]). Every offline command reads through here.

pub mod parse;
pub mod sources;

pub use parse::{
    check_object, is_review, object_problem, parse, parse_in_pieces, InputError, Location,
    SourceDocument, STDIN,
};
