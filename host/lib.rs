// SPDX-License-Identifier: GPL-2.0

//! Compiles the driver's `src/spec` module (which uses only `core`) for the host, so its
//! parsing and decoding logic runs under `cargo test`.

#![allow(dead_code)]

#[path = "../src/spec/mod.rs"]
pub(crate) mod spec;

#[cfg(test)]
mod tests;
