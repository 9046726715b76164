// SPDX-License-Identifier: GPL-2.0

//! Block devices, as `kernel::block`: its `mq` part, and bio-based (stacking) disks.

pub(crate) mod bio;
pub(crate) mod bio_disk;
pub(crate) mod disk;
pub(crate) mod mq;
