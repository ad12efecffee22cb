//! The Service in front of the two webhook replicas: a TCP port on
//! loopback that hands each connection to the replicas in turn, skipping one
//! that refuses, as kube-proxy spreads connections over a Service's ready
//! endpoints. TLS passes through untouched, so the apiserver verifies the
//! replicas' own certificate.
//!
//! The same front, with the apiserver as its one backend, is the way every
//! nodescope component reaches the apiserver: fault 6 cuts every connection
//! through it at once ([`Front::cut`]), as a load balancer or a network
//! blip would, so that every watch breaks mid-stream.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

pub struct Front {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
    /// The connections open through the front.
    open: Arc<Mutex<Vec<AbortHandle>>>,
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
        let open: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let connections = open.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backends = backends.clone();
                let next = next.clone();
                let connection = tokio::spawn(async move {
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
                let mut open = lock(&connections);
                open.retain(|c| !c.is_finished());
                open.push(connection.abort_handle());
            }
        });
        Front { port, task, open }
    }

    /// `https://127.0.0.1:PORT`: the front as a kubeconfig's `server`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// What cuts the front's connections, for a task of its own.
    pub fn cutter(&self) -> Cutter {
        Cutter(self.open.clone())
    }
}

/// Cuts a [`Front`]'s open connections.
#[derive(Clone)]
pub struct Cutter(Arc<Mutex<Vec<AbortHandle>>>);

impl Cutter {
    /// Closes every connection open through the front (both sockets are
    /// dropped: the client reads end of stream mid-response); returns how
    /// many. New connections go through as before.
    pub fn cut(&self) -> usize {
        let live: Vec<AbortHandle> = lock(&self.0)
            .drain(..)
            .filter(|c| !c.is_finished())
            .collect();
        for connection in &live {
            connection.abort();
        }
        live.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
