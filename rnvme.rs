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

/// The module and its parameters; `hooks` are the parameters only the test build has.
macro_rules! rnvme_module {
    ($($hooks:tt)*) => {
        module! {
            type: RnvmeModule,
            name: "rnvme",
            authors: ["The rnvme developers"],
            description: "NVMe host driver in Rust",
            license: "GPL v2",
            params: {
                admin_timeout: u32 {
                    default: 60,
                    description: "Timeout of admin commands in seconds (1-3600, default 60)",
                },
                io_timeout: u32 {
                    default: 30,
                    description: "Timeout of I/O commands in seconds (1-3600, default 30)",
                },
                io_queue_depth: u32 {
                    default: 1024,
                    description: "Entries per I/O queue (2-4096, capped by CAP.MQES; default 1024)",
                },
                sgl_threshold: u32 {
                    default: 32768,
                    description: "Use SGLs for transfers of this many bytes or more, when the controller supports them (0: never; default 32768)",
                },
                io_queues: u32 {
                    default: 0,
                    description: "Most I/O queue pairs per controller (0: one per CPU, the default)",
                },
                poll_queues: u32 {
                    default: 0,
                    description: "Polled I/O queues per controller, without interrupts, for io_uring IOPOLL (0-1024, capped by CPUs; default 0)",
                },
                multipath: bool {
                    default: true,
                    description: "A multipath head disk per namespace of a subsystem that may have several controllers, as the nvme driver's native multipath (default true)",
                },
                write_queues: u32 {
                    default: 0,
                    description: "I/O queues for writes and every other non-read command, besides one queue per CPU for reads (0-1024; 0: reads and writes share the queues, the default)",
                },
                $($hooks)*
            },
        }
    };
}

// The test build (`--cfg rnvme_test_hooks`, see `src/core/fault.rs`) has parameters that fail
// the probe at a given step and slow every probe down; the production build has neither.
#[cfg(rnvme_test_hooks)]
rnvme_module! {
    probe_fault_step: u32 {
        default: 0,
        description: "Testing: fail the probe at this step (1-14) to exercise its unwinding (0: never, the default)",
    },
    probe_delay_ms: u32 {
        default: 0,
        description: "Testing: each probe sleeps this long once its controller is enabled (0-60000 ms), to show probes running side by side (0: never, the default)",
    },
}
#[cfg(not(rnvme_test_hooks))]
rnvme_module! {}

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
