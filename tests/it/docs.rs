//! The documentation's one source: the cheat sheet lives in `src/cheatsheet.md` (the crate
//! docs include it); the README shows the same table, and must not drift from it.

#[test]
fn the_readme_shows_the_crate_docs_cheat_sheet() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let sheet = std::fs::read_to_string(root.join("src/cheatsheet.md")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(sheet.lines().count() > 20);
    assert!(
        readme.contains(sheet.trim_end()),
        "README.md's cheat sheet differs from src/cheatsheet.md: copy the file's table into the README"
    );
}
