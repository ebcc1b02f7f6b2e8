//! The compiler's words for a user's common mistakes (decision 59): indices given by
//! value, weights of another element type than the table's, a shape that is not one, a
//! step's optimizers of a type that is none; and what must compile (`tests/ui/pass`).
//! Each case must fail to compile with the message in its `.stderr` file
//! (`TRYBUILD=overwrite cargo test --test ui` writes them anew after a toolchain change).

#[test]
#[cfg_attr(miri, ignore)]
fn mistakes_read_in_the_users_words() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    // What must compile as a user writes it (decision 67's `&mut [O]` and owned tables).
    t.pass("tests/ui/pass/*.rs");
}
