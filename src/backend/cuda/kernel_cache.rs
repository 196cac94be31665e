//! Compiled kernels kept on disk between runs: NVRTC takes seconds for the fluid kernels, the
//! same for every run of one build, source and options. A cubin is stored under a name holding
//! the hash of its source, options, architecture and NVRTC version
//! (`$XDG_CACHE_HOME/mpcbox` or `~/.cache/mpcbox`; `MPCBOX_KERNEL_CACHE=off`: none), behind a
//! header with its length and checksum; a file that does not match is compiled again and
//! replaced, and a cache that cannot be written only costs the next run the compilation.

use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"MPCBOXKC";
const HEADER: usize = 32;

/// 64-bit FNV-1a of `parts`, each followed by a zero byte.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The loaded NVRTC's version (0.0 where it cannot say).
fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers to c_int; NVRTC is loadable (the caller compiles with it
    // or has already), and nvrtcVersion only writes them.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    match r {
        cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS => (major, minor),
        _ => (0, 0),
    }
}

/// The cache directory, None when switched off or without a home.
pub fn directory() -> Option<PathBuf> {
    if crate::knobs::knobs().is("MPCBOX_KERNEL_CACHE", "off") {
        return None;
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("mpcbox"))
}

/// Where the cubin of `name`'s `source` compiled with `options` is kept in `dir`.
fn entry(dir: &Path, name: &str, source: &str, options: &[String]) -> (PathBuf, u64) {
    let (vmaj, vmin) = nvrtc_version();
    let version = format!("nvrtc {vmaj}.{vmin}");
    let opts = options.join(" ");
    let h = fnv(&[
        name.as_bytes(),
        source.as_bytes(),
        opts.as_bytes(),
        version.as_bytes(),
    ]);
    let stem = name.trim_end_matches(".cu");
    (dir.join(format!("{stem}-{h:016x}.cubin")), h)
}

/// The cubin stored for `key` at `path`, if the file is whole.
fn read(path: &Path, key: u64) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let word = |k: usize| u64::from_le_bytes(bytes[8 + 8 * k..16 + 8 * k].try_into().unwrap());
    let body = &bytes[HEADER..];
    (word(0) == key && word(1) == body.len() as u64 && word(2) == fnv(&[body]))
        .then(|| body.to_vec())
}

/// Store `cubin` for `key` at `path`, atomically (a reader sees the old file or the new).
fn write(path: &Path, key: u64, cubin: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut bytes = Vec::with_capacity(HEADER + cubin.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&key.to_le_bytes());
    bytes.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&fnv(&[cubin]).to_le_bytes());
    bytes.extend_from_slice(cubin);
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The cubin of `source` (named `name`) compiled with `options`: from `dir` if kept there,
/// else by `compile`, then kept. Returns it and whether it came from the cache.
pub fn cached_in(
    dir: Option<&Path>,
    name: &str,
    source: &str,
    options: &[String],
    compile: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<(Vec<u8>, bool), String> {
    let Some(dir) = dir else {
        return compile().map(|c| (c, false));
    };
    let (path, key) = entry(dir, name, source, options);
    if let Some(c) = read(&path, key) {
        return Ok((c, true));
    }
    let c = compile()?;
    if let Err(e) = write(&path, key, &c) {
        tracing::debug!("compiled kernels not kept in {}: {e}", path.display());
    }
    Ok((c, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel compiled once is read back from the cache (not compiled again); a damaged
    /// file is compiled again and replaced; other options are another entry.
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn a_compiled_kernel_is_kept_and_a_damaged_one_replaced() {
        crate::backend::cuda::kernels::require_nvrtc_for_tests();
        let dir = tempfile::tempdir().unwrap();
        let source = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] += 1.0f; }";
        let options = crate::backend::cuda::kernels::compile_options(9, 0);
        let compile = || {
            crate::backend::cuda::kernels::compile_source_cubin(
                source.to_string(),
                c"tiny.cu",
                9,
                0,
            )
        };
        let (first, hit) =
            cached_in(Some(dir.path()), "tiny.cu", source, &options, compile).unwrap();
        assert!(!hit && first.len() > 100);
        let fail = || -> Result<Vec<u8>, String> { Err("compiled again".into()) };
        let (again, hit) = cached_in(Some(dir.path()), "tiny.cu", source, &options, fail).unwrap();
        assert!(hit);
        assert_eq!(again, first);
        let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let mut bytes = std::fs::read(&files[0]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&files[0], &bytes).unwrap();
        let err = cached_in(Some(dir.path()), "tiny.cu", source, &options, fail).unwrap_err();
        assert_eq!(err, "compiled again");
        let (fresh, hit) =
            cached_in(Some(dir.path()), "tiny.cu", source, &options, compile).unwrap();
        assert!(!hit);
        assert_eq!(fresh, first);
        let mut other = options.clone();
        other.push("-DMPC_OTHER=1".into());
        let (_, hit) = cached_in(Some(dir.path()), "tiny.cu", source, &other, compile).unwrap();
        assert!(!hit, "other options share an entry");
    }
}
