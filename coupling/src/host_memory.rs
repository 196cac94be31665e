//! Memory for the solute arrays a C, C++ or Fortran MD code hands to `mpcbox_step`: page-locked
//! where a CUDA GPU is usable, so that the arrays cross PCIe by DMA straight from and into it
//! (no staging copy), and ordinary memory otherwise. Each block remembers which it is, so that
//! `mpcbox_host_free` gives it back the same way.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Mutex;

/// How each live block was allocated, by address.
enum Block {
    PageLocked,
    System(Layout),
}

fn blocks() -> &'static Mutex<HashMap<usize, Block>> {
    static BLOCKS: std::sync::OnceLock<Mutex<HashMap<usize, Block>>> = std::sync::OnceLock::new();
    BLOCKS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `bytes` bytes (aligned to 64) for solute arrays: page-locked host memory where a CUDA driver
/// and GPU are usable (the fluid's GPUs then copy the solutes to and from it by DMA, without
/// the staging copy that ordinary memory needs), ordinary memory otherwise. NULL for 0 bytes or
/// when no memory is left. Give it back with `mpcbox_host_free`. Safe to call from any thread.
#[no_mangle]
pub extern "C" fn mpcbox_host_alloc(bytes: usize) -> *mut c_void {
    if bytes == 0 {
        return std::ptr::null_mut();
    }
    let Ok(mut map) = blocks().lock() else {
        return std::ptr::null_mut();
    };
    if let Some(p) = mpcbox::backend::cuda::alloc_page_locked(bytes) {
        map.insert(p.as_ptr() as usize, Block::PageLocked);
        return p.as_ptr().cast();
    }
    let Ok(layout) = Layout::from_size_align(bytes, 64) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (checked above).
    let p = unsafe { std::alloc::alloc(layout) };
    if !p.is_null() {
        map.insert(p as usize, Block::System(layout));
    }
    p.cast()
}

/// Give back memory from `mpcbox_host_alloc` (NULL: nothing). A pointer that did not come from
/// it, or was given back already, is ignored.
///
/// # Safety
/// No copy or other code may still use the memory.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_host_free(ptr: *mut c_void) {
    let Some(p) = NonNull::new(ptr.cast::<u8>()) else {
        return;
    };
    let Ok(mut map) = blocks().lock() else { return };
    match map.remove(&(p.as_ptr() as usize)) {
        // SAFETY: allocated by `alloc_page_locked` (recorded so), given back once (removed).
        Some(Block::PageLocked) => unsafe { mpcbox::backend::cuda::free_page_locked(p) },
        // SAFETY: allocated by `std::alloc::alloc` with this layout, given back once.
        Some(Block::System(layout)) => unsafe { std::alloc::dealloc(p.as_ptr(), layout) },
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_writable_and_given_back_once() {
        assert!(mpcbox_host_alloc(0).is_null());
        let n = 1000;
        let p = mpcbox_host_alloc(8 * n).cast::<f64>();
        assert!(!p.is_null());
        assert_eq!(p as usize % 64, 0, "aligned to 64 bytes");
        // SAFETY: n doubles were allocated above.
        let s = unsafe { std::slice::from_raw_parts_mut(p, n) };
        s.iter_mut().enumerate().for_each(|(i, x)| *x = i as f64);
        assert_eq!(s.iter().sum::<f64>(), (n * (n - 1) / 2) as f64);
        // SAFETY: from mpcbox_host_alloc; the second call and NULL are ignored.
        unsafe {
            mpcbox_host_free(p.cast());
            mpcbox_host_free(p.cast());
            mpcbox_host_free(std::ptr::null_mut());
        }
        assert!(!blocks().lock().unwrap().contains_key(&(p as usize)));
    }
}
