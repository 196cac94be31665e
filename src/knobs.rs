//! The environment's tuning knobs (`MPCBOX_*`): read once, checked together, recorded.
//!
//! Every knob is listed in [`KNOBS`] (name, the values it takes, what it changes; the table of
//! docs/tuning.md is this list). The environment is read the first time a knob is asked for and never
//! again, so a run uses one set throughout. An unknown value is an error naming the variable
//! and the values it takes ([`check`], called before a solvent allocates anything), not a
//! warning and a silent default. The knobs a run was given go into its `summary.json`
//! (`tuning_knobs`).
//!
//! A leaf module: the modules that act on a knob parse its (checked) text themselves, and a
//! unit test beside each parser checks that every value listed here parses.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::error::{ConfigError, MpcError, Result};

/// One environment knob: its variable, the values it takes (None: any text, or a number as
/// `number` says), and what it changes.
pub struct Knob {
    pub variable: &'static str,
    pub values: Option<&'static [&'static str]>,
    /// Takes a positive integer.
    pub number: bool,
    pub effect: &'static str,
}

/// The CUDA cell-sum methods of `MPCBOX_CUDA_METHOD` (`backend::cuda::CellSumMethod::parse`).
pub const CUDA_METHODS: &[&str] = &["atomics", "warp", "shared", "list", "fused", "fused-shared"];

/// The ways of `MPCBOX_MPI_EXCHANGE` (`ranks::RankExchange::from_env`).
pub const RANK_EXCHANGES: &[&str] = &["alltoallv", "neighbours"];

/// The values of `MPCBOX_RANK_PEER_COPIES` (`backend::cuda::multi::rank_peers`).
pub const RANK_PEER_COPIES: &[&str] = &["on", "off"];

/// The ways of `MPCBOX_MD_EXCHANGE` (`md::gpu::slabs::exchange::choose_pull`).
pub const MD_EXCHANGES: &[&str] = &["pull", "copy"];

/// The values of `MPCBOX_MD_OVERLAP` (`md::coupled::engine::overlap_wanted`).
pub const MD_OVERLAPS: &[&str] = &["on", "off"];

/// The values of `MPCBOX_SOLUTE_STAGING` (`backend::cuda::pieces::up_staging_flags`).
pub const SOLUTE_STAGINGS: &[&str] = &["write-combined", "cached"];

/// The values of `MPCBOX_CELL_SUMS` (`fixed_sums::fixed_wanted`).
pub const CELL_SUMS: &[&str] = &["fixed", "float"];

