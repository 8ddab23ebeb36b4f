//! A listener on a port where a stopped site used to be: once the site is gone, every connection it counts
//! is replay leaking to the network.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Counts the connections made to a port.
pub struct Sentinel {
    connections: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Sentinel {
    /// Listens on 127.0.0.1:`port` (which must be free again) and counts what connects.
    pub fn start(port: u16) -> Sentinel {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the site's port is free again");
        listener.set_nonblocking(true).unwrap();
        let connections = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done) = (connections.clone(), stop.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok(_) => {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Sentinel { connections, stop }
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
