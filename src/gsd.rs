//! GSD trajectory files (General Simulation Data, file layer 2.1, HOOMD schema), the format that
//! HOOMD-blue writes and OVITO, freud and the `gsd` Python package read.
//!
//! The file layer, as written here: a 256-byte header; an index of 32-byte entries (frame, N,
//! location, M, name id, type, flags), sorted by frame and then by name id, ended by the first
//! entry whose location is 0; a name list of NUL-separated chunk names in 64-byte segments; the
//! data chunks. All names a writer will use are put in the name list when the file is created,
//! so each frame appends its chunks and then its index entries; a frame whose index entries
//! were not written (a killed job) is simply not part of the file. When the index is full, a
//! larger copy goes to the end of the file and the header is rewritten to point at it.
//!
//! The HOOMD schema: a chunk missing from frame i > 0 takes its value from frame 0, so the
//! constant parts of a system (N, types, type ids, masses, bonds) are written in frame 0 only.
//! Positions are stored relative to the box centre (HOOMD boxes span [−L/2, L/2)). Under
//! Lees-Edwards shear the box tilt `xy` is the current image offset over Ly, so that a reader
//! unwrapping with `x + ix Lx + iy xy Ly` recovers the same unwrapped positions mpcbox has.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{MpcError, Result};

const MAGIC: u64 = 0x65DF_65DF_65DF_65DF;
const HEADER_BYTES: u64 = 256;
const ENTRY_BYTES: u64 = 32;
const NAME_SEGMENT: u64 = 64;
const INITIAL_INDEX_ENTRIES: u64 = 256;

/// GSD file-layer version 2.1 and HOOMD schema version 1.4, as (major << 16) | minor.
const GSD_VERSION: u32 = (2 << 16) | 1;
const HOOMD_SCHEMA_VERSION: u32 = (1 << 16) | 4;

/// Every chunk name this writer uses, in name-id order.
const NAMES: [&str; 13] = [
    "configuration/step",
    "configuration/dimensions",
    "configuration/box",
    "particles/N",
    "particles/types",
    "particles/typeid",
    "particles/mass",
    "particles/position",
    "particles/velocity",
    "particles/image",
    "bonds/N",
    "bonds/types",
    "bonds/typeid",
];
/// Added after `NAMES` (kept separate so the array above reads as the schema's order).
const NAME_BONDS_GROUP: &str = "bonds/group";

fn name_id(name: &str) -> u16 {
    if name == NAME_BONDS_GROUP {
        return NAMES.len() as u16;
    }
    NAMES
        .iter()
        .position(|n| *n == name)
        .expect("chunk names come from NAMES") as u16
}

/// GSD element types (the file layer's type codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum ElementType {
    U8 = 1,
    U32 = 3,
    U64 = 4,
    I8 = 5,
    I32 = 7,
    F32 = 9,
}

/// One chunk of a frame: N rows of M elements, little-endian bytes.
struct Chunk {
    id: u16,
    n: u64,
    m: u32,
    ty: ElementType,
    bytes: Vec<u8>,
}

impl Chunk {
    fn new(name: &str, n: usize, m: u32, ty: ElementType, bytes: Vec<u8>) -> Chunk {
        Chunk {
            id: name_id(name),
            n: n as u64,
            m,
            ty,
            bytes,
        }
    }
}

fn le_bytes<T: Copy, const K: usize>(xs: &[T], to: impl Fn(T) -> [u8; K]) -> Vec<u8> {
    xs.iter().flat_map(|&x| to(x)).collect()
}

/// The bonds of a system, written in frame 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GsdBonds {
    pub types: Vec<String>,
    pub typeid: Vec<u32>,
    pub group: Vec<[u32; 2]>,
}

/// What stays the same over a trajectory: written in frame 0, taken from there by readers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GsdTopology {
    pub types: Vec<String>,
    pub typeid: Vec<u32>,
    pub mass: Vec<f32>,
    pub bonds: GsdBonds,
}

