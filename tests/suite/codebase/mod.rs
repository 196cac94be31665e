//! The codebase's own rules, checked on its sources: layers without import cycles, docs that
//! name what exists.

mod docs;
mod imports;

use std::path::Path;

use imports::Graph;

fn library() -> Graph {
    Graph::of_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), "mpcbox")
}

/// No two files of `src/` import each other, directly or around a loop: each file can be read
/// (and changed) knowing only the files below it. A cycle is broken by moving what both sides
/// need below them (a trait apart from the factory that builds its implementations, a shared
/// constant into the module that owns the contract).
#[test]
fn no_file_of_the_library_imports_itself_around_a_loop() {
    let g = library();
    let cycles = g.cycles();
    let shown: Vec<String> = cycles
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| {
                    let inside: Vec<&str> = g.edges[f]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("   {f} -> {}", inside.join(", "))
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "{} import cycles among the files of src/ (file -> the files of its cycle it imports):\n{}\n\
         fix: move what both sides need into a file below them",
        cycles.len(),
        shown.join("\n--\n")
    );
}

/// The leaves ARCHITECTURE.md names import nothing of the crate but the error types (and the
/// report, the statistics' series it summarises).
#[test]
fn the_leaf_modules_import_no_other_module() {
    let g = library();
    for (leaf, allowed) in [
        ("knobs.rs", &["error.rs"][..]),
        ("memory.rs", &[]),
        ("stats.rs", &[]),
        ("error.rs", &[]),
        ("report.rs", &["stats.rs"]),
    ] {
        let extra: Vec<&String> = g.edges[leaf]
            .iter()
            .filter(|t| !allowed.contains(&t.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "src/{leaf} is a leaf (ARCHITECTURE.md) but imports {extra:?}; fix: pass the values \
             it needs in, or move the type it needs into it"
        );
    }
}
