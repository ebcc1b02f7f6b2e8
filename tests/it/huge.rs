//! 64-bit offsets: inputs larger than 4 GiB and axes longer than 2^31. Ignored by default
//! (they allocate 4.5 GiB, of which few pages are touched); run with `cargo test --release --test it huge -- --ignored`.

use ndarray::{Array1, Array2, ArrayView2, array};
use ndarray_gather::prelude::*;

#[test]
#[ignore = "allocates 4.5 GiB (zeroed pages, few touched); run with --release -- --ignored"]
fn gathers_the_last_elements_of_a_u8_input_above_4_gib() {
    let n = (1usize << 32) + (1 << 29) + 7; // 4.5 GiB
    let mut data = vec![0u8; n]; // zeroed pages, only the touched ones are materialized
    for (k, v) in data.iter_mut().rev().take(5).enumerate() {
        *v = 200 + k as u8;
    }
    data[(1 << 32) + 1] = 42;
    let a = Array1::from(data);
    let idx = array![-1_i64, (n - 2) as i64, ((1u64 << 32) + 1) as i64, 0];
    assert_eq!(a.gather(&idx, 0).unwrap(), array![200u8, 201, 42, 0]);
    assert_eq!(
        a.take(&array![u64::MAX], None, IndexMode::Wrap).unwrap()[[0]],
        a[(u64::MAX % n as u64) as usize]
    );
    // As two rows of more than 2^31 elements each (an axis longer than i32::MAX).
    let cols = n / 2;
    let rows: ArrayView2<u8> = a
        .slice(ndarray::s![..2 * cols])
        .into_shape_with_order((2, cols))
        .unwrap();
    assert!(cols > 1 << 31);
    let out = rows
        .gather_elements(&Array2::from_elem((2, 1), (cols - 1) as i64), 1)
        .unwrap();
    assert_eq!(out, array![[a[cols - 1]], [a[2 * cols - 1]]]);
    let out = rows.gather_multiaxis(&array![[1_i64, -1]], &[0, 1]).unwrap();
    assert_eq!(out, array![[a[2 * cols - 1]]]);
}

/// A memory-mapped table of 4.5 GiB (a sparse file: only the rows written take disk
/// space), viewed without a copy, its rows above 4 GiB gathered by `gather` and by a
/// `GatherPlan`.
#[test]
#[ignore = "writes a 4.5 GiB sparse file in the temporary directory; run with --release -- --ignored"]
fn gathers_rows_above_4_gib_from_a_memory_mapped_table() {
    use ndarray::{ArrayViewMut2, s};

    let cols = 256;
    let rows = ((1usize << 32) + (1 << 29)) / (cols * 4); // 4.5 GiB of f32
    let path = std::env::temp_dir().join(format!("ndarray-gather-huge-{}.f32", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    file.set_len((rows * cols * 4) as u64).unwrap();
    let picks = [rows - 1, rows - 2, (1 << 32) / (cols * 4) + 3, 5];
    {
        // SAFETY: only this test uses the file.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.unwrap();
        // SAFETY: the map is page-aligned and holds `rows * cols` f32 (any bits are one).
        let data = unsafe { std::slice::from_raw_parts_mut(map.as_mut_ptr().cast::<f32>(), rows * cols) };
        let mut table = ArrayViewMut2::from_shape((rows, cols), data).unwrap();
        for &r in &picks {
            table.row_mut(r).fill(r as f32);
        }
        map.flush().unwrap();
    }
    // SAFETY: as above.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    // SAFETY: as above.
    let data = unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<f32>(), rows * cols) };
    let table = ArrayView2::from_shape((rows, cols), data).unwrap();
    let ids = Array1::from_iter(picks.iter().map(|&r| r as i64));
    let got = table.gather(&ids, 0).unwrap();
    let plan = GatherPlan::gather(table.shape(), &array![-1_i64, -2, 4_194_307, 5], 0).unwrap();
    let planned = plan.apply(&table).unwrap();
    for (k, &r) in picks.iter().enumerate() {
        assert!(got.slice(s![k, ..]).iter().all(|&v| v == r as f32), "row {r}");
        assert_eq!(planned.slice(s![k, ..]), got.slice(s![k, ..]));
    }
    drop(map);
    std::fs::remove_file(&path).unwrap();
}
