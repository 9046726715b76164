// SPDX-License-Identifier: GPL-2.0

//! Lets the kernel's print macros show the spec module's types.
//!
//! `pr_*!`/`dev_*!` format `{}` through `kernel::fmt::Display`, while `src/spec` (built on
//! the host too) can only implement `core::fmt::Display`; this forwards one to the other.

use crate::spec::{
    completion::Status,
    identify::{AsciiField, IdentifyError},
    quirks::QuirkParamError,
    regs::CapError,
    smart::Warnings,
    subsys::Nqn,
    zns::ZnsError,
};
use kernel::fmt::{Display, Formatter, Result};

macro_rules! forward_display {
    ($($ty:ty),* $(,)?) => {
        $(
            impl Display for $ty {
                fn fmt(&self, f: &mut Formatter<'_>) -> Result {
                    core::fmt::Display::fmt(self, f)
                }
            }
        )*
    };
}

forward_display!(Status, IdentifyError, CapError, Warnings, ZnsError, Nqn);

impl<const N: usize> Display for AsciiField<N> {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl Display for QuirkParamError<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        core::fmt::Display::fmt(self, f)
    }
}