pub const KNOBS: &[Knob] = &[
    Knob {
        variable: "MPCBOX_CELL_SUMS",
        values: Some(CELL_SUMS),
        number: false,
        effect: "cell sums and reductions in fixed point, the same bits on any number of \
                 threads, slabs, GPUs and ranks (default), or f64 in the backend's order",
    },
    Knob {
        variable: "MPCBOX_CUDA_METHOD",
        values: Some(CUDA_METHODS),
        number: false,
        effect: "how CUDA sums the cells (default: fused, the fastest measured)",
    },
    Knob {
        variable: "MPCBOX_RULES_KERNELS",
        values: Some(&["per-rule", "generic"]),
        number: false,
        effect: "kernels compiled per collision rule (default) or one generic set",
    },
    Knob {
        variable: "MPCBOX_MULTI_TRANSFER",
        values: Some(&["peer", "host"]),
        number: false,
        effect: "how particles cross between GPUs (default: peer copies where every neighbour \
                 pair has peer access)",
    },
    Knob {
        variable: "MPCBOX_CUDA_SOLUTE_IO",
        values: Some(&["pinned", "pageable"]),
        number: false,
        effect: "how host solutes cross PCIe in a coupled step (default: pinned staging)",
    },
    Knob {
        variable: "MPCBOX_SOLUTE_STAGING",
        values: Some(SOLUTE_STAGINGS),
        number: false,
        effect: "the pinned host memory host solutes go up through (default: write-combined)",
    },
    Knob {
        variable: "MPCBOX_RANK_SOLUTE_SPLIT",
        values: Some(&["on", "off", "route-twice"]),
        number: false,
        effect: "over MPI ranks, split each rank's own solutes on its GPU (default: on; \
                 off: all through the host; route-twice: a rank of one slab routes them to \
                 it again, as before the one-slab shortcut)",
    },
    Knob {
        variable: "MPCBOX_ROUTE_RETURN",
        values: Some(&["gather", "scatter"]),
        number: false,
        effect: "outside solutes on several GPUs: their collided velocities back into the \
                 caller's array in its order, from each solute's slot (default: gather), or \
                 region by region by the caller's indices (scatter)",
    },
    Knob {
        variable: "MPCBOX_NVRTC_OPTIONS",
        values: None,
        number: false,
        effect: "extra NVRTC options for benchmarks (options that change arithmetic defeat the \
                 agreement with the CPU)",
    },
    Knob {
        variable: "MPCBOX_COMPILE_THREADS",
        values: None,
        number: true,
        effect: "NVRTC programs compiled at once on a cold start (default: min(cores, 16))",
    },
    Knob {
        variable: "MPCBOX_HOST_THREADS",
        values: None,
        number: true,
        effect: "threads of the host pool for solute work (default: min(cores, 16))",
    },
    Knob {
        variable: "MPCBOX_MD_BLOCKS_PER_SM",
        values: None,
        number: true,
        effect: "blocks per multiprocessor of the one-GPU MD engine's forces and list kernels \
                 while the fluid streams beside the MD steps (each thread then takes every grid-th \
                 particle; default 4; 64 holds every multiprocessor, as one thread per particle does)",
    },
    Knob {
        variable: "MPCBOX_COUPLING",
        values: Some(&["device", "host"]),
        number: false,
        effect: "bundled MD on the fluid's GPU: device-resident beads (default) or a host round \
                 trip each collision",
    },
    Knob {
        variable: "MPCBOX_MPI_EXCHANGE",
        values: Some(RANK_EXCHANGES),
        number: false,
        effect: "how each step's packets cross between MPI ranks: one MPI_Alltoallv (default) \
                 or point-to-point messages with the ranks that send or receive any",
    },
    Knob {
        variable: "MPCBOX_RANK_PEER_COPIES",
        values: Some(RANK_PEER_COPIES),
        number: false,
        effect: "MPI ranks of one host copy their packets GPU to GPU through CUDA IPC, only \
                 the headers going by MPI (default on), or send everything by MPI",
    },
    Knob {
        variable: "MPCBOX_MD_EXCHANGE",
        values: Some(MD_EXCHANGES),
        number: false,
        effect: "how the decomposed GPU MD's slabs exchange beads: the receiver reads them \
                 where the sender packed them (default, where its GPU may read that memory) \
                 or they are copied to it first",
    },
    Knob {
        variable: "MPCBOX_MD_OVERLAP",
        values: Some(MD_OVERLAPS),
        number: false,
        effect: "whether a GPU MD engine coupled through device memory runs its steps while \
                 the fluid streams towards the next collision (default: on)",
    },
    Knob {
        variable: "MPCBOX_MD_SLABS",
        values: Some(&["on", "off"]),
        number: false,
        effect: "the bundled GPU MD engine decomposed over the fluid's slabs (default on \
                 several slabs) or on the first GPU",
    },
    Knob {
        variable: "MPCBOX_KERNEL_CACHE",
        values: Some(&["on", "off"]),
        number: false,
        effect: "compiled kernels kept on disk ($XDG_CACHE_HOME/mpcbox or ~/.cache/mpcbox) \
                 and read back by later runs (default on) or compiled by every run",
    },
    Knob {
        variable: "MPCBOX_SLAB_IDS",
        values: Some(&["labels", "places"]),
        number: false,
        effect: "how several GPUs identify particles: a 32-bit global label each (default up \
                 to 2^32 particles) or their places, slab by slab (larger boxes; a test of \
                 that path on small ones)",
    },
    Knob {
        variable: "MPCBOX_SLAB_CUT",
        values: Some(&["work", "even"]),
        number: false,
        effect: "how a box between walls is cut into y slabs: by each layer's fluid and cells \
                 (default) or into even layers (as without walls; for A/B runs)",
    },
    Knob {
        variable: "MPCBOX_SLAB_CELL_WORK",
        values: None,
        number: true,
        effect: "the work cut's weight of a layer's cells, in percent of a full fluid layer's \
                 (default 10; for calibration runs)",
    },
    Knob {
        variable: "MPCBOX_SLAB_SURFACE_WORK",
        values: None,
        number: true,
        effect: "the work cut's weight of a distance field's surface band, in percent of a \
                 full fluid layer's per unit of its volume (default 800; for calibration runs)",
    },
    Knob {
        variable: "MPCBOX_OUTPUT",
        values: Some(&["background", "blocking"]),
        number: false,
        effect: "flow-field files and trajectory frames written by a thread while the run \
                 steps on (default) or by the stepping thread",
    },
    Knob {
        variable: "MPCBOX_CHECKPOINTS",
        values: Some(&["background", "blocking"]),
        number: false,
        effect: "checkpoints written by a thread while the run steps on (default, where the \
                 fluid can be copied out) or by the stepping thread",
    },
    Knob {
        variable: "MPCBOX_GPU_CHECKPOINT_SOURCE",
        values: Some(&["download", "pieces"]),
        number: false,
        effect: "how GPUs hand their fluid to a checkpoint: copied in spare device memory and \
                 read a window at a time (default: bounded host memory), or downloaded whole \
                 into host memory",
    },
    Knob {
        variable: "MPCBOX_CHECKPOINT_WRITES",
        values: Some(&["direct", "buffered"]),
        number: false,
        effect: "how a checkpoint's pieces reach the disk: direct I/O, a request per piece \
                 (default, where the file system has it), or through the page cache",
    },
    Knob {
        variable: "MPCBOX_TIME_PHASES",
        values: None,
        number: false,
        effect: "from this step on (0: every step), each phase of a step waited for and timed; \
                 ms per step of each printed on stderr when the solvent is dropped, one line \
                 per rank (solvent::profile checks the step count)",
    },
    Knob {
        variable: "MPCBOX_CHECKPOINT_WINDOW",
        values: None,
        number: true,
        effect: "MiB of host memory a checkpoint or a resume holds at once (default: a quarter \
                 of the available host memory)",
    },
];