/// One frame: the step, the box and the particles. Positions are wrapped into the box with
/// its lower corner at the origin (mpcbox's convention); the writer centres them.
#[derive(Clone, Copy, Debug)]
pub struct GsdFrame<'a> {
    pub step: u64,
    /// Lx, Ly, Lz.
    pub box_lengths: [f64; 3],
    /// Lees-Edwards offset of the y image (x shift of the image above), 0 without shear.
    pub shear_offset: f64,
    pub positions: &'a [[f64; 3]],
    pub velocities: &'a [[f64; 3]],
    pub images: &'a [[i32; 3]],
}

/// An open GSD file that frames are appended to.
pub struct GsdWriter {
    file: File,
    path: PathBuf,
    index_location: u64,
    index_capacity: u64,
    /// Index entries on disk (and in this order in the file's index).
    entries: Vec<[u8; ENTRY_BYTES as usize]>,
    frames: u64,
    topology: GsdTopology,
}

fn io_error<'a>(path: &'a Path, what: &str) -> impl FnOnce(std::io::Error) -> MpcError + 'a {
    let what = what.to_string();
    move |e| MpcError::io(path, std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// A GSD file or frame that cannot be written as asked.
fn invalid(path: &Path, problem: String) -> MpcError {
    MpcError::io(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidInput, problem),
    )
}

fn header_bytes(index_location: u64, index_capacity: u64, namelist_segments: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_BYTES as usize);
    h.extend_from_slice(&MAGIC.to_le_bytes());
    h.extend_from_slice(&index_location.to_le_bytes());
    h.extend_from_slice(&index_capacity.to_le_bytes());
    h.extend_from_slice(&HEADER_BYTES.to_le_bytes()); // the name list follows the header
    h.extend_from_slice(&namelist_segments.to_le_bytes());
    h.extend_from_slice(&HOOMD_SCHEMA_VERSION.to_le_bytes());
    h.extend_from_slice(&GSD_VERSION.to_le_bytes());
    let mut text = |s: &str| {
        let mut field = [0u8; 64];
        field[..s.len()].copy_from_slice(s.as_bytes());
        h.extend_from_slice(&field);
    };
    text(concat!("mpcbox ", env!("CARGO_PKG_VERSION")));
    text("hoomd");
    h.resize(HEADER_BYTES as usize, 0);
    h
}

/// The name list: NUL-terminated names, padded with NULs to whole 64-byte segments (at least
/// one NUL after the last name ends the list).
fn namelist_bytes() -> Vec<u8> {
    let mut b = Vec::new();
    for n in NAMES.iter().chain(std::iter::once(&NAME_BONDS_GROUP)) {
        b.extend_from_slice(n.as_bytes());
        b.push(0);
    }
    b.push(0);
    let segments = (b.len() as u64).div_ceil(NAME_SEGMENT);
    b.resize((segments * NAME_SEGMENT) as usize, 0);
    b
}

fn entry_bytes(frame: u64, chunk: &Chunk, location: u64) -> [u8; ENTRY_BYTES as usize] {
    let mut e = [0u8; ENTRY_BYTES as usize];
    e[0..8].copy_from_slice(&frame.to_le_bytes());
    e[8..16].copy_from_slice(&chunk.n.to_le_bytes());
    e[16..24].copy_from_slice(&location.to_le_bytes());
    e[24..28].copy_from_slice(&chunk.m.to_le_bytes());
    e[28..30].copy_from_slice(&chunk.id.to_le_bytes());
    e[30] = chunk.ty as u8;
    e[31] = 0;
    e
}

fn type_names(types: &[String]) -> Vec<u8> {
    // an N × width array of NUL-padded names (HOOMD's layout for type lists)
    let width = types.iter().map(|t| t.len() + 1).max().unwrap_or(1);
    let mut b = vec![0u8; types.len() * width];
    for (i, t) in types.iter().enumerate() {
        b[i * width..i * width + t.len()].copy_from_slice(t.as_bytes());
    }
    b
}

