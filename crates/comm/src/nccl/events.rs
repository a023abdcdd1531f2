//! The event log behind [`super::NcclComm::start_timeline`]: timing-enabled CUDA events
//! around each collective on the communication stream and at each caller mark on the
//! compute stream, resolved against one origin event when the timeline is taken; and
//! `NcclComm`'s timeline methods (start, mark, take).

use crate::error::{CommError, Result};
use crate::timeline::{CollectiveSpan, Mark, Timeline};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

fn event(stream: &CudaStream) -> Result<CudaEvent> {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(|e| CommError::Cuda {
            call: "cuEventRecord",
            msg: format!("{e:?}"),
        })
}

pub(super) struct EventLog {
    origin: CudaEvent,
    marks: Vec<(String, CudaEvent)>,
    spans: Vec<(&'static str, usize, CudaEvent, CudaEvent)>,
}

impl EventLog {
    pub fn start(compute: &CudaStream) -> Result<Self> {
        Ok(Self {
            origin: event(compute)?,
            marks: Vec::new(),
            spans: Vec::new(),
        })
    }

    pub fn mark(&mut self, compute: &CudaStream, label: String) -> Result<()> {
        self.marks.push((label, event(compute)?));
        Ok(())
    }

    /// Start of a collective: recorded after the stream's wait on compute, so it is when
    /// the collective could actually begin.
    pub fn begin(stream: &CudaStream) -> Result<CudaEvent> {
        event(stream)
    }

    pub fn end(
        &mut self,
        stream: &CudaStream,
        op: &'static str,
        bytes: usize,
        start: CudaEvent,
    ) -> Result<()> {
        let end = event(stream)?;
        self.spans.push((op, bytes, start, end));
        Ok(())
    }

    /// Waits for every recorded event and converts it to milliseconds since the origin.
    pub fn resolve(self) -> Result<Timeline> {
        let at = |e: &CudaEvent| -> Result<f64> {
            self.origin
                .elapsed_ms(e)
                .map(f64::from)
                .map_err(|e| CommError::Cuda {
                    call: "cuEventElapsedTime",
                    msg: format!("{e:?}"),
                })
        };
        let mut t = Timeline::default();
        for (label, e) in &self.marks {
            t.marks.push(Mark {
                label: label.clone(),
                at_ms: at(e)?,
            });
        }
        for (op, bytes, s, e) in &self.spans {
            t.collectives.push(CollectiveSpan {
                op,
                bytes: *bytes,
                start_ms: at(s)?,
                end_ms: at(e)?,
            });
        }
        Ok(t)
    }
}

impl super::NcclComm {
    /// Starts recording a [`Timeline`]: from now on every collective's span on the
    /// communication stream, and every [`mark`](Self::mark) on the compute stream, in
    /// milliseconds since this call's point on the compute stream. Costs two events per
    /// collective; restarting discards what was recorded.
    pub fn start_timeline(&self) -> Result<()> {
        *self.log() = Some(EventLog::start(&self.compute)?);
        Ok(())
    }

    /// Records the point the compute stream has reached, labelled (no-op without a
    /// started timeline).
    pub fn mark(&self, label: impl Into<String>) -> Result<()> {
        match self.log().as_mut() {
            Some(log) => log.mark(&self.compute, label.into()),
            None => Ok(()),
        }
    }

    /// Stops recording and returns the timeline (waits for its events to complete).
    pub fn take_timeline(&self) -> Result<Timeline> {
        let log = self
            .log()
            .take()
            .ok_or_else(|| CommError::InvalidArgument {
                op: "take_timeline",
                rank: self.rank,
                msg: "no timeline was started (call start_timeline first)".into(),
            })?;
        log.resolve()
    }

    pub(super) fn log(&self) -> std::sync::MutexGuard<'_, Option<EventLog>> {
        self.timeline.lock().unwrap_or_else(|p| p.into_inner())
    }
}
