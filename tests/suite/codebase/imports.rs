//! The file-level import graph of a crate's `src/`: which files each file names, through `use`
//! trees (grouped ones expanded, `self`, `super`, `crate` and the crate's own name resolved) and
//! inline `crate::`/`super::`/`self::` paths; comments, strings and `mod tests` left out. A path
//! resolves to the longest of its prefixes that is a file module (`a/b.rs` or `a/b/mod.rs`), so
//! a re-export counts as an edge to the file that re-exports. `mod x;` declarations are not
//! edges (a parent declaring its children is not an import).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files (relative to the source root) and the files each imports.
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Open,
    Close,
    Semi,
    Comma,
    Other(char),
}

/// The tokens of Rust source that matter for paths; comments, string, char and number literals
/// and lifetimes dropped.
fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    // a string body starting after its opening quote; returns the index after the closing one
    let skip_string = |mut i: usize| {
        while i < n && c[i] != '"' {
            i += if c[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    // a raw string from its `r`: r"..", r#".."#, ...
    let skip_raw = |mut i: usize| {
        i += 1;
        let mut hashes = 0;
        while i < n && c[i] == '#' {
            hashes += 1;
            i += 1;
        }
        i += 1; // the opening quote
        while i < n {
            if c[i] == '"' && (1..=hashes).all(|k| i + k < n && c[i + k] == '#') {
                return i + 1 + hashes;
            }
            i += 1;
        }
        n
    };
    while i < n {
        let ch = c[i];
        let next = if i + 1 < n { c[i + 1] } else { '\0' };
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == '/' {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == '*' {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && i + 1 < n && c[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && i + 1 < n && c[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(i + 1);
        } else if ch == '\'' {
            // a char literal ('x', '\n', '\u{1F}') or a lifetime ('a)
            if next == '\\' {
                i += 2;
                while i < n && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if i + 2 < n && c[i + 2] == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < n && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ident_start(ch) {
            let (r_raw, b_raw) = (ch == 'r', ch == 'b' && next == 'r');
            let after = if b_raw { i + 2 } else { i + 1 };
            let at = |k: usize| if k < n { c[k] } else { '\0' };
            if (r_raw || b_raw) && (at(after) == '"' || (at(after) == '#' && at(after + 1) != '['))
            {
                if at(after) == '#' && ident_start(at(after + 1)) {
                    // a raw identifier r#name
                    let s = after + 1;
                    let mut e = s;
                    while e < n && ident_char(c[e]) {
                        e += 1;
                    }
                    out.push(Tok::Ident(c[s..e].iter().collect()));
                    i = e;
                } else {
                    i = skip_raw(after - 1);
                }
            } else if ch == 'b' && next == '"' {
                i = skip_string(i + 2);
            } else if ch == 'b' && next == '\'' {
                i += 2;
                while i < n && c[i] != '\'' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            } else {
                let s = i;
                while i < n && ident_char(c[i]) {
                    i += 1;
                }
                out.push(Tok::Ident(c[s..i].iter().collect()));
            }
        } else if ch.is_ascii_digit() {
            while i < n && (ident_char(c[i]) || c[i] == '.' && at_digit(&c, i + 1)) {
                i += 1;
            }
        } else {
            out.push(match ch {
                ':' if next == ':' => {
                    i += 1;
                    Tok::Sep
                }
                '{' => Tok::Open,
                '}' => Tok::Close,
                ';' => Tok::Semi,
                ',' => Tok::Comma,
                other => Tok::Other(other),
            });
            i += 1;
        }
    }
    out
}

fn at_digit(c: &[char], i: usize) -> bool {
    i < c.len() && c[i].is_ascii_digit()
}

/// The paths a `use` tree names, from its first token to (not including) its `;`.
fn use_paths(t: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    while *i < t.len() {
        match &t[*i] {
            Tok::Ident(s) if s == "as" => {
                *i += 2; // `as name`
                break;
            }
            Tok::Ident(s) => {
                path.push(s.clone());
                *i += 1;
            }
            Tok::Sep => *i += 1,
            Tok::Other('*') => *i += 1,
            Tok::Open => {
                *i += 1;
                loop {
                    match t.get(*i) {
                        Some(Tok::Close) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Comma) => *i += 1,
                        Some(_) => use_paths(t, i, &path, out),
                        None => return,
                    }
                }
            }
            _ => break,
        }
    }
    out.push(path);
}

/// The module path of a file (`a/b.rs`, `a/b/mod.rs` → [a, b]; `lib.rs` → []).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

impl Graph {
    /// The graph of every `.rs` file under `root` (a crate's `src/`), whose crate is `krate`.
    pub fn of_crate(root: &Path, krate: &str) -> Graph {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        let rel = |p: &Path| p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
        for f in &files {
            let r = rel(f);
            if r != "main.rs" {
                modules.insert(module_of(Path::new(&r)), r);
            }
        }
        let mut edges = BTreeMap::new();
        for f in &files {
            let r = rel(f);
            let src = std::fs::read_to_string(f).expect("a source file");
            let here = module_of(Path::new(&r));
            let targets = imports(&lex(&src), &here, krate, r == "main.rs")
                .into_iter()
                .filter_map(|p| resolve(&modules, &p))
                .filter(|t| *t != r)
                .collect();
            edges.insert(r, targets);
        }
        Graph { edges }
    }

    /// Every strongly connected component of more than one file (Tarjan), each sorted.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        struct Walk<'a> {
            g: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on: BTreeSet<&'a str>,
            out: Vec<Vec<String>>,
        }
        impl<'a> Walk<'a> {
            fn visit(&mut self, v: &'a str) {
                let k = self.index.len();
                self.index.insert(v, k);
                self.low.insert(v, k);
                self.stack.push(v);
                self.on.insert(v);
                for w in self.g.edges.get(v).into_iter().flatten() {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let l = self.low[v].min(self.low[w]);
                        self.low.insert(v, l);
                    } else if self.on.contains(w) {
                        let l = self.low[v].min(self.index[w]);
                        self.low.insert(v, l);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on.remove(w);
                        comp.push(w.to_string());
                        if w == v {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        comp.sort();
                        self.out.push(comp);
                    }
                }
            }
        }
        let mut walk = Walk {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in self.edges.keys() {
            if !walk.index.contains_key(v.as_str()) {
                walk.visit(v);
            }
        }
        walk.out
    }
}

/// The absolute module paths `t` names (from module `here`), outside `mod tests`.
fn imports(t: &[Tok], here: &[String], krate: &str, is_main: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // inline modules open here: (name, brace depth inside it)
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let ident = |k: usize| match t.get(k) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    while i < t.len() {
        let in_tests = inline.iter().any(|(m, _)| m == "tests");
        let scope: Vec<String> = here
            .iter()
            .cloned()
            .chain(inline.iter().map(|(m, _)| m.clone()))
            .collect();
        match &t[i] {
            Tok::Ident(m)
                if m == "mod" && ident(i + 1).is_some() && t.get(i + 2) == Some(&Tok::Open) =>
            {
                depth += 1;
                inline.push((ident(i + 1).unwrap().to_string(), depth));
                i += 3;
            }
            Tok::Open => {
                depth += 1;
                i += 1;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(u) if u == "use" => {
                i += 1;
                let mut paths = Vec::new();
                use_paths(t, &mut i, &[], &mut paths);
                while i < t.len() && t[i] != Tok::Semi {
                    i += 1;
                }
                if !in_tests {
                    out.extend(paths.iter().filter_map(|p| absolute(p, &scope, krate)));
                }
            }
            Tok::Ident(first)
                if ["crate", "super", "self"].contains(&first.as_str())
                    || (is_main && first == krate) =>
            {
                let after_sep = i > 0 && t[i - 1] == Tok::Sep;
                let mut path = vec![first.clone()];
                let mut k = i + 1;
                while t.get(k) == Some(&Tok::Sep) {
                    match ident(k + 1) {
                        Some(s) => path.push(s.to_string()),
                        None => break,
                    }
                    k += 2;
                }
                if path.len() > 1 && !after_sep && !in_tests {
                    out.extend(absolute(&path, &scope, krate));
                }
                i = k.max(i + 1);
            }
            _ => i += 1,
        }
    }
    out
}

/// `path` as an absolute module path from `scope`, or None for another crate's path.
fn absolute(path: &[String], scope: &[String], krate: &str) -> Option<Vec<String>> {
    let first = path.first()?;
    let (mut base, mut rest) = if first == "crate" || first == krate {
        (Vec::new(), &path[1..])
    } else if first == "super" || first == "self" {
        (scope.to_vec(), path)
    } else {
        return None;
    };
    while let Some(s) = rest.first().filter(|s| *s == "super" || *s == "self") {
        if s == "super" {
            base.pop();
        }
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The file of the longest prefix of `path` that is a file module.
fn resolve(modules: &BTreeMap<Vec<String>, String>, path: &[String]) -> Option<String> {
    (0..=path.len())
        .rev()
        .find_map(|k| modules.get(&path[..k]).cloned())
}

#[test]
fn the_resolver_reads_use_trees_inline_paths_and_skips_comments_strings_and_tests() {
    let src = r##"
        //! crate::in_a_comment
        use crate::a::{b, c::{self, D}, e as f};
        use super::g::*;
        fn h() { let s = "crate::in_a_string"; let r = r#"crate::raw"#; let ch = '"'; crate::i::j(); }
        fn k<'a>(x: &'a str) -> self::l::T { todo!() }
        /* crate::in /* a nested */ block */
        mod inner { use super::super::m::N; }
        #[cfg(test)]
        mod tests { use crate::in_tests::X; }
        use other_crate::Y;
    "##;
    let got = imports(&lex(src), &["p".into(), "q".into()], "mine", false);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            s(&["a", "b"]),
            s(&["a", "c"]),
            s(&["a", "c", "D"]),
            s(&["a", "e"]),
            s(&["p", "g"]),
            s(&["i", "j"]),
            s(&["p", "q", "l", "T"]),
            s(&["p", "m", "N"]),
        ]
    );
}