impl GsdWriter {
    /// Create (or replace) `path` for a system with this topology.
    pub fn create(path: &Path, topology: GsdTopology) -> Result<GsdWriter> {
        check_topology(&topology).map_err(|p| invalid(path, p))?;
        let mut file = File::create(path).map_err(io_error(path, "cannot create the GSD file"))?;
        let names = namelist_bytes();
        let segments = names.len() as u64 / NAME_SEGMENT;
        let index_location = HEADER_BYTES + names.len() as u64;
        let mut head = header_bytes(index_location, INITIAL_INDEX_ENTRIES, segments);
        head.extend_from_slice(&names);
        head.resize(
            (index_location + INITIAL_INDEX_ENTRIES * ENTRY_BYTES) as usize,
            0,
        );
        file.write_all(&head)
            .and_then(|_| file.sync_all())
            .map_err(io_error(path, "cannot write the GSD header"))?;
        Ok(GsdWriter {
            file,
            path: path.to_path_buf(),
            index_location,
            index_capacity: INITIAL_INDEX_ENTRIES,
            entries: Vec::new(),
            frames: 0,
            topology,
        })
    }

    /// Continue a file this writer made, keeping only the frames of steps ≤ `last_step` (a run
    /// resumed from a checkpoint at `last_step` drops what its predecessor wrote after it).
    pub fn append(path: &Path, topology: GsdTopology, last_step: u64) -> Result<GsdWriter> {
        check_topology(&topology).map_err(|p| invalid(path, p))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_error(path, "cannot open the GSD file to append"))?;
        let (index_location, index_capacity) = read_header(&mut file, path)?;
        let mut w = GsdWriter {
            file,
            path: path.to_path_buf(),
            index_location,
            index_capacity,
            entries: Vec::new(),
            frames: 0,
            topology,
        };
        w.read_index()?;
        w.drop_frames_after(last_step)?;
        Ok(w)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Frames in the file.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    fn read_index(&mut self) -> Result<()> {
        let mut buf = vec![0u8; (self.index_capacity * ENTRY_BYTES) as usize];
        self.file
            .read_exact_at(&mut buf, self.index_location)
            .map_err(io_error(&self.path, "cannot read the GSD index"))?;
        for e in buf.chunks_exact(ENTRY_BYTES as usize) {
            if u64::from_le_bytes(e[16..24].try_into().unwrap()) == 0 {
                break;
            }
            self.entries.push(e.try_into().unwrap());
        }
        self.frames = self
            .entries
            .last()
            .map_or(0, |e| u64::from_le_bytes(e[0..8].try_into().unwrap()) + 1);
        Ok(())
    }

    /// Zero the index entries of every frame whose step is over `last_step`.
    fn drop_frames_after(&mut self, last_step: u64) -> Result<()> {
        let step_id = name_id("configuration/step");
        let mut keep_frames = 0;
        for e in &self.entries {
            let id = u16::from_le_bytes(e[28..30].try_into().unwrap());
            if id != step_id {
                continue;
            }
            let mut v = [0u8; 8];
            let location = u64::from_le_bytes(e[16..24].try_into().unwrap());
            self.file
                .read_exact_at(&mut v, location)
                .map_err(io_error(&self.path, "cannot read a frame's step"))?;
            if u64::from_le_bytes(v) > last_step {
                break;
            }
            keep_frames = u64::from_le_bytes(e[0..8].try_into().unwrap()) + 1;
        }
        let keep = self
            .entries
            .iter()
            .take_while(|e| u64::from_le_bytes(e[0..8].try_into().unwrap()) < keep_frames)
            .count();
        if keep < self.entries.len() {
            let zeros = vec![0u8; (self.entries.len() - keep) * ENTRY_BYTES as usize];
            self.file
                .write_all_at(&zeros, self.index_location + keep as u64 * ENTRY_BYTES)
                .and_then(|_| self.file.sync_all())
                .map_err(io_error(&self.path, "cannot trim the GSD index"))?;
            self.entries.truncate(keep);
        }
        self.frames = keep_frames;
        Ok(())
    }

