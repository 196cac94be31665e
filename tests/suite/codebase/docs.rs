//! The docs stay true: every path and module the Markdown files name exists, ARCHITECTURE.md's
//! module tables list the module tree, and code comments carry no references a reader cannot
//! follow ("issue N", talk numbers) nor machine figures (those belong in `bench/records/`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files under `dir` (relative to the repository) with one of `exts`, skipping build output and
/// hidden directories.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(repo().join(dir)) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.map(|e| e.expect("an entry").path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let rel = p.strip_prefix(repo()).unwrap().to_path_buf();
        if p.is_dir() {
            let skip = name.starts_with('.') && name != ".ci"
                || ["target", "build", "__pycache__", "node_modules"].contains(&name.as_str());
            if !skip {
                files(&rel, exts, out);
            }
        } else if exts.iter().any(|e| name.ends_with(e)) {
            out.push(rel);
        }
    }
}

fn markdown() -> Vec<PathBuf> {
    let mut out = Vec::new();
    files(Path::new(""), &[".md"], &mut out);
    out
}

/// Every file of the repository (relative paths), and every directory.
fn tree() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut all = Vec::new();
    files(Path::new(""), &[""], &mut all);
    let files: BTreeSet<String> = all.iter().map(|p| p.to_string_lossy().into()).collect();
    let mut dirs = BTreeSet::new();
    for f in &files {
        let mut p = Path::new(f.as_str());
        while let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
            dirs.insert(parent.to_string_lossy().into_owned());
            p = parent;
        }
    }
    (files, dirs)
}

/// Each line's candidate names: inline code spans and link targets outside fenced blocks,
/// path-like words inside them.
fn spans(text: &str) -> Vec<(usize, String, bool)> {
    let code = Regex::new(r"`([^`]+)`").unwrap();
    let link = Regex::new(r"\]\(([^)#\s]+)").unwrap();
    let word = Regex::new(r"[\w./{},-]+").unwrap();
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.extend(
                word.find_iter(line)
                    .map(|m| (i + 1, m.as_str().into(), true)),
            );
        } else {
            out.extend(
                code.captures_iter(line)
                    .map(|c| (i + 1, c[1].trim().into(), false)),
            );
            out.extend(
                link.captures_iter(line)
                    .map(|c| (i + 1, c[1].into(), false)),
            );
        }
    }
    out
}

#[test]
fn table_cells_name_nested_modules() {
    assert_eq!(
        table_names("`gpu` (`setup`, `slabs` (`exchange`)), `build`"),
        [
            "gpu",
            "gpu::setup",
            "gpu::slabs",
            "gpu::slabs::exchange",
            "build"
        ]
    );
    assert_eq!(
        table_names("`multi::` `mod`, `slab`"),
        ["multi", "multi", "multi::slab"]
    );
}

/// `a/{b,c}/d` → `a/b/d`, `a/c/d`.
fn expand(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(i), Some(j)) if i < j => path[i + 1..j]
            .split(',')
            .flat_map(|alt| expand(&format!("{}{alt}{}", &path[..i], &path[j + 1..])))
            .collect(),
        _ => vec![path.to_string()],
    }
}

/// Extensions of files the repository holds (a name with another one is an output or a
/// user's file: `summary.json`, `my_run.ron` in prose).
const SOURCE_EXTS: &[&str] = &[
    "rs", "cu", "cuh", "md", "toml", "sh", "py", "f90", "c", "h", "cpp", "ron", "lmp", "in",
];

