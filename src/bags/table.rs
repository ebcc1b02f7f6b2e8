//! A collection's tables: [`Table`] (an `f32` view or a [`QTable`]) and the traits its
//! calls take them by, borrowed ([`AsTable`]) or mutably ([`TableMut`], decision 67).

use ndarray::{Array2, ArrayBase, ArrayView2, ArrayViewMut2, Data, DataMut, Ix2};

use crate::quant::QTable;

/// One table of a collection's call: an `f32` view or a [`QTable`] (decision 49). A slice
/// of views (`&[t0.view(), t1.view()]`) converts itself; mixed kinds convert each:
/// `&[Table::from(t0.view()), Table::from(qt1)]`.
#[derive(Debug, Clone)]
pub enum Table<'a> {
    /// Rows of `f32`.
    F32(ArrayView2<'a, f32>),
    /// Quantized or half-float rows.
    Quantized(QTable<'a>),
}

impl<'a> From<ArrayView2<'a, f32>> for Table<'a> {
    fn from(t: ArrayView2<'a, f32>) -> Self {
        Table::F32(t)
    }
}

impl<'a> From<&'a Array2<f32>> for Table<'a> {
    fn from(t: &'a Array2<f32>) -> Self {
        Table::F32(t.view())
    }
}

impl<'a> From<QTable<'a>> for Table<'a> {
    fn from(t: QTable<'a>) -> Self {
        Table::Quantized(t)
    }
}

/// What a collection's tables argument holds (decisions 49 and 67): `f32` arrays and views,
/// owned or borrowed (`&[t0.view(), t1.view()]`, `&tables` for a `Vec<Array2<f32>>`),
/// [`QTable`]s, or [`Table`]s when the kinds are mixed.
///
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::bags::{Collection, Jagged};
/// use ndarray_gather::prelude::*;
///
/// let tables = vec![Array2::from_elem((3, 2), 1.0f32), Array2::from_elem((2, 1), 2.0f32)];
/// let model = Collection::new().table(3, 2).table(2, 1).feature(0, Pooling::Sum).feature(1, Pooling::Sum);
/// let batch = Jagged::lengths(&[0_i64, 2, 1], &[2_i64, 1], 1)?;
/// let out = model.gather_reduce(&tables, &batch)?; // owned tables
/// assert_eq!(out, model.gather_reduce(&[tables[0].view(), tables[1].view()], &batch)?);
/// assert_eq!(out, array![[2.0, 2.0, 2.0]]);
/// # Ok::<(), GatherError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a table of a collection",
    note = "a collection takes a slice of `f32` arrays or views (`&[t0.view(), t1.view()]`, `&tables`), `QTable`s, or `bags::Table`s when mixed"
)]
pub trait AsTable {
    /// The table, borrowed.
    fn as_table(&self) -> Table<'_>;
}

impl<S: Data<Elem = f32>> AsTable for ArrayBase<S, Ix2> {
    fn as_table(&self) -> Table<'_> {
        Table::F32(self.view())
    }
}

impl AsTable for QTable<'_> {
    fn as_table(&self) -> Table<'_> {
        Table::Quantized(self.reborrow())
    }
}

impl AsTable for Table<'_> {
    fn as_table(&self) -> Table<'_> {
        match self {
            Table::F32(t) => Table::F32(t.view()),
            Table::Quantized(q) => Table::Quantized(q.reborrow()),
        }
    }
}

impl<T: AsTable + ?Sized> AsTable for &T {
    fn as_table(&self) -> Table<'_> {
        (**self).as_table()
    }
}

/// What a collection's mutable tables (or gradients) argument holds (decision 67): `f32`
/// arrays or mutable views, owned or borrowed (`&mut [g0.view_mut(), g1.view_mut()]`,
/// `&mut grads` for a `Vec<Array2<f32>>`).
///
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::bags::{Collection, Jagged};
/// use ndarray_gather::prelude::*;
///
/// let model = Collection::new().table(3, 1).table(2, 1).feature(0, Pooling::Sum).feature(1, Pooling::Sum);
/// let plan = model.plan(&Jagged::lengths(&[2_i64, 2, 1], &[2_i64, 1], 1)?)?;
/// let mut grads = vec![Array2::<f32>::zeros((3, 1)), Array2::<f32>::zeros((2, 1))];
/// plan.backward_into(&array![[1.0, 5.0]], &mut grads)?; // owned gradients
/// assert_eq!(grads[0], array![[0.0], [0.0], [2.0]]);
/// let (mut g0, mut g1) = (Array2::<f32>::zeros((3, 1)), Array2::<f32>::zeros((2, 1)));
/// plan.backward_into(&array![[1.0, 5.0]], &mut [g0.view_mut(), g1.view_mut()])?; // views
/// assert_eq!((g0, g1), (grads[0].clone(), grads[1].clone()));
/// # Ok::<(), GatherError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a mutable table of a collection",
    note = "a collection's step and backward take `&mut [t0.view_mut(), t1.view_mut()]` or `&mut tables` (a `Vec<Array2<f32>>`)"
)]
pub trait TableMut {
    /// The table, mutably borrowed.
    fn table_mut(&mut self) -> ArrayViewMut2<'_, f32>;
}

impl<S: DataMut<Elem = f32>> TableMut for ArrayBase<S, Ix2> {
    fn table_mut(&mut self) -> ArrayViewMut2<'_, f32> {
        self.view_mut()
    }
}

impl<T: TableMut + ?Sized> TableMut for &mut T {
    fn table_mut(&mut self) -> ArrayViewMut2<'_, f32> {
        (**self).table_mut()
    }
}

impl Table<'_> {
    /// `(rows, width)`.
    pub(crate) fn dim(&self) -> (usize, usize) {
        match self {
            Table::F32(t) => t.dim(),
            Table::Quantized(q) => q.dim(),
        }
    }
}
