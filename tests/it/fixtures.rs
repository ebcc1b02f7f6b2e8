//! The fixtures of `tests/fixtures` (written by `generate.py` from the ONNX backend node
//! tests, NumPy and the proposal's examples): every case must give exactly the recorded
//! output, or an error where the library raised one.

use crate::support::manifest::{Case, read};
use crate::support::npy::Npy;
use ndarray::ArrayD;
use ndarray_gather::prelude::*;

fn cases() -> Vec<Case> {
    crate::support::manifest::cases("MANIFEST.txt")
}

/// Whether `e` is what NumPy's exception class `kind` means for a call of `op`.
fn same_kind(op: &str, kind: &str, e: &GatherError) -> bool {
    use GatherError::*;
    match kind {
        // NumPy's take_along_axis is fancy indexing, which reports indices that do not
        // broadcast against the input as an IndexError too.
        "IndexError" if op == "take_along_axis" && matches!(e, ShapeMismatch { .. }) => true,
        // An out-of-range index, or an index into an empty axis.
        "IndexError" => matches!(e, IndexOutOfBounds { .. } | EmptyAxis { .. }),
        "AxisError" => matches!(e, AxisOutOfBounds { .. }),
        "ValueError" => matches!(
            e,
            ShapeMismatch { .. }
                | RankMismatch { .. }
                | BatchDims { .. }
                | CoordinateFold { .. }
                | UpdatesShape { .. }
        ),
        _ => false,
    }
}

/// Runs one case with element type `A` and index type `I`.
fn run<A, I>(c: &Case, data: ArrayD<A>, indices: ArrayD<I>) -> Result<(), String>
where
    A: Npy + Clone + Send + Sync + PartialEq + std::fmt::Debug,
    I: GatherIndex,
{
    let mode = match c
        .params
        .iter()
        .find(|(k, _)| k == "mode")
        .map(|(_, v)| v.as_str())
    {
        Some("wrap") => IndexMode::Wrap,
        Some("clip") => IndexMode::Clip,
        _ => IndexMode::Raise,
    };
    let got: Result<ArrayD<A>, GatherError> = match c.op.as_str() {
        "gather" => data.gather(&indices, c.int("axis")),
        "gather_elements" => data.gather_elements(&indices, c.int("axis")),
        "gather_nd" => data.gather_nd(&indices, c.int("batch_dims") as usize),
        "gather_batched" => data.gather_batched(&indices, c.int("axis"), c.int("batch_dims") as usize),
        "take_along_axis" => data.take_along_axis(&indices, c.int("axis")),
        "take" => {
            let axis = match c.req("axis") {
                "none" => None,
                _ => Some(c.int("axis")),
            };
            data.take(&indices, axis, mode)
        }
        "gather_multiaxis" => {
            let axes: Vec<usize> = c.req("axes").split(',').map(|a| a.parse().unwrap()).collect();
            data.gather_multiaxis(&indices, &axes)
        }
        op => return Err(format!("unknown op {op}")),
    };
    let shape = data.shape();
    let plan = match c.op.as_str() {
        "gather" => GatherPlan::gather(shape, &indices, c.int("axis")),
        "gather_elements" => GatherPlan::gather_elements(shape, &indices, c.int("axis")),
        "gather_nd" => GatherPlan::gather_nd(shape, &indices, c.int("batch_dims") as usize),
        "gather_batched" => {
            GatherPlan::gather_batched(shape, &indices, c.int("axis"), c.int("batch_dims") as usize)
        }
        "take_along_axis" => GatherPlan::take_along_axis(shape, &indices, c.int("axis")),
        "take" => {
            let axis = match c.req("axis") {
                "none" => None,
                _ => Some(c.int("axis")),
            };
            GatherPlan::take(shape, &indices, axis, mode)
        }
        _ => {
            let axes: Vec<usize> = c.req("axes").split(',').map(|a| a.parse().unwrap()).collect();
            GatherPlan::multiaxis(shape, &indices, &axes)
        }
    };
    crate::support::plans::agrees(plan, &data.view(), &got).map_err(|e| format!("through a plan: {e}"))?;
    match (c.req("expect").strip_prefix("error:"), got) {
        (Some(kind), Err(e)) if same_kind(&c.op, kind, &e) => Ok(()),
        (Some(kind), Err(e)) => Err(format!("expected a {kind}, got {e:?}")),
        (Some(kind), Ok(out)) => Err(format!("expected a {kind}, got {out:?}")),
        (None, Err(e)) => Err(format!("unexpected error: {e}")),
        (None, Ok(out)) => {
            let file = c.req("expect");
            let expected: ArrayD<A> = read(file).ok_or(format!("cannot read {file}"))?;
            if out == expected {
                Ok(())
            } else {
                Err(format!("got {out:?}\nexpected {expected:?}"))
            }
        }
    }
}

