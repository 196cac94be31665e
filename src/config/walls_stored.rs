//! The `walls` section as checkpoints store it (`#[serde(with)]` on `Config::walls`).
//! Checkpoints are postcard, a binary format without field names, so a field added to a
//! variant would shift every byte after it: the stored form keeps the variants of checkpoint
//! format 3 as they were and appends the slit normal to z as a variant of its own, so that
//! checkpoints written before `Slit(normal: ...)` existed still decode. Text formats (RON
//! configs, JSON) use [`WallsConfig`]'s own form.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use std::path::PathBuf;

use super::walls::{absolute_file, SoluteWall, WallBoundary, WallsConfig};
use crate::physics::walls::field_load::FieldKind;
use crate::physics::walls::shapes::SlitNormal;

/// [`WallsConfig`] in checkpoint format 3 order; new shapes and options go after the last
/// variant.
#[derive(Serialize, Deserialize)]
enum StoredWalls {
    Slit {
        height: Option<f64>,
        bottom_velocity: f64,
        top_velocity: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    Pipe {
        radius: f64,
        velocity: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    SlitZ {
        height: Option<f64>,
        bottom_velocity: f64,
        top_velocity: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    Sphere {
        radius: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    SphereObstacle {
        radius: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    CylinderObstacle {
        radius: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    PlanarPore {
        height: f64,
        length: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    CosineChannel {
        height: f64,
        amplitude: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    CosineExpansion {
        height: f64,
        amplitude: f64,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
    /// The file is stored by its absolute path: a resumed run reads it again, from any
    /// working directory.
    DistanceField {
        file: PathBuf,
        spacing: f64,
        kind: FieldKind,
        boundary: WallBoundary,
        solutes: SoluteWall,
    },
}

impl From<&WallsConfig> for StoredWalls {
    fn from(w: &WallsConfig) -> StoredWalls {
        if let WallsConfig::DistanceField {
            file,
            spacing,
            kind,
            boundary,
            solutes,
            ..
        } = w
        {
            // absolute: a resume may run in another directory
            return StoredWalls::DistanceField {
                file: absolute_file(file),
                spacing: *spacing,
                kind: *kind,
                boundary: *boundary,
                solutes: *solutes,
            };
        }
        match *w {
            WallsConfig::Slit {
                height,
                normal,
                bottom_velocity,
                top_velocity,
                boundary,
                solutes,
            } => match normal {
                SlitNormal::Y => StoredWalls::Slit {
                    height,
                    bottom_velocity,
                    top_velocity,
                    boundary,
                    solutes,
                },
                SlitNormal::Z => StoredWalls::SlitZ {
                    height,
                    bottom_velocity,
                    top_velocity,
                    boundary,
                    solutes,
                },
            },
            WallsConfig::Pipe {
                radius,
                velocity,
                boundary,
                solutes,
            } => StoredWalls::Pipe {
                radius,
                velocity,
                boundary,
                solutes,
            },
            WallsConfig::Sphere {
                radius,
                boundary,
                solutes,
            } => StoredWalls::Sphere {
                radius,
                boundary,
                solutes,
            },
            WallsConfig::SphereObstacle {
                radius,
                boundary,
                solutes,
            } => StoredWalls::SphereObstacle {
                radius,
                boundary,
                solutes,
            },
            WallsConfig::CylinderObstacle {
                radius,
                boundary,
                solutes,
            } => StoredWalls::CylinderObstacle {
                radius,
                boundary,
                solutes,
            },
            WallsConfig::PlanarPore {
                height,
                length,
                boundary,
                solutes,
            } => StoredWalls::PlanarPore {
                height,
                length,
                boundary,
                solutes,
            },
            WallsConfig::CosineChannel {
                height,
                amplitude,
                boundary,
                solutes,
            } => StoredWalls::CosineChannel {
                height,
                amplitude,
                boundary,
                solutes,
            },
            WallsConfig::CosineExpansion {
                height,
                amplitude,
                boundary,
                solutes,
            } => StoredWalls::CosineExpansion {
                height,
                amplitude,
                boundary,
                solutes,
            },
            WallsConfig::DistanceField { .. } => unreachable!("returned above"),
        }
    }
}

impl From<StoredWalls> for WallsConfig {
    fn from(w: StoredWalls) -> WallsConfig {
        let slit =
            |normal, height, bottom_velocity, top_velocity, boundary, solutes| WallsConfig::Slit {
                height,
                normal,
                bottom_velocity,
                top_velocity,
                boundary,
                solutes,
            };
        match w {
            StoredWalls::Slit {
                height,
                bottom_velocity,
                top_velocity,
                boundary,
                solutes,
            } => slit(
                SlitNormal::Y,
                height,
                bottom_velocity,
                top_velocity,
                boundary,
                solutes,
            ),
            StoredWalls::SlitZ {
                height,
                bottom_velocity,
                top_velocity,
                boundary,
                solutes,
            } => slit(
                SlitNormal::Z,
                height,
                bottom_velocity,
                top_velocity,
                boundary,
                solutes,
            ),
            StoredWalls::Pipe {
                radius,
                velocity,
                boundary,
                solutes,
            } => WallsConfig::Pipe {
                radius,
                velocity,
                boundary,
                solutes,
            },
            StoredWalls::Sphere {
                radius,
                boundary,
                solutes,
            } => WallsConfig::Sphere {
                radius,
                boundary,
                solutes,
            },
            StoredWalls::SphereObstacle {
                radius,
                boundary,
                solutes,
            } => WallsConfig::SphereObstacle {
                radius,
                boundary,
                solutes,
            },
            StoredWalls::CylinderObstacle {
                radius,
                boundary,
                solutes,
            } => WallsConfig::CylinderObstacle {
                radius,
                boundary,
                solutes,
            },
            StoredWalls::PlanarPore {
                height,
                length,
                boundary,
                solutes,
            } => WallsConfig::PlanarPore {
                height,
                length,
                boundary,
                solutes,
            },
            StoredWalls::CosineChannel {
                height,
                amplitude,
                boundary,
                solutes,
            } => WallsConfig::CosineChannel {
                height,
                amplitude,
                boundary,
                solutes,
            },
            StoredWalls::CosineExpansion {
                height,
                amplitude,
                boundary,
                solutes,
            } => WallsConfig::CosineExpansion {
                height,
                amplitude,
                boundary,
                solutes,
            },
            StoredWalls::DistanceField {
                file,
                spacing,
                kind,
                boundary,
                solutes,
            } => WallsConfig::DistanceField {
                file,
                spacing,
                kind,
                boundary,
                solutes,
                loaded: Default::default(),
            },
        }
    }
}

/// Text formats: the config's own form; binary formats (checkpoints): [`StoredWalls`].
pub fn serialize<S: Serializer>(walls: &Option<WallsConfig>, s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() {
        walls.serialize(s)
    } else {
        walls.as_ref().map(StoredWalls::from).serialize(s)
    }
}

/// The inverse of [`serialize`].
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WallsConfig>, D::Error> {
    if d.is_human_readable() {
        Option::<WallsConfig>::deserialize(d)
    } else {
        Ok(Option::<StoredWalls>::deserialize(d)?.map(WallsConfig::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of a y slit as format 3 wrote them (the derived form before `normal` existed).
    #[derive(Serialize)]
    enum Format3Walls {
        Slit {
            height: Option<f64>,
            bottom_velocity: f64,
            top_velocity: f64,
            boundary: WallBoundary,
            solutes: SoluteWall,
        },
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Holder {
        #[serde(with = "super")]
        walls: Option<WallsConfig>,
        after: u32,
    }

    #[test]
    fn slits_of_format_3_still_decode_and_every_shape_round_trips() {
        let old = Format3Walls::Slit {
            height: Some(9.0),
            bottom_velocity: -0.1,
            top_velocity: 0.2,
            boundary: WallBoundary::Slip,
            solutes: SoluteWall::default(),
        };
        let bytes = postcard::to_stdvec(&(Some(old), 7u32)).unwrap();
        let read: Holder = postcard::from_bytes(&bytes).unwrap();
        let y = WallsConfig::Slit {
            height: Some(9.0),
            normal: SlitNormal::Y,
            bottom_velocity: -0.1,
            top_velocity: 0.2,
            boundary: WallBoundary::Slip,
            solutes: SoluteWall::default(),
        };
        assert_eq!(
            read,
            Holder {
                walls: Some(y.clone()),
                after: 7
            }
        );
        for walls in [
            None,
            Some(y),
            Some(WallsConfig::Slit {
                height: None,
                normal: SlitNormal::Z,
                bottom_velocity: 0.3,
                top_velocity: 0.0,
                boundary: WallBoundary::NoSlip,
                solutes: SoluteWall::default(),
            }),
            Some(WallsConfig::PlanarPore {
                height: 6.0,
                length: 7.5,
                boundary: WallBoundary::Slip,
                solutes: SoluteWall::default(),
            }),
            Some(WallsConfig::CosineChannel {
                height: 8.0,
                amplitude: 1.25,
                boundary: WallBoundary::NoSlip,
                solutes: SoluteWall::default(),
            }),
            Some(WallsConfig::CosineExpansion {
                height: 8.0,
                amplitude: 2.0,
                boundary: WallBoundary::NoSlip,
                solutes: SoluteWall {
                    epsilon: 2.0,
                    sigma: 0.5,
                },
            }),
            // stored by its path, read again on resume
            Some(WallsConfig::DistanceField {
                file: "pores.npy".into(),
                spacing: 0.5,
                kind: FieldKind::Mask,
                boundary: WallBoundary::Slip,
                solutes: SoluteWall::default(),
                loaded: Default::default(),
            }),
        ] {
            let h = Holder { walls, after: 3 };
            let bytes = postcard::to_stdvec(&h).unwrap();
            // a data file comes back by its absolute path (the working directory's file)
            let expected = Holder {
                walls: h.walls.as_ref().map(WallsConfig::with_absolute_file),
                after: 3,
            };
            assert_eq!(postcard::from_bytes::<Holder>(&bytes).unwrap(), expected);
        }
    }

    /// A relative data file is stored as the working directory's, so a resume elsewhere reads
    /// the same file; an absolute one as it is.
    #[test]
    fn a_data_file_is_stored_by_its_absolute_path() {
        let stored = |file: &str| {
            let h = Holder {
                walls: Some(WallsConfig::DistanceField {
                    file: file.into(),
                    spacing: 1.0,
                    kind: FieldKind::Mask,
                    boundary: WallBoundary::NoSlip,
                    solutes: SoluteWall::default(),
                    loaded: Default::default(),
                }),
                after: 0,
            };
            let bytes = postcard::to_stdvec(&h).unwrap();
            match postcard::from_bytes::<Holder>(&bytes).unwrap().walls {
                Some(WallsConfig::DistanceField { file, .. }) => file,
                other => panic!("a data field comes back as one, not {other:?}"),
            }
        };
        let here = std::env::current_dir().unwrap();
        assert_eq!(stored("masks/pores.npy"), here.join("masks/pores.npy"));
        assert_eq!(stored("/data/pores.npy"), PathBuf::from("/data/pores.npy"));
    }

    /// A config without `normal` is written back as it was; a z slit names its normal.
    #[test]
    fn ron_configs_name_the_normal_only_when_it_is_z() {
        let text = |walls: &str| {
            let cfg = crate::Config::from_ron_str(&format!(
                "(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, \
                 collision: Srd(angle_deg: 130.0), steps: 10, walls: {walls})"
            ))
            .unwrap();
            let again = cfg.to_ron_string();
            assert_eq!(crate::Config::from_ron_str(&again).unwrap(), cfg);
            again
        };
        assert!(!text("Slit()").contains("normal"));
        assert!(text("Slit(normal: Z)").contains("normal: Z"));
    }
}
