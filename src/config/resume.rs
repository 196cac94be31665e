//! What a resumed run's config may not change: the box and the fluid's physics and, for
//! coupled runs, everything of the MD section but its outputs and backend (outputs, device
//! and tuning may change).

use super::Config;

impl Config {
    /// The fields of `given` (the config handed to a resume) that differ from this one (the
    /// checkpoint's) and may not change without `--allow-change`; `coupled`: the checkpoint
    /// holds MD solutes.
    pub fn resume_differences(&self, given: &Config, coupled: bool) -> Vec<String> {
        let ck = self;
        let mut out = Vec::new();
        let mut check = |name: &str, differs: bool| {
            if differs {
                out.push(name.to_string());
            }
        };
        check("cells", ck.cells != given.cells);
        check(
            "particles_per_cell",
            ck.particles_per_cell != given.particles_per_cell,
        );
        check("mass", ck.mass != given.mass);
        check("kT", ck.kt != given.kt);
        check("time_step", ck.time_step != given.time_step);
        check("collision", ck.collision != given.collision);
        check("shear_rate", ck.shear_rate != given.shear_rate);
        check("seed", ck.seed != given.seed);
        check("grid_shift", ck.grid_shift != given.grid_shift);
        check("thermostat", ck.thermostat != given.thermostat);
        check("body_force", ck.body_force != given.body_force);
        // a data file by its absolute path (as checkpoints store it) on both sides
        let walls = |c: &Config| c.walls.as_ref().map(|w| w.with_absolute_file());
        check("walls", walls(ck) != walls(given));
        check("initial_flow", ck.initial_flow != given.initial_flow);
        if !coupled {
            if given.md.is_some() {
                out.push("md (the checkpoint has no solutes, this config has)".into());
            }
            return out;
        }
        match (&ck.md, &given.md) {
            (Some(a), Some(b)) => out.extend(a.resume_differences(b)),
            (Some(_), None) => out.push("md (the checkpoint has solutes, this config none)".into()),
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn with_field(file: &std::path::Path) -> Config {
        Config::from_ron_str(&format!(
            "(cells: (16, 16, 16), particles_per_cell: 10, time_step: 0.1, \
             collision: Srd(angle_deg: 130.0), steps: 10, \
             walls: DistanceField(file: \"{}\", spacing: 1.0, kind: Mask))",
            file.display()
        ))
        .unwrap()
    }

    /// A checkpoint names its data file by the absolute path; the same config given with the
    /// relative path (read in the same directory) is the same walls, a copy elsewhere is not.
    #[test]
    fn a_data_file_by_its_relative_or_absolute_path_is_the_same_walls() {
        let relative = std::path::Path::new("examples/sphere_bed.npy");
        let ck = with_field(&std::env::current_dir().unwrap().join(relative));
        assert!(ck
            .resume_differences(&with_field(relative), false)
            .is_empty());
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("bed.npy");
        std::fs::copy(relative, &copy).unwrap();
        assert_eq!(ck.resume_differences(&with_field(&copy), false), ["walls"]);
    }
}
