//! The format-4 file written and read back: whole, by layers, damaged, and streamed into
//! parts a piece at a time.

use super::write::spare_path;
use super::*;
use crate::config::Config;
use crate::fluid_parts::FluidSource;
use crate::physics::Physics;
use crate::state::FluidState;
use crate::stats::RunStats;

fn setup() -> (CheckpointHead, FluidState) {
    let config = Config::from_ron_str(
        "(cells: (6, 12, 5), particles_per_cell: 7, time_step: 0.1, seed: 21, steps: 9, \
          collision: Srd(angle_deg: 130.0), shear_rate: 0.05, initial_flow: Steady)",
    )
    .unwrap();
    let fluid = FluidState::initial(&config);
    let phys = Physics::from_config(&config);
    let head = CheckpointHead {
        config,
        step: 7,
        stats: RunStats::new(phys.profile_bins()),
        md: None,
        run_id: Some("0123456789abcdef".into()),
    };
    (head, fluid)
}

/// The particles of layers [lo, hi) as a rank holding those layers would write them: two
/// slabs' parts (the layers' lower and upper halves), each in a scrambled order (a block's
/// order is the rank's, not the global one).
fn layers(fluid: &FluidState, lo: f32, hi: f32) -> LocalFluid {
    let mid = (lo + hi) / 2.0;
    let part = |a: f32, b: f32| {
        let mut ids: Vec<u64> = (0..fluid.len() as u64)
            .filter(|&i| (a..b).contains(&fluid.pos[1][i as usize].floor()))
            .collect();
        ids.reverse();
        let mut st = FluidState::default();
        for k in 0..3 {
            st.pos[k] = ids.iter().map(|&i| fluid.pos[k][i as usize]).collect();
            st.vel[k] = ids.iter().map(|&i| fluid.vel[k][i as usize]).collect();
        }
        (st, ids)
    };
    LocalFluid::Parts(vec![part(lo, mid), part(mid, hi)])
}

/// Three writers' blocks (layers 0-3, 4-7, 8-11) read back whole equal the fluid bit for
/// bit; a reader of layers 4-7 gets exactly their particles in ascending index, reading only
/// the blocks that meet them (a corrupted first block does not stop it, and stops a whole read).
#[test]
fn blocks_of_three_writers_read_back_whole_and_by_layers() {
    let (head, fluid) = setup();
    let parts: Vec<LocalFluid> = [(0.0, 4.0), (4.0, 8.0), (8.0, 12.0)]
        .iter()
        .map(|&(lo, hi)| layers(&fluid, lo, hi))
        .collect();
    let writers: Vec<FluidView> = parts.iter().map(|p| p.view()).collect();
    let n = fluid.len() as u64;
    let mut bytes = to_bytes(&head, n, &writers).unwrap();
    let file = PartedFile::from_bytes(bytes.clone(), "three").unwrap();
    assert_eq!(
        (file.blocks(), file.len(), file.head.step),
        (3, fluid.len(), 7)
    );
    assert_eq!(file.whole_fluid().unwrap(), fluid);
    // layers 8-11 belong to a part of another process (an index beyond this one's parts)
    let part_of = |y: f32| match y.floor() as u32 {
        4..=7 => Some(0),
        8..=11 => Some(1),
        _ => None,
    };
    let got = file.fluid_parts(1, [4.0, 8.0], part_of).unwrap();
    let all = [f32::NEG_INFINITY, f32::INFINITY];
    let expected = FluidSource::State(&fluid).parts(1, all, part_of).unwrap();
    assert_eq!(got, expected);
    assert!(!got[0].1.is_empty());
    // one flipped byte in the first block's velocities
    let first = PAGE as usize + 40 * parts[0].view().count() as usize;
    bytes[first] ^= 0x10;
    let file = PartedFile::from_bytes(bytes, "flipped").unwrap();
    assert_eq!(file.fluid_parts(1, [4.0, 8.0], part_of).unwrap(), expected);
    let err = file.whole_fluid().unwrap_err().to_string();
    assert!(err.contains("checksum mismatch in the block"), "{err}");
}

/// Written through the transport of one process, the file is one block that reads back as
/// the fluid; the header, the meta and a truncation are each caught.
#[test]
fn a_written_file_reads_back_and_damage_is_named() {
    let (head, fluid) = setup();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.mpcbox");
    let mut whole = LocalFluid::Whole(fluid.clone());
    let n = fluid.len() as u64;
    let alone = &crate::ranks::Alone;
    write(&path, &head, n, &mut whole, 1 << 20, alone, Recycle::Free).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "a temporary file was left behind");
    let file = PartedFile::open(&path).unwrap();
    assert_eq!(file.blocks(), 1);
    assert_eq!(file.whole_fluid().unwrap(), fluid);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes, to_bytes(&head, n, &[whole.view()]).unwrap());
    let damaged = |k: usize| {
        let mut b = bytes.clone();
        b[k] ^= 1;
        PartedFile::from_bytes(b, "damaged")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(damaged(bytes.len() - 3).contains("checksum mismatch"));
    assert!(damaged(100).contains("truncated or corrupted"));
    let cut = PartedFile::from_bytes(bytes[..bytes.len() - 8].to_vec(), "cut");
    assert!(cut
        .err()
        .unwrap()
        .to_string()
        .contains("truncated or corrupted"));
    // a count that disagrees with the run
    let err = write(
        &path,
        &head,
        n + 1,
        &mut whole,
        1 << 20,
        &crate::ranks::Alone,
        Recycle::Free,
    )
    .unwrap_err();
    assert!(err.to_string().contains("the ranks hold"), "{err}");
    assert_eq!(
        PartedFile::open(&path).unwrap().whole_fluid().unwrap(),
        fluid
    );
}

