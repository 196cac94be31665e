//! Typed kernel launches. Each kernel's parameters are declared once, in a kernel table
//! ([`kernel_table!`]: the fluid's in `device.rs`, the MD engine's in `md::gpu::setup`), which
//! gives every kernel a launcher whose parameters have those types (`const double *` takes a
//! device array the kernel reads, `double *` one it writes, `MpcParams` the parameter struct)
//! and the list that `tests` compare with the `extern "C" __global__` signatures in
//! `kernels/`: a kernel whose parameters change on one side fails a test instead of trusting
//! a comment, and a launch with an argument of the wrong kind does not compile.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr, LaunchArgs, PushKernelArg};

/// A device array a kernel reads (`const T *`).
pub trait In<T> {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>);
}

/// A device array a kernel writes (`T *`).
pub trait Out<T> {
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>);
}

impl<T> In<T> for CudaSlice<T> {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl<T> In<T> for CudaView<'_, T> {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl<T> Out<T> for CudaSlice<T> {
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl<T> Out<T> for CudaViewMut<'_, T> {
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

/// The device address of an array of `T` that no `CudaSlice` owns (a caller's device-resident
/// solutes, a peer's buffer), or null where a kernel takes an optional array.
#[derive(Debug)]
pub struct DevPtr<T> {
    addr: u64,
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DevPtr<T> {}

impl<T> DevPtr<T> {
    pub fn new(addr: u64) -> DevPtr<T> {
        DevPtr {
            addr,
            _elem: PhantomData,
        }
    }

    /// The address (for a launch built by hand).
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// No array: the kernel's documented meaning of null (e.g. "every solute").
    #[allow(dead_code)] // for the launch sites still to be converted (solutes.rs)
    pub fn null() -> DevPtr<T> {
        DevPtr::new(0)
    }
}

impl<T> In<T> for DevPtr<T> {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(&self.addr);
    }
}

impl<T> Out<T> for DevPtr<T> {
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        args.arg(&self.addr);
    }
}

/// A type the kernels take, with its CUDA spelling (the signature check's vocabulary).
pub trait CudaType: DeviceRepr {
    const NAME: &'static str;
}

impl CudaType for f64 {
    const NAME: &'static str = "double";
}
impl CudaType for f32 {
    const NAME: &'static str = "float";
}
impl CudaType for u32 {
    const NAME: &'static str = "unsigned int";
}
impl CudaType for i32 {
    const NAME: &'static str = "int";
}
impl CudaType for u64 {
    const NAME: &'static str = "unsigned long long";
}

/// The launcher's parameter type of a declared kind: `In<T>` a device array read, `Out<T>` one
/// written, `Val<T>` a value (passed by reference, copied at the launch).
macro_rules! launch_ty {
    (In<$t:ty>) => { &(impl $crate::backend::cuda::launch::In<$t> + ?Sized) };
    (Out<$t:ty>) => { &mut (impl $crate::backend::cuda::launch::Out<$t> + ?Sized) };
    (Val<$t:ty>) => { &$t };
}

/// Pushes one argument of a declared kind.
macro_rules! launch_push {
    ($b:ident, In<$t:ty>, $arg:ident) => {
        $crate::backend::cuda::launch::In::<$t>::push($arg, &mut $b)
    };
    ($b:ident, Out<$t:ty>, $arg:ident) => {
        $crate::backend::cuda::launch::Out::<$t>::push($arg, &mut $b)
    };
    ($b:ident, Val<$t:ty>, $arg:ident) => {
        cudarc::driver::PushKernelArg::arg(&mut $b, $arg)
    };
}

/// A declared kind in CUDA spelling: `const double *`, `double *`, `MpcParams`.
macro_rules! launch_sig {
    (In<$t:ty>) => {
        format!(
            "const {} *",
            <$t as $crate::backend::cuda::launch::CudaType>::NAME
        )
    };
    (Out<$t:ty>) => {
        format!(
            "{} *",
            <$t as $crate::backend::cuda::launch::CudaType>::NAME
        )
    };
    (Val<$t:ty>) => {
        <$t as $crate::backend::cuda::launch::CudaType>::NAME.to_string()
    };
}

