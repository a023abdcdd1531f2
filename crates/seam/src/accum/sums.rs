//! [`Accumulator`]: a step's gradient sums across micro-batches, parameter by parameter.
//! A micro-batch hands its gradients over when its backward is done ([`Accumulator::add`]),
//! or, for the parameters a stage can sum itself, during it: a stage whose weight
//! gradient is a GEMM writes `(sum + gᵀx)·s` into the sum in its epilogue
//! ([`Accumulator::target`], [`Accumulator::put`]), and no pass over that parameter is left.

#[cfg(test)]
use super::accumulate;
use super::{own_f32, sum_many, Job};
use crate::error::{ModelError, Result};
use crate::Grads;
use candle_core::Tensor;

/// A step's gradients across micro-batches: per parameter, the first gradient as it came,
/// then an f32 sum of its own (the first two summed into a new buffer in one pass, each
/// later one added in place, or summed in place by the stage that computes it).
#[derive(Default)]
pub struct Accumulator {
    slots: Vec<Slot>,
    /// The scale of the micro-batch whose backward may sum in place ([`Self::lend`]).
    lent: Option<Option<f64>>,
    /// Parameters summed in place since the last [`Self::add`].
    placed: Vec<usize>,
}

#[derive(Default)]
enum Slot {
    #[default]
    Empty,
    /// One micro-batch's gradient, as it came (any float dtype, not ours to write).
    One(Tensor),
    /// An f32 sum, a buffer of its own.
    Sum(Tensor),
}

/// Where a stage sums parameter `i`'s gradient g in place: it writes `(sum + g)·scale` into
/// `sum` (f32, contiguous, the parameter's shape), or `g·scale` into a new f32 buffer where
/// `sum` is `None`, and hands the result to [`Accumulator::put`].
pub struct Target {
    pub sum: Option<Tensor>,
    pub scale: f64,
}

impl Accumulator {
    /// Opens the sums to the backward of a micro-batch that [`Self::add`] will end with the
    /// same `scale` (1/k on the last of k): its stages may sum in place.
    pub fn lend(&mut self, scale: Option<f64>) {
        self.lent = Some(scale);
    }

    /// Where parameter `i`'s gradient may be summed in place, if it may: only while lent,
    /// and not where its one gradient so far is held as it came.
    pub fn target(&self, i: usize) -> Option<Target> {
        let scale = self.lent?.unwrap_or(1.0);
        match self.slots.get(i) {
            None | Some(Slot::Empty) => Some(Target { sum: None, scale }),
            Some(Slot::Sum(a)) => Some(Target {
                sum: Some(a.clone()),
                scale,
            }),
            Some(Slot::One(_)) => None,
        }
    }

