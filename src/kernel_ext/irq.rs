// SPDX-License-Identifier: GPL-2.0

//! PCI interrupt vectors and their handlers, owned together.
//!
//! The `kernel` crate of 7.3 has `pci::Device::alloc_irq_vectors` and `irq::Registration`,
//! but a registration borrows the vector allocation, which a driver cannot store next to it
//! in its device data, and there is no affinity spreading across CPUs. [`IrqSet`] owns both
//! the allocation and the handlers registered on it, frees every handler before the vectors
//! (so no handler can outlive its vector), and spreads the queue vectors over the CPUs
//! (`PCI_IRQ_AFFINITY`) as the C driver does.
//!
//! [`IrqCell`] is the completion queue's state without a lock on the interrupt path: the
//! handler that owns it uses it directly, as C's `nvme_irq` uses its queue, and everyone
//! else first disables that interrupt (C's `nvme_poll_irqdisable`) or finds it unowned.

use super::{
    pci_dev_raw,
    spinlock::{new_spinlock_irqsave, SpinLockIrqSave},
};
use core::{
    cell::UnsafeCell,
    ffi::c_void,
    hint::spin_loop,
    marker::PhantomData,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};
use kernel::{
    bindings,
    device::Bound,
    irq::IrqReturn,
    new_mutex,
    pci::{self, IrqType},
    prelude::*,
    str::CString,
    sync::Mutex,
};

/// One registration of an [`IrqSet`]: its Linux interrupt number and its cookie (the
/// address of its slot, unique among live registrations). Lent to handlers only for the
/// length of [`VectorHandler::bind`], so none can keep it past the registration.
pub(crate) struct IrqKey {
    irq: u32,
    cookie: usize,
}

/// Proof that the code holding a reference runs as the handler of one registration.
///
/// # Invariants
///
/// Only [`handle_irq`] creates one, on its stack, for the registration it calls; a handler
/// gets it by reference for the duration of the call, so it cannot keep it, and (neither
/// `Send` nor `Sync`) cannot hand it to another CPU.
pub(crate) struct IrqContext {
    cookie: usize,
    _not_send: PhantomData<*mut ()>,
}

/// A handler registered in an [`IrqSet`]. Upstream candidate: `irq::Handler` with a context
/// argument.
pub(crate) trait VectorHandler: Sync {
    /// Runs in hard interrupt context (or the interrupt's thread when the kernel forces
    /// threading); a registration's handler never runs twice at once.
    fn handle(&self, ctx: &IrqContext) -> IrqReturn;

    /// Called with the registration's key before the handler is requested, and with `None`
    /// before it is freed (also when requesting fails): the handler binds the
    /// [`IrqCell`]s it owns with [`IrqCell::bind`].
    fn bind(&self, _key: Option<&IrqKey>) {}
}

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
pub(crate) struct IrqSet<'b, T: VectorHandler> {
    pdev: &'b pci::Device<Bound>,
    count: u32,
    kind: IrqType,
    slots: KVec<Pin<KBox<Slot<T>>>>,
}

/// How an [`IrqSet`] spreads its vectors over the CPUs (`struct irq_affinity`). Upstream
/// candidate.
pub(crate) struct Spread<'a> {
    /// Vectors before the spread ones, left unmanaged (the admin queue's).
    pub(crate) pre: u32,
    /// Given how many vectors are spread, their split into at most two sets, each spread
    /// over every CPU on its own (`calc_sets`: blk-mq's default and read queue maps); a
    /// second set of 0 makes one set. `None`: one set.
    pub(crate) sets: Option<&'a dyn Fn(u32) -> [u32; 2]>,
}

/// `irq_affinity::calc_sets` for a [`Spread`] with sets.
///
/// # Safety
///
/// `affd.priv_` points to the `&dyn Fn(u32) -> [u32; 2]` of a [`Spread`], live for the call.
unsafe extern "C" fn calc_sets(affd: *mut bindings::irq_affinity, nvecs: u32) {
    // SAFETY: The caller guarantees `priv_` (see above); `affd` is the descriptor
    // `IrqSet::alloc` passed, exclusively ours during the call.
    unsafe {
        let split = &*(*affd).priv_.cast::<&dyn Fn(u32) -> [u32; 2]>();
        let [first, second] = split(nvecs);
        (*affd).set_size[0] = first;
        (*affd).set_size[1] = second;
        (*affd).nr_sets = if second > 0 { 2 } else { 1 };
    }
}

/// The interrupt types an [`IrqSet`] may use, as `pci::IrqTypes` (whose flags are private in
/// 7.3, so it cannot be passed on). Upstream candidate: `pci::IrqTypes::without`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IrqTypes(u32);

impl IrqTypes {
    /// MSI-X, MSI and INTx.
    pub(crate) const fn all() -> Self {
        Self(bindings::PCI_IRQ_ALL_TYPES)
    }

