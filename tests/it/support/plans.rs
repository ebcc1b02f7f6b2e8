//! Plans against the methods they mirror.

use ndarray::{ArrayD, ArrayViewD};
use ndarray_gather::prelude::*;

use super::layouts::{ALL, Held, Layout};

/// Whether a plan constructor's error is the method's: the same variant and values, its
/// message named after the constructor (`GatherPlan::gather: ...` for `gather: ...`).
pub fn same_error(plan: &GatherError, method: &GatherError) -> bool {
    let (p, m) = (plan.to_string(), method.to_string());
    std::mem::discriminant(plan) == std::mem::discriminant(method)
        && p.starts_with("GatherPlan::")
        && p.split_once(": ").map(|x| x.1) == m.split_once(": ").map(|x| x.1)
}

/// `plan` (built for `input`'s shape) fails exactly as the method did (`got`), or gathers
/// exactly what it gathered: from `input`, and from the same values in every layout, with
/// `apply` and with `apply_into` into an `out` of another layout.
pub fn agrees<A, O: ndarray::Dimension>(
    plan: Result<GatherPlan<O>, GatherError>,
    input: &ArrayViewD<A>,
    got: &Result<ArrayD<A>, GatherError>,
) -> Result<(), String>
where
    A: Clone + Send + Sync + PartialEq + std::fmt::Debug,
{
    // (A typed plan's outputs are its dynamic twin's, typed: tests/it/plans.rs.)
    let (plan, expected) = match (plan.map(GatherPlan::into_dyn), got) {
        (Err(p), Err(g)) if same_error(&p, g) => return Ok(()),
        (Ok(plan), Ok(expected)) => (plan, expected),
        (p, g) => return Err(format!("plan {p:?} but method {g:?}")),
    };
    if plan.input_shape() != input.shape() || plan.output_shape() != expected.shape() {
        return Err(format!("plan shapes {plan:?} for input {:?}", input.shape()));
    }
    let applied = plan.apply(input).map_err(|e| e.to_string())?;
    if applied != *expected {
        return Err(format!("apply: {applied:?}, method {expected:?}"));
    }
    // The same values in the other layouts (a broadcast layout would show other values).
    let flat: Vec<A> = input.iter().cloned().collect();
    // (Under Miri one standard and one other layout: a plan's two paths.)
    let layouts = ALL
        .into_iter()
        .filter(|l| !matches!(l, Layout::Broadcast(_)))
        .filter(|l| !cfg!(miri) || matches!(l, Layout::C | Layout::Reversed));
    for layout in layouts {
        let other = Held::new(input.shape(), layout, |i| flat[i].clone());
        let applied = plan
            .apply(&other.view())
            .map_err(|e| format!("{layout:?}: {e}"))?;
        if applied != *expected {
            return Err(format!("apply on {layout:?}: {applied:?}, method {expected:?}"));
        }
    }
    // Into an `out` of either order, from the input and from a C-order copy.
    let c_input = input.to_owned();
    for (out_layout, input) in [(Layout::F, input.view()), (Layout::C, c_input.view())] {
        let Some(fill) = flat.first() else { break };
        let mut out = Held::new(expected.shape(), out_layout, |_| fill.clone());
        plan.apply_into(&input, &mut out.view_mut())
            .map_err(|e| e.to_string())?;
        if out.view() != expected {
            return Err(format!(
                "apply_into {out_layout:?}: {:?}, method {expected:?}",
                out.view()
            ));
        }
    }
    Ok(())
}
