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

struct Done;

impl PendingWork for Done {
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

impl Work {
    pub fn new(inner: Box<dyn PendingWork>) -> Self {
        Work(inner)
    }
    /// A collective that already finished (CPU backend).
    pub fn completed() -> Self {
        Work(Box::new(Done))
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