    /// The same without MSI (for devices whose MSI is broken).
    pub(crate) const fn without_msi(self) -> Self {
        Self(self.0 & !bindings::PCI_IRQ_MSI)
    }
}

impl<'b, T: VectorHandler> IrqSet<'b, T> {
    /// Allocates between `min` and `max` vectors of `types`: MSI-X if the device has it, else
    /// MSI, else INTx (as the C driver). Upstream candidate.
    ///
    /// With `spread`, vectors after the first `pre` are spread over the CPUs (in sets, if it
    /// has them) and managed by the kernel (each follows its CPUs through hotplug); the first
    /// `pre` (the admin queue's) stay unmanaged.
    pub(crate) fn alloc(
        pdev: &'b pci::Device<Bound>,
        min: u32,
        max: u32,
        spread: Option<Spread<'_>>,
        types: IrqTypes,
    ) -> Result<Self> {
        let dev = pci_dev_raw(pdev);
        let ret = match spread {
            Some(spread) => {
                // SAFETY: All-zero is a valid `irq_affinity` (no sets, no callback).
                let mut affd: bindings::irq_affinity = unsafe { core::mem::zeroed() };
                affd.pre_vectors = spread.pre;
                if let Some(split) = spread.sets.as_ref() {
                    affd.calc_sets = Some(calc_sets);
                    affd.priv_ = core::ptr::from_ref(split).cast_mut().cast();
                }
                // SAFETY: `dev` is a bound PCI device (from `pdev`), `affd` outlives the
                // call, which copies what it needs; `priv_`, if set, points to `split`,
                // which outlives the call too, as `calc_sets` requires.
                unsafe {
                    bindings::pci_alloc_irq_vectors_affinity(
                        dev,
                        min,
                        max,
                        types.0 | bindings::PCI_IRQ_AFFINITY,
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
                    types.0,
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
        // Bound once requested: requesting the first handler of an interrupt starts it
        // (its disable depth back to zero), which would undo a `disable_irq` of a cell
        // bound before. Until then the handler finds its cells unowned and leaves them.
        slot.handler.bind(Some(&IrqKey {
            irq,
            cookie: cookie as usize,
        }));
        // Capacity was reserved above, so this cannot fail; if it did, unregister again
        // rather than drop a registered handler.
        // INVARIANT: the slot is registered for `irq` with its address as cookie.
        if let Err(e) = self.slots.push_within_capacity(slot) {
            e.0.handler.bind(None);
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
            // Before `free_irq`: unbinding waits for a running handler and keeps it off the
            // cells it owned from then on.
            slot.handler.bind(None);
            // SAFETY: `slot` was registered for `slot.irq` with this cookie (invariant) and
            // is freed exactly once, as it was just removed from the list; `free_irq` waits
            // for running handlers, after which the box may be dropped.
            unsafe { bindings::free_irq(slot.irq, cookie) };
        }
    }
}

impl<T: VectorHandler> Drop for IrqSet<'_, T> {
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
unsafe extern "C" fn handle_irq<T: VectorHandler>(
    _irq: i32,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: `cookie` points at a `Slot<T>` that lives until `free_irq` returns (invariant
    // of `IrqSet`), and handlers only get shared references.
    let slot = unsafe { &*cookie.cast_const().cast::<Slot<T>>() };
    // INVARIANT: this is the handler of the registration with this cookie.
    let ctx = IrqContext {
        cookie: cookie as usize,
        _not_send: PhantomData,
    };
    let ret = match slot.handler.handle(&ctx) {
        IrqReturn::None => bindings::irqreturn::IRQ_NONE,
        IrqReturn::Handled => bindings::irqreturn::IRQ_HANDLED,
    };
    bindings::irqreturn_t(ret.0)
}

/// Data one interrupt handler uses without a lock, and everyone else with its interrupt
/// disabled: what C's NVMe driver does with a completion queue (`nvme_irq` takes no lock;
/// `nvme_poll_irqdisable` disables the vector first, so no interrupt is lost while another
/// context reaps). Upstream candidate.
///
/// Unowned (no handler bound, e.g. a polled queue), the cell is a plain spinlock.
///
/// A disabled interrupt's handler can still run once: the kernel's poll of a line it
/// disabled as spurious ignores the disable depth (`try_one_irq` with `force`). So the data
/// is also guarded by `busy`, a flag the handler only tries (no spinning in an interrupt)
/// and the others wait for, which costs the handler one atomic exchange instead of a lock.
///
/// # Invariants
///
/// - `data` is only accessed with `busy` set by the accessor, and then only by the handler
///   of registration `owner` (seen after setting `busy`), or by a holder of `lock` (with
///   `owner` zero, or with the owner's interrupt disabled and `binding` held);
/// - `owner` changes only with `binding`, `lock` and `busy` held, the old owner's interrupt
///   disabled; it is non-zero only while its registration is requested (bound after
///   `request_irq`, unbound before `free_irq`), and `binding` then holds its number.
#[pin_data]
pub(crate) struct IrqCell<T> {
    owner: AtomicUsize,
    busy: AtomicBool,
    #[pin]
    binding: Mutex<Option<u32>>,
    #[pin]
    lock: SpinLockIrqSave<()>,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only reached by one context at a time (invariant), so the cell may be
// shared between threads whenever `T` may be sent.
unsafe impl<T: Send> Sync for IrqCell<T> {}

/// Disables interrupt `irq` and waits for its running handlers (`disable_irq`); enables it
/// again when dropped. Calls nest, as the kernel counts them.
struct Disabled(u32);

impl Disabled {
    fn new(irq: u32) -> Self {
        // SAFETY: `irq` is the number of a requested registration (the caller holds the
        // cell's `binding`, set only while the registration is requested). May sleep: the
        // callers are in process context.
        unsafe { bindings::disable_irq(irq) };
        Self(irq)
    }
}

impl Drop for Disabled {
    fn drop(&mut self) {
        // SAFETY: paired with the `disable_irq` of `new`, on the same interrupt, still
        // requested (the caller still holds `binding`).
        unsafe { bindings::enable_irq(self.0) };
    }
}

/// Holds an [`IrqCell`]'s `busy` flag; clears it when dropped.
struct Busy<'a>(&'a AtomicBool);

impl<'a> Busy<'a> {
    /// Sets `flag` if it is clear.
    #[inline(always)]
    fn try_set(flag: &'a AtomicBool) -> Option<Self> {
        (!flag.swap(true, Ordering::Acquire)).then_some(Self(flag))
    }

    /// Sets `flag`, waiting for its holder (at most one handler call) to clear it.
    fn set(flag: &'a AtomicBool) -> Self {
        loop {
            if let Some(b) = Self::try_set(flag) {
                return b;
            }
            spin_loop();
        }
    }
}

impl Drop for Busy<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<T> IrqCell<T> {
    /// A cell holding `data`, owned by no handler.
    pub(crate) fn new(data: T) -> impl PinInit<Self> {
        // INVARIANT: unowned, no binding, not busy.
        pin_init!(Self {
            owner: AtomicUsize::new(0),
            busy: AtomicBool::new(false),
            binding <- new_mutex!(None),
            lock <- new_spinlock_irqsave!(()),
            data: UnsafeCell::new(data),
        })
    }

    /// Gives the cell to the handler of registration `key`, or (`None`) takes it back,
    /// waiting for that handler to return if it is running. From the handler's
    /// [`VectorHandler::bind`]; may sleep.
    pub(crate) fn bind(&self, key: Option<&IrqKey>) {
        let mut binding = self.binding.lock();
        // A handler bound now stops first.
        let _off = binding.map(Disabled::new);
        let _guard = self.lock.lock();
        let _busy = Busy::set(&self.busy);
        // INVARIANT: changed with `binding`, `lock` and `busy` held and the old owner's
        // interrupt disabled; `IrqSet` binds only requested registrations and unbinds them
        // before freeing them.
        self.owner
            .store(key.map_or(0, |k| k.cookie), Ordering::Relaxed);
        *binding = key.map(|k| k.irq);
    }

    /// Runs `f` on the data if `ctx` is the handler that owns the cell; `None` otherwise
    /// (also when another context holds the data: only possible while it has this
    /// interrupt disabled, which replays the interrupt when enabled again).
    #[inline(always)]
    pub(crate) fn with_handler<R>(
        &self,
        ctx: &IrqContext,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let _busy = Busy::try_set(&self.busy)?;
        if self.owner.load(Ordering::Relaxed) != ctx.cookie {
            return None;
        }
        // SAFETY: `busy` is set by us and `ctx` proves this is the owner's handler
        // (invariants of `Self` and `IrqContext`).
        Some(f(unsafe { &mut *self.data.get() }))
    }

    /// Runs `f` on the data if no handler owns the cell; `None` otherwise. Any context.
    pub(crate) fn with_unowned<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let _guard = self.lock.lock();
        if self.owner.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let _busy = Busy::set(&self.busy);
        // SAFETY: `lock` and `busy` are held and no handler owns the cell (invariant).
        Some(f(unsafe { &mut *self.data.get() }))
    }

    /// Runs `f` on the data, with the owning handler's interrupt disabled if there is one.
    /// Process context only: may sleep.
    pub(crate) fn with_irq_disabled<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let binding = self.binding.lock();
        let _off = binding.map(Disabled::new);
        let _guard = self.lock.lock();
        let _busy = Busy::set(&self.busy);
        // SAFETY: `lock` and `busy` are held, the owner's interrupt (if any) is disabled
        // and `binding` is held (invariant).
        f(unsafe { &mut *self.data.get() })
    }
}
