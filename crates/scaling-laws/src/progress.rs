//! Progress of the long stages (approach 3's starts, the bootstrap) on stderr.
//!
//! On a terminal: an indicatif bar. Otherwise (a log file, a pipe, a test): nothing for a
//! stage that ends within [`QUIET_FOR`], then a line every [`LINE_EVERY`] and one at the end,
//! so long batch fits show progress and short ones (and test output) stay clean.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A stage shorter than this prints no progress lines.
pub const QUIET_FOR: Duration = Duration::from_secs(2);
/// Interval between progress lines.
pub const LINE_EVERY: Duration = Duration::from_secs(5);

/// Where progress lines go when stderr is not a terminal.
struct Lines {
    sink: Box<dyn Write + Send>,
    quiet_for: Duration,
    every: Duration,
    last: Option<Instant>,
}

/// Progress of one stage of `total` steps; [`Stage::tick`] may be called from any thread.
pub struct Stage {
    name: String,
    total: u64,
    done: AtomicU64,
    start: Instant,
    bar: Option<ProgressBar>,
    lines: Option<Mutex<Lines>>,
}

impl Stage {
    /// A stage reporting to stderr (bar on a terminal, else lines); silent if not `enabled`.
    pub fn new(name: &str, total: u64, enabled: bool) -> Stage {
        let (mut bar, mut lines) = (None, None);
        if enabled && std::io::stderr().is_terminal() {
            let style =
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
            let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            pb.set_style(style);
            pb.set_message(name.to_string());
            bar = Some(pb);
        } else if enabled {
            lines = Some(Box::new(std::io::stderr()) as Box<dyn Write + Send>);
        }
        let mut stage = Stage::with_sink(name, total, lines, QUIET_FOR, LINE_EVERY);
        stage.bar = bar;
        stage
    }

    /// A stage writing progress lines to `sink` (if any) after `quiet_for`, every `every`.
    pub fn with_sink(
        name: &str,
        total: u64,
        sink: Option<Box<dyn Write + Send>>,
        quiet_for: Duration,
        every: Duration,
    ) -> Stage {
        Stage {
            name: name.to_string(),
            total,
            done: AtomicU64::new(0),
            start: Instant::now(),
            bar: None,
            lines: sink.map(|sink| {
                Mutex::new(Lines {
                    sink,
                    quiet_for,
                    every,
                    last: None,
                })
            }),
        }
    }

    /// One step done.
    pub fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        let Some(lines) = &self.lines else { return };
        let Ok(mut l) = lines.lock() else { return };
        let now = Instant::now();
        let elapsed = now - self.start;
        let due = match l.last {
            None => elapsed >= l.quiet_for,
            Some(t) => now - t >= l.every,
        };
        if due && done < self.total {
            l.last = Some(now);
            let left = elapsed.as_secs_f64() * (self.total - done) as f64 / done as f64;
            let line = format!(
                "{}: {done}/{} ({:.0}%), {:.1} s elapsed, ~{:.0} s left",
                self.name,
                self.total,
                100.0 * done as f64 / self.total.max(1) as f64,
                elapsed.as_secs_f64(),
                left
            );
            let _ = writeln!(l.sink, "{line}");
        }
    }

    /// Ends the stage: clears the bar; after progress lines, says how long it took.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Some(Ok(mut l)) = self.lines.as_ref().map(Mutex::lock) {
            if l.last.is_some() {
                let line = format!(
                    "{}: {}/{} done in {:.1} s",
                    self.name,
                    self.done.load(Ordering::Relaxed),
                    self.total,
                    self.start.elapsed().as_secs_f64()
                );
                let _ = writeln!(l.sink, "{line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn text(b: &Buf) -> String {
        String::from_utf8(b.0.lock().expect("lock").clone()).expect("utf8")
    }

    #[test]
    fn long_stage_prints_lines_short_stage_prints_nothing() {
        let buf = Buf::default();
        let sink = Some(Box::new(buf.clone()) as Box<dyn Write + Send>);
        let long = Stage::with_sink("bootstrap", 4, sink, Duration::ZERO, Duration::ZERO);
        for _ in 0..4 {
            long.tick();
        }
        long.finish();
        let out = text(&buf);
        assert!(out.contains("bootstrap: 1/4 (25%)"), "{out}");
        assert!(out.contains("bootstrap: 3/4 (75%)"), "{out}");
        assert!(out.contains("bootstrap: 4/4 done in"), "{out}");

        let quiet = Buf::default();
        let sink = Some(Box::new(quiet.clone()) as Box<dyn Write + Send>);
        // Quiet for an hour: no scheduler delay can make these four ticks late.
        let hour = Duration::from_secs(3600);
        let short = Stage::with_sink("bootstrap", 4, sink, hour, LINE_EVERY);
        for _ in 0..4 {
            short.tick();
        }
        short.finish();
        assert_eq!(text(&quiet), "");
    }
}