/// The run id comes back; a file of a build before run ids (the meta without the id after
/// it) reads with none, and a reader of that build (decoding the meta alone) reads today's.
#[test]
fn the_run_id_follows_the_meta_and_files_without_it_still_read() {
    let (head, fluid) = setup();
    let n = fluid.len() as u64;
    let whole = LocalFluid::Whole(fluid.clone());
    let bytes = to_bytes(&head, n, &[whole.view()]).unwrap();
    let file = PartedFile::from_bytes(bytes.clone(), "with id").unwrap();
    assert_eq!(file.head.run_id.as_deref(), Some("0123456789abcdef"));
    let word =
        |b: &[u8], k: usize| u64::from_le_bytes(b[16 + 8 * k..24 + 8 * k].try_into().unwrap());
    let (at, len) = (word(&bytes, 0) as usize, word(&bytes, 1) as usize);
    let meta: Meta = postcard::from_bytes(&bytes[at..at + len]).unwrap();
    assert_eq!(
        meta.head.step, 7,
        "an earlier build decodes the meta as before"
    );
    // the same file as an earlier build wrote it: the meta alone
    let old_meta = postcard::to_stdvec(&meta).unwrap();
    let mut old = bytes[..at].to_vec();
    old.extend_from_slice(&old_meta);
    old[24..32].copy_from_slice(&(old_meta.len() as u64).to_le_bytes());
    old[32..40].copy_from_slice(&checksum(&old_meta).to_le_bytes());
    let file = PartedFile::from_bytes(old, "before run ids").unwrap();
    assert_eq!(file.head.run_id, None);
    assert_eq!(file.whole_fluid().unwrap(), fluid);
}

/// A run's writer keeps the checkpoint it replaces as the spare and writes the next one over
/// it in place: the same file (inode), the same bytes as a new file even where the spare held
/// other bytes (the padding zeroed, the tail cut), the replaced checkpoint the next spare;
/// the spare removed when the run is done, and a checkpoint written on its own keeps none.
#[test]
fn a_run_writer_overwrites_the_replaced_checkpoint_in_place() {
    use std::os::unix::fs::MetadataExt;
    let (head, fluid) = setup();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.mpcbox");
    let spare = spare_path(&path);
    let n = fluid.len() as u64;
    let at_step = |step: u64| CheckpointHead {
        step,
        ..head.clone()
    };
    let write_step = |step: u64, recycle: Recycle| {
        let mut whole = LocalFluid::Whole(fluid.clone());
        let alone = &crate::ranks::Alone;
        write(
            &path,
            &at_step(step),
            n,
            &mut whole,
            1 << 20,
            alone,
            recycle,
        )
        .unwrap();
    };
    let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
    write_step(1, Recycle::KeepSpare);
    assert!(!spare.exists(), "a first checkpoint replaces nothing");
    let first = inode(&path);
    write_step(2, Recycle::KeepSpare);
    assert_eq!(inode(&spare), first, "the replaced checkpoint is the spare");
    let second = inode(&path);
    // the spare's bytes all stale, and longer than a checkpoint
    let len = std::fs::metadata(&spare).unwrap().len() as usize;
    std::fs::write(&spare, vec![0xa5u8; 2 * len]).unwrap();
    let stale = inode(&spare);
    write_step(3, Recycle::KeepSpare);
    assert_eq!(inode(&path), stale, "written over the spare in place");
    assert_eq!(
        inode(&spare),
        second,
        "the checkpoint replaced is the next spare"
    );
    let whole = LocalFluid::Whole(fluid.clone());
    let fresh = to_bytes(&at_step(3), n, &[whole.view()]).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        fresh,
        "a recycled file's bytes"
    );
    let file = PartedFile::open(&path).unwrap();
    assert_eq!(
        (file.head.step, file.whole_fluid().unwrap()),
        (3, fluid.clone())
    );
    // the run is done
    remove_spare(&path);
    assert!(!spare.exists());
    write_step(4, Recycle::Free);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(
        names.len(),
        1,
        "a checkpoint written on its own keeps no spare"
    );
    assert_eq!(PartedFile::open(&path).unwrap().head.step, 4);
}

