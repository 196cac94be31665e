//! The checkpoint file, format 4: the fluid in blocks, one per writer (an MPI rank, or the one
//! process), each holding its particles with their global indices. Blocks start on 4 KiB pages,
//! so every rank writes its own block into the one file with positioned writes and no two ranks
//! touch one page; a resume on any rank count reads only the blocks whose y range meets its
//! layers. The rest (config, step, statistics, the MD state, the block table) follows the last
//! block, encoded with postcard; the header names its place and checksum, and every block has
//! its own checksum.
//!
//! ```text
//! 0     "MPCBOXCK", version (u32), 0 (u32), meta offset, meta length, meta checksum (u64 each)
//! 40    zeros up to 4096
//! 4096  block 0: ids (u64), x, y, z (f32), vx, vy, vz (f64), each `count` long; then zeros
//!       to the next page; block 1 ...
//! meta  postcard of `Meta` (on a page of its own), then postcard of the run id
//!       (`Option<String>`; absent in files of builds before run ids, which ignore it)
//! ```
//! Every number is little-endian.

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{CheckpointHead, MAGIC};
use crate::error::{MpcError, Result};

pub(super) const VERSION: u32 = 4;
/// Bytes of the header proper.
const HEADER: usize = 40;
/// Blocks and the meta start on pages of this size.
const PAGE: u64 = 4096;
/// Bytes per particle in a block: its id (u64), position (3 × f32) and velocity (3 × f64).
pub const PARTICLE_BYTES: u64 = 44;

/// One writer's particles in the file.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Block {
    offset: u64,
    count: u64,
    /// The lowest and highest y of its particles (a reader skips a block outside its layers).
    y_range: [f32; 2],
    checksum: u64,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    head: CheckpointHead,
    n_fluid: u64,
    blocks: Vec<Block>,
}

/// 64-bit FNV-1a over 8-byte words (a short tail padded with zeros): any change of one word
/// changes the hash, and it runs at memory speed rather than a byte at a time.
fn fnv_words(bytes: &[u8]) -> u64 {
    fnv_fold(FNV_OFFSET, bytes)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// `h` folded with the 8-byte words of `bytes` as [`fnv_words`] folds them (a short tail padded
/// with zeros).
fn fnv_fold(mut h: u64, bytes: &[u8]) -> u64 {
    let (words, tail) = bytes.as_chunks::<8>();
    for w in words {
        h = (h ^ u64::from_le_bytes(*w)).wrapping_mul(FNV_PRIME);
    }
    if !tail.is_empty() {
        let mut w = [0u8; 8];
        w[..tail.len()].copy_from_slice(tail);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// The checksum of a block or the meta: [`fnv_words`] of each MiB (in parallel), folded
/// together with the length.
fn checksum(bytes: &[u8]) -> u64 {
    let parts: Vec<u64> = bytes.par_chunks(1 << 20).map(fnv_words).collect();
    let mut h = fnv_words(&(bytes.len() as u64).to_le_bytes());
    for p in parts {
        h = (h ^ p).wrapping_mul(FNV_PRIME);
    }
    h
}

/// An I/O error on `p` as the crate's error.
fn io(p: &Path) -> impl Fn(std::io::Error) -> MpcError + '_ {
    move |e| MpcError::io(p, e)
}

fn align(x: u64) -> u64 {
    x.div_ceil(PAGE) * PAGE
}

/// The encoded meta (to be written at `at`) and the header naming it.
fn meta_and_header(
    path: &Path,
    head: &CheckpointHead,
    n_fluid: u64,
    blocks: Vec<Block>,
    at: u64,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let meta = Meta {
        head: head.clone(),
        n_fluid,
        blocks,
    };
    let encode_error = |e: postcard::Error| MpcError::Checkpoint {
        path: path.display().to_string(),
        problem: format!("cannot encode: {e}"),
    };
    let mut meta = postcard::to_stdvec(&meta).map_err(encode_error)?;
    // after the meta proper: earlier readers decode the meta and ignore what follows it
    meta.extend(postcard::to_stdvec(&head.run_id).map_err(encode_error)?);
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&at.to_le_bytes());
    header.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    header.extend_from_slice(&checksum(&meta).to_le_bytes());
    Ok((meta, header))
}

/// The file in memory, with a block for each of `writers`, as that many ranks would write it.
pub(super) fn to_bytes(
    head: &CheckpointHead,
    n_fluid: u64,
    writers: &[FluidView<'_>],
) -> Result<Vec<u8>> {
    let mut blocks = Vec::with_capacity(writers.len());
    let mut data = Vec::with_capacity(writers.len());
    let mut at = PAGE;
    let mut first_id = 0;
    for &fluid in writers {
        let mut view = fluid;
        let mut bytes = Vec::new();
        let done = encode::stream_block(&mut view, first_id, 32 << 20, &mut bytes)?;
        blocks.push(Block {
            offset: at,
            count: fluid.count(),
            y_range: done.y_range,
            checksum: done.checksum,
        });
        first_id += fluid.count();
        at = align(at + bytes.len() as u64);
        data.push(bytes);
    }
    let (meta, header) = meta_and_header(Path::new("(memory)"), head, n_fluid, blocks.clone(), at)?;
    let mut out = vec![0u8; at as usize + meta.len()];
    out[..HEADER].copy_from_slice(&header);
    for (b, bytes) in blocks.iter().zip(&data) {
        let o = b.offset as usize;
        out[o..o + bytes.len()].copy_from_slice(bytes);
    }
    out[at as usize..].copy_from_slice(&meta);
    Ok(out)
}

mod chunks;
mod disk;
pub(crate) use disk::BUFFERS;
mod encode;
mod file_io;
mod read;
mod split;
mod stream;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use chunks::{read_section as read_chunked, Chunk, ChunkFetch, Fetched, Kept};
pub use encode::{BlockSource, BlockStream, FluidView, LocalFluid};
pub use read::PartedFile;
pub use split::PartMap;
pub use stream::Values;
pub(crate) use write::{
    finish, piece_bytes, plan, remove_spare, temporary_prefix, write, write_block, Recycle,
};
