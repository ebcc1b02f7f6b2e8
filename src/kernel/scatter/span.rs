//! Which positions of a lane land in a thread's span of destination offsets.

/// The positions `i` in `range` whose offset `d0 + i * step` lies in `lo..hi`, in order
/// (they are consecutive: offsets are monotone in `i`).
#[inline(always)]
pub(super) fn owned(
    d0: isize,
    step: isize,
    range: std::ops::Range<usize>,
    (lo, hi): (isize, isize),
) -> std::ops::Range<usize> {
    let (a, b) = (range.start as isize, range.end as isize);
    if a < b {
        // Most blocks lie wholly inside or outside the span: no division then.
        let (p, q) = (d0 + a * step, d0 + (b - 1) * step);
        let (min, max) = (p.min(q), p.max(q));
        if lo <= min && max < hi {
            return range;
        }
        if max < lo || min >= hi {
            return range.start..range.start;
        }
    }
    let (first, last) = match step {
        0 if lo <= d0 && d0 < hi => (a, b),
        0 => (a, a),
        // d0 + i s >= lo  <=>  i >= ceil((lo - d0) / s);  d0 + i s < hi  <=>  i < ceil((hi - d0) / s)
        s if s > 0 => (ceil_div(lo - d0, s), ceil_div(hi - d0, s)),
        // s < 0: d0 - i |s| < hi  <=>  i > (d0 - hi) / |s|;  d0 - i |s| >= lo  <=>  i <= (d0 - lo) / |s|
        s => ((d0 - hi).div_euclid(-s) + 1, (d0 - lo).div_euclid(-s) + 1),
    };
    let (first, last) = (first.clamp(a, b), last.clamp(a, b));
    first as usize..last.max(first) as usize
}

/// `ceil(a / b)` for `b > 0`.
pub(crate) fn ceil_div(a: isize, b: isize) -> isize {
    -((-a).div_euclid(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_picks_exactly_the_positions_in_the_span() {
        for d0 in -12..12 {
            for step in -4..=4 {
                for (lo, hi) in [(-5, 3), (0, 1), (2, 9), (4, 4), (-20, 20)] {
                    let want: Vec<usize> = (1..9)
                        .filter(|&i| (lo..hi).contains(&(d0 + i as isize * step)))
                        .collect();
                    let got: Vec<usize> = owned(d0, step, 1..9, (lo, hi)).collect();
                    assert_eq!(got, want, "d0 {d0} step {step} span {lo}..{hi}");
                }
            }
        }
    }
}
