//! The integration tests that share the machine: each checks behaviour (answers, exit codes,
//! files, processes left) rather than speed, and tolerates other tests running beside it, as
//! libtest runs them (on `RUST_TEST_THREADS` threads). One binary instead of one per file:
//! the files' tests fill each other's idle time (a guest booting, an agent waiting out a
//! timeout) and the crate links once. The tests that must measure alone are in `alone`;
//! `reaping` is a binary of its own because it makes its process a child subreaper.

mod common;
#[path = "../../store/tests/pgserver/mod.rs"]
#[macro_use]
mod pgserver;

mod agent;
mod architecture;
mod capabilities;
mod chart_labels;
mod data_ports;
mod db_contention;
mod decisions;
mod errors;
mod experiment;
mod export;
mod fleet;
mod fleet_ansible;
mod flows;
mod guest;
mod guest_net;
mod help;
mod hostile;
mod interrupted;
mod intervals;
mod layout;
mod lock;
mod missing;
mod netns;
mod omit;
mod own_vm;
mod pcap;
mod security;
mod silent_agent;
mod sockopts;
mod ssh;
mod store_doc;
mod tax_gate;
mod tcpinfo;
mod team;
mod tune_hostile;
mod udp;
mod udp_forged;
mod vm_spec;
mod workloads;
