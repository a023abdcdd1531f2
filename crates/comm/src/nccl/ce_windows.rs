//! Which window a copy-engine reduce-scatter launch takes (`super::ce_reduce`): the first of
//! its shape that no open launch holds, else a new one. Launches waited for during the
//! backward (ZeRO-2's and FSDP's, a few stages after they went) take the windows of those
//! already closed, so a step registers only as many windows of a shape as it has launches
//! of that shape open at once; launches all open until the backward ends (ZeRO-1's) take
//! one each. Every rank launches and closes in the same order, so each picks the window its
//! peers pick, and a captured step the eager step's.

/// The windows of one communicator: each one's shape (its buffers' chunks, in elements),
/// whether a launch holds it, and what it is (`T`: its registered span and layout).
pub(super) struct Windows<T> {
    all: Vec<(Vec<u64>, bool, T)>,
}

impl<T> Default for Windows<T> {
    fn default() -> Self {
        Self { all: Vec::new() }
    }
}

impl<T> Windows<T> {
    /// Opens the first window of shape `chunks` that no launch holds: its index, or `None`
    /// where there is none (then [`Self::add`] one).
    pub(super) fn open(&mut self, chunks: &[u64]) -> Option<usize> {
        let i = (self.all.iter()).position(|(c, held, _)| !held && c.as_slice() == chunks)?;
        self.all[i].1 = true;
        Some(i)
    }

    /// A new window of shape `chunks`, opened: its index.
    pub(super) fn add(&mut self, chunks: Vec<u64>, t: T) -> usize {
        self.all.push((chunks, true, t));
        self.all.len() - 1
    }

    /// Window `i` is free again: its launch was waited for (or dropped).
    pub(super) fn close(&mut self, i: usize) {
        if let Some(w) = self.all.get_mut(i) {
            w.1 = false;
        }
    }

    pub(super) fn get(&self, i: usize) -> Option<&T> {
        self.all.get(i).map(|w| &w.2)
    }

    /// How many windows of shape `chunks` there are.
    pub(super) fn of_shape(&self, chunks: &[u64]) -> usize {
        self.all.iter().filter(|w| w.0.as_slice() == chunks).count()
    }
}

#[cfg(test)]
mod tests {
    use super::Windows;

    /// Opens a window of `shape` as a launch would: a free one, else a new one.
    fn take(w: &mut Windows<u32>, shape: &[u64]) -> usize {
        match w.open(shape) {
            Some(i) => i,
            None => w.add(shape.to_vec(), 0),
        }
    }

    #[test]
    fn launches_open_together_take_one_window_each() {
        let mut w = Windows::default();
        let got: Vec<usize> = (0..3).map(|_| take(&mut w, &[8, 4])).collect();
        assert_eq!(got, [0, 1, 2]);
        (0..3).for_each(|i| w.close(i));
        // The next step: the same windows, in the same order.
        let again: Vec<usize> = (0..3).map(|_| take(&mut w, &[8, 4])).collect();
        assert_eq!(again, [0, 1, 2]);
        assert_eq!(w.of_shape(&[8, 4]), 3);
    }

    #[test]
    fn a_launch_waited_for_leaves_its_window_to_the_next() {
        let mut w = Windows::default();
        // ZeRO-2: each launch collected two launches later.
        let mut order = Vec::new();
        for k in 0..8 {
            order.push(take(&mut w, &[16]));
            if k >= 2 {
                w.close(order[k - 2]);
            }
        }
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(w.of_shape(&[16]), 3, "as many as are open at once");
    }

    #[test]
    fn shapes_never_share_a_window() {
        let mut w = Windows::default();
        assert_eq!(take(&mut w, &[16]), 0);
        w.close(0);
        assert_eq!(
            take(&mut w, &[16, 2]),
            1,
            "another shape: a window of its own"
        );
        assert_eq!(take(&mut w, &[16]), 0);
        assert_eq!((w.of_shape(&[16]), w.of_shape(&[16, 2])), (1, 1));
    }
}
