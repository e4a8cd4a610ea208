//! Every peer starts with its published parameters (issue 3: "a comparison is only honest when every
//! peer is a faithful implementation with its published parameters"). The sources are in each
//! module's doc: Linux deadline-iosched.rst, cfq-iosched.rst, as-iosched.txt, kyber-iosched.rst, and
//! seed 002 for SCAN-EDF and YFQ.

use bfq_sched::{build, DeviceInfo};

fn assert_defaults(name: &str, expected: &[(&str, &str)]) {
    let s = build(name, DeviceInfo::default(), &[]).unwrap();
    let params = s.params();
    for (key, value) in expected {
        let got = params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        assert_eq!(got, Some(*value), "{name}: {key}");
    }
}

#[test]
fn deadline_defaults_are_the_kernel_documentation_ones() {
    let expected =
        [("read_expire", "500"), ("write_expire", "5000"), ("fifo_batch", "16"), ("writes_starved", "2")];
    assert_defaults("deadline", &expected);
    assert_defaults("mq-deadline", &expected);
    assert_defaults("mq-deadline", &[("prio_aging_expire", "10000")]);
}

#[test]
fn cfq_defaults_are_the_kernel_documentation_ones() {
    assert_defaults(
        "cfq",
        &[
            ("slice_sync", "100"),
            ("slice_async", "40"),
            ("slice_idle", "8"),
            ("low_latency", "1"),
            ("quantum", "8"),
            ("fifo_expire_sync", "125"),
            ("fifo_expire_async", "250"),
            ("back_seek_max", "16384"),
            ("back_seek_penalty", "2"),
            ("slice_async_rq", "2"),
            ("target_latency", "300"),
        ],
    );
}

#[test]
fn anticipatory_defaults_are_linux_2_6_ones() {
    assert_defaults(
        "as",
        &[
            ("antic_expire", "6"),
            ("read_expire", "125"),
            ("write_expire", "250"),
            ("read_batch_expire", "500"),
            ("write_batch_expire", "125"),
        ],
    );
}

#[test]
fn seed_002_and_kyber_defaults() {
    assert_defaults("scan-edf", &[("deadline_granularity", "80"), ("idle_wait", "4")]);
    assert_defaults("yfq", &[("batch_size", "4"), ("idle_wait", "4")]);
    assert_defaults("kyber", &[("read_lat_nsec", "2000000"), ("write_lat_nsec", "10000000")]);
}