/// The knobs as read from the environment (those set), each checked.
#[derive(Clone, Debug, Default)]
pub struct Knobs {
    values: BTreeMap<&'static str, String>,
}

impl Knobs {
    /// The knobs of `lookup` (the environment, or a map in tests); the first invalid value is
    /// the error.
    pub fn read(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Knobs, ConfigError> {
        let mut values = BTreeMap::new();
        for k in KNOBS {
            let Some(raw) = lookup(k.variable) else {
                continue;
            };
            let v = raw.trim().to_ascii_lowercase();
            let ok = match (k.values, k.number) {
                (Some(allowed), _) => allowed.contains(&v.as_str()),
                // every count knob is read as a u32 (blocks, threads), so a larger one is
                // refused here rather than left to fall back to the default where it is used
                (None, true) => v.parse::<u32>().is_ok_and(|n| n > 0),
                (None, false) => true,
            };
            if !ok {
                let takes = match (k.values, k.number) {
                    (Some(allowed), _) => allowed.join(", "),
                    _ => format!("a positive integer up to {}", u32::MAX),
                };
                return Err(ConfigError {
                    field: k.variable.into(),
                    problem: format!("{raw:?} is not a value it takes"),
                    fix: format!("set it to one of: {takes}; or unset it for the default"),
                });
            }
            // options keep their case (NVRTC flags); choices are compared in lower case
            let keep = if k.values.is_some() {
                v
            } else {
                raw.trim().to_string()
            };
            values.insert(k.variable, keep);
        }
        Ok(Knobs { values })
    }

    /// The (checked) value of `variable`, if set.
    pub fn get(&self, variable: &str) -> Option<&str> {
        self.values.get(variable).map(String::as_str)
    }

    /// Whether `variable` is set to `value`.
    pub fn is(&self, variable: &str, value: &str) -> bool {
        self.get(variable) == Some(value)
    }

    /// The knobs set, for the run's summary.
    pub fn set(&self) -> BTreeMap<String, String> {
        self.values
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
}

static READ: OnceLock<std::result::Result<Knobs, ConfigError>> = OnceLock::new();

fn read_once() -> &'static std::result::Result<Knobs, ConfigError> {
    READ.get_or_init(|| Knobs::read(|k| std::env::var(k).ok()))
}

/// The knobs of this process; an invalid value is the error (naming the variable and the
/// values it takes).
pub fn check() -> Result<&'static Knobs> {
    read_once()
        .as_ref()
        .map_err(|e| MpcError::Config(e.clone()))
}

/// The knobs of this process for the code that acts on one: after [`check`] passed (every
/// solvent checks first), the knobs themselves; were they invalid, none (the defaults).
pub fn knobs() -> &'static Knobs {
    static NONE: OnceLock<Knobs> = OnceLock::new();
    read_once()
        .as_ref()
        .unwrap_or_else(|_| NONE.get_or_init(Knobs::default))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> std::result::Result<Knobs, ConfigError> {
        Knobs::read(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn valid_knobs_are_kept_and_recorded() {
        let k = read(&[
            ("MPCBOX_CUDA_METHOD", " Warp"),
            ("MPCBOX_HOST_THREADS", "8"),
            ("MPCBOX_NVRTC_OPTIONS", "-DMPC_X=1 --maxrregcount=40"),
        ])
        .unwrap();
        assert_eq!(k.get("MPCBOX_CUDA_METHOD"), Some("warp"));
        assert!(k.is("MPCBOX_HOST_THREADS", "8"));
        assert_eq!(
            k.get("MPCBOX_NVRTC_OPTIONS"),
            Some("-DMPC_X=1 --maxrregcount=40")
        );
        assert_eq!(k.set().len(), 3);
        assert_eq!(k.get("MPCBOX_COUPLING"), None);
    }

    #[test]
    fn an_unknown_value_names_the_variable_and_the_values_it_takes() {
        let e = read(&[("MPCBOX_MULTI_TRANSFER", "nvlink")]).unwrap_err();
        assert_eq!(e.field, "MPCBOX_MULTI_TRANSFER");
        assert!(e.fix.contains("peer, host"), "{e:?}");
        let e = read(&[("MPCBOX_HOST_THREADS", "0")]).unwrap_err();
        assert!(e.fix.contains("positive integer"), "{e:?}");
        let e = read(&[("MPCBOX_MD_BLOCKS_PER_SM", "4294967296")]).unwrap_err();
        assert_eq!(e.field, "MPCBOX_MD_BLOCKS_PER_SM");
        assert!(e.fix.contains("up to 4294967295"), "{e:?}");
        let e = read(&[("MPCBOX_MD_SLABS", "no")]).unwrap_err();
        assert!(e.problem.contains("\"no\""), "{e:?}");
    }
}
