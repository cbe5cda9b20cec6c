//! plan.yaml: no panic; an error names the file; a plan that reads back, written with
//! `write_yaml`, reads back equal.
#![no_main]
use cmlb_fuzz::{assert_names, file, scratch};
use libfuzzer_sys::fuzz_target;
use mapper::Plan;

fuzz_target!(|data: &[u8]| {
    let p = file("plan.yaml", data);
    match Plan::read_yaml(&p) {
        Ok(plan) => {
            let back = scratch().join("plan-back.yaml");
            plan.write_yaml(&back)
                .expect("write_yaml of a plan that was read");
            let again = Plan::read_yaml(&back).expect("re-read a written plan");
            assert_eq!(plan, again, "plan.yaml round trip");
        }
        Err(e) => assert_names(&e, &p),
    }
});
