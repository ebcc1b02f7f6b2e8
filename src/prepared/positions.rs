//! Resolved positions: negative indices and modes applied once, stored in the narrowest
//! type that holds them, with the dimensions along which they repeat kept once.

use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Slice};

use crate::call::Call;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::plan::Plan;
use crate::small::Small;

/// Resolved positions, of the indices' rank, with size 1 where they repeat, in the
/// narrowest type that holds every gathered axis's positions.
#[derive(Debug, Clone)]
pub(crate) enum Positions {
    U16(ArrayD<u16>),
    U32(ArrayD<u32>),
    Wide(ArrayD<usize>),
}

/// `$body` with `$p` bound to the stored positions, whatever their type.
macro_rules! with_positions {
    ($positions:expr, $p:ident => $body:expr) => {
        match $positions {
            Positions::U16($p) => $body,
            Positions::U32($p) => $body,
            Positions::Wide($p) => $body,
        }
    };
}

/// A type resolved positions are stored in.
pub(crate) trait Position: GatherIndex + PartialEq + Default {
    /// `i`, which the caller knows fits.
    fn from_position(i: usize) -> Self;
    /// The position.
    fn position(self) -> usize;
}

impl Position for u16 {
    fn from_position(i: usize) -> Self {
        i as u16
    }
    fn position(self) -> usize {
        self as usize
    }
}

impl Position for u32 {
    fn from_position(i: usize) -> Self {
        i as u32
    }
    fn position(self) -> usize {
        self as usize
    }
}

impl Position for usize {
    fn from_position(i: usize) -> Self {
        i
    }
    fn position(self) -> usize {
        self
    }
}

/// The stored `positions`, broadcast back to the indices' shape: the indices of the plan's
/// lowering.
pub(crate) fn broadcast_positions<'p, P: Position>(
    op: &'static str,
    indices_shape: &[usize],
    positions: &'p ArrayD<P>,
) -> Result<ArrayViewD<'p, P>, GatherError> {
    positions
        .broadcast(IxDyn(indices_shape))
        .ok_or_else(|| internal(op, "the stored positions do not broadcast to the indices"))
}

/// The resolved positions of the call's indices (of the caller's shape `shape`), with the
/// dimensions along which they repeat reduced to size 1. Values that are never read (an
/// empty output, no gathered axis) are stored as 0.
pub(crate) fn resolved<P: Position>(
    op: &'static str,
    call: &Call<'_, ndarray::ViewRepr<&()>, impl GatherIndex>,
    plan: &Plan,
    shape: &[usize],
) -> Result<ArrayD<P>, GatherError> {
    let len: usize = shape.iter().product();
    let mut values = if plan.out_len > 0 {
        call.resolve_all(plan, P::from_position)?
    } else {
        Vec::new()
    };
    values.resize(len, P::ZERO);
    let full = ArrayD::from_shape_vec(IxDyn(shape), values)
        .map_err(|_| internal(op, "the indices' length is not their shape's"))?;
    Ok(compact(full))
}

/// `full` with every dimension along which it repeats (each slice equal to the first)
/// reduced to size 1.
pub(crate) fn compact<P: Copy + PartialEq>(full: ArrayD<P>) -> ArrayD<P> {
    // Whether dimension `d` repeats, on the row-major values: in every block of the
    // dimensions up to `d`, each of its slices equals the first (slice comparisons, not
    // ndarray's axis iterators, which cost a tiny plan's build: PERFORMANCE.md#tiny-calls-store-forwarding).
    let repeats = |d: usize| {
        let (n, inner) = (full.shape()[d], full.shape()[d + 1..].iter().product::<usize>());
        let values = full.as_slice().unwrap_or_default();
        n > 1
            && inner > 0
            && values.len() == full.len()
            && values
                .chunks(n * inner)
                .all(|block| block.chunks(inner).skip(1).all(|s| s == &block[..inner]))
    };
    let repeated: Small<usize> = (0..full.ndim()).filter(|&d| repeats(d)).collect();
    if repeated.is_empty() {
        return full;
    }
    let mut view = full.view();
    for &d in &repeated {
        view.slice_axis_inplace(Axis(d), Slice::from(..1));
    }
    view.to_owned()
}
