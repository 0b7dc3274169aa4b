//! Test-only helpers shared by every test of the workspace (a dev-dependency
//! of `storprof` and `storprof-bench`, never of their libraries).
//!
//! Data flow: a test renders its output to a string and hands it to
//! [`golden::assert_golden`], which compares it with the checked-in golden
//! file (or writes the file, under the bless rules of [`golden::GoldenEnv`]);
//! fixture-driven tests declare one `#[test]` per fixture and prove with
//! [`fixtures::assert_fixture_dirs_declared`] that no fixture directory was
//! left out of their list.

pub mod fixtures;
pub mod golden;

pub use golden::assert_golden;
