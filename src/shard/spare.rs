//! The buffers a sharded table keeps from one call to the next.

/// The buffers a table's calls keep for the next call: a call's positions, ids, segments
/// and partials, each as long as its positions or its output. Fresh pages on every call
/// cost about as much as the pooling itself (PERFORMANCE.md, "Sharded tables").
pub(crate) struct Spare<A> {
    pub positions: Vec<usize>,
    pub ids: Vec<u64>,
    pub segment: Vec<usize>,
    pub local: Vec<u32>,
    pub asked: Vec<u64>,
    pub asked_segs: Vec<u32>,
    pub partials: Vec<A>,
    pub got: Vec<A>,
}

impl<A> Default for Spare<A> {
    fn default() -> Self {
        Spare {
            positions: Vec::new(),
            ids: Vec::new(),
            segment: Vec::new(),
            local: Vec::new(),
            asked: Vec::new(),
            asked_segs: Vec::new(),
            partials: Vec::new(),
            got: Vec::new(),
        }
    }
}
