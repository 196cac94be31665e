//! A fluid too large for host memory is refused before anything is allocated, with the size that
//! would fit (issue: 400³ × 10 on a 24 GiB machine grew past 11 GiB before it was stopped).

use crate::common;

use mpcbox::backend::cpu::{check_fits_in as check_cpu_fits_in, footprint as cpu_footprint};
use mpcbox::{MpcError, Solvent};

#[test]
fn a_box_larger_than_host_memory_is_refused_with_the_size_that_fits() {
    let cfg = common::small_config([400, 400, 400], 10);
    let gib = 1u64 << 30;
    let e = check_cpu_fits_in(&cfg, 24 * gib).unwrap_err();
    let MpcError::OutOfMemory {
        needed_bytes,
        available_bytes,
        ref fix,
        ..
    } = e
    else {
        panic!("expected OutOfMemory, got {e:?}");
    };
    assert_eq!(needed_bytes, cpu_footprint(&cfg).total_bytes);
    assert_eq!(available_bytes, 24 * gib);
    // about 24 GiB / ~95 B per particle
    let fits: u64 = fix
        .split_whitespace()
        .nth(5)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no particle count in {fix:?}"));
    assert!((2.0e8..3.0e8).contains(&(fits as f64)), "{fix}");
    assert!(e.to_string().contains("particles_per_cell"), "{e}");
    // a box that fits passes
    check_cpu_fits_in(&common::small_config([64, 64, 64], 10), 24 * gib).unwrap();
}

#[test]
fn solvent_refuses_an_oversize_cpu_box_before_allocating() {
    // 4.2 × 10⁹ particles, about the most a config may ask for: 0.5 TB, refused at once
    let cfg = common::small_config([1280, 1280, 1280], 2);
    let t = std::time::Instant::now();
    let e = Solvent::new(cfg).err().expect("refused");
    assert!(matches!(e, MpcError::OutOfMemory { .. }), "{e}");
    assert!(t.elapsed().as_secs_f64() < 1.0, "took {:?}", t.elapsed());
}