    /// Append one frame and make it durable (data first, then its index entries).
    pub fn write_frame(&mut self, frame: &GsdFrame<'_>) -> Result<()> {
        let n = self.topology.typeid.len();
        if frame.positions.len() != n || frame.velocities.len() != n || frame.images.len() != n {
            return Err(invalid(
                &self.path,
                format!(
                    "a frame has {} positions, {} velocities, {} images for {n} particles",
                    frame.positions.len(),
                    frame.velocities.len(),
                    frame.images.len()
                ),
            ));
        }
        let mut chunks = self.frame_chunks(frame);
        if self.frames == 0 {
            chunks.extend(self.topology_chunks());
        }
        chunks.sort_by_key(|c| c.id);
        let mut location = self
            .file
            .seek(SeekFrom::End(0))
            .map_err(io_error(&self.path, "cannot seek"))?;
        let mut new_entries = Vec::with_capacity(chunks.len());
        let mut data = Vec::new();
        for c in &chunks {
            new_entries.push(entry_bytes(self.frames, c, location));
            data.extend_from_slice(&c.bytes);
            location += c.bytes.len() as u64;
        }
        self.file
            .write_all(&data)
            .and_then(|_| self.file.sync_data())
            .map_err(io_error(&self.path, "cannot write a frame"))?;
        self.push_entries(&new_entries)?;
        self.frames += 1;
        Ok(())
    }

    fn frame_chunks(&self, f: &GsdFrame<'_>) -> Vec<Chunk> {
        use ElementType::*;
        let [lx, ly, lz] = f.box_lengths;
        // the offset in (−Lx/2, Lx/2]: the same lattice of images, the smallest tilt
        let offset = f.shear_offset - lx * (f.shear_offset / lx).round();
        let boxv = [
            lx as f32,
            ly as f32,
            lz as f32,
            (offset / ly) as f32,
            0.0,
            0.0,
        ];
        let centred: Vec<f32> = f
            .positions
            .iter()
            .flat_map(|p| (0..3).map(move |k| (p[k] - 0.5 * f.box_lengths[k]) as f32))
            .collect();
        let vel: Vec<f32> = f.velocities.iter().flatten().map(|&v| v as f32).collect();
        let img: Vec<i32> = f.images.iter().flatten().copied().collect();
        let n = f.positions.len();
        vec![
            Chunk::new(
                "configuration/step",
                1,
                1,
                U64,
                f.step.to_le_bytes().to_vec(),
            ),
            Chunk::new(
                "configuration/box",
                6,
                1,
                F32,
                le_bytes(&boxv, f32::to_le_bytes),
            ),
            Chunk::new(
                "particles/position",
                n,
                3,
                F32,
                le_bytes(&centred, f32::to_le_bytes),
            ),
            Chunk::new(
                "particles/velocity",
                n,
                3,
                F32,
                le_bytes(&vel, f32::to_le_bytes),
            ),
            Chunk::new(
                "particles/image",
                n,
                3,
                I32,
                le_bytes(&img, i32::to_le_bytes),
            ),
        ]
    }

    fn topology_chunks(&self) -> Vec<Chunk> {
        use ElementType::*;
        let t = &self.topology;
        let n = t.typeid.len();
        let mut c = vec![
            Chunk::new("configuration/dimensions", 1, 1, U8, vec![3]),
            Chunk::new("particles/N", 1, 1, U32, (n as u32).to_le_bytes().to_vec()),
            type_list_chunk("particles/types", &t.types),
            Chunk::new(
                "particles/typeid",
                n,
                1,
                U32,
                le_bytes(&t.typeid, u32::to_le_bytes),
            ),
            Chunk::new(
                "particles/mass",
                n,
                1,
                F32,
                le_bytes(&t.mass, f32::to_le_bytes),
            ),
        ];
        let b = &t.bonds;
        if !b.group.is_empty() {
            let nb = b.group.len();
            let group: Vec<u32> = b.group.iter().flatten().copied().collect();
            c.push(Chunk::new(
                "bonds/N",
                1,
                1,
                U32,
                (nb as u32).to_le_bytes().to_vec(),
            ));
            c.push(type_list_chunk("bonds/types", &b.types));
            c.push(Chunk::new(
                "bonds/typeid",
                nb,
                1,
                U32,
                le_bytes(&b.typeid, u32::to_le_bytes),
            ));
            c.push(Chunk::new(
                NAME_BONDS_GROUP,
                nb,
                2,
                U32,
                le_bytes(&group, u32::to_le_bytes),
            ));
        }
        c
    }

