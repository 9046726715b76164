// SPDX-License-Identifier: GPL-2.0

//! Module parameters: range checks at load time, so a bad value fails `insmod` with a
//! message that names the parameter instead of misbehaving later.

use crate::module_parameters as p;
use kernel::prelude::*;

/// Checks every parameter; logs each bad one and fails with `EINVAL` if any is.
pub(crate) fn validate() -> Result {
    let mut ok = true;
    let t = p::admin_timeout.value();
    if !(1..=3600).contains(&t) {
        pr_err!("rnvme: admin_timeout={t} is out of range (1-3600 seconds)\n");
        ok = false;
    }
    if ok {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// Admin command timeout in milliseconds.
pub(crate) fn admin_timeout_ms() -> u32 {
    p::admin_timeout.value() * 1000
}
