//! Handles for collectives in flight.

use crate::error::Result;

/// What a backend returns for an asynchronous collective.
pub trait PendingWork: Send {
    /// Order the caller's compute stream after the collective (GPU); the host may return
    /// before the collective ends. A CPU backend has nothing left to do.
    fn wait(self: Box<Self>) -> Result<()>;
    /// Block the host until the collective has finished, or fail on timeout.
    fn synchronize(self: Box<Self>) -> Result<()>;
    /// Whether the collective has finished (never blocks).
    fn is_completed(&self) -> Result<bool>;
}

/// A collective in flight. Holds what the collective reads and writes alive until it ends.
#[must_use = "a Work must be waited on before its buffers are used"]
pub struct Work(Box<dyn PendingWork>);

/// Finished, holding what it was given until it is dropped.
struct Done<T>(#[allow(dead_code)] T);

impl<T: Send> PendingWork for Done<T> {
    fn wait(self: Box<Self>) -> Result<()> {
        Ok(())
    }
    fn synchronize(self: Box<Self>) -> Result<()> {
        Ok(())
    }
    fn is_completed(&self) -> Result<bool> {
        Ok(true)
    }
}

/// Several collectives as one (the default coalesced collectives).
struct All(Vec<Work>);

impl PendingWork for All {
    fn wait(self: Box<Self>) -> Result<()> {
        self.0.into_iter().try_for_each(Work::wait)
    }
    fn synchronize(self: Box<Self>) -> Result<()> {
        self.0.into_iter().try_for_each(Work::synchronize)
    }
    fn is_completed(&self) -> Result<bool> {
        for w in &self.0 {
            if !w.is_completed()? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Work {
    /// One handle for several collectives: waiting on it waits on each, in order.
    pub fn all(works: Vec<Work>) -> Self {
        Work(Box::new(All(works)))
    }
    pub fn new(inner: Box<dyn PendingWork>) -> Self {
        Work(inner)
    }
    /// A collective that already finished (CPU backend).
    pub fn completed() -> Self {
        Work(Box::new(Done(())))
    }
    /// Finished, but holding `keep` until waited for: buffers that queued GPU work still
    /// reads (placed after the handles of that work in [`Work::all`]).
    pub fn completed_holding<T: Send + 'static>(keep: T) -> Self {
        Work(Box::new(Done(keep)))
    }
    pub fn wait(self) -> Result<()> {
        self.0.wait()
    }
    pub fn synchronize(self) -> Result<()> {
        self.0.synchronize()
    }
    pub fn is_completed(&self) -> Result<bool> {
        self.0.is_completed()
    }
}
