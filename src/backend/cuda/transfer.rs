//! Peer access between the GPUs of one host: who may reach whose memory, and the grants that
//! make copy engines and kernels use NVLink for memory from the stream-ordered pools.

use super::{CudaDevice, MpcError, Result};

/// Let every GPU of the run read and write the stream-ordered memory pool of every other
/// (where the hardware allows peer access). cudarc allocates from the device's current pool
/// (`cuMemAllocAsync`), and a pool grants peers nothing by default: a peer copy of pool memory
/// is then staged through the host by the driver (measured on 4 × H200 with NVLink: 38 GB/s
/// instead of ~385 GB/s) and a kernel dereferencing it faults. Peer *context* access
/// (`cuCtxEnablePeerAccess`) does not cover pool memory; `cuMemPoolSetAccess` does.
pub(crate) fn grant_pool_access(devices: &[&CudaDevice]) -> Result<Vec<(usize, usize)>> {
    use cudarc::driver::sys;
    let mut granted = Vec::new();
    for owner in devices {
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: `pool` is a valid out-pointer; the device handle comes from a live context.
        let r = unsafe { sys::cuDeviceGetMemPool(&mut pool, owner.ctx.cu_device()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(MpcError::Device(format!(
                "cuDeviceGetMemPool on cuda:{} failed ({r:?})",
                owner.ordinal
            )));
        }
        for peer in devices {
            if peer.ordinal == owner.ordinal || !can_access_peer(peer, owner) {
                continue;
            }
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: peer.ordinal as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: `desc` is one valid access descriptor and lives across the call; `pool`
            // was returned by the driver above.
            let r = unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(MpcError::Device(format!(
                    "cuMemPoolSetAccess (cuda:{} memory for cuda:{}) failed ({r:?}); fix: set \
                     MPCBOX_MULTI_TRANSFER=host to stage transfers through host memory",
                    owner.ordinal, peer.ordinal
                )));
            }
            granted.push((owner.ordinal, peer.ordinal));
        }
    }
    Ok(granted)
}

/// Whether `reader` may access memory of `owner` directly (NVLink or PCIe peer-to-peer).
pub fn can_access_peer(reader: &CudaDevice, owner: &CudaDevice) -> bool {
    let mut can = 0;
    // SAFETY: `can` is a valid out-pointer; both device handles come from live contexts.
    let r = unsafe {
        cudarc::driver::sys::cuDeviceCanAccessPeer(
            &mut can,
            reader.ctx.cu_device(),
            owner.ctx.cu_device(),
        )
    };
    r == cudarc::driver::sys::CUresult::CUDA_SUCCESS && can != 0
}

/// Whether GPU `reader` has read-write access to the memory behind device pointer `ptr`
/// (which lives on another GPU's pool): the check the tests make for every buffer that
/// another GPU touches.
pub fn peer_can_access(ptr: u64, reader_ordinal: usize) -> Result<bool> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: MEMPOOL_HANDLE writes one CUmemoryPool into `pool`.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut pool as *mut _ as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
            ptr,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS || pool.is_null() {
        return Err(MpcError::Device(format!(
            "pointer {ptr:#x} is not memory of a CUDA pool ({r:?})"
        )));
    }
    let mut loc = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: reader_ordinal as i32,
    };
    let mut flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    // SAFETY: valid out-pointer and location; `pool` returned by the driver above.
    let r = unsafe { sys::cuMemPoolGetAccess(&mut flags, pool, &mut loc) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(MpcError::Device(format!(
            "cuMemPoolGetAccess failed ({r:?})"
        )));
    }
    Ok(flags == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
}

/// If `ptr` lies in a stream-ordered memory pool (`cudaMallocAsync`), let GPUs `readers` read
/// and write it (peer access of contexts does not cover pool memory). Plain `cudaMalloc`
/// memory needs nothing more than the contexts' peer access, enabled when the run opened.
pub(crate) fn open_pool_of(ptr: u64, readers: &[usize]) -> Result<()> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: MEMPOOL_HANDLE writes one CUmemoryPool into `pool`; `ptr` is only read as an
    // integer by the driver.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut pool as *mut _ as *mut std::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
            ptr,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS || pool.is_null() {
        return Ok(()); // not pool memory
    }
    for &reader in readers {
        let desc = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: reader as i32,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: one valid descriptor, alive across the call; `pool` from the driver above.
        let r = unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(MpcError::Device(format!(
                "the solutes' memory pool cannot be opened to GPU {reader} ({r:?}); fix: \
                 allocate the solutes with cudaMalloc, or run the fluid on one GPU"
            )));
        }
    }
    Ok(())
}
