//! `loopgate-scripted-model`: the scripted OpenAI-compatible model server as a standalone
//! process (quickstart, benchmarks, manual testing). Prints `listening on <addr>` once ready.

use clap::Parser;
use scripted_model::{DefaultReply, ScriptedModel};

#[derive(Parser)]
#[command(
    version,
    about = "Scripted OpenAI Chat Completions server for loopgate tests and demos"
)]
struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Answer this fixed text instead of echoing the last user message.
    #[arg(long)]
    reply: Option<String>,
    /// Number of chunks each reply is streamed in.
    #[arg(long, default_value_t = 8)]
    chunks: usize,
    /// Delay between chunks of the default reply, in milliseconds.
    #[arg(long, default_value_t = 0)]
    chunk_delay_ms: u64,
    /// Model id reported in responses.
    #[arg(long, default_value = "scripted-1")]
    model: String,
    /// Stamp each chunk with its send time (`⟦µs⟧`) instead of text (benchmark `stream`).
    #[arg(long)]
    stamp_chunks: bool,
    /// Write the bound address to this file once listening.
    #[arg(long)]
    addr_file: Option<std::path::PathBuf>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let default = match args.reply {
        _ if args.stamp_chunks => DefaultReply::Stamped {
            chunks: args.chunks,
            delay_ms: args.chunk_delay_ms,
        },
        Some(text) => DefaultReply::Fixed {
            text,
            chunks: args.chunks,
            delay_ms: args.chunk_delay_ms,
        },
        None => DefaultReply::Echo {
            prefix: "Echo: ".into(),
            chunks: args.chunks,
            delay_ms: args.chunk_delay_ms,
        },
    };
    let server = ScriptedModel::serve(listener, default, args.model)?;
    if let Some(path) = args.addr_file {
        std::fs::write(path, server.addr().to_string())?;
    }
    println!("listening on {}", server.addr());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
