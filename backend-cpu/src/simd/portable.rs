//! [`Lanes`] in plain Rust: eight `f32` in an array, each operation lane by lane with the
//! scalar operation that matches the AVX2 instruction bit for bit (`f32::mul_add` for FMA).

use super::kernels::{self, Projection, Recurrence, State};
use super::{Arith, Lanes, Pair, SingleTile};

/// Eight lanes in an array.
#[derive(Clone, Copy)]
pub(crate) struct P8([f32; 8]);

impl P8 {
    #[inline(always)]
    fn map(self, f: impl Fn(f32) -> f32) -> Self {
        P8(self.0.map(f))
    }

    #[inline(always)]
    fn zip(self, b: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        let mut out = self.0;
        for (o, &y) in out.iter_mut().zip(&b.0) {
            *o = f(*o, y);
        }
        P8(out)
    }
}

const SIGN: u32 = 0x8000_0000;

impl Arith for P8 {
    #[inline(always)]
    fn splat(v: f32) -> Self {
        P8([v; 8])
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        self.zip(b, |x, y| x + y)
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        self.zip(b, |x, y| x - y)
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        self.zip(b, |x, y| x * y)
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        self.zip(b, |x, y| x / y)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        let mut out = self.0;
        for ((o, &y), &z) in out.iter_mut().zip(&b.0).zip(&c.0) {
            *o = o.mul_add(y, z);
        }
        P8(out)
    }
    #[inline(always)]
    fn max_x86(self, b: Self) -> Self {
        self.zip(b, |x, y| if x > y { x } else { y })
    }
    #[inline(always)]
    fn min_x86(self, b: Self) -> Self {
        self.zip(b, |x, y| if x < y { x } else { y })
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        self.map(f32::round_ties_even)
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        self.map(|n| f32::from_bits(((n as i32 + 127) as u32) << 23))
    }
    #[inline(always)]
    fn neg(self) -> Self {
        self.map(|x| f32::from_bits(x.to_bits() ^ SIGN))
    }
}

impl Lanes for P8 {
    #[inline(always)]
    fn load(src: &[f32; 8]) -> Self {
        P8(*src)
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32; 8]) {
        *dst = self.0;
    }
}

/// [`kernels::project`] with [`P8`].
pub(super) fn project(args: &Projection<'_>, out: &mut [f32], panel: &mut Vec<f32>) {
    kernels::project::<P8, Pair<P8>, 6, 1>(args, out, panel);
}

/// [`kernels::recurrence`] with [`P8`].
pub(super) fn recurrence(args: &Recurrence<'_>, state: State<'_>) {
    kernels::recurrence::<Pair<P8>, 6, 1, 4, 2, 1>(args, state, SingleTile::Strips128);
}

/// The cell and exponential functions with [`P8`] (tests).
#[cfg(test)]
pub(super) fn eval_math(x: &[[f32; 16]; 5]) -> [[f32; 16]; 4] {
    kernels::eval_math::<Pair<P8>>(x)
}

/// [`kernels::project_tiled`] on [`P8`] pairs: the AVX-512F kernels' tiling (any variant),
/// testable on any host (tests).
#[cfg(test)]
pub(crate) fn project_zmm_tiles(
    tiles: super::Tiles,
    args: &Projection<'_>,
    out: &mut [f32],
    panel: &mut Vec<f32>,
) {
    kernels::project_tiled::<P8, Pair<P8>>(tiles.project, args, out, panel);
}

/// [`kernels::recurrence_tiled`] on [`P8`] pairs (tests).
#[cfg(test)]
pub(crate) fn recurrence_zmm_tiles(tiles: super::Tiles, args: &Recurrence<'_>, state: State<'_>) {
    kernels::recurrence_tiled::<Pair<P8>>(tiles, args, state);
}

/// `simd::recurrence_fused` with [`P8`] pairs and the 512-bit build's tiles (tests): the fused
/// kernel where [`kernels::fused_applies`], else the recurrence then the projection.
#[cfg(test)]
pub(crate) fn recurrence_fused_zmm_tiles(
    tiles: super::Tiles,
    args: &Recurrence<'_>,
    state: State<'_>,
    fused: kernels::Fused<'_>,
) {
    if tiles.single.fuses() && kernels::fused_applies(args, &fused) {
        kernels::recurrence_fused_tiled::<Pair<P8>>(tiles.single, args, state, fused);
    } else {
        recurrence_zmm_tiles(tiles, args, state);
        project_zmm_tiles(tiles, &fused.next, fused.out, &mut Vec::new());
    }
}
