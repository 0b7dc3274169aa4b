//! The rules' decisions on synthetic sessions and feature sets, checked
//! with their wording (the analysis crate returns data; the sentences are
//! made here).
mod rules;
mod writes;
