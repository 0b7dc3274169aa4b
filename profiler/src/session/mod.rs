//! The session directory: its data model ([`model`]) and loading it back.
pub mod load;
pub mod model;