    /// Write index entries after the ones on disk, moving the index to the end of the file
    /// (twice as large) when it is full; the header is rewritten last.
    fn push_entries(&mut self, new: &[[u8; ENTRY_BYTES as usize]]) -> Result<()> {
        let needed = (self.entries.len() + new.len()) as u64;
        if needed < self.index_capacity {
            let bytes: Vec<u8> = new.iter().flatten().copied().collect();
            let at = self.index_location + self.entries.len() as u64 * ENTRY_BYTES;
            self.file
                .write_all_at(&bytes, at)
                .and_then(|_| self.file.sync_data())
                .map_err(io_error(&self.path, "cannot write the GSD index"))?;
            self.entries.extend_from_slice(new);
            return Ok(());
        }
        let capacity = (needed + 1)
            .next_power_of_two()
            .max(2 * self.index_capacity);
        let mut bytes: Vec<u8> = self.entries.iter().chain(new).flatten().copied().collect();
        bytes.resize((capacity * ENTRY_BYTES) as usize, 0);
        let location = self
            .file
            .seek(SeekFrom::End(0))
            .map_err(io_error(&self.path, "cannot seek"))?;
        let segments = namelist_bytes().len() as u64 / NAME_SEGMENT;
        self.file
            .write_all(&bytes)
            .and_then(|_| self.file.sync_data())
            .and_then(|_| {
                self.file
                    .write_all_at(&header_bytes(location, capacity, segments), 0)
            })
            .and_then(|_| self.file.sync_data())
            .map_err(io_error(&self.path, "cannot grow the GSD index"))?;
        self.index_location = location;
        self.index_capacity = capacity;
        self.entries.extend_from_slice(new);
        Ok(())
    }
}

fn type_list_chunk(name: &str, types: &[String]) -> Chunk {
    let width = types.iter().map(|t| t.len() + 1).max().unwrap_or(1);
    Chunk::new(
        name,
        types.len(),
        width as u32,
        ElementType::I8,
        type_names(types),
    )
}

fn check_topology(t: &GsdTopology) -> std::result::Result<(), String> {
    let n = t.typeid.len();
    let bad = |what: String| Err(format!("GSD topology: {what}"));
    if t.mass.len() != n {
        return bad(format!("{} masses for {n} particles", t.mass.len()));
    }
    if let Some(&id) = t.typeid.iter().find(|&&id| id as usize >= t.types.len()) {
        return bad(format!("type id {id} with {} types", t.types.len()));
    }
    let b = &t.bonds;
    if b.typeid.len() != b.group.len() {
        return bad(format!(
            "{} bond type ids for {} bonds",
            b.typeid.len(),
            b.group.len()
        ));
    }
    if let Some(g) = b.group.iter().find(|g| g.iter().any(|&i| i as usize >= n)) {
        return bad(format!("bond {g:?} names a particle beyond {n}"));
    }
    if b.typeid.iter().any(|&id| id as usize >= b.types.len()) {
        return bad(format!(
            "a bond type id is beyond the {} bond types",
            b.types.len()
        ));
    }
    if t.types
        .iter()
        .chain(&b.types)
        .any(|s| s.is_empty() || s.contains('\0'))
    {
        return bad("type names must be non-empty and contain no NUL".into());
    }
    Ok(())
}

/// Header fields this writer needs from an existing file: (index location, index capacity).
fn read_header(file: &mut File, path: &Path) -> Result<(u64, u64)> {
    let mut h = [0u8; HEADER_BYTES as usize];
    file.read_exact(&mut h)
        .map_err(io_error(path, "cannot read the GSD header"))?;
    let word = |i: usize| u64::from_le_bytes(h[8 * i..8 * i + 8].try_into().unwrap());
    let names_ok = {
        let expect = namelist_bytes();
        let mut got = vec![0u8; expect.len()];
        file.read_exact_at(&mut got, word(3)).is_ok() && got == expect
    };
    if word(0) != MAGIC || !names_ok {
        return Err(invalid(
            path,
            "not a GSD trajectory written by mpcbox; fix: write to another file, or remove it"
                .into(),
        ));
    }
    Ok((word(1), word(2)))
}
