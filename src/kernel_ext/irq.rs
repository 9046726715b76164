// SPDX-License-Identifier: GPL-2.0

//! PCI interrupt vectors and their handlers, owned together.
//!
//! The `kernel` crate of 7.3 has `pci::Device::alloc_irq_vectors` and `irq::Registration`,
//! but a registration borrows the vector allocation, which a driver cannot store next to it
//! in its device data, and there is no affinity spreading across CPUs. [`IrqSet`] owns both
//! the allocation and the handlers registered on it, frees every handler before the vectors
//! (so no handler can outlive its vector), and spreads the queue vectors over the CPUs
//! (`PCI_IRQ_AFFINITY`) as the C driver does.

use super::pci_dev_raw;
use core::ffi::c_void;
use kernel::{
    bindings,
    device::Bound,
    irq::{Handler, IrqReturn},
    pci::{self, IrqType},
    prelude::*,
    str::CString,
};

/// The name of an interrupt mechanism, for the log. Upstream candidate: `Display` for
/// `pci::IrqType`.
pub(crate) fn irq_type_name(t: IrqType) -> &'static str {
    match t {
        IrqType::MsiX => "MSI-X",
        IrqType::Msi => "MSI",
        IrqType::Intx => "INTx",
    }
}

/// One registered handler. Boxed so its address, given to `request_irq` as the cookie,
/// stays stable.
struct Slot<T> {
    irq: u32,
    /// `request_irq` keeps a pointer to the name for `/proc/interrupts`.
    name: CString,
    handler: T,
}

/// A PCI interrupt vector allocation and the handlers registered on its vectors. Upstream
/// candidate.
///
/// Several handlers may share a vector (all are requested with `IRQF_SHARED`, as
/// `pci_request_irq` does): with a single vector, the admin queue and the I/O queues share it.
///
/// # Invariants
///
/// - `pdev` has `count` vectors allocated by `pci_alloc_irq_vectors*`, freed in `drop`.
/// - Every entry of `slots` is registered with `request_irq` for `slot.irq` with the box's
///   address as cookie, and is freed with `free_irq` before the box is dropped.
pub(crate) struct IrqSet<'b, T: Handler> {
    pdev: &'b pci::Device<Bound>,
    count: u32,
    kind: IrqType,
    slots: KVec<Pin<KBox<Slot<T>>>>,
}