    /// Takes parameter `i`'s sum as a stage wrote it for [`Self::target`].
    pub fn put(&mut self, i: usize, sum: Tensor) -> Result<()> {
        if self.lent.is_none() {
            return Err(ModelError::Config(format!(
                "accumulate: parameter {i} was summed in place outside a lent micro-batch"
            )));
        }
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, Slot::default);
        }
        self.slots[i] = Slot::Sum(sum);
        self.placed.push(i);
        Ok(())
    }

    /// Adds one micro-batch's gradients (any float dtype) and multiplies the sums by
    /// `scale` if given (1/k on the last of k micro-batches); ends a lent micro-batch.
    pub fn add(&mut self, grads: Grads, scale: Option<f64>) -> Result<()> {
        if let Some(lent) = self.lent.take() {
            if lent != scale {
                return Err(ModelError::Config(format!(
                    "accumulate: a micro-batch lent the sums at scale {lent:?} ended at {scale:?}"
                )));
            }
        }
        let n = self.slots.len().max(grads.len());
        self.slots.resize_with(n, Slot::default);
        let mut placed = vec![false; n];
        for i in std::mem::take(&mut self.placed) {
            placed[i] = true;
        }
        let mut grads = grads.into_iter();
        // The sums of a gradient into a held one go together (sum_many), then back.
        let (mut jobs, mut at) = (Vec::new(), Vec::new());
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let g = grads.next().flatten();
            *slot = match (std::mem::take(slot), g) {
                (s, None) if placed[i] => s,
                (_, Some(_)) if placed[i] => {
                    return Err(ModelError::Config(format!(
                        "accumulate: parameter {i} was summed in place and returned as well"
                    )))
                }
                (Slot::Empty, None) => Slot::Empty,
                (Slot::Empty, Some(g)) | (Slot::One(g), None) => match scale {
                    None => Slot::One(g),
                    Some(_) => Slot::Sum(own_f32(&g, scale)?),
                },
                (Slot::One(a), Some(g)) => {
                    jobs.push(Job::New { a, g });
                    at.push(i);
                    Slot::Empty
                }
                (Slot::Sum(sum), Some(g)) => {
                    jobs.push(Job::InPlace { sum, g });
                    at.push(i);
                    Slot::Empty
                }
                (Slot::Sum(a), None) => Slot::Sum(match scale {
                    Some(k) => a.affine(k, 0.0)?,
                    None => a,
                }),
            };
        }
        for (i, sum) in at.into_iter().zip(sum_many(jobs, scale)?) {
            self.slots[i] = Slot::Sum(sum);
        }
        Ok(())
    }

    /// Whether nothing has been added since the last [`Self::take`].
    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Empty))
    }

    /// The f32 sums, buffers of their own (empty when nothing was added), leaving the
    /// accumulator empty.
    pub fn take(&mut self) -> Result<Grads> {
        self.lent = None;
        self.placed.clear();
        if self.is_empty() {
            self.slots.clear();
            return Ok(Grads::new());
        }
        std::mem::take(&mut self.slots)
            .into_iter()
            .map(|s| match s {
                Slot::Empty => Ok(None),
                Slot::One(g) => own_f32(&g, None).map(Some),
                Slot::Sum(a) => Ok(Some(a)),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn sums_written_in_place_are_kept_and_the_rest_added() {
        let d = Device::Cpu;
        let g = Tensor::new(&[1f32, 2.0], &d).unwrap();
        let mut acc = Accumulator::default();
        // Micro-batch 1: parameter 0 summed in place (new buffer), 1 returned.
        acc.lend(None);
        let t = acc.target(0).unwrap();
        assert!(t.sum.is_none());
        acc.put(0, own_f32(&g, None).unwrap()).unwrap();
        acc.add(vec![None, Some(g.clone())], None).unwrap();
        // Micro-batch 2 (the last of 2): 0 in place into its sum, 1 held as it came.
        acc.lend(Some(0.5));
        let t = acc.target(0).unwrap();
        let sum = t.sum.unwrap();
        accumulate(&sum, &g, Some(t.scale)).unwrap();
        acc.put(0, sum).unwrap();
        assert!(acc.target(1).is_none(), "its gradient is held as it came");
        acc.add(vec![None, Some(g.clone())], Some(0.5)).unwrap();
        let got = acc.take().unwrap();
        for p in &got {
            assert_eq!(p.as_ref().unwrap().to_vec1::<f32>().unwrap(), [1.0, 2.0]);
        }
        assert_eq!(g.to_vec1::<f32>().unwrap(), [1.0, 2.0]);
    }

    #[test]
    fn a_gradient_both_placed_and_returned_or_a_scale_that_changed_is_refused() {
        let g = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        let mut acc = Accumulator::default();
        acc.lend(None);
        acc.put(0, g.clone()).unwrap();
        let e = acc
            .add(vec![Some(g.clone())], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("parameter 0"), "{e}");
        let mut acc = Accumulator::default();
        acc.lend(None);
        let e = acc.add(vec![Some(g)], Some(0.5)).unwrap_err().to_string();
        assert!(e.contains("scale"), "{e}");
        assert!(Accumulator::default().target(0).is_none(), "not lent");
    }
}
