//! The shared library.
pub mod plan;