fn with_indices<A>(c: &Case, data: ArrayD<A>) -> Result<(), String>
where
    A: Npy + Clone + Send + Sync + PartialEq + std::fmt::Debug,
{
    let file = c.req("indices");
    if let Some(i) = read::<i64>(file) {
        run(c, data, i)
    } else if let Some(i) = read::<i32>(file) {
        run(c, data, i)
    } else {
        Err(format!("unsupported index type in {file}"))
    }
}

fn run_case(c: &Case) -> Result<(), String> {
    let file = c.req("data");
    if let Some(d) = read::<f32>(file) {
        with_indices(c, d)
    } else if let Some(d) = read::<f64>(file) {
        with_indices(c, d)
    } else if let Some(d) = read::<i64>(file) {
        with_indices(c, d)
    } else if let Some(d) = read::<i32>(file) {
        with_indices(c, d)
    } else if let Some(d) = read::<u8>(file) {
        with_indices(c, d)
    } else if let Some(d) = read::<bool>(file) {
        with_indices(c, d)
    } else {
        Err(format!("unsupported element type in {file}"))
    }
}

#[test]
#[cfg_attr(miri, ignore = "reads 900 files: run natively")]
fn every_fixture_matches() {
    // (The scatters have their own test below.)
    let cases: Vec<Case> = cases().into_iter().filter(|c| !is_scatter(c)).collect();
    assert!(cases.len() > 250, "only {} fixture cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| run_case(c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn fixtures_cover_every_source_and_wrapper() {
    let cases = cases();
    for prefix in [
        "onnx_gather_",
        "onnx_gather_elements",
        "onnx_gathernd",
        "np_",
        "seed_",
    ] {
        assert!(
            cases.iter().any(|c| c.name.starts_with(prefix)),
            "no {prefix} fixtures"
        );
    }
    for op in [
        "gather",
        "gather_elements",
        "gather_nd",
        "gather_batched",
        "take",
        "take_along_axis",
        "gather_multiaxis",
    ] {
        assert!(cases.iter().any(|c| c.op == op), "no {op} fixtures");
        assert!(
            cases
                .iter()
                .any(|c| c.op == op && !c.req("expect").starts_with("error")),
            "no valid {op} fixture"
        );
    }
    for mode in ["raise", "wrap", "clip"] {
        assert!(
            cases
                .iter()
                .any(|c| c.params.iter().any(|(k, v)| k == "mode" && v == mode))
        );
    }
    assert!(cases.iter().any(|c| c.req("expect").starts_with("error:")));
}

fn is_scatter(c: &Case) -> bool {
    c.op.starts_with("scatter") || c.op == "put_along_axis"
}

/// Runs one scatter case with element type `A` and index type `I`: the data after the
/// call must be exactly the recorded one, or the error NumPy's class names, with the data
/// unchanged.
fn run_scatter<A, I>(c: &Case, data: ArrayD<A>, indices: ArrayD<I>) -> Result<(), String>
where
    A: Npy + Copy + PartialOrd + num_traits::NumAssignOps + Send + Sync + std::fmt::Debug,
    I: GatherIndex,
{
    let file = c.req("updates");
    let updates: ArrayD<A> = read(file).ok_or(format!("cannot read {file} as the data's type"))?;
    let reduction: Reduction = match c.op.as_str() {
        "put_along_axis" => Reduction::Replace,
        _ => c.req("reduction").parse().map_err(|e| format!("{e}"))?,
    };
    let mut x = data.clone();
    let got = match c.op.as_str() {
        "scatter" => x.scatter(&indices, &updates, c.int("axis"), reduction),
        "scatter_elements" => x.scatter_elements(&indices, &updates, c.int("axis"), reduction),
        "scatter_nd" => x.scatter_nd(&indices, &updates, c.int("batch_dims") as usize, reduction),
        "put_along_axis" => x.put_along_axis(&indices, &updates, c.int("axis")),
        op => return Err(format!("unknown op {op}")),
    };
    // Exactly the same values: `-0.0` differs from `0.0`, a NaN matches a NaN.
    let same = |a: &ArrayD<A>, b: &ArrayD<A>| {
        a.shape() == b.shape() && a.iter().zip(b).all(|(p, q)| format!("{p:?}") == format!("{q:?}"))
    };
    match (c.req("expect").strip_prefix("error:"), got) {
        (Some(kind), Err(e)) if same_kind(&c.op, kind, &e) => {
            if same(&x, &data) {
                Ok(())
            } else {
                Err(format!("{e} but the data changed: {x:?}"))
            }
        }
        (Some(kind), Err(e)) => Err(format!("expected a {kind}, got {e:?}")),
        (Some(kind), Ok(())) => Err(format!("expected a {kind}, got {x:?}")),
        (None, Err(e)) => Err(format!("unexpected error: {e}")),
        (None, Ok(())) => {
            let file = c.req("expect");
            let expected: ArrayD<A> = read(file).ok_or(format!("cannot read {file}"))?;
            if same(&x, &expected) {
                Ok(())
            } else {
                Err(format!("got {x:?}\nexpected {expected:?}"))
            }
        }
    }
}

fn run_scatter_case(c: &Case) -> Result<(), String> {
    fn with<A>(c: &Case, data: ArrayD<A>) -> Result<(), String>
    where
        A: Npy + Copy + PartialOrd + num_traits::NumAssignOps + Send + Sync + std::fmt::Debug,
    {
        let file = c.req("indices");
        if let Some(i) = read::<i64>(file) {
            run_scatter(c, data, i)
        } else if let Some(i) = read::<i32>(file) {
            run_scatter(c, data, i)
        } else {
            Err(format!("unsupported index type in {file}"))
        }
    }
    let file = c.req("data");
    if let Some(d) = read::<f32>(file) {
        with(c, d)
    } else if let Some(d) = read::<f64>(file) {
        with(c, d)
    } else if let Some(d) = read::<i64>(file) {
        with(c, d)
    } else if let Some(d) = read::<i32>(file) {
        with(c, d)
    } else {
        Err(format!("unsupported element type in {file}"))
    }
}

#[test]
#[cfg_attr(miri, ignore = "reads hundreds of files: run natively")]
fn every_scatter_fixture_matches() {
    let cases: Vec<Case> = cases().into_iter().filter(is_scatter).collect();
    for (prefix, op) in [
        ("onnx_scatter_elements", "scatter_elements"),
        ("onnx_scatternd_", "scatter_nd"),
        ("np_add_at", "scatter"),
        ("np_min_at", "scatter"),
        ("np_fancy_assign", "scatter"),
        ("np_put_along_axis", "put_along_axis"),
    ] {
        assert!(
            cases
                .iter()
                .any(|c| c.name.starts_with(prefix) && c.op == op && !c.req("expect").starts_with("error")),
            "no valid {prefix} fixture"
        );
    }
    assert!(cases.iter().any(|c| c.req("expect").starts_with("error:")));
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| run_scatter_case(c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} scatter fixtures failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