/// Declares a kernel table: per kernels file, each kernel's field, entry point and parameters
/// (`name: In<T>`, `Out<T>` or `Val<T>`). It defines the struct of loaded kernels, `load`,
/// `signatures` (the parameters in CUDA spelling, for the check against the sources) and one
/// typed launcher per kernel, named after its field:
/// `unsafe fn field(&self, stream, cfg, args...) -> Result<(), DriverError>`, whose contract is
/// every launch's: the arrays hold what the kernel reads and writes for `cfg`'s threads and
/// live until the stream has run it.
macro_rules! kernel_table {
    (
        $(#[$meta:meta])* $vis:vis struct $table:ident;
        $($file:literal {
            $($(#[$kdoc:meta])* $field:ident: $name:literal ($($arg:ident: $kind:ident<$t:ty>),* $(,)?),)*
        })*
    ) => {
        $(#[$meta])*
        $vis struct $table {
            $($($(#[$kdoc])* pub(crate) $field: cudarc::driver::CudaFunction,)*)*
        }

        #[allow(dead_code)]
        impl $table {
            /// Every kernel of the table, each looked up by name with `function` (a missing
            /// one fails here, when the device opens, not in the middle of a run).
            pub(crate) fn load(
                function: impl Fn(&str) -> $crate::error::Result<cudarc::driver::CudaFunction>,
            ) -> $crate::error::Result<$table> {
                Ok($table { $($($field: function($name)?,)*)* })
            }

            /// Each kernel's file, entry point and parameter types in CUDA spelling.
            pub(crate) fn signatures() -> Vec<(&'static str, &'static str, Vec<String>)> {
                vec![$($(($file, $name, vec![$($crate::backend::cuda::launch::launch_sig!($kind<$t>)),*]),)*)*]
            }

            $($(
                #[doc = concat!("Launch `", $name, "` (", $file, ") on `stream` with `cfg`.")]
                ///
                /// # Safety
                /// The arrays hold what the kernel reads and writes for `cfg`'s threads and live
                /// until the stream has run it; the values mean what the kernel expects.
                #[allow(clippy::too_many_arguments)]
                pub(crate) unsafe fn $field(
                    &self,
                    stream: &cudarc::driver::CudaStream,
                    cfg: cudarc::driver::LaunchConfig,
                    $($arg: $crate::backend::cuda::launch::launch_ty!($kind<$t>),)*
                ) -> std::result::Result<(), cudarc::driver::DriverError> {
                    let mut b = stream.launch_builder(&self.$field);
                    $($crate::backend::cuda::launch::launch_push!(b, $kind<$t>, $arg);)*
                    // SAFETY: this function's contract; every argument has the declared type.
                    unsafe { b.launch(cfg) }.map(|_| ())
                }
            )*)*
        }
    };
}

pub(crate) use {kernel_table, launch_push, launch_sig, launch_ty};

/// The `extern "C" __global__` kernels of a CUDA source: (name, parameter types in the
/// spelling of [`CudaType`]: `const double *`, `unsigned int`), with parameter-list macros and
/// typedefs expanded, `__restrict__` and the parameter names dropped.
#[cfg(test)]
pub(crate) fn cuda_signatures(source: &str) -> Vec<(String, Vec<String>)> {
    let text = strip_comments(source);
    let mut defines = std::collections::HashMap::new();
    let mut typedefs = std::collections::HashMap::new();
    let joined = text.replace("\\\n", " ");
    for line in joined.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("#define ") {
            let (name, body) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            defines.insert(name.to_string(), body.trim().to_string());
        } else if let Some(rest) = l.strip_prefix("typedef ") {
            let rest = rest.trim_end_matches(';');
            if let Some((ty, name)) = rest.rsplit_once(' ') {
                typedefs.insert(name.to_string(), ty.trim().to_string());
            }
        }
    }
    let mut out = Vec::new();
    let marker = "extern \"C\" __global__ void";
    let mut rest = joined.as_str();
    while let Some(at) = rest.find(marker) {
        rest = &rest[at + marker.len()..];
        // the name is the word before the parameter list; a `__launch_bounds__(...)` before
        // it is skipped (a bounds macro without parentheses is just a word before the name)
        let mut from = 0;
        let (name, list_start) = loop {
            let open = from + rest[from..].find('(').unwrap_or(0);
            let word = rest[from..open].split_whitespace().last().unwrap_or("");
            if word == "__launch_bounds__" {
                from = open + matching(&rest[open..]) + 1;
                continue;
            }
            break (word.to_string(), open);
        };
        let list = &rest[list_start..];
        let close = matching(list);
        let mut params = list[1..close].trim().to_string();
        if let Some(body) = defines.get(&params) {
            params = body.clone();
        }
        let types = params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let p = p.replace("__restrict__", " ");
                let words: Vec<&str> = p.split_whitespace().collect();
                // drop the parameter's name (the last word, or what follows the last '*')
                let ty = match p.rfind('*') {
                    Some(star) => format!(
                        "{} *",
                        p[..star].split_whitespace().collect::<Vec<_>>().join(" ")
                    ),
                    None => words[..words.len().saturating_sub(1)].join(" "),
                };
                let ty = ty
                    .split_whitespace()
                    .map(|w| typedefs.get(w).map_or(w.to_string(), |t| t.clone()))
                    .collect::<Vec<_>>()
                    .join(" ");
                ty.trim().to_string()
            })
            .collect();
        out.push((name, types));
        rest = &list[close..];
    }
    out
}

/// The index of the ')' closing the '(' that `s` starts with.
#[cfg(test)]
fn matching(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    s.len()
}

#[cfg(test)]
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '/' && chars.peek() == Some(&'/') {
            for d in chars.by_ref() {
                if d == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            let mut prev = ' ';
            for d in chars.by_ref() {
                if prev == '*' && d == '/' {
                    break;
                }
                if d == '\n' {
                    out.push('\n');
                }
                prev = d;
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Compares a kernel table's declared parameters with the sources': every kernel of the table
/// is defined there with the same parameter types. Returns the mismatches, each naming the
/// kernel, its file and both sides.
#[cfg(test)]
pub(crate) fn check_table(
    declared: &[(&str, &str, Vec<String>)],
    sources: &[(String, Vec<String>)],
) -> Vec<String> {
    let mut problems = Vec::new();
    for (file, name, types) in declared {
        match sources.iter().find(|(n, _)| n == name) {
            None => problems.push(format!("{name} ({file}): no such kernel in the sources")),
            Some((_, cuda)) if cuda != types => problems.push(format!(
                "{name} ({file}):\n  CUDA: ({})\n  Rust: ({})",
                cuda.join(", "),
                types.join(", ")
            )),
            Some(_) => {}
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_read_with_macros_typedefs_and_bounds() {
        let src = r#"
            typedef unsigned long long mpc_u64;
            #define PARAMS const double *__restrict__ a, \
                mpc_u64 n
            // extern "C" __global__ void commented(int x)
            extern "C" __global__ void k1(MpcParams p, double *out, const unsigned int *__restrict__ idx) {}
            extern "C" __global__ void __launch_bounds__(256, 4) k2(PARAMS) {}
            extern "C" __global__ void MPC_BOUNDS k3(float *x, int y) {}
        "#;
        let s = cuda_signatures(src);
        let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["k1", "k2", "k3"]);
        assert_eq!(s[0].1, ["MpcParams", "double *", "const unsigned int *"]);
        assert_eq!(s[1].1, ["const double *", "unsigned long long"]);
        assert_eq!(s[2].1, ["float *", "int"]);
    }

    #[test]
    fn a_changed_parameter_is_reported() {
        let sources = vec![("k".to_string(), vec!["double *".to_string()])];
        let same = [("f.cu", "k", vec!["double *".to_string()])];
        assert!(check_table(&same, &sources).is_empty());
        let other = [("f.cu", "k", vec!["const double *".to_string()])];
        let p = check_table(&other, &sources);
        assert!(p[0].contains("CUDA: (double *)") && p[0].contains("Rust: (const double *)"));
        let missing = [("f.cu", "gone", vec![])];
        assert!(check_table(&missing, &sources)[0].contains("no such kernel"));
    }
}
