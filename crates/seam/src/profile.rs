//! Named points of a training step, for profilers. The model calls [`mark`] right after
//! each component has been queued (the label names the component that just ended, as a
//! `/`-separated path: `fwd/block/attn/softmax`); a profiler installs a hook for the
//! current thread ([`set_hook`]) that records what it measures there (CUDA events on the
//! compute stream, memory in use). Without a hook a mark is one thread-local read.
//! The fused kernels also mark themselves right before and after their launch
//! ([`mark_kernel_begin`], label `kb:<kernel>`; [`mark_kernel`], label `k:<kernel>`), so a
//! profiler can split a component into its kernels and the rest.

use std::cell::RefCell;

/// What a profiler runs at each mark.
pub type Hook = Box<dyn FnMut(&str)>;

thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Installs `hook` (or removes it with `None`) for this thread; returns the previous one.
pub fn set_hook(hook: Option<Hook>) -> Option<Hook> {
    HOOK.with(|c| std::mem::replace(&mut *c.borrow_mut(), hook))
}

/// Marks the end of component `label` (a no-op without a hook).
pub fn mark(label: &'static str) {
    HOOK.with(|c| {
        if let Some(h) = c.borrow_mut().as_mut() {
            h(label)
        }
    })
}

/// Marks the start of one launch of the fused kernel `name` (label `kb:<name>`): what was
/// queued since the last mark is not this kernel's.
pub fn mark_kernel_begin(name: &str) {
    HOOK.with(|c| {
        if let Some(h) = c.borrow_mut().as_mut() {
            h(&format!("kb:{name}"))
        }
    })
}

/// Marks the end of one launch of the fused kernel `name` (label `k:<name>`; the label is
/// only built when a hook is installed).
pub fn mark_kernel(name: &str) {
    HOOK.with(|c| {
        if let Some(h) = c.borrow_mut().as_mut() {
            h(&format!("k:{name}"))
        }
    })
}
