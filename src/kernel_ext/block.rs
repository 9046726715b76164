// SPDX-License-Identifier: GPL-2.0

//! Block devices, as `kernel::block`: only its `mq` part is needed here.

pub(crate) mod mq;
