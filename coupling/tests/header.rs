//! The committed C header matches what cbindgen generates from the source.
//! Regenerate with `MPCBOX_BLESS=1 cargo test -p mpcbox-coupling --test header`.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = dir.join("include/mpcbox.h");
    if std::env::var_os("MPCBOX_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "coupling/include/mpcbox.h is stale; regenerate with MPCBOX_BLESS=1 cargo test -p mpcbox-coupling --test header"
    );
    for f in [
        "mpcbox_create_from_ron",
        "mpcbox_step",
        "mpcbox_begin_step",
        "mpcbox_finish_step",
        "mpcbox_last_error",
        "mpcbox_free",
    ] {
        assert!(generated.contains(f), "{f} missing from the header");
    }
}
