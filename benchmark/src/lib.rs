//! DLIO-compatible data generation and training emulation.
pub mod cli;
