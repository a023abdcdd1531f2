//! Element-wise reductions on raw buffers for the CPU backends, in each dtype's own
//! arithmetic: f32 and f64 natively, bf16 and f16 through f32 (rounded once per combine).
//! No f64 round trip, no intermediate vectors; the op is chosen outside the inner loops so
//! they vectorize. The order of the operands is fixed by the caller, so every rank that
//! computes the same element computes the same bits.

use crate::ReduceOp;
use candle_core::DType;
use half::{bf16, f16};

/// The arithmetic type a dtype is reduced in.
pub(crate) trait Acc: Copy + Send + Sync + 'static {
    const ZERO: Self;
    fn add(self, o: Self) -> Self;
    fn max_(self, o: Self) -> Self;
    fn min_(self, o: Self) -> Self;
    fn div_n(self, n: usize) -> Self;
}

macro_rules! acc {
    ($t:ty) => {
        impl Acc for $t {
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn max_(self, o: Self) -> Self {
                self.max(o)
            }
            #[inline(always)]
            fn min_(self, o: Self) -> Self {
                self.min(o)
            }
            #[inline(always)]
            fn div_n(self, n: usize) -> Self {
                self / n as $t
            }
        }
    };
}
acc!(f32);
acc!(f64);

/// A buffer element and its arithmetic type.
pub(crate) trait Elem: Copy + Send + Sync + 'static {
    type A: Acc;
    fn get(self) -> Self::A;
    fn put(a: Self::A) -> Self;
}

impl Elem for f32 {
    type A = f32;
    #[inline(always)]
    fn get(self) -> f32 {
        self
    }
    #[inline(always)]
    fn put(a: f32) -> Self {
        a
    }
}
impl Elem for f64 {
    type A = f64;
    #[inline(always)]
    fn get(self) -> f64 {
        self
    }
    #[inline(always)]
    fn put(a: f64) -> Self {
        a
    }
}
impl Elem for bf16 {
    type A = f32;
    #[inline(always)]
    fn get(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn put(a: f32) -> Self {
        bf16::from_f32(a)
    }
}
impl Elem for f16 {
    type A = f32;
    #[inline(always)]
    fn get(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn put(a: f32) -> Self {
        f16::from_f32(a)
    }
}

/// Calls `$body` with `$T` the element type of `$dtype` (one of the four accepted ones).
macro_rules! by_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::BF16 => {
                type $T = bf16;
                $body
            }
            DType::F16 => {
                type $T = f16;
                $body
            }
            // validate::check_dtype refuses every other dtype before a backend runs.
            other => unreachable!("reduce: dtype {other:?} passed validation"),
        }
    };
}

/// Calls `$body` with `$f` the combining closure of `$op` over accumulator type `$A`.
macro_rules! by_op {
    ($op:expr, $A:ty, $f:ident => $body:expr) => {
        match $op {
            ReduceOp::Sum | ReduceOp::Avg => {
                let $f = |a: $A, b: $A| a.add(b);
                $body
            }
            ReduceOp::Max => {
                let $f = |a: $A, b: $A| a.max_(b);
                $body
            }
            ReduceOp::Min => {
                let $f = |a: $A, b: $A| a.min_(b);
                $body
            }
        }
    };
}

/// Elements reduced per block: the block's accumulators stay in L1.
const BLOCK: usize = 2048;

/// # Safety
/// Every `srcs[k]` and `dsts[k]` points to at least `range.end` elements of `T`; no other
/// thread touches elements `range` of any of them meanwhile.
unsafe fn across<T: Elem>(
    srcs: &[*const T],
    dsts: &[*mut T],
    range: std::ops::Range<usize>,
    f: impl Fn(T::A, T::A) -> T::A,
    div: Option<usize>,
) {
    let mut acc = [T::A::ZERO; BLOCK];
    let mut i = range.start;
    while i < range.end {
        let len = BLOCK.min(range.end - i);
        let a = &mut acc[..len];
        let first = std::slice::from_raw_parts(srcs[0].add(i), len);
        a.iter_mut().zip(first).for_each(|(x, y)| *x = y.get());
        for s in &srcs[1..] {
            let s = std::slice::from_raw_parts(s.add(i), len);
            a.iter_mut().zip(s).for_each(|(x, y)| *x = f(*x, y.get()));
        }
        if let Some(n) = div {
            a.iter_mut().for_each(|x| *x = x.div_n(n));
        }
        for d in dsts {
            let d = std::slice::from_raw_parts_mut(d.add(i), len);
            d.iter_mut()
                .zip(a.iter())
                .for_each(|(y, x)| *y = T::put(*x));
        }
        i += len;
    }
}