/// Streamed in small pieces into two parts (and one kept by none), with the count's map of
/// parts and with the y values read again, the values put at their places rebuild each
/// part in file order; sorted by id they are the parts that `fluid_parts` reads; the
/// counts agree; one part takes every particle; a damaged block is caught either way.
#[test]
fn streamed_parts_hold_the_parts_read_whole() {
    let config = Config::from_ron_str(
        "(cells: (16, 24, 10), particles_per_cell: 7, time_step: 0.1, seed: 21, steps: 9, \
          collision: Srd(angle_deg: 130.0))",
    )
    .unwrap();
    let fluid = FluidState::initial(&config);
    let phys = crate::physics::Physics::from_config(&config);
    let head = CheckpointHead {
        config,
        step: 1,
        stats: crate::stats::RunStats::new(phys.profile_bins()),
        md: None,
        run_id: Some("streamed".into()),
    };
    let all = [f32::NEG_INFINITY, f32::INFINITY];
    let part_of = |y: f32| match y.floor() as u32 {
        0..=3 => None,
        4..=7 => Some(0),
        _ => Some(1),
    };
    // two writers, the second's particles in reverse order
    let mut ids: Vec<u64> = (0..fluid.len() as u64).collect();
    let (a, b) = ids.split_at_mut(fluid.len() / 2);
    b.reverse();
    let cut = |ids: &[u64]| {
        let mut st = FluidState::default();
        for k in 0..3 {
            st.pos[k] = ids.iter().map(|&i| fluid.pos[k][i as usize]).collect();
            st.vel[k] = ids.iter().map(|&i| fluid.vel[k][i as usize]).collect();
        }
        vec![(st, ids.to_vec())]
    };
    let (pa, pb) = (cut(a), cut(b));
    let n = fluid.len() as u64;
    let bytes = to_bytes(&head, n, &[FluidView::Parts(&pa), FluidView::Parts(&pb)]).unwrap();
    let file = PartedFile::from_bytes(bytes.clone(), "streamed").unwrap();
    let expected = FluidSource::State(&fluid).parts(2, all, part_of).unwrap();
    let (counts, map) = file.count_parts(2, all, part_of, 1 << 20).unwrap();
    assert!(
        map.is_some(),
        "a byte per particle fits a MiB beside the pieces"
    );
    // a window too small for the map: the y values are read again beside each section
    let (counts_small, none) = file.count_parts(2, all, part_of, 64).unwrap();
    assert!(none.is_none());
    assert_eq!(counts_small, counts);
    for map in [map.as_ref(), None] {
        let mut got: Vec<(FluidState, Vec<u64>)> = counts
            .iter()
            .map(|&c| {
                let c = c as usize;
                let z = FluidState {
                    pos: [vec![0.0; c], vec![0.0; c], vec![0.0; c]],
                    vel: [vec![0.0; c], vec![0.0; c], vec![0.0; c]],
                };
                (z, vec![0; c])
            })
            .collect();
        // a window of 64 KiB: pieces of 8 Ki values, two per block
        let streamed = file
            .stream_parts(2, all, part_of, 64 << 10, map, &mut |p, s, first, v| {
                let f = first as usize;
                let (st, ids) = &mut got[p];
                match v {
                    Values::Ids(x) => ids[f..f + x.len()].copy_from_slice(x),
                    Values::F32(x) => st.pos[s - 1][f..f + x.len()].copy_from_slice(x),
                    Values::F64(x) => st.vel[s - 4][f..f + x.len()].copy_from_slice(x),
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(streamed, counts);
        for (k, (st, ids)) in got.iter().enumerate() {
            assert_eq!(ids.len(), expected[k].1.len());
            let mut order: Vec<usize> = (0..ids.len()).collect();
            order.sort_by_key(|&i| ids[i]);
            let sorted: Vec<u64> = order.iter().map(|&i| ids[i]).collect();
            assert_eq!(sorted, expected[k].1);
            for c in 0..3 {
                let p: Vec<f32> = order.iter().map(|&i| st.pos[c][i]).collect();
                let v: Vec<f64> = order.iter().map(|&i| st.vel[c][i]).collect();
                assert_eq!(
                    (p, v),
                    (expected[k].0.pos[c].clone(), expected[k].0.vel[c].clone())
                );
            }
        }
    }
    // one part taking everything ([`PartMap::one`]): every particle, in file order
    let mut one = 0u64;
    let whole = file
        .stream_parts(
            1,
            all,
            |_| Some(0),
            64 << 10,
            Some(&PartMap::one()),
            &mut |_, s, _, v| {
                if s == 0 {
                    let Values::Ids(x) = v else {
                        panic!("ids first")
                    };
                    one += x.len() as u64;
                }
                Ok(())
            },
        )
        .unwrap();
    assert_eq!((whole, one), (vec![n], n));
    // the lowest byte of the first particle's x: still inside the box
    let mut damaged = bytes;
    damaged[PAGE as usize + 8 * a.len()] ^= 1;
    let file = PartedFile::from_bytes(damaged, "damaged").unwrap();
    for map in [map.as_ref(), None] {
        let err = file
            .stream_parts(2, all, part_of, 64 << 10, map, &mut |_, _, _, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("checksum mismatch"), "{err}");
    }
}
