mod common;
use mpcbox::config::Thermostat;
use mpcbox::Solvent;
#[test]
fn probe() {
    for ly in [16u32, 32] {
        let mut cfg = common::small_config([16, ly, 16], 10);
        cfg.shear_rate = 0.05 * 16.0 / ly as f64 * 0.0 + 0.05; cfg.thermostat = Thermostat::Mbs; cfg.seed = 91;
        cfg.output.equilibration_steps = 100; cfg.output.sample_interval = 1;
        let mut s = Solvent::new(cfg).unwrap();
        for _ in 0..10100 { s.step().unwrap(); }
        let st = s.stats();
        println!("Ly {ly}: kin {:.4} ± {:.4} coll {:.4} ± {:.4}", st.viscosity_kinetic.mean().unwrap(), st.viscosity_kinetic.std_error().unwrap(), st.viscosity_collisional.mean().unwrap(), st.viscosity_collisional.std_error().unwrap());
    }
}
