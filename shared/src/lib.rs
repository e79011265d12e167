//! The shared library.
