//! One module per subcommand: its flags (`Args`) and what it does (`run`).
//! `main` only parses and dispatches.

pub mod alerts;
pub mod demo;
pub mod dev_kafka;
pub mod dlq;
pub mod groups;
pub mod journey;
pub mod keys;
pub mod lag;
pub mod probe;
pub mod record;
pub mod redrive;
pub mod replay;
pub mod scenario;
pub mod serve;
pub mod store;

/// Sends on `tx` when the process is interrupted or terminated.
pub fn on_interrupt(tx: std::sync::mpsc::Sender<()>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let terminated = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = terminated => {}
            }
        });
        let _ = tx.send(());
    });
    Ok(())
}
