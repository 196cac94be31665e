//! Config files as data: every file in tests/configs/good parses and validates; every file in
//! tests/configs/bad is rejected with the message its first line expects (`// expect: ...`).

use std::path::Path;

use mpcbox::Config;

/// The `.ron` files of `dir` (under the crate's root), sorted.
fn files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    v.sort();
    v
}

#[test]
fn good_configs_are_accepted() {
    let good = files("tests/configs/good");
    assert!(good.len() >= 4);
    for p in good {
        let cfg = Config::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        // round trip through RON text
        let again = Config::from_ron_str(&cfg.to_ron_string()).unwrap();
        assert_eq!(cfg, again, "{}", p.display());
    }
}

#[test]
fn bad_configs_are_rejected_with_their_message() {
    let bad = files("tests/configs/bad");
    assert!(bad.len() >= 15);
    for p in bad {
        let text = std::fs::read_to_string(&p).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// expect: "))
            .unwrap_or_else(|| panic!("{} lacks an `// expect:` first line", p.display()));
        let result = std::panic::catch_unwind(|| Config::from_ron_str(&text));
        let err = match result {
            Ok(Ok(_)) => panic!("{} was accepted", p.display()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => panic!("{} made the parser panic", p.display()),
        };
        assert!(
            err.contains(expect),
            "{}:\n  expected: {expect}\n  got:      {err}",
            p.display()
        );
        assert!(
            err.contains("fix:"),
            "{}: message gives no fix: {err}",
            p.display()
        );
    }
}

#[test]
fn missing_file_is_a_clear_error() {
    let err = Config::from_file(Path::new("/nonexistent/run.ron"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read /nonexistent/run.ron"), "{err}");
}

#[test]
fn every_example_is_accepted() {
    let examples = files("examples");
    assert!(examples.len() >= 8, "{examples:?}");
    for p in examples {
        let cfg = Config::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let again = Config::from_ron_str(&cfg.to_ron_string()).unwrap();
        assert_eq!(cfg, again, "{}", p.display());
    }
}
