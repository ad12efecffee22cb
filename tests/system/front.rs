//! The Service in front of the two webhook replicas: a TCP port on
//! loopback that hands each connection to the replicas in turn, skipping one
//! that refuses, as kube-proxy spreads connections over a Service's ready
//! endpoints. TLS passes through untouched, so the apiserver verifies the
//! replicas' own certificate.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

pub struct Front {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Front {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Front {
    pub async fn start(backends: Vec<SocketAddr>) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        let next = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backends = backends.clone();
                let next = next.clone();
                tokio::spawn(async move {
                    let first = next.fetch_add(1, Ordering::Relaxed);
                    for i in 0..backends.len() {
                        let backend = backends[(first + i) % backends.len()];
                        if let Ok(mut outbound) = TcpStream::connect(backend).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            return;
                        }
                    }
                });
            }
        });
        Front { port, task }
    }
}