/// Every path a Markdown file names exists: from the repository root, from the file's own
/// directory, or, for a path that does not start at a top-level directory (`cuda/stream.rs`,
/// `stream.cu`), as the end of some file's path.
#[test]
fn every_path_the_docs_name_exists() {
    let (files, dirs) = tree();
    let root = repo();
    // the repository's top-level directories (not those .gitignore names: `out`, `target`)
    let ignored = std::fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
    let tops: BTreeSet<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !ignored.lines().any(|l| l.trim_matches('/') == n))
        .collect();
    let pathlike = Regex::new(r"^[\w.{},-]+(/[\w.{},-]*)*$").unwrap();
    let ext = Regex::new(&format!(r"\.({})$", SOURCE_EXTS.join("|"))).unwrap();
    let ours = Regex::new(r"\.(rs|cu|cuh)$").unwrap();
    let mut missing = Vec::new();
    for md in markdown() {
        let text = std::fs::read_to_string(root.join(&md)).unwrap();
        let here = md.parent().unwrap_or(Path::new(""));
        for (line, span, _) in spans(&text) {
            let span = span.trim_end_matches('/');
            if !pathlike.is_match(span) || span.starts_with(['.', '-']) || span.contains("..") {
                continue;
            }
            let first = span.split('/').next().unwrap();
            let rooted = span.contains('/') && tops.contains(first);
            // build output and machines' local directories are not the repository's
            if first == "target" || span.split('/').any(|c| c == "build") {
                continue;
            }
            let source = ext.is_match(span);
            if !rooted && !source {
                continue;
            }
            // a bare file name of prose is checked only when it is one of ours (.rs, .cu, .cuh)
            if !span.contains('/') && !ours.is_match(span) {
                continue;
            }
            for p in expand(span) {
                let found = root.join(&p).exists()
                    || root.join(here).join(&p).exists()
                    || (!rooted
                        && (files.iter().any(|f| f.ends_with(&format!("/{p}")))
                            || dirs.iter().any(|d| d.ends_with(&format!("/{p}")))));
                if !found {
                    missing.push(format!("{}:{line}: {p}", md.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} paths named in the docs do not exist:\n{}\nfix: name the file where it is now, or \
         drop the reference",
        missing.len(),
        missing.join("\n")
    );
}

/// The library's top-level modules (`pub mod x;` in src/lib.rs).
fn top_modules() -> Vec<String> {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    Regex::new(r"(?m)^pub mod (\w+);")
        .unwrap()
        .captures_iter(&lib)
        .map(|c| c[1].to_string())
        .collect()
}

/// The file of module `path` (segments below the crate), if it is a file module.
fn module_file(path: &[&str]) -> Option<PathBuf> {
    let base = repo().join("src").join(path.join("/"));
    if path.is_empty() {
        return Some(repo().join("src/lib.rs"));
    }
    [base.with_extension("rs"), base.join("mod.rs")]
        .into_iter()
        .find(|p| p.exists())
}

/// Whether module file `file` declares or re-exports an item named `name`.
fn declares(file: &Path, name: &str) -> bool {
    let src = std::fs::read_to_string(file).unwrap();
    let n = regex::escape(name);
    Regex::new(&format!(
        r"\b(fn|struct|enum|trait|type|const|static|mod|union)\s+{n}\b|macro_rules!\s*{n}\b|\bas\s+{n}\b|pub(\([^)]*\))?\s+use\s+[^;]*(::|\{{|,)\s*{n}\s*[,}};]"
    ))
    .unwrap()
    .is_match(&src)
}

/// Whether `segs` (from the crate root) names a module, or an item of one.
fn resolves(segs: &[&str]) -> bool {
    let mut module: Vec<&str> = Vec::new();
    for s in segs {
        let lower = s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
        let mut next = module.clone();
        next.push(s);
        if lower && module_file(&next).is_some() {
            module = next;
            continue;
        }
        // an item of the module (after it, methods and fields are not checked)
        return module_file(&module).is_some_and(|f| declares(&f, s));
    }
    true
}

/// Every module path the docs name in code spans (`physics::walls::Walls`, `crate::host_pool`, or
/// relative to a module: `rules::theory`) exists.
#[test]
fn every_module_the_docs_name_exists() {
    let tops = top_modules();
    let path =
        Regex::new(r"^((crate|mpcbox)::)?[a-z_][a-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+$").unwrap();
    // every module path of the library, to resolve a relative one
    let mut rs = Vec::new();
    files(Path::new("src"), &[".rs"], &mut rs);
    let modules: Vec<Vec<String>> = rs
        .iter()
        .map(|f| {
            let s = f.with_extension("").to_string_lossy().into_owned();
            let mut v: Vec<String> = s.split('/').skip(1).map(String::from).collect();
            if v.last()
                .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
            {
                v.pop();
            }
            v
        })
        .collect();
    let mut missing = Vec::new();
    for md in markdown() {
        let text = std::fs::read_to_string(repo().join(&md)).unwrap();
        for (line, span, fenced) in spans(&text) {
            let span = span.trim_end_matches("()");
            if fenced || !path.is_match(span) {
                continue;
            }
            let segs: Vec<&str> = span
                .split("::")
                .filter(|s| *s != "crate" && *s != "mpcbox")
                .collect();
            let ok = if tops.iter().any(|t| t == segs[0]) {
                resolves(&segs)
            } else {
                let bases: Vec<&Vec<String>> = modules
                    .iter()
                    .filter(|m| m.last().is_some_and(|l| l == segs[0]))
                    .collect();
                // a name that is no module of ours (`std::fs`, `serde::Serialize`) is not checked
                bases.is_empty()
                    || bases.iter().any(|b| {
                        let mut full: Vec<&str> =
                            b[..b.len() - 1].iter().map(String::as_str).collect();
                        full.extend(&segs);
                        resolves(&full)
                    })
            };
            if !ok {
                missing.push(format!("{}:{line}: {span}", md.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} module paths named in the docs do not exist:\n{}\nfix: name the module where it is \
         now, or drop the reference",
        missing.len(),
        missing.join("\n")
    );
}

/// The module names of a table's first column: `a`, `a` (`b`, `c` (`d`)) nesting as `a::b`,
/// `a::c::d`; a name ending in `::` (`multi::`) prefixes the rest of the cell.
fn table_names(cell: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    let mut prefix = String::new();
    let mut last = String::new();
    let tok = Regex::new(r"`([^`]+)`|\(|\)").unwrap();
    for m in tok.find_iter(cell) {
        match m.as_str() {
            "(" => stack.push(last.clone()),
            ")" => {
                stack.pop();
            }
            s => {
                let name = s.trim_matches('`');
                if let Some(p) = name.strip_suffix("::") {
                    prefix = format!("{p}::");
                    out.push(p.to_string());
                    continue;
                }
                let parent = stack.last().map(|p| format!("{p}::")).unwrap_or_default();
                last = if name == "mod" {
                    prefix.trim_end_matches("::").to_string()
                } else {
                    format!("{prefix}{parent}{name}")
                };
                if !last.is_empty() {
                    out.push(last.clone());
                }
            }
        }
    }
    out
}

/// ARCHITECTURE.md's module tables, by the module they describe ("" for the crate): the names
/// in each first column.
fn architecture_tables() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let start = text
        .find("## Modules of `mpcbox`")
        .expect("ARCHITECTURE.md: ## Modules of `mpcbox`");
    let rest = &text[start + 3..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let heading = Regex::new(r"^### `([\w:]+)`").unwrap();
    let mut tables: Vec<(String, Vec<String>)> = vec![(String::new(), Vec::new())];
    for line in section.lines() {
        if let Some(c) = heading.captures(line) {
            tables.push((c[1].to_string(), Vec::new()));
        } else if line.starts_with("| `") {
            let cell = line.split('|').nth(1).unwrap();
            tables.last_mut().unwrap().1.extend(table_names(cell));
        }
    }
    tables
}

/// The module paths below `base` that are files (relative to it).
fn file_modules_under(base: &str) -> Vec<String> {
    let dir = repo().join("src").join(base.replace("::", "/"));
    let mut rs = Vec::new();
    files(dir.strip_prefix(repo()).unwrap(), &[".rs"], &mut rs);
    let prefix = dir.strip_prefix(repo()).unwrap().to_path_buf();
    rs.iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&prefix).unwrap().with_extension("");
            let mut v: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if v.last().is_some_and(|l| l == "mod") {
                v.pop();
            }
            (!v.is_empty() && v.last() != Some(&"tests".to_string())).then(|| v.join("::"))
        })
        .collect()
}

/// ARCHITECTURE.md's module tables match the module tree: every name they list is a module,
/// the first table lists every top-level module (or a section of its own does), and each
/// module's own table lists every file below it.
#[test]
fn the_architecture_tables_list_the_module_tree() {
    let tables = architecture_tables();
    let mut problems = Vec::new();
    for (base, names) in &tables {
        let base_segs: Vec<&str> = base.split("::").filter(|s| !s.is_empty()).collect();
        for n in names {
            let mut segs = base_segs.clone();
            segs.extend(n.split("::"));
            if module_file(&segs).is_none() {
                problems.push(format!(
                    "table of `{base}` lists `{n}`, which is no module file"
                ));
            }
        }
        let expected: Vec<String> = if base.is_empty() {
            top_modules()
                .into_iter()
                .filter(|m| !tables.iter().any(|(b, _)| b == m))
                .collect()
        } else {
            file_modules_under(base)
        };
        for m in expected {
            if !names.contains(&m) {
                problems.push(format!(
                    "table of `{}` does not list `{m}`",
                    if base.is_empty() { "mpcbox" } else { base }
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's module tables and src/ disagree:\n{}\nfix: add the module's row (or \
         its name to the row of the module it belongs with), or drop the row",
        problems.join("\n")
    );
}

/// Comments of the code and build files: (file, line, text).
fn comments() -> Vec<(PathBuf, usize, String)> {
    let mut out = Vec::new();
    let mut paths = Vec::new();
    for dir in ["src", "kernels", "tests", "bench", "coupling", ".ci"] {
        files(
            Path::new(dir),
            &[
                ".rs", ".cu", ".cuh", ".c", ".h", ".py", ".sh", ".toml", ".f90", "run",
            ],
            &mut paths,
        );
    }
    paths.push("Cargo.toml".into());
    for p in paths {
        let text = std::fs::read_to_string(repo().join(&p)).unwrap_or_default();
        let name = p.to_string_lossy();
        let hash = [".py", ".sh", ".toml", "run"]
            .iter()
            .any(|e| name.ends_with(e));
        let bang = name.ends_with(".f90");
        let mut in_block = false;
        // a string may span lines (Rust, Python, shell)
        let mut quote: Option<char> = None;
        for (i, line) in text.lines().enumerate() {
            let chars: Vec<char> = line.chars().collect();
            let mut comment = String::new();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                let next = chars.get(k + 1).copied().unwrap_or('\0');
                if in_block {
                    if c == '*' && next == '/' {
                        in_block = false;
                        k += 1;
                    } else {
                        comment.push(c);
                    }
                } else if let Some(q) = quote {
                    if c == '\\' {
                        k += 1;
                    } else if c == q {
                        quote = None;
                    }
                } else if c == '"' && !(k > 0 && chars[k - 1] == '\'' && next == '\'') {
                    quote = Some('"');
                } else if hash && c == '\'' {
                    quote = Some('\'');
                } else if (hash && c == '#' && !(k > 0 && matches!(chars[k - 1], '$' | '{')))
                    || (bang && c == '!')
                    || (!hash && !bang && c == '/' && next == '/')
                {
                    comment.extend(&chars[k..]);
                    break;
                } else if !hash && !bang && c == '/' && next == '*' {
                    in_block = true;
                    k += 1;
                }
                k += 1;
            }
            if !comment.is_empty() {
                out.push((p.clone(), i + 1, comment));
            }
        }
    }
    out
}

/// Code comments explain why, in words a reader can follow: no "issue N" or "talk N" (the
/// tracker and the talks are not in the tree), no GPU models, dates or measured rates (a
/// measurement belongs in `bench/records/`, where its machine and commit are recorded).
#[test]
fn code_comments_carry_no_issue_numbers_talks_or_machine_figures() {
    let rules = [
        (r"(?i)\bissues? #?\d+", "an issue number"),
        (r"(?i)\btalks? \d+", "a talk number"),
        (r"\b(GH200|H100|H200|A100|V100|B200)", "a GPU model"),
        (r"\b\d+ (multiprocessors|SMs)\b", "a GPU's size"),
        (r"\b20\d\d-\d\d-\d\d\b", "a date"),
        (r"\d ?(GB/s|GiB/s|TB/s|MB/s)", "a measured rate"),
        (r"\d\s*[GMk]?\s*particle-steps/s", "a measured rate"),
    ]
    .map(|(r, what)| (Regex::new(r).unwrap(), what));
    // timings, in the library and its kernels (tests name the waits they make)
    let timing = Regex::new(r"\d ?(ms|µs)\b").unwrap();
    let mut found = Vec::new();
    for (file, line, text) in comments() {
        if file.starts_with("src") || file.starts_with("kernels") {
            if let Some(m) = timing.find(&text) {
                found.push(format!(
                    "{}:{line}: a timing ({})",
                    file.display(),
                    m.as_str()
                ));
            }
        }
        for (re, what) in &rules {
            if let Some(m) = re.find(&text) {
                found.push(format!(
                    "{}:{line}: {what} ({})",
                    file.display(),
                    m.as_str()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} code comments a reader cannot follow or that date:\n{}\nfix: say why in words; a \
         figure goes into a benchmark record (`mpcbox-bench`), an issue's reason into the comment",
        found.len(),
        found.join("\n")
    );
}
