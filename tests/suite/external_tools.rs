//! Tests that drive external tools (OpenMPI, the gsd and vtk Python packages, NVRTC) never
//! pass without having checked anything: built without MPCBOX_REQUIRE_EXTERNAL they are
//! reported as ignored, naming the tool and its install line; built with it (CI, which
//! installs the tools) they run, and a missing tool fails them with the install line.

use std::process::Command;

use crate::common;

/// A test of each kind, by its full name in this binary.
const NEEDING_TOOLS: [(&str, &str); 4] = [
    (
        "mpi_ranks::the_fluid_is_the_same_on_one_to_four_ranks",
        "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev)",
    ),
    (
        "gsd_file::gsd_reader_reads_back_what_mpcbox_wrote",
        "needs the gsd Python package (python3 -m pip install gsd)",
    ),
    (
        "flow_fields::field_files_show_the_imposed_shear_profile_to_an_independent_reader",
        "needs the vtk Python package (python3 -m pip install vtk)",
    ),
    (
        "md_gpu::md_kernels_compile_without_fma_when_nvrtc_available",
        "needs NVRTC (pip install nvidia-cuda-nvrtc",
    ),
];

#[test]
fn tests_needing_external_tools_are_reported_ignored_with_the_tool_or_run() {
    let exe = std::env::current_exe().unwrap();
    let list = Command::new(&exe)
        .args(["--list", "--ignored"])
        .output()
        .unwrap();
    let ignored = String::from_utf8_lossy(&list.stdout);
    let external = cfg!(mpcbox_external);
    for (name, reason) in NEEDING_TOOLS {
        let listed = ignored.lines().any(|l| l == format!("{name}: test"));
        assert_eq!(
            listed, !external,
            "{name}: ignored = {listed} in a build with MPCBOX_REQUIRE_EXTERNAL = {external}"
        );
        if external {
            continue;
        }
        // the summary names it ignored, with the tool and its install line (not run here)
        let out = Command::new(&exe).args([name, "--exact"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("test {name} ... ignored, {reason}"))
                && text.contains("0 passed; 0 failed; 1 ignored"),
            "{text}"
        );
    }
}

#[test]
fn a_missing_python_package_fails_the_test_with_its_install_line() {
    let e = std::panic::catch_unwind(|| {
        common::require_python("mpcbox_no_such_module", "mpcbox-no-such-package")
    })
    .expect_err("a missing package passed");
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("python3 -m pip install mpcbox-no-such-package"),
        "{msg}"
    );
}
