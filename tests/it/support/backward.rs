//! The plan's backward written out (decisions 34-35): each kept position, in increasing
//! order, adds its coefficient times its segment's gradient row into the row it read.
//! Shared by the property test and the fuzz target.

use ndarray::{ArrayD, Axis, Zip};
use ndarray_gather::{PoolElement, Pooling};

use super::pooling::{Seg, segment_of};

/// What a backward is made of: each position's row (`None`: skipped) and segment, and the
/// segment count.
pub struct Walk {
    pub rows: Vec<Option<usize>>,
    pub segs: Vec<Option<usize>>,
    pub count: usize,
}

impl Walk {
    /// The walk of a plan of `shape` along `axis` with indices `idx` (skipping `skip`) and
    /// segments `seg`, and the axis; `None` where the plan would refuse it.
    pub fn of(
        shape: &[usize],
        axis: isize,
        idx: &[i64],
        seg: &Seg,
        skip: Option<i64>,
    ) -> Option<(Walk, usize)> {
        let r = shape.len() as isize;
        if axis < -r || axis >= r {
            return None;
        }
        let axis = axis.rem_euclid(r) as usize;
        let len = shape[axis] as i64;
        let (segs, count) = segment_of(seg, idx.len()).ok()?;
        let rows = idx
            .iter()
            .map(|&v| match v {
                _ if skip == Some(v) => Ok(None),
                v if (-len..len).contains(&v) => Ok(Some(v.rem_euclid(len) as usize)),
                _ => Err(()),
            })
            .collect::<Result<_, _>>()
            .ok()?;
        Some((Walk { rows, segs, count }, axis))
    }

    /// The kept positions in increasing order: position, row, segment.
    pub fn kept(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.rows.len()).filter_map(|p| Some((p, self.rows[p]?, self.segs[p]?)))
    }

    /// Decision 34's `c_p` for every position (`None`: one, a plain add), from the
    /// forward's divisors: the segment's kept positions' count or weight sums.
    pub fn coefficients<A: PoolElement + Copy>(&self, pooling: Pooling, w: Option<&[A]>) -> Vec<Option<A>> {
        let (mut n, mut sw, mut sw2) = (
            vec![0usize; self.count],
            vec![A::zero(); self.count],
            vec![A::zero(); self.count],
        );
        for (p, _, s) in self.kept() {
            n[s] += 1;
            if let Some(w) = w {
                sw[s] += w[p];
                sw2[s] += w[p] * w[p];
            }
        }
        let integral = A::from_f64(0.5).is_none_or(|h| h.is_zero());
        let mut c = vec![None; self.rows.len()];
        for (p, _, s) in self.kept() {
            let wp = w.map(|w| w[p]);
            let d = match (pooling, w) {
                (Pooling::Sum, _) => {
                    c[p] = wp;
                    continue;
                }
                (Pooling::Mean, Some(_)) => Some(sw[s]),
                (Pooling::Mean, None) => A::from_usize(n[s]),
                (_, Some(_)) => A::from_f64(sw2[s].to_f64().unwrap().sqrt()),
                (_, None) => A::from_f64((n[s] as f64).sqrt()),
            };
            c[p] = Some(match d {
                Some(d) if !(integral && d.is_zero()) => wp.unwrap_or_else(A::one) / d,
                _ => A::zero(),
            });
        }
        c
    }
}

/// `grad[idx[p]] += c_p * g[s]` for each kept position in increasing order, along `axis`
/// (with `first`, a row's first contribution is written, not added).
pub fn add_rows<A: PoolElement + Copy>(
    grad: &mut ArrayD<A>,
    g: &ArrayD<A>,
    axis: usize,
    walk: &Walk,
    c: &[Option<A>],
    rows: impl Fn(usize) -> usize,
    first: bool,
) {
    let mut seen = std::collections::HashSet::new();
    for (p, r, s) in walk.kept() {
        let fresh = first && seen.insert(r);
        let mut dst = grad.index_axis_mut(Axis(axis), rows(r));
        let src = g.index_axis(Axis(axis), s);
        Zip::from(&mut dst).and(&src).for_each(|o, &v| {
            let v = c[p].map_or(v, |k| k * v);
            if fresh { *o = v } else { *o += v }
        });
    }
}

/// `grad[idx[p]] += g[s]` where the argmax `arg` names position `p`: each element of a
/// `Max` / `Min` segment's gradient goes to the position its value came from.
pub fn add_arg_rows<A: PoolElement + Copy>(
    grad: &mut ArrayD<A>,
    g: &ndarray::ArrayViewD<A>,
    arg: &ArrayD<usize>,
    axis: usize,
    walk: &Walk,
) {
    for (p, r, s) in walk.kept() {
        let mut dst = grad.index_axis_mut(Axis(axis), r);
        Zip::from(&mut dst)
            .and(&g.index_axis(Axis(axis), s))
            .and(&arg.index_axis(Axis(axis), s))
            .for_each(|o, &v, &a| {
                if a == p {
                    *o += v
                }
            });
    }
}
