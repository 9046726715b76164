// SPDX-License-Identifier: GPL-2.0

//! rnvme: an NVMe driver in Rust.
//!
//! Crate root: the module list, the module and its parameters, the PCI driver registration.

#[path = "src/pci/admin.rs"]
mod admin;
#[path = "src/features/aen.rs"]
mod aen;
#[path = "src/features/blk.rs"]
mod blk;
#[path = "src/pci/cmb.rs"]
mod cmb;
#[path = "src/entry/ctrl.rs"]
mod ctrl;
#[path = "src/entry/driver.rs"]
mod driver;
#[path = "src/core/events.rs"]
mod events;
#[path = "src/core/fault.rs"]
mod fault;
#[path = "src/core/fmt.rs"]
mod fmt;
#[path = "src/pci/hw.rs"]
mod hw;
#[path = "src/features/hwmon.rs"]
mod hwmon;
#[path = "src/core/instance.rs"]
mod instance;
#[path = "src/features/ioctl.rs"]
mod ioctl;
#[path = "src/pci/ioq.rs"]
mod ioq;
#[path = "src/kernel_ext/mod.rs"]
mod kernel_ext;
#[path = "src/features/mpath/mod.rs"]
mod mpath;
#[path = "src/features/ns.rs"]
mod ns;
#[path = "src/features/ns_add.rs"]
mod ns_add;
#[path = "src/core/params.rs"]
mod params;
#[path = "src/features/passthru.rs"]
mod passthru;
#[path = "src/entry/power.rs"]
mod power;
#[path = "src/pci/queue.rs"]
mod queue;
#[path = "src/pci/queues.rs"]
mod queues;
#[path = "src/pci/regs.rs"]
mod regs;
#[path = "src/pci/reset.rs"]
mod reset;
#[path = "src/features/scan.rs"]
mod scan;
#[path = "src/features/shared.rs"]
mod shared;
#[path = "src/spec/mod.rs"]
mod spec;
#[path = "src/core/state.rs"]
mod state;
#[path = "src/core/stats.rs"]
mod stats;
#[path = "src/features/zns.rs"]
mod zns;

use kernel::prelude::*;

// The module; its parameters are in `src/core/params.rs` (shown in sysfs, as C's).
module! {
    type: RnvmeModule,
    name: "rnvme",
    authors: ["The rnvme developers"],
    description: "NVMe host driver in Rust",
    license: "GPL v2",
}

/// The module: validated parameters, then the PCI driver registration.
#[pin_data]
struct RnvmeModule {
    #[pin]
    _driver: kernel::driver::Registration<kernel_ext::pci_driver::Adapter<driver::RnvmeDriver>>,
}

impl kernel::InPlaceModule for RnvmeModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pin_init::pin_init_scope(move || {
            params::validate()?;
            mpath::init();
            Ok(try_pin_init!(Self {
                _driver <- kernel::driver::Registration::new(c"rnvme", module),
            }))
        })
    }
}
