//! Times `StreamAssembler` on one reply with many small tool calls (issue 10, item 12):
//! `cargo run --example assembly_bench -- 25000 50000 100000`. Not part of the test suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use agcore::llm::{FinishReason, ModelDelta, ReplyLimits, StreamAssembler};

fn main() {
    let counts: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    for count in counts {
        let started = Instant::now();
        // The cap is raised: this measures assembly, not the limit.
        let limits = ReplyLimits::default().with_max_tool_calls(count as usize);
        let mut assembler = StreamAssembler::with_limits(limits);
        let mut events = Vec::new();
        for index in 0..count {
            // Each call in two pieces, as servers stream them: id + name, then the arguments.
            assembler.push(
                ModelDelta::ToolCall {
                    index: Some(index),
                    id: Some(format!("call_{index}")),
                    name: Some("f".to_owned()),
                    arguments: None,
                },
                &mut events,
            );
            assembler.push(
                ModelDelta::ToolCall {
                    index: Some(index),
                    id: None,
                    name: None,
                    arguments: Some("{}".to_owned()),
                },
                &mut events,
            );
            events.clear();
        }
        assembler.push(ModelDelta::Finish(FinishReason::ToolCalls), &mut events);
        let outcome = assembler.finish(&mut events);
        let calls = outcome.as_ref().map(|response| response.tool_calls().len());
        println!(
            "{count} calls: {:.3} s ({calls:?})",
            started.elapsed().as_secs_f64()
        );
    }
}