/// Reduces elements `range` of every buffer in `srcs` (in that order) and writes the result
/// to elements `range` of every buffer in `dsts` (buffers may be the same). `Avg` divides by
/// `world` before rounding.
///
/// # Safety
/// Each pointer addresses at least `range.end` elements of `dtype`, aligned for it, and no
/// other thread reads or writes elements `range` of any of the buffers meanwhile.
pub(crate) unsafe fn reduce_across(
    dtype: DType,
    srcs: &[usize],
    dsts: &[usize],
    range: std::ops::Range<usize>,
    op: ReduceOp,
    world: usize,
) {
    if range.is_empty() || srcs.is_empty() {
        return;
    }
    let div = (op == ReduceOp::Avg).then_some(world);
    by_dtype!(dtype, T => {
        let s: Vec<*const T> = srcs.iter().map(|&p| p as *const T).collect();
        let d: Vec<*mut T> = dsts.iter().map(|&p| p as *mut T).collect();
        by_op!(op, <T as Elem>::A, f => across::<T>(&s, &d, range, f, div))
    })
}

/// Views bytes as elements, refusing misaligned or ragged input instead of reading it wrong.
fn typed<T>(b: &[u8]) -> &[T] {
    // SAFETY: plain numbers, any bit pattern valid; prefix/suffix checked empty below.
    let (pre, mid, post) = unsafe { b.align_to::<T>() };
    assert!(
        pre.is_empty() && post.is_empty(),
        "reduce: misaligned buffer"
    );
    mid
}

fn typed_mut<T>(b: &mut [u8]) -> &mut [T] {
    // SAFETY: as in `typed`.
    let (pre, mid, post) = unsafe { b.align_to_mut::<T>() };
    assert!(
        pre.is_empty() && post.is_empty(),
        "reduce: misaligned buffer"
    );
    mid
}

/// `dst = dst ⊕ src` element-wise (the ring's step); with `last` and `Avg`, divided by
/// `world` before rounding. Both byte slices hold whole, aligned elements of `dtype`.
pub(crate) fn accumulate(
    dtype: DType,
    dst: &mut [u8],
    src: &[u8],
    op: ReduceOp,
    world: usize,
    last: bool,
) {
    let div = (last && op == ReduceOp::Avg).then_some(world);
    by_dtype!(dtype, T => {
        let d = typed_mut::<T>(dst);
        let s = typed::<T>(src);
        by_op!(op, <T as Elem>::A, f => match div {
            None => d.iter_mut().zip(s).for_each(|(x, y)| *x = T::put(f(x.get(), y.get()))),
            Some(n) => d
                .iter_mut()
                .zip(s)
                .for_each(|(x, y)| *x = T::put(f(x.get(), y.get()).div_n(n))),
        })
    })
}

/// A heap buffer aligned for every accepted dtype (8 bytes), for bytes off the wire.
pub(crate) struct Aligned(Vec<u64>, usize);

impl Aligned {
    pub fn new(bytes: usize) -> Self {
        Aligned(vec![0u64; bytes.div_ceil(8)], bytes)
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: u64s viewed as their bytes, within the allocation.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.1) }
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; any bytes are valid u64s.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulate_each_dtype_and_op() {
        let mut d = Aligned::new(8);
        d.bytes_mut()
            .copy_from_slice(&[1f32.to_ne_bytes(), 5f32.to_ne_bytes()].concat());
        let mut s = Aligned::new(8);
        s.bytes_mut()
            .copy_from_slice(&[3f32.to_ne_bytes(), 2f32.to_ne_bytes()].concat());
        accumulate(DType::F32, d.bytes_mut(), s.bytes(), ReduceOp::Avg, 2, true);
        assert_eq!(typed::<f32>(d.bytes()), &[2.0, 3.5]);
        accumulate(DType::F32, d.bytes_mut(), s.bytes(), ReduceOp::Max, 2, true);
        assert_eq!(typed::<f32>(d.bytes()), &[3.0, 3.5]);
        let mut h = [bf16::from_f32(1.5), bf16::from_f32(-2.0)];
        let g = [bf16::from_f32(0.25), bf16::from_f32(-4.0)];
        let p = [h.as_mut_ptr() as usize];
        let q = [h.as_ptr() as usize, g.as_ptr() as usize];
        // SAFETY: both buffers hold 2 bf16 elements; nothing else touches them.
        unsafe { reduce_across(DType::BF16, &q, &p, 0..2, ReduceOp::Min, 2) };
        assert_eq!(h, [bf16::from_f32(0.25), bf16::from_f32(-4.0)]);
    }
}