impl<'b, T: Handler> IrqSet<'b, T> {
    /// Allocates between `min` and `max` vectors, MSI-X if the device has it, else MSI, else
    /// INTx (`PCI_IRQ_ALL_TYPES`, as the C driver; `pci::IrqTypes` keeps its flags private).
    /// Upstream candidate.
    ///
    /// With `spread` set, vectors after the first `pre` are spread over the CPUs and
    /// managed by the kernel (each follows its CPUs through hotplug); the first `pre` (the
    /// admin queue's) stay unmanaged.
    pub(crate) fn alloc(
        pdev: &'b pci::Device<Bound>,
        min: u32,
        max: u32,
        spread: Option<u32>,
    ) -> Result<Self> {
        let dev = pci_dev_raw(pdev);
        let ret = match spread {
            Some(pre) => {
                // SAFETY: All-zero is a valid `irq_affinity` (no sets, no callback).
                let mut affd: bindings::irq_affinity = unsafe { core::mem::zeroed() };
                affd.pre_vectors = pre;
                // SAFETY: `dev` is a bound PCI device (from `pdev`), `affd` outlives the
                // call, which copies what it needs.
                unsafe {
                    bindings::pci_alloc_irq_vectors_affinity(
                        dev,
                        min,
                        max,
                        bindings::PCI_IRQ_ALL_TYPES | bindings::PCI_IRQ_AFFINITY,
                        &mut affd,
                    )
                }
            }
            // SAFETY: `dev` is a bound PCI device; a null affinity descriptor is allowed.
            None => unsafe {
                bindings::pci_alloc_irq_vectors_affinity(
                    dev,
                    min,
                    max,
                    bindings::PCI_IRQ_ALL_TYPES,
                    core::ptr::null_mut(),
                )
            },
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        let count = ret as u32;
        // SAFETY: `dev` is a valid, bound `pci_dev`; reading its flag bits races with nothing
        // (only this driver changes them, from probe and remove).
        let (msix, msi) = unsafe { ((*dev).msix_enabled(), (*dev).msi_enabled()) };
        let kind = match (msix != 0, msi != 0) {
            (true, _) => IrqType::MsiX,
            (false, true) => IrqType::Msi,
            _ => IrqType::Intx,
        };
        // INVARIANT: `count` vectors were allocated for `pdev`; no handler yet.
        Ok(Self {
            pdev,
            count,
            kind,
            slots: KVec::new(),
        })
    }

    /// The mechanism the PCI core picked. Upstream candidate.
    pub(crate) fn kind(&self) -> IrqType {
        self.kind
    }

    /// Linux IRQ number of `vector`.
    fn irq_of(&self, vector: u32) -> Result<u32> {
        if vector >= self.count {
            return Err(EINVAL);
        }
        // SAFETY: `pdev` is bound and `vector` is below the allocated count.
        let irq = unsafe { bindings::pci_irq_vector(pci_dev_raw(self.pdev), vector) };
        if irq < 0 {
            return Err(Error::from_errno(irq));
        }
        Ok(irq as u32)
    }

    /// Number of vectors allocated. Upstream candidate.
    pub(crate) fn len(&self) -> u32 {
        self.count
    }

    /// Registers `handler` on `vector`, named `name` in `/proc/interrupts`. Upstream candidate.
    pub(crate) fn request(&mut self, vector: u32, name: CString, handler: T) -> Result {
        let irq = self.irq_of(vector)?;
        // Reserve the list entry first, so nothing can fail after `request_irq`.
        self.slots.reserve(1, GFP_KERNEL)?;
        let slot = KBox::pin(Slot { irq, name, handler }, GFP_KERNEL)?;
        let cookie = core::ptr::from_ref::<Slot<T>>(&slot)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `irq` belongs to this device; `handle_irq::<T>` matches the cookie type;
        // `cookie` and the name stay valid until `free_irq` in `free_all`/`drop`
        // (invariant).
        let ret = unsafe {
            bindings::request_threaded_irq(
                irq,
                Some(handle_irq::<T>),
                None,
                bindings::IRQF_SHARED as usize,
                slot.name.as_char_ptr(),
                cookie,
            )
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        // Capacity was reserved above, so this cannot fail; if it did, unregister again
        // rather than drop a registered handler.
        // INVARIANT: the slot is registered for `irq` with its address as cookie.
        if let Err(e) = self.slots.push_within_capacity(slot) {
            // SAFETY: registered just above with this cookie; freed once, here.
            unsafe { bindings::free_irq(irq, cookie) };
            drop(e);
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Unregisters every handler, waiting for running ones to return. The vectors stay.
    /// Upstream candidate.
    pub(crate) fn free_all(&mut self) {
        while let Some(slot) = self.slots.pop() {
            let cookie = core::ptr::from_ref::<Slot<T>>(&slot)
                .cast_mut()
                .cast::<c_void>();
            // SAFETY: `slot` was registered for `slot.irq` with this cookie (invariant) and
            // is freed exactly once, as it was just removed from the list; `free_irq` waits
            // for running handlers, after which the box may be dropped.
            unsafe { bindings::free_irq(slot.irq, cookie) };
        }
    }
}

impl<T: Handler> Drop for IrqSet<'_, T> {
    fn drop(&mut self) {
        self.free_all();
        // SAFETY: vectors were allocated in `alloc` (invariant) and no handler is left.
        unsafe { bindings::pci_free_irq_vectors(pci_dev_raw(self.pdev)) };
    }
}

/// The C entry point for every [`IrqSet`] handler.
///
/// # Safety
///
/// Only registered by [`IrqSet::request`], with `cookie` pointing at a live `Slot<T>`.
unsafe extern "C" fn handle_irq<T: Handler>(
    _irq: i32,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: `cookie` points at a `Slot<T>` that lives until `free_irq` returns (invariant
    // of `IrqSet`), and handlers only get shared references.
    let slot = unsafe { &*cookie.cast_const().cast::<Slot<T>>() };
    let ret = match slot.handler.handle() {
        IrqReturn::None => bindings::irqreturn::IRQ_NONE,
        IrqReturn::Handled => bindings::irqreturn::IRQ_HANDLED,
    };
    bindings::irqreturn_t(ret.0)
}
